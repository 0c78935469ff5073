"""Issue 50's tracr bars, measured side by side on this machine: tracr's library programs compiled
and run by tracr and by rasp-compiler (through its tracr-style Python API, the same calls).

tracr is not a dependency of this project (it needs jax and haiku, and it is not on PyPI).  Give
a Python that can import it, and where its checkout lies if it is not installed:

    .venv/bin/python bench/tracr_side_by_side.py --tracr-python ~/tracr-env/bin/python --tracr-path ~/tracr
    .venv/bin/python bench/tracr_side_by_side.py --programs reverse sort --lengths 10   # ours only

For each program of ``bench/tracr_cells.py`` (the ten of programs/tracr/, vocabulary of 5 tokens)
at max length 10, 20 and 40, in two warm processes (ours here, tracr's in ``bench/tracr_driver.py``
under ``--tracr-python``), both on one CPU thread:

* compile: median CPU seconds of ``--repeats`` compiles after a warm-up compile (one compile where
  the warm-up alone took more than ``--compile-budget`` seconds); bar: ours >= 20x faster;
* forward: median CPU seconds of ``--forward-repeats`` runs on ``--batch`` inputs of full length,
  tracr's forward jitted (after the run that compiles it), ours the compiled module, both up to
  the output ids (argmax) or numbers; bar: ours never slower;
* correctness: ``--inputs`` random inputs of lengths 1..N, each model's output against tracr's own
  evaluator (``rasp.evaluate``) where tracr is given, else against ours; an input on which the
  evaluator raises or outputs None has no answer and is not counted.  A numerical output agrees
  within 1e-5 (absolute, or relative past 1), as every number does (a mean read from a softmax
  carries rounding residue).

Prints a table and writes bench/results/tracr_side_by_side.json (``--out`` elsewhere).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from tracr_cells import PROGRAMS, agrees, batch_inputs, check_inputs, compile_times  # noqa: E402

RESULTS = HERE / "results" / "tracr_side_by_side.json"
COMPILE_BAR = 20.0  # ours at least this many times faster to compile
FORWARD_BAR = 1.0  # ours never slower


def ours(name: str, n: int, args: argparse.Namespace) -> dict:
    """Our half of one cell: compile and forward times, sizes and outputs."""
    import torch

    from rasp_compiler import pyapi as rasp
    from rasp_compiler.errors import UserError
    from rasp_compiler.pyapi import compiling, lib

    cell = PROGRAMS[name]
    row: dict[str, Any] = {"program": name, "max_len": n}

    def compile_once() -> Any:
        program = cell.build(rasp, lib, n)
        return compiling.compile_rasp_to_model(program, set(cell.vocab), max_seq_len=n, compiler_bos="BOS")

    try:
        row["compile_cpu_s"], model = compile_times(compile_once, args.repeats, args.compile_budget)
    except UserError as err:
        row["error"] = err.message.splitlines()[0]
        return row
    compiled = model.model
    row.update(layers=compiled.n_layers, residual_width=int(compiled.config["d_model"]),
               params=compiled.params)
    ids, lengths, values = compiled.encode_inputs(batch_inputs(name, n, args.batch))
    categorical = compiled.config["output"]["encoding"] == "categorical"

    def forward() -> None:
        logits = compiled.module(ids, lengths, values=values)
        if categorical:
            logits.argmax(dim=-1)

    times = []
    with torch.inference_mode():
        forward()
        for _ in range(args.forward_repeats):
            c0 = time.process_time()
            forward()
            times.append(time.process_time() - c0)
    row["forward_cpu_s"] = times
    program = cell.build(rasp, lib, n)
    outputs, reference = [], []
    for x in check_inputs(name, n, args.inputs):
        try:
            outputs.append(model.apply(["BOS", *x]).decoded[1:])
        except UserError as err:
            outputs.append({"error": err.message.splitlines()[0]})
        try:
            reference.append(rasp.evaluate(program, x))
        except Exception as err:  # the program has no answer on this input
            reference.append({"error": type(err).__name__})
    row["outputs"], row["reference"] = outputs, reference
    return row


def theirs(cells: list[tuple[str, int]], args: argparse.Namespace) -> tuple[dict, dict]:
    """tracr's half of every cell, from ``tracr_driver.py`` under ``--tracr-python``: rows by
    cell, and the versions it reports."""
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                        " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
    env["OMP_NUM_THREADS"] = "1"
    if args.tracr_path:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(args.tracr_path), env.get("PYTHONPATH")) if p)
    job = {"cells": cells, "batch": args.batch, "inputs": args.inputs, "repeats": args.repeats,
           "forward_repeats": args.forward_repeats, "compile_budget": args.compile_budget}
    proc = subprocess.Popen([str(args.tracr_python), str(HERE / "tracr_driver.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env, cwd="/")
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(job))
    proc.stdin.close()
    rows: dict[tuple[str, int], dict] = {}
    versions: dict = {}
    for line in proc.stdout:
        try:
            got = json.loads(line)
        except json.JSONDecodeError:  # something tracr or jax printed: shown, not parsed
            print(f"  tracr: {line.rstrip()}", file=sys.stderr)
            continue
        if "fatal" in got:
            sys.exit(f"error: {args.tracr_python}: {got['fatal']}")
        if "versions" in got:
            versions = got["versions"]
            continue
        rows[(got["program"], got["max_len"])] = got
        print(f"  tracr: {got['program']} at {got['max_len']} done", file=sys.stderr, flush=True)
    if proc.wait() != 0 and not rows:
        sys.exit(f"error: {args.tracr_python} {HERE / 'tracr_driver.py'} exited with {proc.returncode}")
    return rows, versions


def correct(row: dict, reference: list, numerical: bool) -> tuple[int, int, float | None]:
    """(inputs whose output is the reference's, inputs with an answer, largest numerical error)."""
    good = valid = 0
    worst: float | None = 0.0 if numerical else None
    for got, want in zip(row.get("outputs") or [], reference, strict=False):
        if isinstance(want, dict) or want is None or None in want:
            continue
        valid += 1
        ok = isinstance(got, list) and len(got) == len(want) and \
            all(agrees(g, w) for g, w in zip(got, want, strict=True))
        good += ok
        if numerical and isinstance(got, list) and len(got) == len(want):
            errs = [abs(g - w) for g, w in zip(got, want, strict=True)
                    if isinstance(g, (int, float)) and isinstance(w, (int, float))]
            worst = max([worst or 0.0, *errs])
    return good, valid, worst


def summarise(ours_row: dict, tracr_row: dict | None) -> dict:
    cell = PROGRAMS[ours_row["program"]]
    reference = (tracr_row or {}).get("reference") or ours_row.get("reference") or []
    row: dict[str, Any] = {"program": ours_row["program"], "max_len": ours_row["max_len"],
                           "reference": "tracr rasp.evaluate" if tracr_row and tracr_row.get("reference")
                           else "ours rasp.evaluate"}
    for who, r in (("ours", ours_row), ("tracr", tracr_row)):
        if r is None:
            continue
        if "error" in r:
            row[f"{who}_error"] = r["error"]
            continue
        row[f"{who}_compile_s"] = statistics.median(r["compile_cpu_s"])
        row[f"{who}_compiles_timed"] = len(r["compile_cpu_s"])
        row[f"{who}_forward_s"] = statistics.median(r["forward_cpu_s"])
        for key in ("layers", "residual_width", "params"):
            row[f"{who}_{key}"] = r[key]
        good, valid, worst = correct(r, reference, cell.numerical)
        row[f"{who}_correct"], row["inputs_with_answer"] = good, valid
        if worst is not None:
            row[f"{who}_max_error"] = worst
    if tracr_row and tracr_row.get("reference") and ours_row.get("reference"):
        # tracr's evaluator against ours: the programs are the same calls, so the answers should be
        same = sum(a == b or (isinstance(a, dict) and isinstance(b, dict))
                   for a, b in zip(ours_row["reference"], tracr_row["reference"], strict=True))
        row["evaluators_agree"] = f"{same}/{len(tracr_row['reference'])}"
    if "ours_compile_s" in row and "tracr_compile_s" in row:
        row["compile_speedup"] = row["tracr_compile_s"] / row["ours_compile_s"]
        row["forward_speedup"] = row["tracr_forward_s"] / row["ours_forward_s"]
    return row


def fmt(x: Any, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tracr-python", type=Path, help="a Python that can import tracr, jax and haiku")
    ap.add_argument("--tracr-path", type=Path, help="a tracr checkout to put on that Python's path")
    ap.add_argument("--programs", nargs="*", default=list(PROGRAMS), choices=list(PROGRAMS), metavar="NAME")
    ap.add_argument("--lengths", nargs="*", type=int, default=[10, 20, 40])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--inputs", type=int, default=200, help="random inputs checked per cell")
    ap.add_argument("--repeats", type=int, default=3, help="timed compiles per cell")
    ap.add_argument("--forward-repeats", type=int, default=7)
    ap.add_argument("--compile-budget", type=float, default=30.0,
                    help="a first compile longer than this many CPU seconds is the only one timed")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    if args.tracr_python is not None and not args.tracr_python.exists():
        sys.exit(f"error: --tracr-python {args.tracr_python}: no such file")
    if any(n < 1 for n in args.lengths):
        sys.exit("error: --lengths must be positive")
    import warnings

    import torch

    from rasp_compiler.errors import CompileWarning

    # sort_freq's note (several keys may be selected) on every compile: the table is the report
    warnings.simplefilter("ignore", CompileWarning)
    torch.set_num_threads(1)
    cells = [(name, n) for name in args.programs for n in args.lengths]
    tracr_rows, versions = theirs(cells, args) if args.tracr_python else ({}, {})
    rows = []
    head = (f"{'program':<14}{'N':>4} {'compile s: ours':>16}{'tracr':>9}{'x':>7}  "
            f"{'forward ms: ours':>17}{'tracr':>9}{'x':>7}  {'correct: ours':>14} {'tracr':>8}  layers")
    print(head)
    for name, n in cells:
        r = summarise(ours(name, n, args), tracr_rows.get((name, n)))
        rows.append(r)
        valid = r.get("inputs_with_answer")
        ours_ok = f"{r['ours_correct']}/{valid}" if "ours_correct" in r else "refused"
        tracr_ok = (f"{r['tracr_correct']}/{valid}" if "tracr_correct" in r else
                    "refused" if "tracr_error" in r else "-")
        fwd = [None if r.get(k) is None else 1e3 * r[k] for k in ("ours_forward_s", "tracr_forward_s")]
        print(f"{name:<14}{n:>4} {fmt(r.get('ours_compile_s'), '.4f'):>16}"
              f"{fmt(r.get('tracr_compile_s'), '.3f'):>9}"
              f"{fmt(r.get('compile_speedup'), '.0f'):>7}  {fmt(fwd[0], '.2f'):>17}{fmt(fwd[1], '.2f'):>9}"
              f"{fmt(r.get('forward_speedup'), '.2f'):>7}  {ours_ok:>14} {tracr_ok:>8}  "
              f"{r.get('ours_layers', '-')}/{r.get('tracr_layers', '-')}", flush=True)
    both = [r for r in rows if "compile_speedup" in r]
    if both:
        slow = [r for r in both if r["compile_speedup"] < COMPILE_BAR]
        slower = [r for r in both if r["forward_speedup"] < FORWARD_BAR]
        print(f"\ncompile >= {COMPILE_BAR:.0f}x tracr's: {len(both) - len(slow)} of {len(both)} cells"
              + "".join(f"\n  {r['program']} at {r['max_len']}: {r['compile_speedup']:.1f}x" for r in slow))
        print(f"forward no slower than tracr's jitted forward: {len(both) - len(slower)} of {len(both)} cells"
              + "".join(f"\n  {r['program']} at {r['max_len']}: {r['forward_speedup']:.2f}x" for r in slower))
    elif args.tracr_python is None:
        print("\ntracr not measured: pass --tracr-python (a Python that imports tracr) for its columns")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join(["bench/tracr_side_by_side.py", *sys.argv[1:]])
    args.out.write_text(json.dumps({
        "command": command, "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "cpu_count": os.cpu_count(), "tracr_versions": versions, "compile_bar": COMPILE_BAR,
        "forward_bar": FORWARD_BAR, "rows": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
