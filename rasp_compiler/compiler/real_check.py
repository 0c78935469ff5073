"""``rasp compile`` / ``rasp check`` for real-valued programs (``--input-range LO HI``).

The check draws inputs uniformly from the range (plus its corners: all LO, all HI, alternating),
runs the compiled model and the interpreter (float64) on each, and reports the largest absolute
difference next to the error bound the compiler stated.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

import numpy as np

from rasp_compiler.compiler.real import EXACT_TOL
from rasp_compiler.errors import UserError


def example_length(path: str) -> int:
    """The length of the first ``# example-json: [...] -> ...`` input of a program file."""
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("# example-json:"):
                    value = json.loads(line.split(":", 1)[1].split("->")[0])
                    if isinstance(value, list) and value:
                        return len(value)
    except (OSError, ValueError):
        pass
    raise UserError(f"--max-len is required: {path} states no '# example-json' input to take the length from",
                    hint="give --max-len N (and --fixed-length N for a fixed shape)")


def range_from_args(args: argparse.Namespace) -> tuple[float, float] | None:
    r = getattr(args, "input_range", None)
    if r is None:
        return None
    lo, hi = float(r[0]), float(r[1])
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise UserError(f"--input-range needs finite LO <= HI, got {r[0]} {r[1]}")
    return lo, hi


def lengths_for(model: Any) -> list[int]:
    fixed = model.config.get("fixed_length")
    return [int(fixed)] if fixed else list(range(1, int(model.config["max_len"]) + 1))


def sample_inputs(lo: float, hi: float, lengths: list[int], samples: int, seed: int,
                  integers: bool = False) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    out: list[list[Any]] = []
    if integers:  # a program over integer tokens: the range's integers, uniformly
        ilo, ihi = math.ceil(lo), math.floor(hi)
        for _ in range(samples):
            n = int(rng.choice(lengths))
            out.append([int(v) for v in rng.integers(ilo, ihi + 1, n)])
        return out
    for n in lengths:  # corners first: all LO, all HI, alternating
        out += [[lo] * n, [hi] * n, [lo if i % 2 else hi for i in range(n)]]
    for _ in range(samples):
        n = int(rng.choice(lengths))
        out.append(rng.uniform(lo, hi, n).tolist())
    return out


def _float32_within(values: list[float], bounds: list[float] | None) -> list[float]:
    """``values`` rounded to float32, each kept inside ``bounds``: an end of the range that float32
    cannot hold (1e16) rounds outside it, so such a value takes the float32 next to it, inside."""
    x = np.asarray(values, dtype=np.float32)
    if bounds is not None:
        lo, hi = bounds
        x = np.where(x.astype(np.float64) > hi, np.nextafter(x, np.float32(-np.inf)), x)
        x = np.where(x.astype(np.float64) < lo, np.nextafter(x, np.float32(np.inf)), x)
    return x.astype(np.float64).tolist()


def check_real(model: Any, program: Any, inputs: list[list[float]]) -> dict[str, Any]:
    """Max abs error of the model against the interpreter, and whether it is within the bound."""
    from rasp_compiler.errors import RaspError
    from rasp_compiler.interpreter import run

    dtype = model.config["dtype"]
    bound = float(model.config.get("numeric", {}).get("approx_error_bound", 0.0))
    if dtype == "float32" and (model.config.get("input") or {}).get("kind") == "numerical":
        # both sides read the numbers the model can hold: a float32 model cannot see more digits,
        # so the check measures the compiled computation (a transpose is then exactly 0)
        inputs = [_float32_within(x, model.config["input"].get("range")) for x in inputs]
    worst, worst_input, checked, undefined, failures = 0.0, None, 0, 0, []
    batch = 256
    for start in range(0, len(inputs), batch):
        chunk = inputs[start:start + batch]
        outs = model.run(chunk)
        for x, got in zip(chunk, outs, strict=False):
            try:
                ref = run(program, x)
            except RaspError:
                undefined += 1
                continue
            try:
                ref_a = np.array([float(v) for v in ref])
                got_a = np.array(got, dtype=np.float64)
                err = float(np.max(np.abs(ref_a - got_a)))
            except (TypeError, ValueError):  # categorical values: equal or not
                ref_a, got_a = np.zeros(1), np.zeros(1)
                err = 0.0 if list(got) == list(ref) else math.inf
            tol = bound + EXACT_TOL[dtype] * max(1.0, float(np.max(np.abs(ref_a))))
            checked += 1
            if err > worst:
                worst, worst_input = err, x
            if not err <= tol and len(failures) < 5:
                failures.append({"input": x, "model": got_a.tolist(), "interpreter": ref_a.tolist(),
                                 "error": err})
    return {"inputs_checked": checked, "inputs_undefined": undefined, "max_abs_error": worst,
            "error_bound": bound, "worst_input": worst_input, "failures": failures,
            "ok": not failures and checked > 0}


def describe_maps(model: Any) -> list[str]:
    """One line per numerical map / head: exact, or its stated bound over its inferred range."""
    lines = []
    for r in model.config.get("numeric", {}).get("maps", []):
        lo, hi = r["interval"]
        what = "exact" if r["exact"] else f"|error| <= {r['bound']:.3g}"
        lines.append(f"  {r['kind']} {r['node']}: {what}; range [{lo:.6g}, {hi:.6g}]")
    return lines


def main_check(args: argparse.Namespace) -> int:
    import torch

    from rasp_compiler.commands.compile import compile_from_args
    from rasp_compiler.lang import load_program

    torch.set_num_threads(max(1, min(4, torch.get_num_threads())))
    lo, hi = range_from_args(args)  # type: ignore[misc]
    model = compile_from_args(args)
    program = load_program(args.file, output=args.output or "out")
    samples = args.samples if args.samples is not None else 1000
    numeric = (model.config.get("input") or {}).get("kind") == "numerical"
    inputs = sample_inputs(lo, hi, lengths_for(model), samples, args.seed, integers=not numeric)
    model.to(args.device)  # the model's run moves its inputs there and its logits back
    res = check_real(model, program, inputs)
    stats = model.stats()
    report = {"layers": stats["layers"], "heads_per_layer": stats["heads_per_layer"],
              "residual_width": stats["residual_width"], "mlp_hidden": stats["mlp_hidden"],
              "params": stats["params"], "mode": "random", "input_range": [lo, hi],
              "inputs_checked": res["inputs_checked"], "inputs_undefined": res["inputs_undefined"],
              "max_abs_error": res["max_abs_error"], "error_bound": res["error_bound"],
              "maps": model.config.get("numeric", {}).get("maps", []),
              "compile_seconds": stats["compile_seconds"],
              "output_encoding": model.config["output"]["encoding"], "device": str(model.device),
              "failures": res["failures"]}
    if args.json:
        print(json.dumps(report))
    else:
        print(model.summary())
        print("\n".join(describe_maps(model)))
        print(f"random: {res['inputs_checked']} inputs in [{lo:g}, {hi:g}], max abs error "
              f"{res['max_abs_error']:.3g} (stated bound {res['error_bound']:.3g} + rounding)")
        for f in res["failures"]:
            print(f"  disagree on {f['input']!r}: error {f['error']:.3g}")
    return 0 if res["ok"] else 1
