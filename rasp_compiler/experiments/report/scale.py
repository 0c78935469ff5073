"""The scale grid and the paths construction: the longer, deeper and wider runs that went after
the floors the base grid misses, and the readings drawn from them (depth, training aids, Dyck-1's
sparse constructions).

Each reading is worded from the medians it sits next to (which k reach a floor, at or below 99 %),
so that rerunning a cell rewrites the sentence along with the number.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import replace
from pathlib import Path

from rasp_compiler.experiments.data import khop_targets, task_spec, test_set
from rasp_compiler.experiments.grid import KS, SCALE_KHOP_WIDTH, paths_grid, scale_grid
from rasp_compiler.experiments.models import sparse_dim
from rasp_compiler.experiments.report.labels import (
    and_join,
    depth_words,
    hops,
    pct,
    precision_words,
    training_aids,
)
from rasp_compiler.experiments.report.results import (
    Cells,
    Got,
    best_cell,
    cell_of,
    device_of,
    load,
    median,
)
from rasp_compiler.experiments.train import RunConfig


def scale_section(cells: Cells, got: Got, results: str | Path | None) -> list[str]:
    """The scale grid's cells: median and every seed, with where the runs ran."""
    names = {cell_of(c.name()) for c in scale_grid() + paths_grid()}
    L = ["## Larger runs (the scale grid) and the paths construction", "",
         "Longer schedules, larger batches, deeper and wider backbones (`scale_grid` in "
         "`rasp_compiler/experiments/grid.py`), sized for a GPU, and the sparse UT with value masks "
         "(`paths_grid`, runs named `sparse-paths`); both are part of the resumable grid. "
         "The run name gives the settings (w width, L layers, H heads, s steps, b batch, lr); "
         "runs named `_bf16` trained with bf16 autocast matmuls (`--precision bf16`, about half "
         "the step time on this CPU), their weights and every evaluation in fp32.", "",
         "| cell | median | seeds | per seed | wall seconds per run | device |", "|---|---|---|---|---|---|"]
    for cell, cfgs in cells.items():
        if cell not in names:
            continue
        rs = got.get(cell, [])
        if not rs:
            L.append(f"| `{cell}` | not run | 0/{len(cfgs)} | | | |")
            continue
        devices = sorted({device_of(results, x.name()) for x in cfgs if results is not None} - {None})
        L.append(f"| `{cell}` | {pct(median(rs))} | {len(rs)}/{len(cfgs)} | "
                 + ", ".join(pct(r["test_accuracy"]) for r in rs)
                 + f" | {statistics.median(r['seconds'] for r in rs):.0f} | {', '.join(devices) or '—'} |")
    L += [""] + _depth_findings(cells, got) + [""] + _paths_steps(results)
    L += _training_aids(cells, got)
    L += _dyck_findings(cells, got, results)
    return L


_DEPTH_COLUMNS = ("sparse", "paths", "random", "trained")
_BACKBONE_NAMES = {"random": "the random UT", "paths": "the paths construction"}


def _depth_cells(cells: Cells, got: Got) -> dict[tuple[int, str], str]:
    """(k, column) -> the cell the depth table shows: k-hop with residual + LN at depth k + 1,
    width SCALE_KHOP_WIDTH (any width for the paths construction). Where a column has several
    such cells (the paths construction's d, steps and aids; the random UT with auxiliary hop
    heads) the best median is shown."""
    shown: dict[tuple[int, str], str] = {}
    for cell, cfgs in cells.items():
        c = cfgs[0]
        rs = got.get(cell, [])
        if not rs or not _at_depth_k_plus_1(c):
            continue
        if c.construction == "paths":
            column = "paths"
        elif c.width == SCALE_KHOP_WIDTH:
            column = c.backbone
        else:
            continue
        if (c.k, column) not in shown or median(rs) > median(got[shown[(c.k, column)]]):
            shown[(c.k, column)] = cell
    return shown


def _at_depth_k_plus_1(c: RunConfig) -> bool:
    return c.task == "khop" and c.arch == "attn-res-ln" and c.layers == c.k + 1


def _depth_findings(cells: Cells, got: Got) -> list[str]:
    """k-hop at depth k + 1: each backbone's median against the floors, and what it says."""
    shown = _depth_cells(cells, got)
    if not shown:
        return []
    L = [_depth_intro(cells, got, shown), "",
         "| k | sparse UT, construction C | sparse UT, paths | random UT | trained |",
         "|---|---|---|---|---|"]
    for k in KS:
        row = []
        for b in _DEPTH_COLUMNS:
            rs = got[shown[(k, b)]] if (k, b) in shown else []
            row.append(f"{pct(median(rs))} ({len(rs)})" if rs else "not run")
        L.append(f"| {k} | " + " | ".join(row) + " |")
    paths_cell = {k: cell for (k, b), cell in shown.items() if b == "paths"}
    if paths_cell:
        L += ["", "Paths cells shown: " + "; ".join(f"{k}-hop `{cell}`"
                                                   for k, cell in sorted(paths_cell.items())) + "."]
    L += ["", " ".join(_depth_reading(cells, got, shown))]
    return L


