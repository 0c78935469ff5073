"""How far the split-width heads' outputs are from their exact values, in units of the decode's gap.

A selector width split into part heads (docs/compiler.md, "Width of a disjoint `or`") writes, per
part, the weight m = w/(w+c) of its w selected keys, c = (N+1)^2, and layer 0's MLP decodes the
sum of the parts from those numbers; consecutive w are 1/c apart.  This script compiles a program,
runs random inputs, reads every ``*.partJ.mass`` row of the residual after the heads' layer,
recovers w as the integer nearest c·m/(1−m) and reports max |m − w/(w+c)| · c (the decode
tolerates well under 1/2), and whether the model's outputs agree with the interpreter on the same
inputs (which shows the recovered w were the true ones).

    .venv/bin/python bench/width_parts_margin.py --lengths 64 256

Writes bench/results/width_parts_margin.json.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rasp_compiler.compiler import compile_program  # noqa: E402
from rasp_compiler.interpreter import run  # noqa: E402
from rasp_compiler.lang import load_program  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "width_parts_margin.json"
PART = re.compile(r"\.part\d+\.mass$")


def measure(program_file: str, vocab: list[str], n: int, count: int, seed: int) -> dict:
    program = load_program(program_file)
    model = compile_program(program, vocab, n)
    c = float(n + 1) ** 2
    rng = random.Random(seed)
    inputs = [[rng.choice(vocab) for _ in range(rng.randint(max(1, n // 2), n))] for _ in range(count)]
    worst: dict[str, float] = {}
    agree = 0
    for start in range(0, count, 8):
        batch = inputs[start:start + 8]
        trace = model.trace(batch)
        labels = trace["labels"]
        cols = {lab: j for j, lab in enumerate(labels) if PART.search(lab)}
        if not cols:
            raise SystemExit(f"{program_file} has no split width at max_len {n}")
        for lab, j in cols.items():
            layer = next(lay["layer"] for lay in model.plan for h in lay["heads"] if h["writes"] == lab)
            # residuals: the embedding, then after each layer's heads and after its MLP
            residual = trace["residuals"][2 * layer + 1].to(torch.float64)
            for b, x in enumerate(batch):
                m = residual[b, 1:len(x) + 1, j]
                w = torch.round(c * m / (1 - m))
                err = float(((m - w / (w + c)).abs() * c).max())
                worst[lab] = max(worst.get(lab, 0.0), err)
        got = model.run(batch)
        agree += sum(g == run(program, x) for g, x in zip(got, batch, strict=True))
    return {"program": program_file, "max_len": n, "inputs": count, "inputs_agreeing": agree,
            "layers": model.n_layers, "mlp_hidden": model.mlp_sizes,
            "max_error_in_gaps": worst}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--program", default=str(ROOT / "programs" / "sort.rasp"))
    ap.add_argument("--vocab", default="abcde", help="a string of one-character tokens")
    ap.add_argument("--lengths", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--inputs", type=int, default=32, help="random inputs per max length")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    rows = []
    print(f"{'N':>5} {'layers':>6}  {'agree':>9}  max |m - w/(w+c)| in units of 1/c")
    for n in args.lengths:
        row = measure(args.program, list(args.vocab), n, args.inputs, args.seed)
        rows.append(row)
        errs = "  ".join(f"{lab.split('.')[-2]} {e:.2e}"
                         for lab, e in sorted(row["max_error_in_gaps"].items()))
        agree = f"{row['inputs_agreeing']}/{row['inputs']}"
        print(f"{n:>5} {row['layers']:>6}  {agree:>9}  {errs}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
