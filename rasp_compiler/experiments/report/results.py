"""What the report knows about the runs: the result files read, grouped into cells, and measured.

Every section and every plot takes its results from here, so a damaged or missing result file
counts the same way everywhere (as a run not made).  The training curves (``curves/NAME.json``)
are read here for their CPU time and device, and by ``plots`` for the curves themselves.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from rasp_compiler.experiments.grid import read_result, run_config
from rasp_compiler.experiments.train import RunConfig

Cells = dict[str, list[RunConfig]]
"""Cell name (a run name without its seed) -> the grid's configurations of that cell, one a seed."""
Got = dict[str, list[dict]]
"""Cell name -> the results of its seeds that have a result file."""
Runs = dict[str, dict]
"""Run name -> its result, for every readable result file (the grid's or not)."""
MainCells = dict[tuple[str, int | None, str, str], str]
"""(task, k, backbone, arch) -> the cell name of the grid's base settings."""

BAR_SEEDS = 3
"""Seeds a cell needs before the report calls a bar met from its median (the grid runs 3)."""


def load(results: Path, read: Callable[[Path], dict | None] = read_result) -> dict[str, dict]:
    """Every readable file ``*.json`` in ``results`` by name; a damaged result file is a missing
    run (and the report says how many are missing)."""
    out = {}
    for p in sorted(results.glob("*.json")):
        value = read(p)
        if value is not None:
            out[p.stem] = value
    return out


def read_json(path: Path) -> dict | None:
    """A JSON object file that is not a run result (a probe), or None when it does not parse."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def cell_of(name: str) -> str:
    return name.rsplit("_seed", 1)[0]


def median(rs: list[dict]) -> float | None:
    return statistics.median(r["test_accuracy"] for r in rs) if rs else None


def best_cell(cells: Cells, got: Got, task: str, k: int | None, backbone: str, arch: str,
              keep: Callable[[RunConfig], bool] = lambda c: True) -> tuple[float, str] | None:
    """(median, cell) of the best cell of this task, k, backbone and architecture, at any settings
    (the scale grid's included), among those ``keep`` accepts with ``BAR_SEEDS`` seeds or more;
    None when there is none.  This is the cell the bars cite."""
    found = []
    for cell, cfgs in cells.items():
        c = cfgs[0]
        rs = got.get(cell, [])
        if (c.task, c.k, c.backbone, c.arch) == (task, k, backbone, arch) and keep(c) \
                and len(rs) >= BAR_SEEDS:
            found.append((median(rs), cell))
    return max(found) if found else None


def main_cells(cells: Cells, quick: bool = False) -> MainCells:
    """(task, k, backbone, arch) -> cell name, for the default width (every cell of the quick grid)."""
    out = {}
    for cell, cfgs in cells.items():
        c = cfgs[0]
        default = run_config(c.task, c.k, c.backbone, c.arch, c.seed)
        if quick or c.name() == default.name():
            out[(c.task, c.k, c.backbone, c.arch)] = cell
    return out


def cpu_seconds(results: str | Path, runs: Runs) -> dict[str, float]:
    """Run name -> CPU seconds of its training process, for the runs whose curve file records it
    (runs made before it was recorded have none)."""
    out = {}
    for name in runs:
        p = Path(results) / "curves" / f"{name}.json"
        try:
            c = json.loads(p.read_text()).get("total_cpu_seconds")
        except (OSError, ValueError):
            continue
        if c is not None:
            out[name] = float(c)
    return out


def device_of(results: str | Path, name: str) -> str | None:
    try:
        return json.loads((Path(results) / "curves" / f"{name}.json").read_text()).get("device")
    except (OSError, ValueError):
        return None


def estimate(todo: list[tuple[str, list[RunConfig]]], runs: Runs,
             cpu: dict[str, float] | None = None) -> tuple[float, int, bool]:
    """(seconds, runs without an estimate, whether only CPU times were used) for the missing runs.

    Seconds per step of finished runs, scaled by steps: of the same task, arch and width, else of
    the same task scaled linearly by width.  CPU times (from the curve files) are preferred; wall
    clock (inflated by this machine's load) is used only for a task with no CPU time recorded.
    """
    cpu = cpu or {}
    by_cpu: dict[tuple, list[float]] = defaultdict(list)
    by_wall: dict[tuple, list[float]] = defaultdict(list)
    for name, r in runs.items():
        table = by_cpu if name in cpu else by_wall
        rate = cpu.get(name, r["seconds"]) / max(1, r["steps"])
        table[(r["task"], r["arch"], r["width"])].append(rate)
        table[(r["task"],)].append(rate / r["width"])
    total, unknown, cpu_only = 0.0, 0, True
    for _cell, cfgs in todo:
        c = cfgs[0]
        n = len(cfgs) - sum(1 for x in cfgs if x.name() in runs)
        rates = None
        for table in (by_cpu, by_wall):
            rates = table.get((c.task, c.arch, c.width)) or \
                [x * c.width for x in table.get((c.task,), [])]
            if rates:
                cpu_only &= table is by_cpu
                break
        if rates:
            total += statistics.median(rates) * c.total_steps() * n
        else:
            unknown += n
    return total, unknown, cpu_only


def random_khop4_runs(results: str | Path | None) -> dict[tuple[int, str], list[tuple[int, float]]]:
    """(width, precision) -> [(seed, accuracy)] of random 4-hop with auxiliary hop heads at depth
    5, 4 heads, 6,000 steps: grid cells and tuning runs alike."""
    if results is None:
        return {}
    runs = {**load(Path(results) / "tuning"), **load(Path(results))}
    shape = re.compile(r"khop4_random_attn-res-ln_w(\d+)_L5_H4_s6000_aux_b32_lr0\.01(_bf16)?_seed(\d+)")
    found = defaultdict(list)
    for name, r in runs.items():
        if m := shape.fullmatch(name):
            found[(int(m[1]), "bf16" if m[2] else "fp32")].append((int(m[3]), r["test_accuracy"]))
    return found