def _depth_intro(cells: Cells, got: Got, shown: dict[tuple[int, str], str]) -> str:
    """What the depth table shows, naming the cells with training aids among them."""
    aux_ks = [k for k in KS if (k, "random") in shown and cells[shown[(k, "random")]][0].aux]
    random_aux = ""
    if aux_ks:
        many = len(aux_ks) > 1
        random_aux = (f"; the random cell{'s' if many else ''} for k = {and_join(list(map(str, aux_ks)))} "
                      f"{'are the ones' if many else 'is the one'} with auxiliary hop heads")
    paths_aux = any(_at_depth_k_plus_1(cfgs[0]) and cfgs[0].construction == "paths" and cfgs[0].aux
                    and got.get(cell) for cell, cfgs in cells.items())
    return ("k-hop with residual + LN at depth k + 1 (medians; the floors are sparse ≥ 99 %, random "
            f"≥ 90 %). Width {SCALE_KHOP_WIDTH} for construction C, random and trained (4 heads"
            f"{random_aux}); the paths construction has one head per layer and width d × its block "
            "count (10, 22, 46 and 94 blocks), and the best of its cells is shown (d = 8 and 6,000 "
            "steps; 2-hop also at d = 16 and 24,000 steps, 3-hop also at 12,000 steps; k ≥ 2 also "
            "with the hop curriculum, runs named `cur2000`"
            + (", and with auxiliary hop heads, runs named `aux`" if paths_aux else "") + "):")


def _depth_reading(cells: Cells, got: Got, shown: dict[tuple[int, str], str]) -> list[str]:
    """The depth table read: depth, the random UT, construction C, the paths construction, and the
    cells the bars cite for the k the table misses."""
    med = {key: median(got[cell]) for key, cell in shown.items()}

    def ks(b: str, floor: float, above: bool) -> list[int]:
        return [k for k in KS if (k, b) in med and (med[(k, b)] >= floor) == above]

    def listed(xs: list[int]) -> str:
        return ", ".join(map(str, xs)) or "none"

    trained_ok, trained_bad = ks("trained", 0.99, True), ks("trained", 0.99, False)
    sparse = [med[(k, "sparse")] for k in KS if (k, "sparse") in med]
    reading = [f"Reading: the fully trained model of depth k + 1 reaches 99 % for k = {listed(trained_ok)}"
               + (f" (not for k = {listed(trained_bad)})" if trained_bad else "")
               + ", so at 2 layers depth was the limit."]
    rescued: dict[str, list[int]] = {}     # column -> the k its cited cells meet the floor for
    bad = ks("random", 0.90, False)
    reading.append(f"At width {SCALE_KHOP_WIDTH} the random UT reaches its 90 % floor for k = "
                   f"{listed(ks('random', 0.90, True))}"
                   + (f" and not for k = {listed(bad)} ({_misses(cells, got, shown, bad, 'random')})"
                      if bad else "") + ".")
    sentences, rescued["random"] = _rescues(cells, got, shown, bad, "random", 0.90)
    reading += sentences
    if sparse:
        reading.append(f"Construction C reaches at most {pct(max(sparse))}: its heads have identity "
                       "values, so a head adds the attended token's embedding into the same "
                       "coordinates as the current token's, and an induction step must tell 'my "
                       "token' from 'the token I looked back at' by scale alone.")
    if any(b == "paths" for _, b in med):
        bad = ks("paths", 0.99, False)
        reading.append("The paths construction, whose value masks send each head's output to "
                       "blocks of its own, reaches the 99 % floor at depth k + 1 for k = "
                       f"{listed(ks('paths', 0.99, True))}"
                       + (f" and not for k = {listed(bad)} ({_misses(cells, got, shown, bad, 'paths')})"
                          if bad else "") + ".")
        sentences, rescued["paths"] = _rescues(cells, got, shown, bad, "paths", 0.99)
        reading += sentences
    return reading + _rescued_summary({b: ks for b, ks in rescued.items() if ks})


def _misses(cells: Cells, got: Got, shown: dict[tuple[int, str], str], ks: list[int], column: str) -> str:
    """The medians of the cells shown for the k a column misses, with their training aids."""
    parts = []
    for k in ks:
        cell = shown[(k, column)]
        aids = training_aids(cells[cell][0]) + precision_words(cells[cell][0])
        part = pct(median(got[cell])) + (f" with {and_join(aids)}" if aids else "")
        parts.append(part if len(ks) == 1 else f"{k}-hop {part}")
    return "; ".join(parts)


