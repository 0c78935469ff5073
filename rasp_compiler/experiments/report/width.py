"""Accuracy against the embedding width of the random backbone, the one knob that the random UT's
floors were chased with; where a floor is not reached, the section bounds what a wider run costs
instead of guessing whether it would reach it."""

from __future__ import annotations

import statistics
from pathlib import Path

from rasp_compiler.experiments.grid import DEFAULTS
from rasp_compiler.experiments.report.labels import pct, task_label
from rasp_compiler.experiments.report.results import Cells, Got, median, random_khop4_runs


def width_section(cells: Cells, got: Got, cpu: dict[str, float]) -> list[str]:
    """Dyck-1 and 2-hop at the base depth, heads and steps: one row per width swept."""
    L = ["## Accuracy against width (random backbone)", ""]
    for task, k, arch, floor in (("dyck1", None, "attn", 0.944), ("khop", 2, "attn-res-ln", 0.90)):
        rows = []
        for cell, cfgs in cells.items():
            c = cfgs[0]
            if (c.task, c.k, c.backbone, c.arch) == (task, k, "random", arch) and \
                    all(getattr(c, f) == DEFAULTS[task][f] for f in ("layers", "heads", "steps")):
                names = [x.name() for x in cfgs if x.name() in cpu]
                rs = got.get(cell, [])
                if rs:
                    rows.append((c.width, median(rs), len(rs),
                                 statistics.median(r["seconds"] for r in rs),
                                 statistics.median(cpu[n] for n in names) if names else None))
        rows.sort()
        L.append(f"{task_label(task, k)}, {arch} (floor {pct(floor)}):")
        L.append("")
        if not rows:
            L += ["no width-sweep run yet.", ""]
            continue
        L += ["| width | median accuracy | seeds | wall seconds per run | CPU seconds per run |",
              "|---|---|---|---|---|"]
        for w, acc, n, s, c in rows:
            L.append(f"| {w} | {pct(acc)} | {n} | {s:.0f} | {'—' if c is None else f'{c:.0f}'} |")
        reached = [w for w, acc, *_ in rows if acc >= floor]
        if reached:
            L += ["", f"The floor is reached at width {min(reached)}."]
        else:
            w, acc = rows[-1][0], rows[-1][1]
            L += ["", f"Not reached up to width {w} ({pct(acc)})."]
            timed = [(r[0], r[4]) for r in rows if r[4] is not None]
            if timed:
                # the cost of a step is a sum of terms linear and quadratic in the width; assume the
                # worst (quadratic) beyond the largest measured width for an upper estimate
                w0, c0 = max(timed)
                w1 = rows[-1][0]
                est = [(x, c0 * (x / w0) ** 2) for x in (2 * w1, 4 * w1)]
                L.append(f"Measured CPU time at width {w0}: {c0:.0f} s per run on one thread. With at "
                         "most quadratic growth in the width (the matmuls grow with m², the attention "
                         "scores with m), " + " and ".join(f"width {x} needs at most {e / 60:.0f} "
                                                          "CPU-minutes" for x, e in est) +
                         " per run and seed; whether they reach the floor is not known until they run.")
        L.append("")
    return L


def random_khop4_width(results: str | Path | None) -> list[str]:
    """Random 4-hop with auxiliary hop heads at depth 5 against width: grid cells and tuning runs."""
    found = random_khop4_runs(results)
    if len({w for w, _ in found}) < 2:
        return []
    L = ["4-hop, attn-res-ln with auxiliary hop heads, depth 5, 4 heads, 6,000 steps (grid cells and "
         "one-seed tuning runs; floor 90.0 %):", "",
         "| width | training matmuls | seeds | per seed | median |", "|---|---|---|---|---|"]
    for (w, prec), rs in sorted(found.items()):
        rs.sort()
        L.append(f"| {w} | {prec} | {len(rs)} | "
                 + ", ".join(f"{pct(a)} (seed {s})" for s, a in rs)
                 + f" | {pct(statistics.median(a for _, a in rs))} |")
    return L + [""]
