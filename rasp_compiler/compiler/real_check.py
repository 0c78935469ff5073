"""The check of a model over real-valued tokens (``--input-range LO HI``) against the interpreter.

The check draws inputs uniformly from the range (plus its corners: all LO, all HI, alternating),
runs the compiled model and the interpreter (float64) on each, and reports the largest absolute
difference next to the error bound the compiler stated.  The command-line side (``rasp check``,
the range and length options) is ``rasp_compiler.commands.real_options``.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np

from rasp_compiler.compiler.real import EXACT_TOL
from rasp_compiler.compiler.real.limits import ROUNDING_PER_TERM, UNIT_ROUNDOFF


def lengths_for(model: Any) -> list[int]:
    fixed = model.config.get("fixed_length")
    return [int(fixed)] if fixed else list(range(1, int(model.config["max_len"]) + 1))


def sample_inputs(lo: float, hi: float, lengths: list[int], samples: int, seed: int,
                  integers: bool = False, grid: float | None = None) -> list[list[float]]:
    """``samples`` random inputs, after 3 corner inputs a length (all LO, all HI, alternating;
    none for integer tokens: ``corner_count``).  With ``grid`` (a model compiled with
    ``--input-grid``) every input is a multiple of it, the corners the range's outermost ones."""
    rng = np.random.default_rng(seed)
    out: list[list[Any]] = []
    if grid is not None and not integers:
        first, last = math.ceil(lo / grid - 1e-9), math.floor(hi / grid + 1e-9)
        lo, hi = first * grid, last * grid
        for n in lengths:
            out += [[lo] * n, [hi] * n, [lo if i % 2 else hi for i in range(n)]]
        for _ in range(samples):
            n = int(rng.choice(lengths))
            out.append((rng.integers(first, last + 1, n) * grid).tolist())
        return out
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


def corner_count(lengths: list[int], integers: bool = False) -> int:
    """How many corner inputs ``sample_inputs`` puts before the random ones."""
    return 0 if integers else 3 * len(lengths)


def _float32_within(values: list[float], bounds: list[float] | None) -> list[float]:
    """``values`` rounded to float32, each kept inside ``bounds``: an end of the range that float32
    cannot hold (1e16) rounds outside it, so such a value takes the float32 next to it, inside."""
    x = np.asarray(values, dtype=np.float32)
    if bounds is not None:
        lo, hi = bounds
        x = np.where(x.astype(np.float64) > hi, np.nextafter(x, np.float32(-np.inf)), x)
        x = np.where(x.astype(np.float64) < lo, np.nextafter(x, np.float32(np.inf)), x)
    return x.astype(np.float64).tolist()


def check_real(model: Any, program: Any, inputs: list[list[float]],
               progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Max abs error of the model against the interpreter, and whether it is within the bound.
    ``progress`` hears the number of inputs done after each batch."""
    from rasp_compiler.compiler.checking import next_batch_size
    from rasp_compiler.errors import RaspError
    from rasp_compiler.interpreter import run

    dtype = model.config["dtype"]
    bound = float(model.config.get("numeric", {}).get("approx_error_bound", 0.0))
    # |error| <= A + R |value|, where the compiler stated a relative part (a division)
    parts = model.config.get("numeric", {}).get("error_bound") or {"absolute": bound, "relative": 0.0}
    absolute, relative = float(parts["absolute"]), float(parts["relative"])
    guarded = bool(model.config.get("guards"))
    if dtype == "float32" and (model.config.get("input") or {}).get("kind") == "numerical":
        # both sides read the numbers the model can hold: a float32 model cannot see more digits,
        # so the check measures the compiled computation (a transpose is then exactly 0)
        inputs = [_float32_within(x, model.config["input"].get("range")) for x in inputs]
    worst, worst_input, checked, undefined, failures, flagged = 0.0, None, 0, 0, [], 0
    failing = answered_undefined = 0  # every one counted; ``failures`` keeps the first five
    done, began = 0, time.monotonic()
    while done < len(inputs):
        chunk = inputs[done:done + next_batch_size(done, time.monotonic() - began, 256)]
        # a model with excluded denominators (--min-denominator) gives None for a flagged input
        outs = model.run(chunk, strict=not guarded)
        for x, got in zip(chunk, outs, strict=False):
            try:
                ref = run(program, x)
            except RaspError:
                undefined += 1
                answered_undefined += guarded and got is not None
                if guarded and got is not None and len(failures) < 5:
                    # the program divides by 0 there: a model with excluded denominators must flag it
                    failures.append({"input": x, "model": list(got), "interpreter": None,
                                     "error": math.inf})
                continue
            if got is None:  # flagged: outside the stated guarantee, not answered
                flagged += 1
                continue
            try:
                ref_a = np.array([float(v) for v in ref])
                got_a = np.array(got, dtype=np.float64)
                err = float(np.max(np.abs(ref_a - got_a)))
            except (TypeError, ValueError):  # categorical values: equal or not
                ref_a, got_a = np.zeros(1), np.zeros(1)
                err = 0.0 if list(got) == list(ref) else math.inf
            allowance = rounding_allowance(dtype, len(x)) * max(1.0, float(np.max(np.abs(ref_a))))
            if relative:  # per value: the absolute part plus the relative part of that value
                with np.errstate(invalid="ignore"):
                    within = bool(np.all(np.abs(ref_a - got_a) <= absolute + relative * np.abs(ref_a)
                                         + allowance))
            else:
                within = err <= bound + allowance
            checked += 1
            if err > worst:
                worst, worst_input = err, x
            failing += not within
            if not within and len(failures) < 5:
                failures.append({"input": x, "model": got_a.tolist(), "interpreter": ref_a.tolist(),
                                 "error": err})
        done += len(chunk)
        if progress is not None:
            progress(len(chunk))
    return {"inputs_checked": checked, "inputs_undefined": undefined, "inputs_flagged": flagged,
            "max_abs_error": worst, "relative_bound": relative,
            "error_bound": bound, "worst_input": worst_input, "failures": failures,
            "inputs_failing": failing, "inputs_answered_undefined": answered_undefined,
            "ok": not failures and checked > 0}


def rounding_allowance(dtype: str, length: int) -> float:
    """The float rounding an "exact" model may add at an input of ``length`` tokens, relative to
    max(1, |value|): EXACT_TOL for its few operations, plus the summation bound of a head that
    averages ``length`` values."""
    return EXACT_TOL[dtype] + ROUNDING_PER_TERM * length * UNIT_ROUNDOFF[dtype]


def describe_maps(model: Any) -> list[str]:
    """One line per numerical map / head: exact, or its stated bound over its inferred range; then
    the output's bound, |error| <= A + R |value| (float rounding aside: ``rounding_allowance``)."""
    lines = []
    numeric = model.config.get("numeric", {})
    for r in numeric.get("maps", []):
        lo, hi = r["interval"]
        what = "exact" if r["exact"] else f"|error| <= {r['bound']:.3g}"
        lines.append(f"  {r['kind']} {r['node']}: {what}; range [{lo:.6g}, {hi:.6g}]")
    bound = numeric.get("error_bound")
    if bound is not None:
        a, rel = float(bound["absolute"]), float(bound["relative"])
        what = "exact" if a == 0 and rel == 0 else "|error| <= " + " + ".join(
            p for p in (f"{a:.3g}" if a else "", f"{rel:.3g} x |value|" if rel else "") if p)
        out = model.config["output"]
        rounded = " (an integer, rounded)" if out.get("integer") else ""
        lines.append(f"output {out.get('node')}{rounded}: {what}, besides float rounding")
    return lines
