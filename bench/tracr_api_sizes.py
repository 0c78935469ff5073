"""Sizes of tracr's library programs, written in the Python API and compiled, next to tracr's.

    .venv/bin/python bench/tracr_api_sizes.py [--max-len 10] [--inputs 1000]

For each program of ``rasp_compiler.pyapi.lib`` (vocabulary of 5 tokens, max length 10 by
default): layers, heads, residual width, MLP hidden units, parameters, and tracr's residual width
and layers as measured for issue 7; then, with ``--inputs K``, how many of K random inputs the
compiled model agrees on with the interpreter at max length 10 and 20.  Prints a Markdown table
and writes ``bench/results/tracr_api_sizes.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

from rasp_compiler.interpreter import run as interpret
from rasp_compiler.pyapi import compile_program
from rasp_compiler.pyapi.lib import LIBRARY

TRACR = {"reverse": (71, 4), "sort": (85, 3), "sort_freq": (168, 5), "shuffle_dyck2": (70, 8),
         "frac_prevs": (18, 2), "pair_balance": (21, 2)}


def agreement(name: str, max_len: int, k: int, seed: int = 0) -> tuple[int, int]:
    make, vocab = LIBRARY[name]
    if name == "sort_unique":
        vocab = list(range(1, max_len + 1))  # distinct keys for every length, as tracr requires
    program = make(max_len).program()
    model = compile_program(program, vocab, max_len)
    rng = random.Random(seed)
    inputs = []
    for i in range(k):
        n = max_len - i % max_len
        unique = name == "sort_unique"
        inputs.append(rng.sample(vocab, n) if unique else [rng.choice(vocab) for _ in range(n)])
    got = model.run(inputs)
    ok = 0
    for x, g in zip(inputs, got, strict=True):
        e = interpret(program, x)
        ok += all(abs(float(a) - float(b)) <= 1e-5 if isinstance(a, float) or isinstance(b, float) else a == b
                  for a, b in zip(e, g, strict=True))
    return ok, k


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-len", type=int, default=10)
    ap.add_argument("--inputs", type=int, default=0, help="also check agreement on K inputs at 10 and 20")
    args = ap.parse_args(argv)
    rows = []
    compile_program(LIBRARY["length"][0](4), "ab", 4)  # warm-up: imports are not compile time
    for name, (make, vocab) in LIBRARY.items():
        start = time.perf_counter()
        model = compile_program(make(args.max_len), vocab, args.max_len)
        seconds = time.perf_counter() - start
        row = {"program": name, "vocab": [str(v) for v in vocab], "max_len": args.max_len,
               "layers": model.n_layers, "heads": sum(model.heads_per_layer),
               "residual_width": model.residual_width, "mlp_hidden": sum(model.mlp_sizes),
               "params": model.params, "compile_seconds": round(seconds, 3),
               "tracr_residual_width": TRACR.get(name, (None, None))[0],
               "tracr_layers": TRACR.get(name, (None, None))[1]}
        if args.inputs:
            for n in (10, 20):
                ok, k = agreement(name, n, args.inputs)
                row[f"agree_at_{n}"] = f"{ok}/{k}"
        rows.append(row)
    cols = ["program", "layers", "residual_width", "tracr_layers", "tracr_residual_width", "heads",
            "mlp_hidden", "params", "compile_seconds"]
    if args.inputs:
        cols += ["agree_at_10", "agree_at_20"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join("–" if r.get(c) is None else str(r.get(c)) for c in cols) + " |")
    os.makedirs("bench/results", exist_ok=True)
    with open("bench/results/tracr_api_sizes.json", "w", encoding="utf-8") as fh:
        json.dump({"max_len": args.max_len, "inputs": args.inputs, "rows": rows}, fh, indent=1)
        fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
