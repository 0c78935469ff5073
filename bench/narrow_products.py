"""Whether padding narrow products pays (runtime ``GEMM_COLUMNS``, ``_gemm_width``): a CPU product
whose output width is off the BLAS kernel's runs with zero columns appended, and a head's value
dimensions likewise.

Two parts:

* ``--sweep``: one product [M x K] @ [K x N] for N = 1..72, float32 and float64, as it is and
  padded to the next multiple of the kernel's width, marked where the runtime pads it (best of 4
  timings of ``--calls`` calls, microseconds);
* the module (default): every shipped program (``bench/shipped.py``, five-token vocabulary) at
  each max length, one compile run by two modules interleaved in one process on one thread,
  one prepared with the padding ("now") and one without (``GEMM_COLUMNS`` empty: "before"); CPU
  seconds (``time.process_time``) of a forward of ``--batch`` inputs of full length, median of
  ``--repeats``; ratio before / now (above 1: padding pays).  The logits are compared: padding may
  move a sum's last bit (every path pads alike, tests/test_sparse_paths.py), never more.

    .venv/bin/python bench/narrow_products.py                         # 10 20 40, batch 256
    .venv/bin/python bench/narrow_products.py --sweep
    .venv/bin/python bench/narrow_products.py --dtype float64 --lengths 16

Prints a table and writes bench/results/narrow_products.json (``--sweep``: narrow_sweep.json).
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import statistics
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from shipped import BY_NAME, PROGRAMS  # noqa: E402
from timing import best_time, interleaved_medians  # noqa: E402

RESULTS = HERE / "results" / "narrow_products.json"
SWEEP = HERE / "results" / "narrow_sweep.json"


def prepared(model, padded: bool, ids, lengths, values):
    """A runtime Transformer for ``model`` with its products prepared, narrow ones padded or not."""
    import torch

    import rasp_compiler.runtime as runtime

    module = runtime.Transformer(model.config, model.tensors)
    widths = runtime.GEMM_COLUMNS
    runtime.GEMM_COLUMNS = widths if padded else {}
    try:
        with torch.inference_mode():
            module(ids[:1], lengths[:1], values=None if values is None else values[:1])  # prepares
    finally:
        runtime.GEMM_COLUMNS = widths
    return module


def padded_products(module) -> int:
    """How many of the module's weights run padded (``explain`` says "run as")."""
    return sum(" run as " in e["why"] for e in module.explain())


def best_us(f, calls: int) -> float:
    """Microseconds a call of ``f``: the best of 4 timings of ``calls`` calls, after two."""
    f()
    f()
    return 1e6 * best_time(lambda: [f() for _ in range(calls)], 4) / calls


