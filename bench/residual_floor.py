"""How fast can a compiled module be on a CPU at all?  The cost of writing its residual stream once.

Any forward pass of a transformer starts by writing the residual stream: the token and position
embeddings, [batch, 1 + N, d_model] numbers.  This bench times that one step (``embed.token[ids] +
embed.pos``, the runtime's own first line) for a batch of 1,024 inputs of length N on one torch
thread, beside the whole module and the interpreter on the same inputs, and prints the fraction
of the interpreter's time the embedding alone takes.  Where the embedding alone costs more than a
tenth of the interpreter's time, "module >= 10x the interpreter" (issue 50) cannot be met by any
forward pass that computes the residual stream, sparse or not.

    .venv/bin/python bench/residual_floor.py                      # the five programs of issue 50, N=64
    .venv/bin/python bench/residual_floor.py --programs reverse --lengths 16 64

Times are CPU seconds of the process (``time.process_time``), median of 5 (the interpreter: 128
inputs, scaled to the batch).  Writes bench/results/residual_floor.json.
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
from shipped import BY_NAME  # noqa: E402

RESULTS = HERE / "results" / "residual_floor.json"
PROGRAMS = ["dyck2", "most_frequent", "double_histogram", "histogram", "sort_by_frequency"]
BATCH = 1024
INTERP_SAMPLE = 128
REPEATS = 5


def _median_seconds(step, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        c0 = time.process_time()
        step()
        times.append(time.process_time() - c0)
    return statistics.median(times)


def measure(name: str, n: int) -> dict:
    import torch

    from rasp_compiler.compiler import compile_program
    from rasp_compiler.interpreter import run
    from rasp_compiler.lang import load_program

    s = BY_NAME[name]
    vocab = list(s.vocab5)
    program = load_program(str(s.file))
    model = compile_program(program, vocab, n)
    xs = _inputs(vocab, n, BATCH, seed=n)
    ids, lengths, values = model.encode_inputs(xs)
    module = model.module
    token, pos = module.w("embed.token"), module.w("embed.pos")
    with torch.inference_mode():
        module(ids[:2], lengths[:2], values=None if values is None else values[:2])  # prepare paths
        embed_s = _median_seconds(lambda: token[ids] + pos[:ids.shape[1]].unsqueeze(0))
        module_s = _median_seconds(lambda: module(ids, lengths, values=values))
    c0 = time.process_time()
    for x in xs[:INTERP_SAMPLE]:
        run(program, x)
    interp_s = (time.process_time() - c0) * BATCH / INTERP_SAMPLE
    return {"program": name, "max_len": n, "batch": BATCH, "d_model": int(token.shape[1]),
            "dtype": model.config["dtype"], "embedding_s": embed_s, "module_s": module_s,
            "interp_s": interp_s, "bar_s": interp_s / 10, "embedding_over_bar": embed_s / (interp_s / 10)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", nargs="+", default=PROGRAMS, choices=sorted(BY_NAME), metavar="NAME")
    ap.add_argument("--lengths", nargs="+", type=int, default=[64])
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()

    import torch
    torch.set_num_threads(1)
    rows = []
    print(f"{'program':20s} {'N':>4s} {'d_model':>7s} {'embed ms':>9s} {'module ms':>10s} "
          f"{'interp ms':>10s} {'bar ms':>7s} {'embed/bar':>9s}")
    for name in args.programs:
        for n in args.lengths:
            r = measure(name, n)
            rows.append(r)
            ms = {k: r[k] * 1e3 for k in ("embedding_s", "module_s", "interp_s", "bar_s")}
            print(f"{name:20s} {n:4d} {r['d_model']:7d} {ms['embedding_s']:9.1f} {ms['module_s']:10.1f} "
                  f"{ms['interp_s']:10.1f} {ms['bar_s']:7.1f} {r['embedding_over_bar']:9.2f}", flush=True)
    Path(args.out).write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
