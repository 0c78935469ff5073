"""The paper's floors held against the result files: the issue's bars, and the settings that
``rasp experiment`` defaults to because they reach a floor.

A bar is a claim ("met", "not met", "gap reproduced"), so these sections state the number of
seeds behind each one and refuse to call a bar met from cells that were not run.
"""

from __future__ import annotations

from rasp_compiler.experiments.grid import FLOOR_ARCH, FLOOR_SETTINGS, FLOORS, KS, run_config
from rasp_compiler.experiments.report.labels import pct, task_label
from rasp_compiler.experiments.report.results import Cells, Got, MainCells, cell_of, median


def bars(main: MainCells, got: Got, cells: Cells) -> list[str]:
    """Each floor of the issue at the base settings and at the best settings with 3 seeds, then
    the attention-only k-hop gap between the frozen backbones and the trained one."""
    L = []

    def med(task, k, b, arch):
        cell = main.get((task, k, b, arch))
        rs = got.get(cell, []) if cell else []
        return median(rs), len(rs)

    def verdict(x, n, floor):
        if n == 0:
            return "not run"
        status = "met" if x >= floor else "not met"
        return f"{status} ({pct(x)}, {n} seed{'s' if n != 1 else ''}{', fewer than 3' if n < 3 else ''})"

    def best(task, k, b, arch, floor):
        """The best cell of any settings with 3 seeds or more (the scale grid included)."""
        found = []
        for cell, cfgs in cells.items():
            c = cfgs[0]
            rs = got.get(cell, [])
            if (c.task, c.k, c.backbone, c.arch) == (task, k, b, arch) and len(rs) >= 3:
                found.append((median(rs), cell))
        if not found:
            return ""
        x, cell = max(found)
        c = cells[cell][0]
        aid = (" (with auxiliary hop heads)" if c.aux else "") + \
            (f" (with a {c.curriculum:,}-step hop curriculum)" if c.curriculum else "") + \
            (" (bf16 training matmuls)" if c.precision == "bf16" else "")
        return f"; best settings: {verdict(x, 3, floor)} with `{cell}`{aid}"

    x, n = med("dyck1", None, "sparse", "attn")
    L.append(f"* Dyck-1, attention-only, sparse UT ≥ 99 %: at the base settings {verdict(x, n, 0.99)}"
             + best("dyck1", None, "sparse", "attn", 0.99))
    x, n = med("dyck1", None, "random", "attn")
    L.append(f"* Dyck-1, attention-only, random UT ≥ 94.4 %: at the base settings {verdict(x, n, 0.944)}"
             + best("dyck1", None, "random", "attn", 0.944))
    for k in KS:
        x, n = med("khop", k, "sparse", "attn-res-ln")
        y, m = med("khop", k, "random", "attn-res-ln")
        L.append(f"* {k}-hop, res+LN: sparse UT ≥ 99 %: at the base settings {verdict(x, n, 0.99)}"
                 + best("khop", k, "sparse", "attn-res-ln", 0.99)
                 + f". Random UT ≥ 90 %: at the base settings {verdict(y, m, 0.90)}"
                 + best("khop", k, "random", "attn-res-ln", 0.90))
    L += ["", "The attention-only k-hop gap (paper: about 30–40 % frozen against about 99 % trained):", ""]
    for k in KS:
        parts = []
        for b in ("sparse", "random", "trained"):
            x, n = med("khop", k, b, "attn")
            parts.append(f"{b} {pct(x) if n else 'not run'}" + (f" ({n})" if n else ""))
        frozen = [med("khop", k, b, "attn")[0] for b in ("sparse", "random")]
        frozen = [f for f in frozen if f is not None]
        trained = med("khop", k, "trained", "attn")[0]
        if trained is not None and trained < 0.90:
            parts.append("→ not comparable: the trained model of the same depth does not learn this "
                         "task either, so depth, not the frozen backbone, is the limit here")
        elif frozen and trained is not None:
            gap = trained - max(frozen)
            word = ("the gap is reproduced (more than 20 points)" if gap > 0.20 else
                    "the gap is refuted (the best frozen backbone is within 20 points of training)")
            if max(frozen) > 0.45:
                word += ", but the frozen backbones score above the paper's 30–40 %"
            parts.append(f"→ gap {100 * gap:.1f} points: {word}")
        else:
            parts.append("→ undecided: not all of these were run")
        L.append(f"* {k}-hop attention-only: " + ", ".join(parts))
    L.append("")
    return L


def floor_settings_section(got: Got) -> list[str]:
    """The settings `rasp experiment` uses by default, each with its cell's measured median."""
    L = ["## What `rasp experiment` runs by default", "",
         "When no shape option (`--construction`, `--width`, `--layers`, `--heads`) is given, "
         "`rasp experiment dyck1|khop` takes the cheapest measured settings that reach the "
         "paper's floor (`FLOOR_SETTINGS` in `rasp_compiler/experiments/grid.py`); other options "
         "(`--steps`, `--lr`, ...) still override single values. `--settings base`, a shape "
         "option, the trained backbone and the other architectures (no floor) use the small "
         "settings of the grid's base cells.", "",
         "Before training, `--out` (and for `rasp experiment table`, `--results`, `--doc` and "
         "`--img`) must be writable, and the run must fit in memory, or nothing starts. A run "
         "whose loss becomes NaN or infinite stops with an error (lower `--lr`) rather than "
         "reporting an accuracy of diverged weights. A result file that does not parse or lacks "
         "a field (a run killed while writing) counts as a missing run: `table` runs it again.", "",
         "| task | backbone | settings | cell | median (seeds) | floor |", "|---|---|---|---|---|---|"]
    for (task, k, backbone), recipe in FLOOR_SETTINGS.items():
        c = run_config(task, k, backbone, FLOOR_ARCH[task], 0, **recipe)
        rs = got.get(cell_of(c.name()), [])
        shown = ", ".join(f"{name} {v}" for name, v in recipe.items())
        L.append(f"| {task_label(task, k)} | {backbone} | {shown} | `{cell_of(c.name())}` | "
                 f"{pct(median(rs))} ({len(rs)}) | {pct(FLOORS[(task, k, backbone)])} |")
    return L + [""]
