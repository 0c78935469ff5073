"""Which plans the compiler weighs for each program, and what each cost.

The compiler builds a first plan and, where it may win, other candidate strategies (deferred,
fewer deferred, plain, wide tables, large tables opaque, numeric output: ``compiler/plans.py``),
and keeps the one with the fewest layers, then parameters.  For every shipped token program
(``bench/shipped.py``, five-token vocabulary) or, with ``--paper``, the original repository's
paper programs, at each max length, this prints every strategy built: its wall-clock seconds,
layers, the most heads on one chain (no plan has fewer layers), parameters and outcome (kept,
assembled, not assembled because it had no fewer layers, refused).  Writes
bench/results/plan_candidates.json (``--out`` elsewhere).

    .venv/bin/python bench/plan_candidates.py
    .venv/bin/python bench/plan_candidates.py --paper --lengths 8 16 24 40 64
    .venv/bin/python bench/plan_candidates.py --programs dyck2 --lengths 48 256
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from paper_programs import PROGRAMS as PAPER  # noqa: E402
from paper_programs import SOURCE as PAPER_SOURCE  # noqa: E402
from shipped import PROGRAMS  # noqa: E402

from rasp_compiler.compiler import compile_weights  # noqa: E402
from rasp_compiler.errors import UserError  # noqa: E402
from rasp_compiler.lang import load_program, program_from_source  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "plan_candidates.json"
LENGTHS = (5, 16, 40, 64)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", nargs="*", type=int, default=list(LENGTHS))
    ap.add_argument("--paper", action="store_true", help="the paper programs instead of the shipped ones")
    ap.add_argument("--programs", nargs="*", help="only these (names as in the table)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    if args.paper:
        source = PAPER_SOURCE.read_text(encoding="utf-8")
        programs = [(f"paper/{name}", lambda name=name: program_from_source(
            source, "paper_examples.rasp", output=name), vocab) for name, vocab, _ in PAPER]
    else:
        programs = [(s.name, lambda s=s: load_program(str(s.file)), s.vocab5) for s in PROGRAMS]
    if args.programs:
        known = {name for name, _, _ in programs}
        unknown = sorted(set(args.programs) - known)
        if unknown:
            ap.error(f"unknown programs: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        programs = [p for p in programs if p[0] in args.programs]
    rows = []
    print(f"{'program':24} {'N':>4}  {'strategy':40} {'s':>6} {'layers':>6} {'heads':>5} "
          f"{'params':>11}  outcome")
    start = time.perf_counter()
    for name, load, vocab in programs:
        for n in args.lengths:
            try:
                built = compile_weights(load(), list(vocab), n)
            except UserError as err:
                print(f"{name:24} {n:>4}  refused: {err.message}")
                rows.append({"program": name, "max_len": n, "refused": err.message})
                continue
            for t in built.plans_tried or []:
                params = "" if t["params"] is None else f"{t['params']:,}"
                print(f"{name:24} {n:>4}  {t['strategy']:40} {t['seconds']:6.2f} "
                      f"{'' if t['layers'] is None else t['layers']:>6} "
                      f"{'' if t['head_depth'] is None else t['head_depth']:>5} {params:>11}  {t['outcome']}",
                      flush=True)
            rows.append({"program": name, "max_len": n, "vocab": "".join(map(str, vocab)),
                         "tried": built.plans_tried})
    several = sum(1 for r in rows if len(r.get("tried", [])) > 1)
    print(f"{len(rows)} compiles in {time.perf_counter() - start:.0f} s; {several} built more than one plan")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": " ".join(["bench/plan_candidates.py", *sys.argv[1:]]),
                                    "rows": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
