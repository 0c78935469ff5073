"""The experiments report: reads every result file of the grid and writes the markdown and the plots.

It never invents a number: a cell without results shows a dash, and every figure is computed from
the ``RESULTS/*.json`` files that ``rasp_compiler.experiments.grid.run_grid`` writes.

``write_report`` is the whole interface. Behind it, ``results`` reads and measures the runs,
``plots`` draws the figures, and ``markdown`` assembles the page that links them from its own
sections and those of ``mlp``, ``floors``, ``width``, ``scale`` and ``probes``.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

from rasp_compiler.atomic_dir import write_file
from rasp_compiler.experiments.grid import full_grid, quick_grid
from rasp_compiler.experiments.report import markdown, plots
from rasp_compiler.experiments.report.results import Cells, cell_of, load

__all__ = ["write_report"]


def write_report(results: str | os.PathLike, doc: str | os.PathLike, img: str | os.PathLike,
                 quick: bool = False) -> None:
    """Write the report of the full grid (or, with ``quick``, the quick grid) to ``doc`` and its
    plots into ``img``, from the result files in ``results``."""
    results, doc, img = Path(results), Path(doc), Path(img)
    runs = load(results)
    grid = quick_grid() if quick else full_grid()
    cells: Cells = defaultdict(list)
    for c in grid:
        cells[cell_of(c.name())].append(c)
    got = {cell: [runs[c.name()] for c in cfgs if c.name() in runs] for cell, cfgs in cells.items()}
    stem = "experiments_quick" if quick else "experiments"
    img.mkdir(parents=True, exist_ok=True)
    drawn = plots.draw(results, cells, got, img, stem, quick)
    rel = os.path.relpath(img, doc.parent)
    lines = markdown.render(cells, got, runs, drawn, rel, quick, results)
    doc.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(lines) + "\n"
    # beside it, renamed over it: write_text followed a link at --doc (the file it named was
    # replaced by the report) and left half a page when killed
    write_file(doc, lambda tmp: Path(tmp).write_text(text), example_name="experiments.md")
