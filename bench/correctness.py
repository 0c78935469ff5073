"""Issue 3's correctness bar: every shipped categorical-token program against the interpreter.

For each program in ``bench/shipped.py``:
  * exhaustive: every input over its three-token vocabulary (four for the Dyck-2 programs) up to
    length 6, compiled at max length 6;
  * random: >= 2,000 random inputs of every length at max length 16 and at 64, >= 200 at 256;
  * edges (added to every random cell): all-equal tokens at every length up to the maximum,
    alternating pairs at the longest length (which make the programs' selections empty:
    shift's first position, induction's first occurrences, no opener for a closer).

Each cell runs in its own process under a memory limit and a time limit, so a model that grows
too large is recorded as such instead of stopping the run.  Prints a table and writes
bench/results/correctness.json.

    nice -n 5 .venv/bin/python bench/correctness.py                 # the full bar
    .venv/bin/python bench/correctness.py --programs reverse sort --quick
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from shipped import BY_NAME, PROGRAMS  # noqa: E402

RESULTS = HERE / "results" / "correctness.json"
# (mode, max_len, random inputs): the bar's cells
CELLS = [("exhaustive", 6, 0), ("random", 16, 2000), ("random", 64, 2000), ("random", 256, 200)]
QUICK = [("exhaustive", 4, 0), ("random", 16, 200), ("random", 64, 50)]
MEMORY_LIMIT = 8 << 30  # bytes of address space per cell
TIME_LIMIT = 900  # seconds per cell


def run_cell(name: str, mode: str, max_len: int, count: int, seed: int) -> dict:
    """One cell, in this process: compile, check, time."""
    import torch

    from rasp_compiler.compiler import compile_program
    from rasp_compiler.compiler.checking import check_model, edge_inputs, exhaustive_inputs, random_inputs
    from rasp_compiler.lang import load_program

    torch.set_num_threads(1)
    s = BY_NAME[name]
    vocab = list(s.vocab3)
    program = load_program(str(s.file))
    t0 = time.perf_counter()
    model = compile_program(program, vocab, max_len)
    compile_s = time.perf_counter() - t0
    if mode == "exhaustive":
        inputs = list(exhaustive_inputs(vocab, max_len))
    else:
        inputs = random_inputs(vocab, max_len, count, seed)
        inputs += edge_inputs(vocab, max_len)
        inputs += [[t] * n for t in vocab for n in range(1, max_len + 1) if [t] * n not in inputs]
    t1 = time.perf_counter()
    res = check_model(model, program, inputs, batch_size=64 if max_len > 64 else 256)
    return {"program": name, "mode": mode, "max_len": max_len, "vocab": vocab,
            "inputs_checked": res.inputs_checked, "inputs_agreeing": res.inputs_agreeing,
            "inputs_undefined": res.inputs_undefined, "max_abs_error": res.max_abs_error,
            "ok": res.ok and res.inputs_checked > 0, "failures": [
                {k: v for k, v in f.items()} for f in res.failures[:3]],
            "layers": model.n_layers, "residual_width": model.residual_width, "params": model.params,
            "compile_s": round(compile_s, 3), "check_s": round(time.perf_counter() - t1, 2)}


def run_isolated(name: str, mode: str, max_len: int, count: int, seed: int) -> dict:
    """The cell in a child process with limits; a crash, timeout or out-of-memory is a result too."""
    cmd = [sys.executable, __file__, "--cell", name, mode, str(max_len), str(count), str(seed)]

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    base = {"program": name, "mode": mode, "max_len": max_len, "ok": False}
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIME_LIMIT, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return {**base, "error": f"did not finish in {TIME_LIMIT} s"}
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        if "MemoryError" in r.stderr or "Cannot allocate" in r.stderr or "DefaultCPUAllocator" in r.stderr:
            tail = f"out of memory (> {MEMORY_LIMIT >> 30} GiB): {tail}"
        return {**base, "error": tail[:300]}
    return json.loads(lines[-1])


def fmt(cell: dict) -> str:
    if "error" in cell:
        return f"{cell['program']:<22} {cell['mode']:<10} {cell['max_len']:>4}  ERROR {cell['error'][:90]}"
    agree = f"{cell['inputs_agreeing']}/{cell['inputs_checked']}"
    extra = f" max_err {cell['max_abs_error']:.1e}" if cell["max_abs_error"] else ""
    return (f"{cell['program']:<22} {cell['mode']:<10} {cell['max_len']:>4} {agree:>13} "
            f"{'100%' if cell['ok'] else 'FAIL':>5}  L={cell['layers']} d={cell['residual_width']:<6} "
            f"params={cell['params']:<11,} compile {cell['compile_s']:.2f}s "
            f"check {cell['check_s']:.1f}s{extra}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", nargs="*", default=None, help="names from bench/shipped.py")
    ap.add_argument("--quick", action="store_true", help="small cells (a smoke run)")
    ap.add_argument("--lengths", nargs="*", type=int, default=None,
                    help="only the cells with these max lengths (6 = the exhaustive cell)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--cell", nargs=5, metavar=("NAME", "MODE", "N", "COUNT", "SEED"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cell:
        name, mode, n, count, seed = args.cell
        print(json.dumps(run_cell(name, mode, int(n), int(count), int(seed))))
        return 0
    names = args.programs or [p.name for p in PROGRAMS]
    cells = QUICK if args.quick else CELLS
    if args.lengths:
        cells = [c for c in cells if c[1] in args.lengths]
    results = []
    start = time.perf_counter()
    print(f"{'program':<22} {'mode':<10} {'N':>4} {'agree':>13} {'':>5}")
    for name in names:
        s = BY_NAME[name]
        for mode, n, count in cells:
            n_eff = min(n, s.exhaustive_len) if mode == "exhaustive" else n
            cell = run_isolated(name, mode, n_eff, count, args.seed)
            results.append(cell)
            print(fmt(cell), flush=True)
    ok = sum(c["ok"] for c in results)
    print(f"\n{ok}/{len(results)} cells agree on 100 % of inputs; "
          f"{sum(c.get('inputs_checked', 0) for c in results):,} inputs checked in "
          f"{time.perf_counter() - start:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"cells": results, "command": " ".join(sys.argv),
                                    "seed": args.seed}, indent=1) + "\n")
    return 0 if ok == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