def _rescues(cells: Cells, got: Got, shown: dict[tuple[int, str], str], ks: list[int], column: str,
             floor: float) -> tuple[list[str], list[int]]:
    """For each k the column misses, the cell the bars cite for it where it is another cell of the
    same column: how it differs from the one shown and what it reaches; then the k whose cited
    cell meets the floor."""
    out, met = [], []
    for k in ks:
        backbone = "sparse" if column == "paths" else column
        found = best_cell(cells, got, "khop", k, backbone, "attn-res-ln")
        if found is None or found[1] == shown[(k, column)]:
            continue
        x, cell = found
        c, s = cells[cell][0], cells[shown[(k, column)]][0]
        if (c.construction == "paths") != (column == "paths"):
            continue
        if x >= floor:
            met.append(k)
        out.append(f"{_changes(c, s)}, it reaches {pct(x)} for k = {k} (`{cell}`, the cell the bars "
                   "above cite)" + ("" if x >= floor else ", still below the floor") + ".")
    return out, met


def _changes(c: RunConfig, s: RunConfig) -> str:
    """How cell ``c`` differs from ``s``, the cell of its k that the table shows, its shape first:
    'At width 512, still at depth 5 = k + 1 and with auxiliary hop heads and bf16 training
    matmuls'."""
    shape = ([depth_words(c)] if c.layers != s.layers else []) + _width_change(c, s) + \
        ([f"{c.heads} heads"] if c.heads != s.heads else [])
    aids = training_aids(c) + ([f"{c.steps:,} steps"] if c.steps != s.steps else []) + precision_words(c)
    rest = " and ".join(([] if c.layers != s.layers else [f"still at {depth_words(c)}"])
                        + ([f"with {and_join(aids)}"] if aids else []))
    text = ", ".join(([f"At {and_join(shape)}"] if shape else []) + ([rest] if rest else []))
    return text[:1].upper() + text[1:]


def _width_change(c: RunConfig, s: RunConfig) -> list[str]:
    """The paths construction's width follows from its depth and d, so for it d is compared."""
    if c.construction == "paths":
        d = sparse_dim(c.arch, c.layers, c.heads, c.width, "paths")
        return [] if d == sparse_dim(s.arch, s.layers, s.heads, s.width, "paths") else [f"d = {d}"]
    return [] if c.width == s.width else [f"width {c.width}"]


def _rescued_summary(rescued: dict[str, list[int]]) -> list[str]:
    """Both backbones meeting the floors the depth table misses, as the bars section says."""
    if not rescued:
        return []

    def floors(ks: list[int]) -> str:
        return f"the {hops(ks)} floor" + ("s" if len(ks) > 1 else "")

    groups = list(rescued.values())
    if len(rescued) == 2 and groups[0] == groups[1]:
        who = f"both backbones meet {floors(groups[0])}"
    else:
        who = " and ".join(f"{_BACKBONE_NAMES[b]} meets {floors(ks)}" for b, ks in rescued.items())
    return [f"So {who}, as the bars section says; this table shows only width {SCALE_KHOP_WIDTH} "
            "and depth k + 1."]


def _paths_steps(results: str | Path | None) -> list[str]:
    """2-hop on the paths construction against training length (one seed, from the tuning runs)."""
    if results is None:
        return []
    runs = {**load(Path(results) / "tuning"), **load(Path(results))}
    direct = re.compile(r"khop2_sparse-paths_attn-res-ln_w352_L3_H1_s\d+_b32_lr0\.01_seed0")  # no aids
    rows = sorted((r["steps"], r["test_accuracy"], r["seconds"]) for name, r in runs.items()
                  if direct.fullmatch(name))
    if len(rows) < 2:
        return []
    trend = ", ".join(f"{pct(a)} after {s:,} steps ({t / s * 1000:.0f} ms a step)" for s, a, t in rows)
    return [f"2-hop on the paths construction keeps climbing with training length (d = 16, width "
            f"352, seed 0, one CPU thread): {trend}. Trained directly, the floor needs longer "
            "schedules than this machine can give three seeds of; auxiliary hop heads (below) "
            "get there in 6,000 to 12,000 steps.", ""]


