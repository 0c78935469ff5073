"""The exactness table: every construction over the issue's grid, in float64.

Grid: L in 1..4, H in 1..3 (one head for sparse/looped), d in {1,2,4,8}, causal off and on, residual
where the construction allows it; ``--trials`` random targets per cell (default 50), each run on one
random input of every length in 1..32.  Random UTs are run where their width stays at most
``--max-random-m`` (dense m x m value matrices).  Prints a Markdown table (pasted in docs/universal.md)
and writes bench/results/universal_exactness.json.

    .venv/bin/python bench/universal_exactness.py [--trials 50]
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import torch

from rasp_compiler.universal import build_universal, width_formula
from rasp_compiler.universal.check import compare
from rasp_compiler.universal.target import Target

ROWS = [  # (construction, residual, values)
    ("sparse", False, True), ("looped", False, True), ("multihead", False, False),
    ("multihead", True, False), ("paths", False, True), ("paths", True, True),
    ("random", False, True), ("random", True, True), ("random", False, False), ("random", True, False),
]


def cells(construction: str, residual: bool, values: bool, max_random_m: int):
    heads = (1,) if construction in ("sparse", "looped") else (1, 2, 3)
    for L, H, d, causal in itertools.product((1, 2, 3, 4), heads, (1, 2, 4, 8), (False, True)):
        if construction == "random" and width_formula("random", L, H, d, residual, values) > max_random_m:
            continue
        yield L, H, d, causal


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=50)
    p.add_argument("--max-length", type=int, default=32)
    p.add_argument("--max-random-m", type=int, default=1000)
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "universal_exactness.json"))
    args = p.parse_args()
    torch.set_num_threads(1)
    lengths = range(1, args.max_length + 1)
    rows = []
    for construction, residual, values in ROWS:
        t0 = time.perf_counter()
        row = {"construction": construction, "residual": residual, "values": values, "cells": 0,
               "targets": 0, "max_abs_error": 0.0, "attention_max_diff": 0.0, "worst_cell": None,
               "widths_equal_formula": True, "methods": set()}
        for L, H, d, causal in cells(construction, residual, values, args.max_random_m):
            ut = build_universal(construction, L, H, d, residual=residual, causal=causal, values=values)
            row["widths_equal_formula"] &= ut.config.m == width_formula(construction, L, H, d, residual,
                                                                         values)
            for t in range(args.trials):
                target = Target.random(L, H, d, seed=t, residual=residual, causal=causal, values=values)
                err, att, enc = compare(ut, target, lengths, batch=1, seed=t)
                row["methods"].add(enc.method)
                if err > row["max_abs_error"]:
                    row["max_abs_error"], row["worst_cell"] = err, {"L": L, "H": H, "d": d, "causal": causal}
                row["attention_max_diff"] = max(row["attention_max_diff"], att)
            row["cells"] += 1
            row["targets"] += args.trials
        row["methods"] = sorted(row["methods"])
        row["seconds"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        print(f"  done {construction} residual={residual} values={values} in {row['seconds']} s", flush=True)
    print("\n| construction | residual | values | cells | targets | max abs error | attention max diff | "
          "m = formula |\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        on, yes = ("on" if r["residual"] else "off"), ("yes" if r["values"] else "no")
        print(f"| {r['construction']} | {on} | {yes} | "
              f"{r['cells']} | {r['targets']} | {r['max_abs_error']:.1e} | {r['attention_max_diff']:.1e} | "
              f"{'yes' if r['widths_equal_formula'] else 'NO'} |")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"settings": vars(args), "rows": rows}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
