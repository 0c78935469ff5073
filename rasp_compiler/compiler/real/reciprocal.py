"""Reciprocals ``c / x`` of a real number, with a relative error bound.

A piecewise-linear unit of 1/x over [a, b] needs knots spaced in proportion to x, and its ReLU sum
would cancel catastrophically if written from the left end: 1/a minus a long sum of slopes.  So:

* ``y0``: 1/x interpolated on geometric knots A = k_0 < ... < k_K (ratio rho), written from the
  right end (1/k_K plus terms c_j relu(k_j - x) that vanish right of their knot), so every term is
  at most a few times 1/x: the chord's relative error is at most (rho - 1)^2 / (4 rho);
* Newton steps ``y <- y (2 - x y)``, each two gated MLPs (t = x y, then 2y - y t): the relative
  error e = 1 - x y becomes e^2 (plus a few roundings), so two or three coarse steps replace
  thousands of knots.  ``_plan`` picks the fewest steps whose knots stay under MAX_RECIP_KNOTS.

Where x's range holds 0 there is no bound near it.  With ``--min-denominator EPS`` the division is
compiled for |x| >= EPS: knots from EPS/2 on each side and a linear bridge between -EPS/2 and
EPS/2, and the model *flags* every input at which |x| < EPS (``guards`` in the config: the runtime
reads x from an extra unembedding column and refuses such an input).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rasp_compiler.compiler.real.limits import MAX_RECIP_KNOTS, RECIP_LAYER_UNITS, RECIP_TARGET, UNIT_ROUNDOFF
from rasp_compiler.compiler.real.specs import Feat, MLPSpec, Unit, _next

# relative rounding a Newton step adds (t = x y, 2 - t, y (2 - t) and the sums of the units)
NEWTON_ROUNDING_ULPS = 6


def chord_error(rho: float) -> float:
    """The largest |1 - x L(x)| of the chord L of 1/x between k and rho k (the same for every k)."""
    return (rho - 1.0) ** 2 / (4.0 * rho)


def plan_reciprocal(lo: float, hi: float, dtype: str) -> tuple[float, int, int, float]:
    """(rho, knots, Newton steps, stated relative error) for 1/x on [lo, hi], 0 < lo <= hi: of the
    plans that reach the dtype's target with at most MAX_RECIP_KNOTS knots, the one of fewest
    hidden units, counting each Newton step's two layers as RECIP_LAYER_UNITS units (at least one
    step: it absorbs the rounding of the knots' sum)."""
    u = UNIT_ROUNDOFF[dtype]
    target = RECIP_TARGET[dtype]
    span = math.log(hi / lo) if hi > lo else 0.0
    plans = []
    for steps in range(1, 6):
        for rho in (4.0, 2.0, 1.5, 1.3, 1.2, 1.12, 1.08, 1.05, 1.03, 1.02, 1.012, 1.008, 1.005, 1.003):
            knots = max(1, math.ceil(span / math.log(rho) - 1e-9)) + 1
            if knots > MAX_RECIP_KNOTS:
                break
            # the knots' sum rounds each of its 2 (knots + 1) terms, each at most rho / (rho - 1)
            # times 1/x: a relative error of the first guess on top of the chord's
            e = chord_error(rho) + 2.0 * (knots + 2) * u * rho / (rho - 1.0)
            if e >= 0.5:
                continue
            for _ in range(steps):
                e = e * e + NEWTON_ROUNDING_ULPS * u
            if e <= target:
                plans.append((knots + steps * (6 + RECIP_LAYER_UNITS), steps, rho, knots, e))
                break  # a finer rho costs more knots for the same steps
    _, steps, rho, knots, e = min(plans)
    return rho, knots, steps, e


