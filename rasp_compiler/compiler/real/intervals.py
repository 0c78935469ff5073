"""Interval analysis: the range of every numerical s-op, from ``--input-range`` forward.

Maps are read as forms (``real_forms``) and bounded by interval arithmetic on their atoms; a max,
min or choice takes the hull of its branches.  An aggregate stays in the hull of its values (and
its default, where a query may select nothing).  Intervals size the margins of heads, the error
bounds of maps and the overflow check of ``assembly``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rasp_compiler.compiler.real.divisions import is_reciprocal
from rasp_compiler.compiler.real.grids import coefficients, remember, resume
from rasp_compiler.compiler.real.specs import Deferred
from rasp_compiler.compiler.real_forms import Form, Lin, NonLinear, form_of
from rasp_compiler.graph.expr import Ternary, Var
from rasp_compiler.graph.nodes import Aggregate, Map, SelectorWidth, SequenceMap, SoftmaxAggregate, Tokens

_STEP_HINT = ("give --input-grid G when every input is a multiple of G (e.g. 0.001): comparisons of "
              "values on that grid then have a margin; or compare inside a max or min "
              "(a if a > b else b), which is exact at every real")


class Intervals:
    """Part of ``NumericCompiler`` (``core``): the interval of each s-op, and its form."""

    def _numeric(self, node: Any) -> None:
        nid = node.id
        if isinstance(node, Tokens):
            self.interval[nid] = self.range
            self._grid_tokens(node)
        elif isinstance(node, (Map, SequenceMap)):
            fn, inputs = self._inline(node.fn, node.inputs)
            attempts = [
                # inlined maps' forms, positions as per-position constants
                [self.pos[i] if i in self.pos else self._form_input(i) for i in inputs],
                # materialised inputs instead of inlined maps
                [self.pos[i] if i in self.pos else self._var(i) for i in inputs],
            ]
            if any(i in self.pos for i in inputs):
                # positions as residual features too: max(x, indices) is relu(x - indices) + indices,
                # whose relu needs the position as an input, not as a per-position constant
                # (one feature for equal position-only inputs: `indices - 1` written twice is two
                # nodes, and the max must see the same number on both sides of its comparison)
                same: dict[tuple, str] = {}
                for i in inputs:
                    if i in self.pos:
                        same.setdefault(tuple(map(repr, self.pos[i])), i)
                attempts.append([Form.var(self.n, same[tuple(map(repr, self.pos[i]))]) if i in self.pos
                                 else self._var(i) for i in inputs])
            errors: list[NonLinear] = []
            for args in attempts:
                try:
                    f = form_of(fn, args, self.n)
                    if isinstance(f, list):
                        raise NonLinear("positional")
                    break
                except NonLinear as err:
                    errors.append(err)
            else:
                if is_reciprocal(fn) and len(inputs) == 1 and inputs[0] not in self.pos:
                    self._reciprocal_check(node, float(fn.left.value))
                    return
                deferred = self._why_no_unit(node, fn, inputs, str(errors[0]))
                if deferred is not None:
                    # maybe a part of a larger expression (the condition of a max): the consumer
                    # inlines it; it is an error only if something needs its value
                    self.deferred[nid] = deferred
                    return
                self._approx_check(node, str(errors[1]))
                self._no_grid(nid, f"'{nid}' is approximated by a piecewise-linear unit")
                return
            if f.has_step():
                why = self._step_margins(nid, f)
                if why is not None:
                    self.deferred[nid] = Deferred(fn, inputs, nid, why, _STEP_HINT if self.token_grid is None
                                                  else "compare values computed from the inputs by sums "
                                                       "and products only")
                    return
            self.forms[nid] = f
            lo, hi = self._form_interval(self.forms[nid], nid, inputs)
            choice = self._choice_interval(fn, args, inputs)
            if choice is not None:  # both are sound: keep what both allow
                lo, hi = max(lo, choice[0]), min(hi, choice[1])
            self.interval[nid] = (lo, hi)
            self._grid_form(nid, f, inputs)
        elif isinstance(node, (Aggregate, SelectorWidth)) and node.inputs[0] not in self.pos and \
                self.token_grid is not None:
            self._row_plan(node)  # a selector comparing numbers on a grid (``row_selectors``)
        elif isinstance(node, (Aggregate, SoftmaxAggregate)):
            sel, src = node.inputs[0], node.inputs[-1]
            self._check_selector(sel, nid)
            lo, hi = self._interval_any(src)
            d = _as_float(node.default, self.error, nid)
            if self._may_be_empty(sel):
                lo, hi = min(lo, d), max(hi, d)
            self.interval[nid] = (lo, hi)
            self._grid_aggregate(node)
        elif isinstance(node, SelectorWidth):
            if node.inputs[0] in self.pos:  # positions only: its count depends on the length
                raise self.error(nid, "{node} counts the keys its selector selects, which at a variable "
                                 "length depends on how many positions there are",
                                 hint="give --fixed-length N: the count is then folded into the embedding")
            raise self.error(nid, "selector_width of a selector that reads real numbers cannot be compiled",
                             hint="select on positions only")
        else:
            raise self.error(nid, f"numerical compilation does not handle {node.kind} nodes")

    def _choice_interval(self, fn: Any, args: list[Any],
                         inputs: tuple[str, ...]) -> tuple[float, float] | None:
        """For ``a if cond else b`` (a max, a min or a choice by position, as form_of accepted it),
        the hull of a's and b's intervals, through nested choices.  The form's own interval adds b
        to relu(a - b) as if they were independent: min(x, y) over [1, 2] came out as [0, 2], and a
        later 1 / m was refused for a pole at 0."""
        if not isinstance(fn, Ternary):
            return None
        parts = []
        for branch in (fn.then, fn.otherwise):
            part = self._choice_interval(branch, args, inputs)
            if part is None and isinstance(branch, Var) and inputs[branch.index] in self.interval:
                part = self.interval[inputs[branch.index]]   # already tightened where it was made
            if part is None:
                try:
                    f = form_of(branch, args, self.n)
                    if isinstance(f, list):  # a positional branch: its values at each position
                        f = Form.const(self.n, np.array([float(v) for v in f]))
                except (NonLinear, TypeError, ValueError):
                    return None
                part = self._form_interval(f)
            parts.append(part)
        return min(p[0] for p in parts), max(p[1] for p in parts)

    def _form_input(self, sid: str) -> Form:
        return self.forms[sid] if sid in self.forms else self._var(sid)

    def _var(self, sid: str) -> Form:
        """The s-op as a residual number; a comparison's 0/1 stays marked as such."""
        f = Form.var(self.n, sid)
        f.boolean = sid in self.forms and self.forms[sid].boolean
        return f

    def _interval_any(self, sid: str) -> tuple[float, float]:
        if sid in self.deferred:  # a mean of a map that has no unit: its value is needed
            raise self._deferred_error(sid)
        if sid in self.pos:
            cache = self._pos_interval
            if sid not in cache:
                vals = [float(v) for v in self.pos[sid] if isinstance(v, (int, float))]
                if not vals:
                    raise self.error(sid, "{node} holds no numbers")
                cache[sid] = (min(vals), max(vals))
            return cache[sid]
        return self.interval[sid]

    def _atom_interval(self, atom: tuple) -> tuple[float, float]:
        if atom[0] == "one":
            return (1.0, 1.0)
        if atom[0] == "x":
            return self._interval_any(atom[1])
        if atom[0] == "step":
            return (0.0, 1.0)
        if atom[0] == "stepx":
            v = self._interval_any(atom[3])
            return min(0.0, v[0]), max(0.0, v[1])
        if atom[0] == "xx":
            a, b = self._interval_any(atom[1]), self._interval_any(atom[2])
            if atom[1] == atom[2]:  # x * x, not x ** 2: a float ** overflowing raises OverflowError
                lo = 0.0 if a[0] <= 0 <= a[1] else min(a[0] * a[0], a[1] * a[1])
                return lo, max(a[0] * a[0], a[1] * a[1])
            ps = [x * y for x in a for y in b]
            return min(ps), max(ps)
        lin: Lin = atom[1]
        lo = hi = lin.const
        for s, w in lin.terms:
            i = self._interval_any(s)
            lo += min(w * i[0], w * i[1])
            hi += max(w * i[0], w * i[1])
        return max(0.0, lo), max(0.0, hi)

    def _form_interval(self, f: Form, nid: str | None = None, after: Any = ()) -> tuple[float, float]:
        """The hull of a form's values; with ``nid``, the loop resumes from that of an input's
        form that ``f`` extends (``grids.resume``)."""
        items = list(f.terms.items())
        start, state = resume(self._form_states["interval"], items, after) if nid else (0, None)
        lo = np.zeros(self.n) if state is None else state[0].copy()
        hi = np.zeros(self.n) if state is None else state[1].copy()
        for atom, c in items[start:]:
            a = self._atom_interval(atom)
            c = coefficients(c)
            # a huge --input-range makes a bound overflow to inf (_check_magnitudes then refuses it
            # with one clear error): no RuntimeWarning before it, and a zero coefficient (the atom
            # is absent at that position) adds 0, not 0 * inf = NaN
            with np.errstate(over="ignore", invalid="ignore"):
                lo += np.where(c == 0, 0.0, np.minimum(c * a[0], c * a[1]))
                hi += np.where(c == 0, 0.0, np.maximum(c * a[0], c * a[1]))
        if nid:
            remember(self._form_states["interval"], nid, items, (lo.copy(), hi.copy()))
        return float(lo.min()), float(hi.max())

    def _check_selector(self, sel: str, nid: str) -> None:
        if sel not in self.pos:
            raise self.error(nid, "{node} uses a selector that compares real numbers; hard attention "
                             "has no margin between arbitrarily close reals",
                             hint="give --input-grid G when every input is a multiple of G: a selector "
                                  "comparing values on that grid then compiles exactly; or select on "
                                  "positions, or use softmax_aggregate for a data-dependent weighting")

    def _may_be_empty(self, sel: str) -> bool:
        """Whether some query row can select no key (then the default is one of the values)."""
        rows = self._selector_rows(sel)
        # at a variable length, a query at q may see only keys 0..q (``lows``: how many there are)
        return bool((rows["sizes"] == 0).any() or (self.fixed is None and (rows["lows"] == 0).any()))


def _as_float(v: Any, err: Any, nid: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise err(nid, f"{{node}} needs a numeric default, not {v!r}")
    return float(v)