def sweep(args: argparse.Namespace) -> int:
    """Every width 1..72 plain and padded to the next multiple of the kernel's width, whether or
    not the runtime pads it: the widths the rule leaves alone show why it does."""
    import torch

    import rasp_compiler.runtime as runtime

    torch.set_num_threads(1)
    rows = []
    for dtype in (torch.float32, torch.float64):
        name, q = str(dtype).removeprefix("torch."), runtime.GEMM_COLUMNS[dtype]
        for m, k in args.shapes:
            x = torch.randn(m, k, dtype=dtype)
            got = []
            for n in range(1, 73):
                w = torch.randn(k, n, dtype=dtype)
                multiple = -(-n // q) * q
                wide = runtime._padded(w, multiple)
                plain = best_us(lambda x=x, w=w: x @ w, args.calls)
                padded = None if multiple == n else best_us(lambda x=x, w=wide: x @ w, args.calls)
                got.append({"dtype": name, "M": m, "K": k, "N": n, "runtime_width": runtime._gemm_width(w),
                            "multiple": multiple, "plain_us": plain, "multiple_us": padded})
            rows += got
            print(f"{name} [{m} x {k}] @ [{k} x N], us: N:plain->multiple:padded (* where the runtime pads)")
            cells = [f"{r['N']}:{r['plain_us']:.0f}" + ("" if r["multiple_us"] is None else
                     f"->{r['multiple']}:{r['multiple_us']:.0f}" + "*" * (r["runtime_width"] != r["N"]))
                     for r in got]
            print("  " + "  ".join(cells), flush=True)
            for label, chosen in (("padded by the runtime", True), ("left as they are", False)):
                ratios = [r["plain_us"] / r["multiple_us"] for r in got
                          if r["multiple_us"] is not None and (r["runtime_width"] != r["N"]) == chosen]
                if ratios:
                    print(f"  {len(ratios)} widths {label}: plain / padded {min(ratios):.2f}-"
                          f"{max(ratios):.2f} (median {statistics.median(ratios):.2f}), "
                          f"{sum(v < 1 for v in ratios)} below 1")
    SWEEP.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join(["bench/narrow_products.py", *sys.argv[1:]])
    SWEEP.write_text(json.dumps({"command": command, "rows": rows}, indent=1) + "\n")
    print(f"wrote {SWEEP}")
    return 0


def main() -> int:
    import torch

    from rasp_compiler.compiler import compile_program
    from rasp_compiler.errors import CompileWarning
    from rasp_compiler.lang import load_program

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", nargs="*", default=None)
    ap.add_argument("--lengths", nargs="*", type=int, default=[10, 20, 40])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--sweep", action="store_true", help="time single products instead of modules")
    ap.add_argument("--shapes", nargs="*", type=lambda s: tuple(int(v) for v in s.split("x")),
                    default=[(5376, 38), (2816, 13), (10496, 120)], help="the sweep's M x K, e.g. 5376x38")
    ap.add_argument("--calls", type=int, default=10, help="calls a sweep timing averages over")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    if args.sweep:
        return sweep(args)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore", CompileWarning)
    names = args.programs or [p.name for p in PROGRAMS if p.vocab5]
    rows = []
    print(f"{'program':<22}{'N':>4}{'before ms':>11}{'now ms':>9}{'ratio':>7}  padded  max logit difference")
    for name in names:
        s = BY_NAME[name]
        for n in args.lengths:
            model = compile_program(load_program(str(s.file)), list(s.vocab5), n, dtype=args.dtype)
            rng = random.Random(n)
            ids, lengths, values = model.encode_inputs(
                [[rng.choice(list(s.vocab5)) for _ in range(n)] for _ in range(args.batch)])
            old = prepared(model, False, ids, lengths, values)
            new = prepared(model, True, ids, lengths, values)
            with torch.inference_mode():
                diff = float((old(ids, lengths, values=values).double()
                              - new(ids, lengths, values=values).double()).abs().max())
                medians = interleaved_medians({"before": functools.partial(old, ids, lengths, values=values),
                                               "now": functools.partial(new, ids, lengths, values=values)},
                                              args.repeats)
            before, now = medians["before"], medians["now"]
            count = padded_products(new)
            rows.append({"program": name, "max_len": n, "batch": args.batch, "dtype": args.dtype,
                         "before_s": before, "now_s": now, "ratio": before / now, "padded": count,
                         "max_logit_difference": diff})
            print(f"{name:<22}{n:>4}{1e3 * before:>11.2f}{1e3 * now:>9.2f}{before / now:>7.2f}{count:>8}  "
                  f"{diff:.2e}", flush=True)
    padded = [r for r in rows if r["padded"]]
    if padded:
        ratios = sorted(r["ratio"] for r in padded)
        print(f"\ncells with a padded product: {len(padded)} of {len(rows)}; ratio before/now "
              f"{ratios[0]:.2f}-{ratios[-1]:.2f} (median {statistics.median(ratios):.2f}); "
              f"logits the same in {sum(r['max_logit_difference'] == 0 for r in rows)} of {len(rows)} cells, "
              f"largest difference {max(r['max_logit_difference'] for r in rows):.2e}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join(["bench/narrow_products.py", *sys.argv[1:]])
    args.out.write_text(json.dumps({"command": command, "rows": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