class Reciprocals:
    """Part of ``NumericCompiler`` (``core``): reciprocal maps (``divisions`` makes them)."""

    def _reciprocal_check(self, node: Any, scale: float) -> None:
        """The interval of ``scale / x`` and its plan; a CompileError where x's range holds 0 and
        no --min-denominator is given."""
        nid, src = node.id, node.inputs[0]
        lo, hi = self._interval_any(src)
        eps = self.min_denominator
        sides: list[tuple[float, float]] = []  # the |x| intervals compiled, positive then negative
        if lo > 0 or hi < 0:
            m_lo, m_hi = (lo, hi) if lo > 0 else (-hi, -lo)
            # a little room for the drift of the computed denominator past its exact range
            sides = [(m_lo * (1 - 2 ** -10), m_hi * (1 + 2 ** -10))] if lo > 0 else []
            neg = [] if lo > 0 else [(m_lo * (1 - 2 ** -10), m_hi * (1 + 2 ** -10))]
            guard = None
        else:
            what = f"divides by '{src}', whose range [{lo:g}, {hi:g}] holds 0"
            if eps is None:
                # a listing of one shape (a softmax's row sums): at shorter lengths a row is empty
                # and its sum 0, which the range then holds
                fixed = ("" if self.fixed is not None or lo < 0 else
                         "if the program takes inputs of one length (a matrix listing), give "
                         "--fixed-length N: a sum over positions that are then always there is not 0; "
                         "else ")
                raise self.error(nid, f"{{node}} {what}: near 0 the quotient has no bound",
                                 hint=fixed + "give --min-denominator EPS: the division is then compiled for "
                                      f"|{src}| >= EPS, and the model flags every input nearer 0 "
                                      "(rasp eval refuses it); or a narrower --input-range that keeps "
                                      "the denominator away from 0")
            if max(-lo, hi) < eps:
                raise self.error(nid, f"{{node}} {what}, and all of it lies within --min-denominator "
                                 f"{eps:g} of 0", hint="give a smaller --min-denominator")
            sides = [(eps / 2, hi * (1 + 2 ** -10))] if hi >= eps else []
            neg = [(eps / 2, -lo * (1 + 2 ** -10))] if -lo >= eps else []
            guard = eps
        widest = max(s[1] / s[0] for s in sides + neg)
        rho, knots, steps, rel = plan_reciprocal(1.0, widest, self.dtype)
        self._recips[nid] = {"src": src, "scale": scale, "pos": sides, "neg": neg, "rho": rho,
                             "steps": steps, "rel": rel, "guard": guard}
        if guard is None:
            values = [scale / lo, scale / hi]
        else:  # the exact quotient where the input is not flagged
            values = [scale / x for x in (lo, hi, eps, -eps) if abs(x) >= eps and lo <= x <= hi]
        self.interval[nid] = (min(values), max(values))
        self._no_grid(nid, f"'{nid}' is a reciprocal (1 / x)")
        if guard is not None:
            self.guards.append({"node": src, "eps": eps, "reciprocal": nid})

    def _reciprocal_mlps(self, nid: str) -> None:
        """``y0`` (knots) and the Newton steps, each an MLP of its own; the last writes ``nid``."""
        spec = self._recips[nid]
        x = self.need(spec["src"])
        y0 = f"{nid}.y0"
        if spec["pos"] and spec["neg"]:
            y = self._two_sided_guess(nid, x, spec)
        else:
            sign = 1.0 if spec["pos"] else -1.0
            ((lo, hi),) = spec["pos"] or spec["neg"]
            knots, const = self._knot_units(y0, x, lo, hi, spec["rho"], sign)
            y = self._synthetic_mlp(nid, y0, knots + [Unit({"one": 1.0}, 0.0, {}, const, y0)], [x])
        for step in range(spec["steps"]):
            last = step == spec["steps"] - 1
            t = self._synthetic_mlp(nid, f"{nid}.newton{step + 1}.xy", [
                Unit({x: 1.0}, 0.0, {y: 1.0}, 0.0, ""), Unit({x: -1.0}, 0.0, {y: -1.0}, 0.0, "")], [x, y])
            out = nid if last else f"{nid}.newton{step + 1}"
            c = spec["scale"] if last else 1.0
            y = self._synthetic_mlp(nid, out, [
                Unit({y: 1.0}, 0.0, {}, 2.0 * c, ""), Unit({y: -1.0}, 0.0, {}, -2.0 * c, ""),
                Unit({y: 1.0}, 0.0, {t: -c}, 0.0, ""), Unit({y: -1.0}, 0.0, {t: c}, 0.0, "")], [y, t])
        lo, hi = self.interval[nid]
        rel = spec["rel"]
        self.map_reports.append({"node": nid, "kind": "reciprocal", "exact": False,
                                 "bound": rel * max(abs(lo), abs(hi)), "relative_bound": rel,
                                 "interval": [lo, hi], "newton_steps": spec["steps"],
                                 "knot_ratio": spec["rho"],
                                 **({"min_denominator": spec["guard"]} if spec["guard"] else {})})

    def _two_sided_guess(self, nid: str, x: str, spec: dict[str, Any]) -> str:
        """The first guess where x may have either sign (``--min-denominator``): from p = relu(x)
        and n = relu(-x) (an MLP of their own, so that neither side's units see the other side's
        large numbers), P(p) - N(n) - P(0) + (P(0) + N(0)) s(x), where P and N are the knot sums of
        the two sides and s runs from 0 at x <= -A to 1 at x >= A with bounded terms:
        s = 1/2 + (relu(A - n) - relu(A - p)) / 2A."""
        p = self._synthetic_mlp(nid, f"{nid}.positive", [Unit({x: 1.0}, 0.0, {}, 1.0, "")], [x])
        n = self._synthetic_mlp(nid, f"{nid}.negative", [Unit({x: -1.0}, 0.0, {}, 1.0, "")], [x])
        ((plo, phi),), ((nlo, nhi),) = spec["pos"], spec["neg"]
        y0 = f"{nid}.y0"
        pos_units, pos_const = self._knot_units(y0, p, plo, phi, spec["rho"], 1.0)
        neg_units, neg_const = self._knot_units(y0, n, nlo, nhi, spec["rho"], 1.0)
        for u in neg_units:
            u.b_gate = -u.b_gate
        # the value of each side's sum at 0 (where the other side's inputs sit)
        p0 = pos_const + sum(u.b_gate * max(u.b_in, 0.0) for u in pos_units)
        n0 = neg_const - sum(u.b_gate * max(u.b_in, 0.0) for u in neg_units)
        a = plo
        jump = p0 + n0
        units = pos_units + neg_units + [
            Unit({"one": 1.0}, 0.0, {}, pos_const - neg_const - p0 + jump / 2.0, y0),
            Unit({n: -1.0}, a, {}, jump / (2.0 * a), y0),
            Unit({p: -1.0}, a, {}, -jump / (2.0 * a), y0)]
        return self._synthetic_mlp(nid, y0, units, [p, n])

    def _knot_units(self, target: str, x: str, lo: float, hi: float, rho: float,
                    sign: float) -> tuple[list[Unit], float]:
        """1/x on [lo, hi] (x -> -x and the result negated for ``sign`` -1) from the right end:
        the units of sum_j c_j (relu(k_{j+1} - x) - relu(k_j - x)) (c_j the chord's |slope|) and
        the constant 1/k_K, each times ``sign``."""
        count = max(1, math.ceil(math.log(hi / lo) / math.log(rho) - 1e-9))
        ks = lo * rho ** np.arange(count + 1)
        ys = 1.0 / ks
        c = (ys[:-1] - ys[1:]) / np.diff(ks)
        # relu(k_j - x) for x positive; the negative side reads -x: relu(k_j + x)
        coef = np.zeros(count + 1)
        coef[1:] += c
        coef[:-1] -= c
        units = [Unit({x: -sign}, k, {}, sign * w, target)
                 for k, w in zip(ks.tolist(), coef.tolist(), strict=True) if w != 0.0]
        return units, sign * float(ys[-1])

    def _synthetic_mlp(self, nid: str, fid: str, units: list[Unit], inputs: list[str]) -> str:
        """An MLP writing the feature ``fid`` (a step of ``nid``'s reciprocal) from ``units``."""
        slot = _next(max([self.slot(f) for f in inputs if f != "one"] + [-1]), 1)
        self.feats[fid] = Feat(fid, 1, slot, nid if fid == nid else None, "numerical", labels=[fid])
        for u in units:
            u.out = fid
        self.mlps.append(MLPSpec(nid, fid, units, "approx", 0.0, slot, list(inputs)))
        return fid
