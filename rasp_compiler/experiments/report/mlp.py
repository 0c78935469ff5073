"""The paper's claim that frozen random MLPs help the random UT further on induction, held against
the grid's base cells of the random backbone with residual + LN, with and without the MLP.

The note is worded from the medians it quotes: which k rise, fall or stay level decides the
verbs, and whether any k rises decides whether the claim is called reproduced.
"""

from __future__ import annotations

from rasp_compiler.experiments.grid import KS, PAPER
from rasp_compiler.experiments.report.labels import comma_and, hops, pct
from rasp_compiler.experiments.report.results import Cells, Got, MainCells, median

LEVEL_POINTS = 0.5
"""A change of less than this many percentage points reads as staying level."""

Pair = tuple[float, float]
"""(median without the MLP, median with it)."""


def mlp_note(main: MainCells, got: Got, cells: Cells) -> list[str]:
    """One paragraph: the random UT's medians with and without the frozen MLP at the base
    settings, k-hop then Dyck-1, and whether any larger run had the MLP; nothing without them."""
    khop = {k: p for k in KS if (p := _pair(main, got, "khop", k)) is not None}
    dyck = _pair(main, got, "dyck1", None)
    if not khop:
        return []
    moved = [k for k, p in khop.items() if _moved(p)]
    level = [k for k in khop if k not in moved]
    helped = [k for k in moved if khop[k][1] > khop[k][0]]
    claim = f"(`random {PAPER[('khop', 'attn-res-ln-mlp', 'random')]}` above)"
    if helped:
        head = (f"The paper reports that adding frozen random MLPs helps the random UT further on "
                f"induction {claim}. At these base settings they help for {hops(helped)}: ")
    else:
        head = ("Frozen random MLPs are not reproduced as a help. The paper reports that adding "
                f"them helps the random UT further on induction {claim}. At these base settings "
                "they do not: ")
    clauses = [_moved_clause(k, khop[k], first=i == 0) for i, k in enumerate(moved)]
    if level:
        clauses.append(_level_clause(level, [khop[k] for k in level]))
    text = head + comma_and(clauses) + "."
    if dyck is not None:
        text += " " + _dyck_sentence(dyck)
    return [text + " " + _larger_runs(main, got, cells), ""]


def _pair(main: MainCells, got: Got, task: str, k: int | None) -> Pair | None:
    without = got.get(main.get((task, k, "random", "attn-res-ln"), ""), [])
    with_mlp = got.get(main.get((task, k, "random", "attn-res-ln-mlp"), ""), [])
    return (median(without), median(with_mlp)) if without and with_mlp else None


def _moved(p: Pair) -> bool:
    return abs(p[1] - p[0]) * 100 >= LEVEL_POINTS


def _moved_clause(k: int, p: Pair, first: bool) -> str:
    verb = "rises" if p[1] > p[0] else "falls"
    if first:   # the first clause says which median is which; the others follow its order
        return f"{k}-hop {verb} from {pct(p[0])} (res+LN) to {pct(p[1])} (with the MLP)"
    return f"{k}-hop {verb} from {pct(p[0])} to {pct(p[1])}"


def _level_clause(ks: list[int], pairs: list[Pair]) -> str:
    # the bound is read off the figures as printed beside it (46.9 → 46.7 % is within 0.2 points
    # even where the unrounded medians differ by 0.21), so a reader can check it against them
    bound = max(abs(round(100 * b, 1) - round(100 * a, 1)) for a, b in pairs)
    shown = ", ".join(f"{100 * a:.1f} → {pct(b)}" for a, b in pairs)
    verb = "stays" if len(ks) == 1 else "stay"
    return f"{hops(ks)} {verb} within {bound:.1f} points ({shown})"


def _dyck_sentence(p: Pair) -> str:
    if not _moved(p):
        return f"Dyck-1 stays level ({100 * p[0]:.1f} → {pct(p[1])})."
    return f"Dyck-1 {'rises' if p[1] > p[0] else 'falls'} from {pct(p[0])} to {pct(p[1])}."


def _larger_runs(main: MainCells, got: Got, cells: Cells) -> str:
    """The random UT's runs with a frozen MLP beyond the base settings, or that there are none."""
    base = set(main.values())
    larger = [(cell, median(got[cell])) for cell, cfgs in cells.items()
              if (cfgs[0].backbone, cfgs[0].arch) == ("random", "attn-res-ln-mlp")
              and cell not in base and got.get(cell)]
    if not larger:
        # "where the random UT meets its bars": the bars section checks that it does
        return ("No run with a frozen MLP was made at the larger settings where the random UT "
                "meets its bars, so the paper's claim is untested there.")
    shown = []
    for cell, x in larger:        # side by side with the same cell without the MLP, where it ran
        without = cell.replace("_attn-res-ln-mlp_", "_attn-res-ln_")
        seeds = ", ".join(pct(r["test_accuracy"]) for r in got[cell])
        text = f"`{cell}` {pct(x)} (seeds: {seeds})"
        if got.get(without):
            text += (f" against {pct(median(got[without]))} without it (seeds: "
                     + ", ".join(pct(r["test_accuracy"]) for r in got[without]) + ")")
        shown.append(text)
    return ("With a frozen MLP at larger settings, same seeds and so the same frozen attention "
            "weights, trained directly: " + "; ".join(shown) + ". Command: `rasp experiment table "
            "--only '^khop3_random_attn-res-ln-mlp_w256_L4'`.")
