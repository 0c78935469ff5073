"""Hand-written selector widths against the built-in: layers, residual width and parameters.

The RASP paper and the original RASP library count the keys a selector selects with a mean over
a hand-made BOS at position 0 (``rewrites.bos_counts``, ``rewrites.bos_widths``). Each form below
is the width of its selector on every input; each is compiled inside three programs (the
library's sort, a histogram, a count of earlier copies) beside the same program with
``selector_width``. Shared with tests/test_width_idioms.py and tests/test_show.py. Writes
bench/results/width_idioms.json.

    .venv/bin/python bench/width_idioms.py                       # vocab abcde, max_len 10 and 40
    .venv/bin/python bench/width_idioms.py --lengths 64
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results" / "width_idioms.json"

# a + z, each written differently; every one is selector_width(sel) on every input
HAND_WIDTHS = {
    "rasplib": """def width(sel) {
    at0 = select(indices, 0, ==);
    sAND0 = sel and at0;
    sOR0 = sel or at0;
    inverted = aggregate(sOR0, indicator(indices == 0));
    except0 = (1 / inverted) - 1;
    valat0 = aggregate(sAND0, 1, 0);
    return round(except0 + valat0);
}""",
    "unrounded": """def width(sel) {
    at0 = select(indices, 0, ==);
    return (1 / aggregate(sel or at0, indicator(indices == 0))) - 1 + aggregate(sel and at0, 1, 0);
}""",
    "bos_flag": """def width(sel) {
    bos = indices == 0;
    at_bos = select(bos, True, ==);
    share = numerical(aggregate(sel or at_bos, indicator(bos)));
    has_bos = numerical(aggregate(sel and at_bos, indicator(bos), 0));
    return round(1 / share - 1 + has_bos);
}""",
    "bos_first_round_then_subtract": """def width(sel) {
    first = select(indices, 1, <);
    return round(1 / aggregate(first or sel, indicator(indices < 1))) - 1
           + aggregate(first and sel, 1, 0);
}""",
    "length_over_share": """def width(sel) {
    at0 = select(indices, 0, ==);
    scaled = aggregate(at0 or sel, length * indicator(indices == 0));
    return round(length / scaled) - 1 + aggregate(at0 and sel, 1, 0);
}""",
    "reciprocal_times_length": """def width(sel) {
    at0 = select(indices, 0, ==);
    share = aggregate(sel or at0, indicator(indices == 0));
    with_bos = round(length * (1 / (length * share)));
    return with_bos - 1 + numerical(aggregate(sel and at0, indicator(indices == 0), 0));
}""",
    "probe_as_indicator": """def width(sel) {
    at0 = select(indices, 0, ==);
    others = round(1 / aggregate(sel or at0, indicator(indices == 0)) - 1);
    selects_bos = aggregate(sel and at0, indicator(indices == 0), 0) > 0;
    return others + indicator(selects_bos);
}""",
}
BUILTIN = "def width(sel) { return selector_width(sel); }"

PROGRAMS = {
    # the original library's sort: a stable sort by each position's place
    "sort": """def sort_by(vals, keys) {
    before = select(keys, keys, <) or (select(keys, keys, ==) and select(indices, indices, <));
    place = width(before);
    return aggregate(select(place, indices, ==), vals);
}
sorted = sort_by(tokens, tokens);
sorted;""",
    "histogram": "hist = width(select(tokens, tokens, ==));\nhist;",
    # a selector that never selects key 0 from query 0, and at most the earlier keys
    "earlier_copies": "n = width(select(tokens, tokens, ==) and select(indices, indices, <));\nn;",
}




def source(width: str, program: str) -> str:
    """The program ``program`` with ``width`` (a key of HAND_WIDTHS, or "builtin") as its width."""
    return (BUILTIN if width == "builtin" else HAND_WIDTHS[width]) + "\n" + PROGRAMS[program] + "\n"


def main() -> int:
    from rasp_compiler.compiler import compile_weights
    from rasp_compiler.errors import UserError
    from rasp_compiler.lang import program_from_source

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", nargs="*", type=int, default=[10, 40])
    ap.add_argument("--vocab", default="abcde")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    rows = []
    print(f"{'program':15} {'width':32} {'N':>3} {'layers':>6} {'width':>6} {'params':>10}")
    for n in args.lengths:
        for program in PROGRAMS:
            for width in ["builtin", *HAND_WIDTHS]:
                try:
                    built = compile_weights(program_from_source(source(width, program)), list(args.vocab), n)
                except UserError as err:
                    print(f"{program:15} {width:32} {n:>3} refused: {err.message[:60]}")
                    rows.append({"program": program, "width": width, "max_len": n, "refused": err.message})
                    continue
                print(f"{program:15} {width:32} {n:>3} {built.n_layers:>6} {built.residual_width:>6} "
                      f"{built.params:>10,}")
                rows.append({"program": program, "width": width, "max_len": n, "layers": built.n_layers,
                             "residual_width": built.residual_width, "params": built.params})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": " ".join(["bench/width_idioms.py", *sys.argv[1:]]),
                                    "vocab": args.vocab, "rows": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