def _training_aids(cells: Cells, got: Got) -> list[str]:
    """The hop curriculum and the auxiliary hop heads against direct training of the same shape."""
    rows = []
    for cell, cfgs in cells.items():
        c = cfgs[0]
        if not (c.curriculum or c.aux) or not got.get(cell):
            continue
        aid = (f"curriculum {c.curriculum:,}/hop" if c.curriculum else "") + \
            ("auxiliary hop heads" if c.aux else "") + (", bf16" if c.precision == "bf16" else "")
        d = got.get(cell_of(replace(c, curriculum=0, aux=False).name()), [])
        direct = f"{pct(median(d))} ({len(d)})" if d else "not run"
        if not d:       # the same shape trained directly for another number of steps, if any
            others = sorted((o.steps, median(got[n]), len(got[n])) for n, cs in cells.items()
                            for o in cs[:1] if got.get(n) and not (o.curriculum or o.aux)
                            and (o.task, o.k, o.backbone, o.construction, o.width, o.layers, o.heads)
                            == (c.task, c.k, c.backbone, c.construction, c.width, c.layers, c.heads))
            if others:
                steps, x, n = others[-1]
                direct = f"{pct(x)} ({n}) at {steps:,} steps"
        rows.append(f"| {c.k} | {aid} | `{cell}` | {pct(median(got[cell]))} ({len(got[cell])}) | "
                    + ", ".join(pct(r["test_accuracy"]) for r in got[cell]) + f" | {direct} |")
    if not rows:
        return []
    test = test_set(task_spec("khop", 2), 1024)
    same = float((khop_targets(test.tokens, 2, 4) == test.tokens).mean())
    return ["### Training aids: the hop curriculum and auxiliary hop heads", "",
            "Both keep the backbone frozen and train only embeddings and unembeddings; the test "
            "accuracy is always the hop_k unembedding's on hop_k.", "",
            "* `--curriculum N` trains on hop_1, ..., hop_{k−1} targets for N steps each (the same "
            "k-hop sequences, a fresh optimiser and schedule per stage), then on hop_k for the "
            "run's `--steps`.",
            "* `--aux-hops` adds k − 1 unembeddings that read the same final stream, each trained "
            "on one hop_j (j < k) at every step next to the hop_k loss; nothing reads them at test "
            "time.", "",
            "The last column is the same backbone and width trained directly, for the same number "
            "of hop_k steps (or, where that cell is not in the grid, the longest that is).", "",
            "| k | aid | cell | median | per seed | direct training |", "|---|---|---|---|---|---|",
            *rows, "",
            "Trained directly, 2-hop runs settle on predicting the current token (on the test set "
            f"hop_2 equals it at {pct(same)} of the positions) and leave that plateau slowly, if at "
            "all. The probe table below shows what the aids change inside.", ""]


def _dyck_findings(cells: Cells, got: Got, results: str | Path | None) -> list[str]:
    """Dyck-1, sparse UT: construction A against its target width, and the paths construction."""
    tuning = load(Path(results) / "tuning") if results is not None else {}
    one_head = {r["width"]: r["test_accuracy"] for name, r in tuning.items()
                if name.startswith("dyck1_trained_attn_") and "_H1_" in name}

    def sparse_cells(construction: str) -> list[tuple[float, str, int]]:
        return [(median(got[cell]), cell, len(got[cell])) for cell, cfgs in cells.items()
                if (cfgs[0].task, cfgs[0].backbone, cfgs[0].arch, cfgs[0].construction)
                == ("dyck1", "sparse", "attn", construction) and got.get(cell)]

    L = []
    found_a, found_paths = sparse_cells("auto"), sparse_cells("paths")
    if one_head and found_a:
        best, cell, _ = max(found_a)
        trained = ", ".join(f"width {w}: {pct(a)}" for w, a in sorted(one_head.items()))
        wide = sorted((r["width"], r["test_accuracy"]) for name, r in tuning.items()
                      if name.startswith("dyck1_sparse_attn_") and "_L2_" in name and r["width"] > 64)
        wider = "; ".join(f"m = {w} (d = {w // 5}): {pct(a)}" for w, a in wide)
        L += ["Dyck-1, sparse UT, attention-only, construction A: at embedding width m it simulates "
              "the one-head targets of width d = m // (2L + 1). Fully trained one-head models of the "
              f"same depth (tuning runs, one seed) give {trained}. The best construction-A cell is "
              f"{pct(best)} (`{cell}`): close to the trained one-head model of its target width."
              + (f" Wider construction-A backbones (2 layers, tuning runs: {wider}) do not close "
                 "the gap." if wide else ""), ""]
    if found_paths:
        best, cell, n = max(found_paths)
        L += [f"Dyck-1, sparse UT, attention-only, paths construction (two heads per layer, each "
              f"with its own 0/1 value mask): {pct(best)} (median of {n}, `{cell}`), "
              + ("at or above" if best >= 0.99 else "below")
              + " the 99 % floor. The paths construction is still a frozen {0,1} backbone that "
              "simulates a class exactly (two-head targets with value matrices, no residual); "
              "what it adds to construction A is a second head whose output lands in blocks of "
              "its own.", ""]
    return L
