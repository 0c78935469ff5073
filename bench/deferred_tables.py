"""What deferring large tables does to random programs: each compiled with and without it.

``analysis.limits.DEFER_FROM`` keeps a map of independent inputs past that many joint assignments
opaque in a first plan (docs/compiler.md, MLPs, "Deferred tables").  Every program from
``rasp_compiler.testing.random_source`` (the generator behind bench/differential.py) is compiled
twice, with ``DEFER_FROM = None`` and with ``--defer-from K``, and sorted by what changed: the
same weights (nothing deferred, or the tabulated plan kept), fewer layers, fewer parameters, more
parameters or more layers.  Every program that grew is printed with its sizes.
Agreement with the interpreter is bench/differential.py's job (``--defer-from K`` there); this
counts sizes only.  Writes bench/results/deferred_tables.json.

    nice -n 5 .venv/bin/python bench/deferred_tables.py --defer-from 50 --start 12200000 \\
        --programs 300 --max-len 8
    nice -n 5 .venv/bin/python bench/deferred_tables.py --defer-from 4096 --start 12300000 \\
        --programs 400 --max-len 12
    nice -n 5 .venv/bin/python bench/deferred_tables.py --defer-from 2000 --start 12300000 \\
        --programs 400 --max-len 12
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path
from typing import Any

from rasp_compiler.compiler import compile_weights
from rasp_compiler.compiler.analysis import limits
from rasp_compiler.errors import UserError
from rasp_compiler.lang import program_from_source
from rasp_compiler.testing import random_source

RESULTS = Path(__file__).resolve().parent / "results" / "deferred_tables.json"


def _sizes(program: Any, vocab: list[str], max_len: int, defer_from: int | None) -> dict | None:
    """Layers, parameters, the deferred maps and the weights digest; None where it is refused."""
    limits.DEFER_FROM = defer_from
    try:
        built = compile_weights(program, vocab, max_len)
    except UserError:
        return None
    return {"layers": int(built.config["n_layers"]), "params": built.params,
            "deferred": [sid for sid, _ in built.analysis.deferred],
            "sha": built.config["weights_sha256"]}


def _verdict(plain: dict | None, deferred: dict | None) -> str:
    if plain is None or deferred is None:
        return "refused" if plain is None and deferred is None else "refused by one"
    if deferred["sha"] == plain["sha"]:  # nothing deferred, or the tabulated plan kept
        return "same weights"
    if deferred["layers"] != plain["layers"]:
        return "fewer layers" if deferred["layers"] < plain["layers"] else "more layers"
    return "fewer params" if deferred["params"] < plain["params"] else "more params"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--defer-from", type=int, required=True, metavar="K",
                    help="the threshold to compare with no deferring")
    ap.add_argument("--programs", type=int, default=300)
    ap.add_argument("--start", type=int, default=12_200_000, help="first seed")
    ap.add_argument("--max-len", type=int, default=8)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    counts: collections.Counter = collections.Counter()
    grew = []
    start = time.perf_counter()
    for seed in range(args.start, args.start + args.programs):
        gen = random_source.generate(seed, max_len=args.max_len)
        program = program_from_source(gen.source, f"<random {seed}>")
        plain = _sizes(program, list(gen.vocab), args.max_len, None)
        deferred = _sizes(program, list(gen.vocab), args.max_len, args.defer_from)
        verdict = _verdict(plain, deferred)
        counts[verdict] += 1
        if verdict in ("more params", "more layers"):
            grew.append({"seed": seed, "before": plain, "after": deferred})
            print(f"seed {seed}: {plain['layers']} -> {deferred['layers']} layers, "
                  f"{plain['params']:,} -> {deferred['params']:,} parameters "
                  f"(deferred {', '.join(deferred['deferred'])})", flush=True)
    secs = time.perf_counter() - start
    print(f"{args.programs} programs at max_len {args.max_len}, DEFER_FROM {args.defer_from:,} against "
          f"none: {dict(counts.most_common())} in {secs:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": " ".join(sys.argv), "counts": counts, "grew": grew,
                                    "seconds": round(secs)}, indent=1, default=dict) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
