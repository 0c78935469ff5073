"""Size and speed of the universal simulator U for n in {4, 8, 16, 32, 64}, d = 8, H = 2.

For each n: layers, heads per layer, residual width, sequence length, parameters, the time to
generate U (RASP source + compile), U's forward time on a batch of 64 random layers (in chunks of
--chunk, as attention over L = 1024 positions needs ~1 GB per 4 inputs), NumPy's time for the
same 64 attention layers, and U's max abs error on that batch.  Prints a table and writes
bench/results/simulator_bench.json.

    .venv/bin/python bench/simulator_bench.py [--dtype float64] [--repeats 2] [--chunk 4]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch
from timing import best_time  # bench/timing.py

from rasp_compiler.simulator import attention_layer, build_simulator
from rasp_compiler.simulator.check import random_layers

NS = (4, 8, 16, 32, 64)
D, H, BATCH = 8, 2, 64




def numpy_batch(A: np.ndarray, V: np.ndarray, X: np.ndarray) -> np.ndarray:
    """The 64 attention layers in NumPy, batched (the reference U is compared with)."""
    xa = np.einsum("bid,bhde->bhie", X, A)
    s = np.einsum("bhie,bje->bhij", xa, X)
    e = np.exp(s - s.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    out = np.einsum("bhij,bhje->bhie", p, np.einsum("bid,bhde->bhie", X, V))
    return out.transpose(0, 2, 1, 3).reshape(X.shape[0], X.shape[1], -1)


def _fmt(v: float | None, spec: str) -> str:
    return "—" if v is None else format(v, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float64")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=4)
    ap.add_argument("--ns", type=int, nargs="*", default=list(NS))
    ap.add_argument("--plans", nargs="*", default=["windows", "direct"],
                    help="U's layouts: windows (the default U) and direct (one gather head per number)")
    ap.add_argument("--direct-forward-max-n", type=int, default=16,
                    help="time the direct plan's forward pass only up to this n (it has 3x the heads)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for plan, n in [(p, n) for p in args.plans for n in args.ns]:
        t0 = time.perf_counter()
        sim = build_simulator(n, D, H, dtype=args.dtype, plan=plan)
        gen = time.perf_counter() - t0
        lay = sim.layout
        A, V, X = random_layers(lay, BATCH, seed=0)
        seqs = np.stack([lay.build(a, v, x) for a, v, x in zip(A, V, X, strict=False)])
        outs: list[np.ndarray] = []

        def run_u(outs: list = outs, sim=sim, seqs: np.ndarray = seqs) -> None:
            outs.clear()
            for s in range(0, BATCH, args.chunk):
                outs.append(sim.run_sequences(seqs[s:s + args.chunk]))
        timed = plan == "windows" or n <= args.direct_forward_max_n
        t_u = best_time(run_u, args.repeats) if timed else float("nan")
        t_np = best_time(lambda A=A, V=V, X=X: numpy_batch(A, V, X), max(args.repeats, 5))
        ref = np.stack([attention_layer(a, v, x)["output"] for a, v, x in zip(A, V, X, strict=False)])
        got = lay.read_output(np.concatenate(outs)) if timed else ref + np.nan
        assert np.allclose(numpy_batch(A, V, X), ref, atol=1e-13)
        size = sim.size()
        rows.append({"plan": plan, "n": n, "d": D, "heads": H, "dtype": args.dtype, **size,
                     "heads_total": sum(size["heads_per_layer"]),
                     "generation_seconds": round(gen, 3),
                     "u_forward_seconds_batch64": round(t_u, 4) if timed else None,
                     "numpy_seconds_batch64": round(t_np, 6),
                     "max_abs_error": float(np.max(np.abs(got - ref))) if timed else None})
        r = rows[-1]
        print(f"{plan:8s} n={n:3d} layers={r['layers']} heads/layer={r['heads_per_layer']} "
              f"width={r['residual_width']} "
              f"L={r['sequence_length']} params={r['params']:,} gen={gen:.2f}s "
              f"U(64)={_fmt(r['u_forward_seconds_batch64'], '.3f')}s "
              f"numpy(64)={t_np * 1e3:.2f}ms err={r['max_abs_error']}", flush=True)
    header = ["plan", "n", "layers", "heads/layer", "width", "L", "params", "gen s", "U fwd s (64)",
              "NumPy ms (64)", "max err"]
    print("\n| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for r in rows:
        print(f"| {r['plan']} | {r['n']} | {r['layers']} | {r['heads_per_layer']} | {r['residual_width']} | "
              f"{r['sequence_length']} | {r['params']:,} | {r['generation_seconds']:.2f} | "
              f"{_fmt(r['u_forward_seconds_batch64'], '.3f')} | {r['numpy_seconds_batch64'] * 1e3:.2f} | "
              f"{_fmt(r['max_abs_error'], '.1e')} |")
    out = Path(__file__).parent / "results" / "simulator_bench.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "torch_threads": 1, "batch": BATCH,
                               "chunk": args.chunk, "rows": rows}, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
