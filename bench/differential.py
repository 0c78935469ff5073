"""Differential testing at scale: random RASP programs, compiled model vs interpreter.

The larger run behind tests/test_differential.py (500 programs x 20 inputs at max length 5).
Programs come from ``rasp_compiler.testing.random_source`` (RASP source text, attention depth up
to 6); each is compiled and compared with the interpreter on ``--inputs`` random inputs plus the
all-equal edge inputs.  Every disagreement or crash is printed with its source, ready to be
minimised into tests/test_regressions.py.  Writes bench/results/differential.json.

    nice -n 5 .venv/bin/python bench/differential.py --programs 3000 --max-len 8 --inputs 30
    .venv/bin/python bench/differential.py --seeds 283 1342        # re-check given seeds
    nice -n 5 .venv/bin/python bench/differential.py --causal --programs 2000 --start 2000000
    nice -n 5 .venv/bin/python bench/differential.py --vocab '["x", "yy", "0", "ab", "q", "r2"]'
    nice -n 5 .venv/bin/python bench/differential.py --repeats 0.3 --start 9500000   # alike nodes
    nice -n 5 .venv/bin/python bench/differential.py --annotate 0.3 --start 84000000   # numerical(...)
    nice -n 5 .venv/bin/python bench/differential.py --hand-widths 0.7 --start 13100000   # BOS widths
    nice -n 5 .venv/bin/python bench/differential.py --domain-cap 100 --wide-domain-cap 2000 \
        --programs 3000 --start 9960000          # the second plan with larger tables
    nice -n 5 .venv/bin/python bench/differential.py --defer-from 50 --start 12200000   # deferred maps
    .venv/bin/python bench/differential.py --programs 20000 --ray HEAD:6379   # on a Ray cluster

With ``--causal`` every selector is restricted to keys at or before its query and ``length`` is
never read, and each program is compiled with ``causal=True``.

With ``--python-api`` the programs are tracr-style Python built through ``rasp_compiler.pyapi``
(``rasp_compiler.testing.random_pyapi``: opaque lambdas, merged maps, ``selector_and``/``or``/``not``,
numerical annotations; the larger run behind tests/test_pyapi_differential.py).  Its vocabulary is
``abc`` or ``{1, 2, 3}`` by seed unless ``--vocab`` is given (numbers allowed):

    nice -n 5 .venv/bin/python bench/differential.py --python-api --programs 800 --max-len 7 \
        --vocab '[0, 1, 2, 5]' --out bench/results/pyapi_differential_ints.json
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import sys
import time
from pathlib import Path

import torch

from rasp_compiler.errors import UserError
from rasp_compiler.testing import random_pyapi, random_source

RESULTS = Path(__file__).resolve().parent / "results" / "differential.json"
LIMITS = ("domain_cap", "wide_domain_cap", "defer_from")   # analysis.limits, lowered by options


def check_seed(seed: int, args: dict) -> tuple:
    """Generate and check one program (in this process, a worker process or a Ray task): the
    options that change module state (limits, logging) are applied here, where the check runs."""
    from rasp_compiler.compiler.analysis import limits
    for name in LIMITS:
        if args[name] is not None:
            setattr(limits, name.upper(), args[name])
    torch.set_num_threads(1)
    if args["python_api"]:  # tracr's warning for SequenceMap(f, x, x), which the generator writes on purpose
        logging.getLogger("rasp_compiler.pyapi.sops").setLevel(logging.ERROR)
        gen = random_pyapi.generate(seed, max_len=args["max_len"],
                                       vocab=None if args["vocab"] is None else tuple(args["vocab"]))
        out = random_pyapi.check_generated(gen, inputs=args["inputs"], dtype=args["dtype"])
    else:
        gen = random_source.generate(seed, max_len=args["max_len"], causal=args["causal"],
                                     vocab=tuple(args["vocab"] or random_source.VOCAB),
                                     repeats=args["repeats"], annotate=args["annotate"],
                                     hand_widths=args["hand_widths"])
        out = random_source.check_generated(gen, max_len=args["max_len"], inputs=args["inputs"],
                                            dtype=args["dtype"])
    return out.status, out.detail, out.failures[:2], out.inputs_checked, gen.depth, gen.source


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", type=int, default=2000)
    ap.add_argument("--start", type=int, default=10_000, help="first seed (the test uses 0..499)")
    ap.add_argument("--seeds", nargs="*", type=int, default=None, help="check exactly these seeds")
    ap.add_argument("--max-len", type=int, default=8)
    ap.add_argument("--inputs", type=int, default=30)
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ap.add_argument("--causal", action="store_true",
                    help="programs that look only backwards, compiled causally")
    ap.add_argument("--vocab", type=json.loads, default=None,
                    help='tokens as a JSON list (default ["a", "b", "c"]; with --python-api, by seed)')
    ap.add_argument("--python-api", action="store_true",
                    help="tracr-style programs built through rasp_compiler.pyapi")
    ap.add_argument("--repeats", type=float, default=0.0,
                    help="the chance that a statement is written twice under two names (exercises "
                         "the merging of alike nodes; 0, the default, gives the programs of every "
                         "earlier run)")
    ap.add_argument("--annotate", type=float, default=0.0,
                    help="the chance that a map with a numeric result is written numerical(...), "
                         "overriding the compiler's choice of encoding, with sums of means too (0, "
                         "the default, gives the programs of every earlier run)")
    ap.add_argument("--hand-widths", type=float, default=0.0,
                    help="the chance that a selector_width is written by hand over a BOS at position "
                         "0, as the RASP paper and library do (random_source.HAND_WIDTHS; not with "
                         "--causal; 0, the default, gives the programs of every earlier run)")
    ap.add_argument("--domain-cap", type=int, default=None, metavar="N",
                    help="lower the analysis's tabulation cap (analysis.limits.DOMAIN_CAP) to N, and "
                         "with --wide-domain-cap the second plan's: small programs then take the "
                         "paths of large ones (opaque maps, the plan with larger tables)")
    ap.add_argument("--wide-domain-cap", type=int, default=None, metavar="M")
    ap.add_argument("--defer-from", type=int, default=None, metavar="K",
                    help="lower analysis.limits.DEFER_FROM to K: maps past K joint assignments are "
                         "kept opaque in the first plan, and tabulated in a second where that costs "
                         "a layer")
    ap.add_argument("--jobs", type=int, default=None,
                    help="programs checked in parallel (default 1; with --ray, the cluster's CPUs)")
    ap.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                    help="check each program as a Ray task: on the cluster at ADDRESS, or on a Ray "
                         "instance started here; the same output and JSON as without")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    if args.python_api and (args.causal or args.repeats or args.annotate or args.hand_widths):
        ap.error("--causal, --repeats, --annotate and --hand-widths have no --python-api generator")
    if args.jobs is not None and args.jobs < 1:
        ap.error("--jobs must be at least 1")
    from rasp_compiler import scheduling
    seeds = args.seeds if args.seeds else list(range(args.start, args.start + args.programs))
    vocab = args.vocab or ("abc or {1, 2, 3} by seed" if args.python_api else list(random_source.VOCAB))
    counts: collections.Counter = collections.Counter()
    depths: collections.Counter = collections.Counter()
    bad, refused = [], collections.Counter()
    inputs = 0
    start = time.perf_counter()
    outcomes: dict[int, tuple] = {}
    reported = 0

    def finished(seed: int, outcome: tuple) -> None:   # reported in seed order, whatever the backend
        nonlocal inputs, reported
        outcomes[seed] = outcome
        while reported < len(seeds) and seeds[reported] in outcomes:
            s = seeds[reported]
            status, detail, failures, checked, depth, source = outcomes.pop(s)
            reported += 1
            counts[status] += 1
            depths[depth] += 1
            inputs += checked
            if status == "refused":
                refused[detail[:120]] += 1
            if status in ("disagree", "crash"):
                bad.append({"seed": s, "status": status, "detail": detail, "failures": failures,
                            "source": source})
                print(f"--- seed {s}: {status} {detail[:200]} {failures[:1]}\n{source}", flush=True)

    options = {name: getattr(args, name) for name in ("max_len", "inputs", "dtype", "causal", "vocab",
                                                      "python_api", "repeats", "annotate", "hand_widths",
                                                      *LIMITS)}
    try:
        backend = scheduling.backend(args.jobs, args.ray is not None, args.ray or None)
        scheduling.run_tasks(backend, check_seed, [(seed, (seed, options)) for seed in seeds], finished)
    except UserError as err:      # --ray without Ray installed, or no cluster at the address
        print(err.render(), file=sys.stderr)
        return 2
    secs = time.perf_counter() - start
    print(f"{len(seeds)} programs (depths {dict(sorted(depths.items()))}), {inputs:,} inputs compared, "
          f"max_len {args.max_len}, vocab {vocab}: {dict(counts)} in {secs:.0f} s")
    for why, k in refused.most_common(5):
        print(f"  refused x{k}: {why}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": " ".join(sys.argv), "programs": len(seeds), "counts": counts,
                                    "depths": depths, "inputs_compared": inputs, "seconds": round(secs),
                                    "refused": refused, "bad": bad}, indent=1, default=dict) + "\n")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
