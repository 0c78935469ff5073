"""What the runtime's lookups buy: the module with and without them, in one process.

A query, key or value projection that reads only one-hot blocks of the residual stream, at least
``runtime.LOOKUP_MIN_ROWS`` rows of them, runs as a table lookup (``runtime._Lookup``; ``rasp eval
DIR --explain`` says ``lookup``).  This bench times the transformer module on a batch of inputs of
length N on one torch thread, on the runtime's chosen paths with the lookups and with them turned
off (the threshold set out of reach, the products prepared again), interleaved, median of
``--repeats`` each, and checks that both give the same logits bit for bit.  ``--min-rows R`` times
the lookups taken from R rows on instead of the default threshold (how the threshold was chosen).

    .venv/bin/python bench/lookups.py                                   # issue 50's five, N=64
    .venv/bin/python bench/lookups.py --all --lengths 20 40 --batch 256 --min-rows 1

Times are CPU seconds of the process (``time.process_time``).  Writes bench/results/lookups.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from compile_bench import _inputs  # noqa: E402
from shipped import BY_NAME, PROGRAMS  # noqa: E402

RESULTS = HERE / "results" / "lookups.json"
FIVE = ["dyck2", "most_frequent", "double_histogram", "histogram", "sort_by_frequency"]
OFF = 1 << 60


def measure(name: str, n: int, batch: int, repeats: int, min_rows: int) -> dict:
    import torch

    import rasp_compiler.runtime as runtime
    from rasp_compiler.compiler import compile_program
    from rasp_compiler.lang import load_program

    s = BY_NAME[name]
    vocab = list(s.vocab5)
    model = compile_program(load_program(str(s.file)), vocab, n)
    ids, lengths, values = model.encode_inputs(_inputs(vocab, n, batch, seed=n))
    module = model.module
    times: dict[str, list[float]] = {"lookups": [], "without": []}
    logits, taken = {}, 0
    default = runtime.LOOKUP_MIN_ROWS
    try:
        with torch.inference_mode():
            for _ in range(repeats):
                for key, rows in (("lookups", min_rows), ("without", OFF)):
                    runtime.LOOKUP_MIN_ROWS, module._prepared = rows, None
                    if key == "lookups":
                        taken = sum(e["path"] == "lookup" for e in module.explain())
                    else:
                        module._layers()
                    c0 = time.process_time()
                    logits[key] = module(ids, lengths, values=values)
                    times[key].append(time.process_time() - c0)
    finally:
        runtime.LOOKUP_MIN_ROWS, module._prepared = default, None
    with_s, without_s = statistics.median(times["lookups"]), statistics.median(times["without"])
    return {"program": name, "max_len": n, "batch": batch, "lookups": taken, "min_rows": min_rows,
            "with_s": with_s, "without_s": without_s, "speedup": without_s / with_s,
            "bit_identical": bool(torch.equal(logits["lookups"], logits["without"]))}


def main() -> int:
    import torch

    import rasp_compiler.runtime as runtime

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", nargs="+", default=FIVE, choices=sorted(BY_NAME), metavar="NAME")
    ap.add_argument("--all", action="store_true", help="every shipped program")
    ap.add_argument("--lengths", nargs="+", type=int, default=[64])
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--min-rows", type=int, default=runtime.LOOKUP_MIN_ROWS,
                    help=f"take lookups from this many rows read on (default {runtime.LOOKUP_MIN_ROWS})")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    torch.set_num_threads(1)
    names = [p.name for p in PROGRAMS] if args.all else args.programs
    rows = []
    print(f"{'program':<22}{'N':>4}{'lookups':>9}{'with s':>9}{'without s':>11}{'speedup':>9}  bit-identical")
    for name in names:
        for n in args.lengths:
            r = measure(name, n, args.batch, args.repeats, args.min_rows)
            rows.append(r)
            print(f"{name:<22}{n:>4}{r['lookups']:>9}{r['with_s']:>9.3f}{r['without_s']:>11.3f}"
                  f"{r['speedup']:>8.2f}x  {r['bit_identical']}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join(["bench/lookups.py", *sys.argv[1:]])
    args.out.write_text(json.dumps({"command": command, "rows": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0 if all(r["bit_identical"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
