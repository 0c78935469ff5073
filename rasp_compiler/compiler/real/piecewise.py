"""Maps of one number that are no form (``e ^ x``, ``1 / x``): piecewise-linear units.

``_approx_check`` refuses a map that is not finite on its input's interval and records its
interval; ``_approx_units`` interpolates it on knots fine enough for ``APPROX_TARGET`` and states
an error bound (interpolation error plus the rounding of the units).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rasp_compiler.compiler.real.limits import APPROX_TARGET, MAX_SEGMENTS
from rasp_compiler.compiler.real.specs import Unit
from rasp_compiler.graph.expr import evaluate as eval_expr


class PiecewiseLinear:
    """Part of ``NumericCompiler`` (``core``): piecewise-linear units with an error bound."""

    def _approx_check(self, node: Any, why: str) -> None:
        nums = [i for i in node.inputs if i not in self.pos]
        if len(nums) != 1 or len(node.inputs) != 1:
            raise self.error(node.id, f"{{node}} is not exactly compilable ({why}) and reads "
                             f"{len(node.inputs)} inputs; only a function of one real number gets a "
                             "piecewise-linear unit with an error bound",
                             hint="compute the argument (e.g. tokens - m) as its own s-op first")
        lo, hi = self.interval[nums[0]]
        fn = node.fn
        # the grid holds every knot a piecewise-linear unit may use (dyadic points) and 0
        xs = np.unique(np.concatenate([np.linspace(lo, hi, 2 * MAX_SEGMENTS + 1), [lo, hi],
                                       [0.0] if lo <= 0.0 <= hi else []]))
        try:
            ys = np.array([float(eval_expr(fn, (float(x),))) for x in xs])
        except Exception:
            ys = np.array([np.nan])
        if not np.all(np.isfinite(ys)):
            raise self.error(node.id, f"{{node}} is not finite everywhere on its inferred input range "
                             f"[{lo:g}, {hi:g}], so no error bound exists",
                             hint="give a narrower --input-range")
        self._approx = getattr(self, "_approx", {})
        self._approx[node.id] = (nums[0], lo, hi)
        ymin, ymax = float(ys.min()), float(ys.max())
        self.interval[node.id] = (ymin, ymax)

    def _approx_units(self, nid: str, src: str, lo: float, hi: float) -> tuple[list[Unit], float, list[str]]:
        """Piecewise-linear interpolation of a one-argument map on [lo, hi], with its error bound."""
        fn = self.program.node(nid).fn
        x = self.need(src)

        def f(v: np.ndarray) -> np.ndarray:
            return np.array([float(eval_expr(fn, (float(t),))) for t in v])
        scale = max(1.0, float(np.max(np.abs(f(np.linspace(lo, hi, 257))))))
        segs = 16
        while True:
            knots = np.linspace(lo, hi, segs + 1)
            ys = f(knots)
            err = 0.0
            for j in range(segs):  # sample the interpolation error densely inside every segment
                t = np.linspace(knots[j], knots[j + 1], 33)[1:-1]
                interp = ys[j] + (ys[j + 1] - ys[j]) * (t - knots[j]) / (knots[j + 1] - knots[j] or 1.0)
                err = max(err, float(np.max(np.abs(f(t) - interp), initial=0.0)))
            if err <= APPROX_TARGET[self.dtype] * scale or segs >= MAX_SEGMENTS or hi == lo:
                break
            segs *= 2
        slopes = np.diff(ys) / np.where(np.diff(knots) == 0, 1.0, np.diff(knots))
        units = [Unit({"one": 1.0}, 0.0, {}, float(ys[0]), nid)]
        prev = 0.0
        for j, s in enumerate(slopes):
            if s != prev:
                units.append(Unit({x: 1.0}, -float(knots[j]), {}, float(s - prev), nid))
            prev = s
        eps = float(np.finfo(np.float32 if self.dtype == "float32" else np.float64).eps)
        # stated bound: the sampled interpolation error with a 25% margin (for the unsampled points
        # between samples) plus the worst-case rounding of the units and of their sum:
        # (units + 2) * eps * sum of |unit outputs| <= (units + 2) * eps * (|f(lo)| + sum |slope
        # changes| * (hi - lo))
        mass = abs(float(ys[0])) + float(np.sum(np.abs(np.diff(np.concatenate([[0.0], slopes]))))) * (hi - lo)
        bound = 1.25 * err + (len(units) + 2) * eps * mass
        return units, bound, [x]
