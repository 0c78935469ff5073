"""The report's three figures: accuracy by configuration, training curves, accuracy against width.

A figure is drawn only when it has something to show (a plot of no runs would look like a
result), and the markdown links exactly the files this module returns.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

from rasp_compiler.atomic_dir import write_file
from rasp_compiler.experiments.grid import DEFAULTS
from rasp_compiler.experiments.report.labels import task_label
from rasp_compiler.experiments.report.results import (
    Cells,
    Got,
    MainCells,
    main_cells,
    median,
    random_khop4_runs,
)

_PALETTE = {"sparse": "tab:blue", "random": "tab:orange", "trained": "tab:green"}


def draw(results: Path, cells: Cells, got: Got, img: Path, stem: str,
          quick: bool = False) -> list[tuple[str, str]]:
    """Draw every figure that has data into ``img`` as ``{stem}_*.png``; (title, file name) of each."""
    import matplotlib
    matplotlib.use("Agg")       # before pyplot: the report is written on machines without a display
    import matplotlib.pyplot as plt

    main = main_cells(cells, quick)
    # built only when its turn comes: pyplot holds every figure until it is closed
    drawings = (("Accuracy by configuration", "accuracy", lambda: _accuracy(plt, main, got, quick)),
                ("Training curves", "curves", lambda: _curves(plt, main, cells, results)),
                ("Accuracy against width, random backbone", "width",
                 lambda: _width(plt, cells, got, results)))
    out = []
    for title, what, draw in drawings:
        fig = draw()
        if fig is None:
            continue
        name = f"{stem}_{what}.png"
        write_file(img / name, lambda tmp, fig=fig: fig.savefig(tmp, dpi=110, format="png"),
                   example_name=name)   # renamed over it, as --doc: a link there is not followed
        plt.close(fig)
        out.append((title, name))
    return out


def _accuracy(plt, main: MainCells, got: Got, quick: bool = False):
    """Median accuracy of each base cell as a bar (min to max over its seeds as the error bar),
    and beside it, where the paper states a floor, the best measured setting (``FLOOR_SETTINGS``,
    the cell `rasp experiment` runs by default) with the floor as a black tick."""
    from rasp_compiler.experiments.grid import FLOORS, floor_settings, run_config
    from rasp_compiler.experiments.report.results import cell_of

    rows = []        # (label, base runs, best runs or None, floor or None, colour)
    for (task, k, b, arch), cell in main.items():
        rs = got.get(cell, [])
        if not rs:
            continue
        best, floor = None, FLOORS.get((task, k if task == "khop" else None, b))
        settings = floor_settings(task, k, b, arch)
        if settings is not None:
            best = got.get(cell_of(run_config(task, k, b, arch, 0, **settings).name())) or None
        rows.append((f"{task_label(task, k)} {arch} {b}", rs, best, floor if best else None,
                     _PALETTE[b]))
    if not rows:
        return None

    def spread(rs):
        accs = [r["test_accuracy"] for r in rs]
        m = statistics.median(accs)
        return m, (m - min(accs), max(accs) - m)

    # at least 4 rows' height: a shorter figure has no room for the legend below the axes
    # (a partial grid, `table --only ...`, lost its legend and x label)
    shown = max(len(rows), 4)
    fig, ax = plt.subplots(figsize=(8.5, 0.42 * shown + 2.4))
    h = 0.38
    for i, (_, rs, best, floor, colour) in enumerate(rows):
        m, e = spread(rs)
        ax.barh(i - h / 2 if best else i, m, height=h if best else 0.7, color=colour, alpha=0.45,
                xerr=[[e[0]], [e[1]]], capsize=2)
        if best:
            mb, eb = spread(best)
            ax.barh(i + h / 2, mb, height=h, color=colour, xerr=[[eb[0]], [eb[1]]], capsize=2,
                    hatch="//", edgecolor="black", linewidth=0.4)
            ax.plot([floor, floor], [i - 0.45, i + 0.45], color="black", lw=1.4)
    ax.set_yticks(range(len(rows)), [f"{r[0]} ({len(r[1])} seed{'s' if len(r[1]) != 1 else ''})"
                                     for r in rows], fontsize=7)
    if len(rows) < shown:
        ax.set_ylim(-0.5, shown - 0.5)   # bars of the usual thickness, from the top
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("test accuracy (median over seeds; whiskers: min–max)")
    ax.grid(axis="x", alpha=0.3)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    handles = [Patch(color=c, label=f"{b} UT" if b != "trained" else "trained (all weights)")
               for b, c in _PALETTE.items()]
    with_best = any(r[2] for r in rows)
    if with_best:  # the quick grid has no best settings nor floors: its legend listed them anyway
        handles += [Patch(facecolor="white", edgecolor="gray", alpha=0.45, label="base grid (pale)"),
                    Patch(facecolor="white", edgecolor="black", hatch="//",
                          label="best measured setting (docs: floor settings)"),
                    Line2D([0], [0], color="black", lw=1.4, label="the floor for that cell")]
    # below the axes: inside, it would cover the last rows
    ax.legend(handles=handles, fontsize=7, loc="upper center", ncol=3, framealpha=0.9,
              bbox_to_anchor=(0.5, -0.6 / (0.42 * shown)))
    grid = "the quick grid" if quick else "the base grid"
    ax.set_title(f"Embedding-only training: {grid}" + (" and the best setting per cell" if with_best else ""),
                 fontsize=9)
    fig.tight_layout()
    return fig


def _curves(plt, main: MainCells, cells: Cells, results: Path):
    """Test accuracy during training: the first seed of each base cell that has a curve file, one
    panel per task and architecture with a line per backbone."""
    curves = []
    for (task, k, b, arch), cell in main.items():
        for c in cells[cell]:
            p = results / "curves" / f"{c.name()}.json"
            if p.is_file():
                curves.append((f"{task_label(task, k)} {arch}", b, json.loads(p.read_text())))
                break
    if not curves:
        return None
    groups = sorted({g for g, _, _ in curves}, key=lambda s: (s[0] != "D", s))
    cols = min(3, len(groups))
    rows_ = math.ceil(len(groups) / cols)
    fig, axes = plt.subplots(rows_, cols, figsize=(4 * cols, 2.8 * rows_), squeeze=False)
    for ax, g in zip(list(axes.flat)[:len(groups)], groups, strict=True):
        for gg, b, cv in curves:
            if gg == g:
                ax.plot(cv["step"], cv["test_accuracy"], label=b, color=_PALETTE[b])
        ax.set_title(g, fontsize=9)
        ax.set_ylim(0, 1)
        ax.set_xlabel("step", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(groups):]:
        ax.axis("off")
    fig.suptitle("test accuracy during training (first 1,024 Dyck-1 strings / 128 k-hop sequences of the "
                 "test set; first seed run)", fontsize=9)
    fig.tight_layout()
    return fig


def _width(plt, cells: Cells, got: Got, results: Path):
    """Accuracy against width on the random backbone, each series with two widths or more, against
    the Dyck-1 and k-hop floors."""
    series = defaultdict(list)
    for cell, cfgs in cells.items():
        c = cfgs[0]
        if c.backbone != "random":
            continue
        if (c.task, c.arch) not in (("dyck1", "attn"), ("khop", "attn-res-ln")):
            continue
        rs = got.get(cell, [])
        if rs and all(getattr(c, f) == DEFAULTS[c.task][f] for f in ("layers", "heads", "steps")):
            series[f"{task_label(c.task, c.k)} {c.arch}"].append(
                (c.width, median(rs), min(r["test_accuracy"] for r in rs),
                 max(r["test_accuracy"] for r in rs)))
    deep = random_khop4_runs(results)       # bf16 runs where a width has them, else fp32
    for w in sorted({w for w, _ in deep}):
        accs = [a for _, a in deep.get((w, "bf16")) or deep[(w, "fp32")]]
        series["4-hop attn-res-ln, depth 5, aux heads"].append(
            (w, statistics.median(accs), min(accs), max(accs)))
    series = {k: sorted(v) for k, v in series.items() if len(v) >= 2}
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for label, pts in series.items():
        w = [p[0] for p in pts]
        ax.plot(w, [p[1] for p in pts], marker="o", label=label)
        ax.fill_between(w, [p[2] for p in pts], [p[3] for p in pts], alpha=0.2)
    ax.set_xscale("log", base=2)      # before the floor labels, which are placed by xlim
    ax.axhline(0.944, ls="--", color="gray", lw=0.8)
    ax.text(ax.get_xlim()[0], 0.944, " Dyck-1 floor 94.4 %", fontsize=7, va="bottom")
    ax.axhline(0.90, ls=":", color="gray", lw=0.8)
    ax.text(ax.get_xlim()[0], 0.90, " k-hop floor 90 %", fontsize=7, va="top")
    ax.set_xlabel("embedding width m")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
