"""How far a width head's BOS weight is from 1/(w+1), relative to itself, in float32 epsilons.

The step MLPs that read several numbers charge a BOS weight rounding relative to its own size
where the uniform bound finds no projection (docs/compiler.md, "MLPs"; ``numeric.projection``).
This script checks the premise: it compiles a program, runs random inputs, reads every
``*.bos_weight`` row of the residual after its head's layer, recovers w as the integer nearest
1/x − 1 and reports max |x − 1/(w+1)| / x in epsilons (the allowance is 32).  The heads'
numerical outputs whose values are 0 and 1 are reported too, as max |x − round(x)| (the uniform
allowance charges them 32 epsilons).  It also
says whether the model's outputs agree with the interpreter on the same inputs.

    .venv/bin/python bench/bos_weight_rounding.py --lengths 192 256

Writes bench/results/bos_weight_rounding.json.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rasp_compiler.compiler import compile_program  # noqa: E402
from rasp_compiler.interpreter import run  # noqa: E402
from rasp_compiler.lang import load_program  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "bos_weight_rounding.json"
EPS = float(np.finfo(np.float32).eps)


def measure(program_file: str, vocab: list[str], n: int, count: int, seed: int) -> dict:
    program = load_program(program_file)
    model = compile_program(program, vocab, n)
    rng = random.Random(seed)
    inputs = [[rng.choice(vocab) for _ in range(rng.randint(1, n))] for _ in range(count)]
    written = {h["writes"]: lay["layer"] for lay in model.plan for h in lay["heads"]}
    numerical = {f["feature"] for f in model.config["residual"] if f["encoding"] == "numerical"}
    other: set[str] = set()   # numerical head outputs seen off {0, 1}: not reported
    worst: dict[str, float] = {}
    agree = 0
    for start in range(0, count, 8):
        batch = inputs[start:start + 8]
        trace = model.trace(batch)
        for j, lab in enumerate(trace["labels"]):
            if lab not in written or lab not in numerical or lab.endswith(".mass"):
                continue
            # residuals: the embedding, then after each layer's heads and after its MLP
            residual = trace["residuals"][2 * written[lab] + 1].to(torch.float64)
            for b, x in enumerate(batch):
                v = residual[b, 1:len(x) + 1, j]
                if lab.endswith(".bos_weight"):
                    w = torch.round(1 / v - 1)
                    err = float(((v - 1 / (w + 1)).abs() / v).max()) / EPS
                else:
                    if not bool(torch.all((torch.round(v) == 0) | (torch.round(v) == 1))):
                        other.add(lab)
                    err = float((v - torch.round(v)).abs().max()) / EPS
                worst[lab] = max(worst.get(lab, 0.0), err)
        got = model.run(batch)
        agree += sum(g == run(program, x) for g, x in zip(got, batch, strict=True))
    worst = {lab: e for lab, e in worst.items() if lab not in other}
    return {"program": program_file, "max_len": n, "inputs": count, "inputs_agreeing": agree,
            "layers": model.n_layers, "max_error_in_epsilons": worst}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--program", default=str(ROOT / "programs" / "most_frequent.rasp"))
    ap.add_argument("--vocab", default="abcde", help="a string of one-character tokens")
    ap.add_argument("--lengths", type=int, nargs="+", default=[192, 256])
    ap.add_argument("--inputs", type=int, default=32, help="random inputs per max length")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    rows = []
    print(f"{'N':>5} {'layers':>6}  {'agree':>9}  max error in float32 epsilons")
    for n in args.lengths:
        row = measure(args.program, list(args.vocab), n, args.inputs, args.seed)
        rows.append(row)
        errs = "  ".join(f"{lab} {e:.2f}" for lab, e in sorted(row["max_error_in_epsilons"].items()))
        agree = f"{row['inputs_agreeing']}/{row['inputs']}"
        print(f"{n:>5} {row['layers']:>6}  {agree:>9}  {errs}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
