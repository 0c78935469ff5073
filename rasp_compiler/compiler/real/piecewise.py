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
        """Piecewise interpolation of a one-argument map on [lo, hi], with its error bound: linear
        pieces or quadratic ones, whichever reaches ``APPROX_TARGET`` with fewer units.  A gated
        unit relu(x - k) (a x + b) adds a quadratic piece at the cost of a linear one, and its
        error falls with the cube of the knots' spacing, not the square (e^x on [-5, 5] in
        float32: 129 units against 2,049).  Where the map keeps one sign, the bound is also stated
        relative to |f| (``relative_bounds``)."""
        fn = self.program.node(nid).fn
        x = self.need(src)

        def f(v: np.ndarray) -> np.ndarray:
            return np.array([float(eval_expr(fn, (float(t),))) for t in v])
        scale = max(1.0, float(np.max(np.abs(f(np.linspace(lo, hi, 257))))))
        target = APPROX_TARGET[self.dtype] * scale
        eps = float(np.finfo(np.float32 if self.dtype == "float32" else np.float64).eps)
        best = None
        for pieces in (_quadratic_pieces, _linear_pieces):
            # finer knots until the target is met; in float32 the rounding of the units' sum grows
            # with their number, so past some point finer knots only raise the bound
            segs, worse = 16, 0
            while True:
                got = pieces(f, lo, hi, segs, eps)
                key = (got.bound > target, len(got.terms) if got.bound <= target else got.bound)
                if best is None or key < best[0]:
                    best, worse = (key, got), 0
                else:
                    worse += 1
                if got.bound <= target or segs >= MAX_SEGMENTS or hi == lo or worse >= 2:
                    break
                segs *= 2
        assert best is not None
        got = best[1]
        units = [Unit({"one": 1.0}, 0.0, {}, got.start, nid)]
        units += [Unit({x: 1.0}, -k, {x: a} if a else {}, b - a * k, nid) for k, a, b in got.terms]
        if got.relative is not None:
            self.relative_bounds[nid] = got.relative
        return units, got.bound, [x]


class Pieces:
    """A piecewise polynomial as f(k_0) + sum_j relu(x - k_j) (a_j (x - k_j) + b_j): ``terms``
    (k_j, a_j, b_j), its stated error bound (sampled error with a 25% margin, plus the rounding of
    the units and their sum) and, where f keeps one sign, that bound relative to |f|."""

    def __init__(self, start: float, terms: list[tuple[float, float, float]], bound: float,
                 relative: float | None) -> None:
        self.start, self.terms, self.bound, self.relative = start, terms, bound, relative


def _pieces(f: Any, knots: np.ndarray, start: float, alpha: np.ndarray, gamma: np.ndarray,
            interp: Any, eps: float) -> Pieces:
    """Bound the interpolant on ``knots`` (``interp(j, t)`` its values on segment j) on 31 samples a
    segment; the rounding of the sum at x is (units + 3) eps times the sum of |terms| there, from
    prefix sums (every |term| is |a_j| (x - k_j)^2 + |b_j| (x - k_j) at most)."""
    n = len(knots) - 1
    ts, errs, fs, seg = [], [], [], []
    for j in range(n):
        t = np.linspace(knots[j], knots[j + 1], 33)[1:-1]
        ft = f(t)
        ts.append(t)
        fs.append(ft)
        errs.append(np.abs(ft - interp(j, t)))
        seg.append(np.full(len(t), j))
    t, fx, err, idx = (np.concatenate(v) for v in (ts, fs, errs, seg))
    aa, gg = np.abs(alpha), np.abs(gamma)
    s0, s1, s2 = np.cumsum(aa), np.cumsum(aa * knots[:-1]), np.cumsum(aa * knots[:-1] ** 2)
    g0, g1 = np.cumsum(gg), np.cumsum(gg * knots[:-1])
    mass = abs(start) + (t * t * s0[idx] - 2 * t * s1[idx] + s2[idx]) + (t * g0[idx] - g1[idx])
    units = int(np.count_nonzero((alpha != 0) | (gamma != 0))) + 1
    local = 1.25 * err + (units + 3) * eps * np.maximum(mass, 0.0)
    bound = float(np.max(local, initial=0.0))
    relative = None
    if len(fx) and (np.all(fx > 0) or np.all(fx < 0)):
        relative = float(np.max(local / np.abs(fx)))
    terms = [(float(k), float(a), float(b)) for k, a, b in zip(knots[:-1], alpha, gamma, strict=True)
             if a != 0 or b != 0]
    return Pieces(start, terms, bound, relative)


def _linear_pieces(f: Any, lo: float, hi: float, segs: int, eps: float) -> Pieces:
    knots = np.linspace(lo, hi, segs + 1)
    ys = f(knots)
    w = np.where(np.diff(knots) == 0, 1.0, np.diff(knots))
    slopes = np.diff(ys) / w
    gamma = np.diff(np.concatenate([[0.0], slopes]))

    def interp(j: int, t: np.ndarray) -> np.ndarray:
        return ys[j] + slopes[j] * (t - knots[j])
    return _pieces(f, knots, float(ys[0]), np.zeros(segs), gamma, interp, eps)


def _quadratic_pieces(f: Any, lo: float, hi: float, segs: int, eps: float) -> Pieces:
    """The quadratic through f at each segment's ends and middle: continuous at the knots, so the
    pieces differ by (x - k_j) (a_j (x - k_j) + b_j) with a_j the change of the leading
    coefficient and b_j that of the slope at k_j."""
    knots = np.linspace(lo, hi, segs + 1)
    w = float(knots[1] - knots[0]) if segs else 1.0
    ys = f(knots)
    mids = f((knots[:-1] + knots[1:]) / 2)
    w = w or 1.0
    a = 2.0 * (ys[:-1] - 2.0 * mids + ys[1:]) / (w * w)
    b = (ys[1:] - ys[:-1]) / w - a * w
    end_slope = b + 2.0 * a * w  # each piece's slope at its right end
    alpha = np.diff(np.concatenate([[0.0], a]))
    gamma = b - np.concatenate([[0.0], end_slope[:-1]])

    def interp(j: int, t: np.ndarray) -> np.ndarray:
        d = t - knots[j]
        return ys[j] + b[j] * d + a[j] * d * d
    return _pieces(f, knots, float(ys[0]), alpha, gamma, interp, eps)
