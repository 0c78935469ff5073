"""Issue 3's inference bar on an accelerator: compiled batch inference against the interpreter.

For every shipped classic at vocabulary size 5 and max length 5, 10, 20, 40 and 64, one batch of
1,024 random inputs of length N:

* ``module ms``: the compiled transformer alone on the device (token ids already encoded and on the
  device, logits left there), wall time with ``torch.cuda.synchronize``, best of 5 after a warm-up;
* ``run ms``: ``model.run`` end to end (Python encoding on the CPU, the copy to the device, the
  forward pass, the copy back and decoding), best of 3;
* ``interp s``: the reference interpreter on the same 1,024 inputs, CPU seconds of one process
  (the interpreter is pure Python and runs on the CPU; worker processes run it in parallel, each
  on one thread, before the device timings start);
* ``agree``: how many of the 1,024 device outputs equal the interpreter's.

The models are float32 and TF32 stays off (torch's default for matrix products), so the device
computes the same exact weights as the CPU.

    python bench/gpu_inference.py --device cuda                     # everything
    python bench/gpu_inference.py --device cpu --programs reverse --lengths 5 --batch 64   # a smoke run

Prints a table and writes bench/results/gpu_inference.json (``--out``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from shipped import BY_NAME, PROGRAMS  # noqa: E402
from timing import best_time  # noqa: E402

from rasp_compiler.compiler.checking import TOLERANCE, agree  # noqa: E402

RESULTS = HERE / "results" / "gpu_inference.json"
LENGTHS = [5, 10, 20, 40, 64]
BATCH = 1024


def batch_inputs(vocab: list, n: int, count: int) -> list[list]:
    rng = random.Random(1000 + n)
    return [[rng.choice(vocab) for _ in range(n)] for _ in range(count)]


def interpret(task: tuple[str, int, int]) -> dict:
    """Worker: the interpreter's outputs and CPU time on one (program, N) batch."""
    import torch

    from rasp_compiler.interpreter import run
    from rasp_compiler.lang import load_program

    torch.set_num_threads(1)
    name, n, count = task
    s = BY_NAME[name]
    program = load_program(str(s.file))
    xs = batch_inputs(list(s.vocab5), n, count)
    c0 = time.process_time()
    outs = [run(program, x) for x in xs]
    return {"program": name, "max_len": n, "interp_s": time.process_time() - c0, "outputs": outs}


def _timed(fn, repeats: int, device: str) -> float:
    """Best of ``repeats`` wall times of ``fn``, waiting for the device's queued work each time."""
    import torch

    def call() -> None:
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    call()   # nothing of an earlier call still queued
    return best_time(call, repeats)


def time_on_device(name: str, n: int, count: int, device: str) -> dict:
    import torch

    from rasp_compiler.compiler import compile_program
    from rasp_compiler.lang import load_program

    s = BY_NAME[name]
    vocab = list(s.vocab5)
    row: dict = {"program": name, "max_len": n}
    try:
        model = compile_program(load_program(str(s.file)), vocab, n)
    except Exception as err:  # noqa: BLE001 - recorded, the bench goes on
        row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
        return row
    model.to(device)
    model.module.chunk_elements = 1 << 28 if device.startswith("cuda") else model.module.chunk_elements
    xs = batch_inputs(vocab, n, count)
    ids, lengths, values = model.inputs_on_device(*model.encode_inputs(xs))
    with torch.inference_mode():
        model.module(ids, lengths, values=values)     # warm-up (kernel selection, allocator)
        module_s = _timed(lambda: model.module(ids, lengths, values=values), 5, device)
        outs: list = []

        def end_to_end() -> None:
            outs[:] = model.run(xs)
        run_s = _timed(end_to_end, 3, device)
    row.update(numerical=model.config["output"]["encoding"] == "numerical",
               layers=model.n_layers, heads_per_layer=model.heads_per_layer,
               residual_width=model.residual_width, params=model.params,
               module_s=module_s, run_s=run_s, outputs=outs)
    return row


def print_row(r: dict) -> None:
    if "error" in r:
        print(f"{r['program']:<22}{r['max_len']:>4}  ERROR {r['error'][:100]}", flush=True)
        return
    print(f"{r['program']:<22}{r['max_len']:>4}{r['layers']:>3}{r['params']:>13,}"
          f"{1e3 * r['module_s']:>11.3f}{1e3 * r['run_s']:>10.1f}{r['interp_s']:>10.3f}"
          f"{r['module_speedup']:>10,.0f}x{r['run_speedup']:>8,.0f}x{r['agree']:>7}/{r['inputs']}",
          flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--programs", nargs="*", default=None)
    ap.add_argument("--lengths", nargs="*", type=int, default=LENGTHS)
    ap.add_argument("--batch", type=int, default=BATCH)
    ap.add_argument("--workers", type=int, default=max(1, min(12, (mp.cpu_count() or 2) - 2)),
                    help="interpreter worker processes")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()

    import torch
    torch.set_num_threads(1)     # host-side work is Python; one thread keeps CPU timings steady
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device is available; use --device cpu", file=sys.stderr)
        return 2
    names = args.programs or [p.name for p in PROGRAMS if p.classic]
    tasks = [(name, n, args.batch) for name in names for n in args.lengths]
    start = time.perf_counter()
    # the interpreter first, in parallel; the device timings after, on an otherwise idle host
    print(f"interpreting {len(tasks)} batches with {args.workers} worker(s)...", flush=True)
    with mp.get_context("spawn").Pool(args.workers) as pool:
        refs = {(r["program"], r["max_len"]): r for r in pool.imap_unordered(interpret, tasks)}
    print(f"{'program':<22}{'N':>4}{'L':>3}{'params':>13}{'module ms':>11}{'run ms':>10}"
          f"{'interp s':>10}{'module x':>11}{'run x':>9}{'agree':>12}", flush=True)
    rows = []
    for name, n, _ in tasks:
        r = time_on_device(name, n, args.batch, args.device)
        if "error" not in r:
            ref = refs[(name, n)]
            outs = r.pop("outputs")
            r["interp_s"] = ref["interp_s"]
            r["inputs"] = len(outs)
            r["agree"] = sum(agree(a, b, r["numerical"], TOLERANCE["float32"])[0]
                             for a, b in zip(outs, ref["outputs"], strict=True))
            r["module_speedup"] = r["interp_s"] / r["module_s"]
            r["run_speedup"] = r["interp_s"] / r["run_s"]
        print_row(r)
        rows.append(r)
    ok = [r for r in rows if "error" not in r]
    summary = {
        "cells": len(rows), "compiled": len(ok),
        "all_agree": all(r["agree"] == r["inputs"] for r in ok),
        "module_speedup_min": min((r["module_speedup"] for r in ok), default=None),
        "module_speedup_at_or_above_100": sum(r["module_speedup"] >= 100 for r in ok),
        "run_speedup_min": min((r["run_speedup"] for r in ok), default=None),
        "run_speedup_at_or_above_100": sum(r["run_speedup"] >= 100 for r in ok),
    }
    print(json.dumps(summary))
    device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "summary": summary, "device": args.device,
                                    "device_name": device_name, "torch": torch.__version__,
                                    "batch": args.batch, "command": " ".join(sys.argv),
                                    "seconds": round(time.perf_counter() - start)}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
