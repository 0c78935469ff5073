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

from rasp_compiler.universal import Target, build_universal, encode, width_formula
from rasp_compiler.universal.reference import batched_reference

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


def run_cell(construction: str, L: int, H: int, d: int, causal: bool, residual: bool, values: bool,
             trials: int, lengths) -> tuple[float, float, set, bool]:
    ut = build_universal(construction, L, H, d, residual=residual, causal=causal, values=values)
    same_width = ut.config.m == width_formula(construction, L, H, d, residual, values)
    targets = [Target.random(L, H, d, seed=t, residual=residual, causal=causal, values=values)
               for t in range(trials)]
    encs = [encode(ut, t) for t in targets]
    E, U = torch.stack([e.E for e in encs]), torch.stack([e.U for e in encs])
    gen = torch.Generator().manual_seed(L * 1000 + H * 100 + d * 10 + causal)
    err = att = 0.0
    for n in lengths:
        X = torch.randn(trials, n, d, generator=gen, dtype=torch.float64)
        y_ref, a_ref = batched_reference(targets, X)
        y_ut, a_ut = ut(X, E, U)
        err = max(err, float((y_ut - y_ref).abs().max()))
        att = max(att, float((a_ut - a_ref).abs().max()))
    # the batched reference is itself checked against Target.forward on one target and length
    y_one = targets[0](X[0])[0]
    assert float((y_one - y_ref[0]).abs().max()) <= 1e-12
    return err, att, {e.method for e in encs}, same_width


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=50)
    p.add_argument("--max-length", type=int, default=32)
    p.add_argument("--max-random-m", type=int, default=1000)
    p.add_argument("--rows", default="all", help="comma-separated constructions to run (default all)")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "universal_exactness.json"))
    args = p.parse_args()
    torch.set_num_threads(1)
    lengths = range(1, args.max_length + 1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = json.loads(out.read_text())["rows"] if out.is_file() else []
    wanted = None if args.rows == "all" else set(args.rows.split(","))
    for construction, residual, values in ROWS:
        if wanted is not None and construction not in wanted:
            continue
        t0 = time.perf_counter()
        row = {"construction": construction, "residual": residual, "values": values, "cells": 0,
               "targets": 0, "lengths": f"1..{args.max_length}", "max_abs_error": 0.0,
               "attention_max_diff": 0.0, "worst_cell": None, "widths_equal_formula": True, "methods": set()}
        for L, H, d, causal in cells(construction, residual, values, args.max_random_m):
            err, att, methods, same = run_cell(construction, L, H, d, causal, residual, values, args.trials,
                                               lengths)
            row["widths_equal_formula"] &= same
            row["methods"] |= methods
            if err >= row["max_abs_error"]:
                row["max_abs_error"], row["worst_cell"] = err, {"L": L, "H": H, "d": d, "causal": causal}
            row["attention_max_diff"] = max(row["attention_max_diff"], att)
            row["cells"] += 1
            row["targets"] += args.trials
        row["methods"] = sorted(row["methods"])
        row["seconds"] = round(time.perf_counter() - t0, 1)
        done = [r for r in done if (r["construction"], r["residual"], r["values"]) !=
                (construction, residual, values)] + [row]
        out.write_text(json.dumps({"settings": {k: v for k, v in vars(args).items() if k != "out"},
                                   "rows": done}, indent=2) + "\n")
        print(f"  {construction} residual={residual} values={values}: {row['cells']} cells, "
              f"max error {row['max_abs_error']:.1e}, {row['seconds']} s", flush=True)
    order = {key: i for i, key in enumerate(ROWS)}
    done.sort(key=lambda r: order.get((r["construction"], r["residual"], r["values"]), 99))
    print("\n| construction | residual | values | cells | targets per cell | lengths | max abs error | "
          "attention max diff | m = formula |\n|---|---|---|---|---|---|---|---|---|")
    for r in done:
        on, yes = ("on" if r["residual"] else "off"), ("yes" if r["values"] else "no")
        print(f"| {r['construction']} | {on} | {yes} | {r['cells']} | {r['targets'] // max(1, r['cells'])} | "
              f"{r['lengths']} | {r['max_abs_error']:.1e} | {r['attention_max_diff']:.1e} | "
              f"{'yes' if r['widths_equal_formula'] else 'NO'} |")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
