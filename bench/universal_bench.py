"""Time encoding + one UT forward pass against running the target directly.

Setting of the issue: L = 4, H = 2, d = 16, sequence length 256, float64, one thread.  Constructions
with one head (sparse, looped) run at H = 1.  Prints a table and writes
bench/results/universal_bench.json.

    .venv/bin/python bench/universal_bench.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch
from timing import best_time  # bench/timing.py

from rasp_compiler.universal import Target, build_universal, encode

CASES = [  # (construction, heads, residual, values)
    ("sparse", 1, False, True),
    ("looped", 1, False, True),
    ("multihead", 2, True, False),
    ("paths", 2, False, True),
    ("paths", 2, True, True),
    ("random", 2, True, False),
    ("random", 2, False, True),
]




def measure(construction: str, L: int, H: int, d: int, n: int, residual: bool, values: bool,
            repeats: int) -> dict:
    t0 = time.perf_counter()
    ut = build_universal(construction, L, H, d, residual=residual, values=values, seed=0)
    build_s = time.perf_counter() - t0
    target = Target.random(L, H, d, seed=1, residual=residual, values=values)
    X = torch.randn(n, d, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with torch.no_grad():
        enc = encode(ut, target)
        y_t = target(X)[0]
        err = float((ut(X, enc.E, enc.U)[0] - y_t).abs().max())
        t_target = best_time(lambda: target(X), repeats)
        t_encode = best_time(lambda: encode(ut, target), repeats)
        t_ut = best_time(lambda: ut(X, enc.E, enc.U), repeats)
    return {"construction": construction, "layers": L, "heads": H, "dim": d, "length": n,
            "residual": residual, "values": values, "m": ut.config.m, "build_s": build_s,
            "target_forward_s": t_target, "encode_s": t_encode, "ut_forward_s": t_ut,
            "forward_ratio": t_ut / t_target, "overhead_ratio": (t_encode + t_ut) / t_target,
            "max_abs_error": err, "max_abs_target_output": float(y_t.abs().max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "universal_bench.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [measure(c, args.layers, min(h, args.heads), args.dim, args.length, r, v, args.repeats)
            for c, h, r, v in CASES]
    print(f"L={args.layers} d={args.dim} n={args.length}, float64, 1 thread, best of {args.repeats}")
    print(f"{'construction':<12} {'H':>2} {'res':>4} {'m':>6} {'target ms':>10} {'encode ms':>10} "
          f"{'UT fwd ms':>10} {'fwd ratio':>10} {'(enc+fwd)/T':>12} {'max|UT-T|':>10} {'max|T|':>8}")
    for r in rows:
        print(f"{r['construction']:<12} {r['heads']:>2} {('on' if r['residual'] else 'off'):>4} {r['m']:>6} "
              f"{1e3 * r['target_forward_s']:>10.2f} {1e3 * r['encode_s']:>10.2f} "
              f"{1e3 * r['ut_forward_s']:>10.2f} {r['forward_ratio']:>10.1f} {r['overhead_ratio']:>12.1f} "
              f"{r['max_abs_error']:>10.1e} {r['max_abs_target_output']:>8.1f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"settings": vars(args) | {"threads": 1, "dtype": "float64",
                                                         "machine": platform.machine(),
                                                         "torch": torch.__version__},
                               "rows": rows}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
