"""Selectors that compare numbers on a grid: gathered into each query's row, compared in an MLP.

Hard attention cannot select ``key > query`` between real numbers: selected keys must score alike
and the others a margin below, and no bilinear score of a few numbers makes such a step.  But a
selector ``select(x, x, >) and same_row`` at a fixed length has a known set of candidate keys per
query (the positional conjuncts: the query's row).  So each candidate is gathered into the query
position (one hard head per candidate slot, carrying every s-op the aggregate reads from it),
and the comparison becomes a step of a difference, exact on a grid (``grids``):

    s_j   = [x_j > x_q]                  (one step atom per candidate slot j)
    count = sum_j s_j                    (selector_width is this)
    sum   = sum_j s_j v_j                (steps gating the gathered values: gated units)
    mean  = sum * r(count) + default * [count == 0],   r(c) = 1/c, r(0) = 0

r is a table of the integers 0..m (interpolated through them, exact there).  A mean of a constant
value is that value times [count > 0], which stays on the grid 1 (``any_greater == 0`` compares
it).  Only one data comparison per selector (a product of two steps needs another layer), and
only at a fixed length (the candidates must not depend on it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rasp_compiler.compiler import selectors as sl
from rasp_compiler.compiler.real.grids import as_fraction
from rasp_compiler.compiler.real.specs import Feat, HeadSpec, Unit, _next
from rasp_compiler.compiler.real_forms import Form, _compare, _negation
from rasp_compiler.graph.nodes import Aggregate, SelectorWidth


class RowSelectors:
    """Part of ``NumericCompiler`` (``core``): aggregates and selector widths over data selectors."""

    def _row_plan(self, node: Any) -> None:
        """Check that ``node``'s selector can be gathered and compared, and record its plan, its
        interval and its grid; a CompileError says why not."""
        nid, sel = node.id, node.inputs[0]
        what = "counts" if isinstance(node, SelectorWidth) else "averages"
        if self.fixed is None:
            raise self.error(nid, f"{{node}} {what} over a selector that compares numbers, which is "
                             "compiled by gathering each query's candidate keys: that needs a fixed "
                             "length", hint="give --fixed-length N")
        data, mask = [], np.ones((self.n, self.n), dtype=bool)
        for part in sl.conjuncts(sl.formula(self.graph, sel)):
            positional = all(a.key in self.pos and a.query in self.pos for a in sl.atoms(part))
            if positional:
                mask &= self._formula_matrix(part)
            elif isinstance(part, sl.Atom) and part.fn is None:
                data.append(part)
            else:
                raise self.error(nid, f"{{node}} {what} over a selector whose comparison of numbers is "
                                 "combined by or/not, or is a Python predicate: only a conjunction of "
                                 "one comparison with selects on positions compiles",
                                 hint="write the selector as select(x, y, op) and select(positions...)")
        if len(data) != 1:
            raise self.error(nid, f"{{node}} {what} over a selector with {len(data)} comparisons of "
                             "numbers; one compiles (each is a step of a difference on a grid)",
                             hint="compute the combined condition as an s-op first, then select on it")
        atom = data[0]
        slots = [np.nonzero(mask[q])[0].tolist() for q in range(self.n)]
        width = max((len(s) for s in slots), default=0)
        if width == 0:
            raise self.error(nid, "{node} selects no key at any position")
        value = None if isinstance(node, SelectorWidth) else node.inputs[-1]
        plan = {"atom": atom, "slots": slots, "width": width, "value": value}
        self._rows[nid] = plan
        # the comparison of each slot, as a form over stand-in gathered features (validated now)
        steps = self._row_steps(nid, plan, gathered=lambda sid, j: self._gathered_id(nid, sid, j),
                                declare=True)
        for f in steps:
            why = self._step_margins(nid, f)
            if why is not None:
                raise self.error(nid, why.replace("{node}", "{node}'s selector"),
                                 hint="compare the inputs, or values computed from them by sums and "
                                      "products (they stay on the grid); or select on positions")
        if value is None:
            self.interval[nid] = (0.0, float(width))
            self.grid[nid] = [as_fraction(1)] * self.n
            self.delta[nid] = 0.0
            return
        lo, hi = self._interval_any(value)
        default = float(node.default)
        self.interval[nid] = (min(lo, default), max(hi, default))
        constant = value in self.pos and len({float(v) for v in self.pos[value]}) == 1
        if constant:  # value [count > 0]: on the grid of the value and the default
            v = as_fraction(float(self.pos[value][0]))
            from rasp_compiler.compiler.real.grids import grid_gcd
            self.grid[nid] = [grid_gcd(v, as_fraction(default))] * self.n
            self.delta[nid] = 0.0
        else:
            self._no_grid(nid, f"'{nid}' is a mean over a data-dependent count")

    def _formula_matrix(self, f: Any) -> np.ndarray:
        """The [query, key] matrix of a formula of positional selects."""
        if isinstance(f, sl.Atom):
            m = np.asarray(self.pos[f.select], dtype=bool)
            return ~m if f.negated else m
        parts = [self._formula_matrix(p) for p in f.parts]
        out = parts[0].copy()
        for p in parts[1:]:
            out = out & p if isinstance(f, sl.All) else out | p
        return out

    @staticmethod
    def _gathered_id(nid: str, sid: str, j: int) -> str:
        return f"{nid}.row{j}.{sid}"

    def _row_steps(self, nid: str, plan: dict, gathered: Any, declare: bool) -> list[Form]:
        """Per candidate slot j, the 0/1 form of the comparison (0 where the query has no j-th
        candidate).  ``declare`` registers the gathered stand-ins' interval, grid and drift."""
        atom, slots = plan["atom"], plan["slots"]
        forms = []
        for j in range(plan["width"]):
            present = np.array([1.0 if len(s) > j else 0.0 for s in slots])
            at = [s[j] if len(s) > j else 0 for s in slots]

            def side(sid: str, is_key: bool, j: int = j, at: list = at,
                     present: np.ndarray = present) -> Form:
                if sid in self.pos:
                    vals = [self.pos[sid][k] for k in at] if is_key else list(self.pos[sid])
                    return Form.const(self.n, np.array([float(v) for v in vals]))
                if not is_key:
                    return self._var(sid)
                gid = gathered(sid, j)
                if declare:
                    self._declare_gathered(gid, sid, at, present)
                f = Form.var(self.n, gid)
                f.boolean = sid in self.forms and self.forms[sid].boolean
                return f
            k, q = side(atom.key, True), side(atom.query, False)
            # select(keys, queries, op) selects when key op query
            s = _compare(atom.op, k, q, self.n)
            if atom.negated:
                s = _negation(s, self.n)
            forms.append(s.scale(present))
        return forms

    def _declare_gathered(self, gid: str, sid: str, at: list[int], present: np.ndarray) -> None:
        lo, hi = self._interval_any(sid)
        self.interval[gid] = (min(lo, 0.0), max(hi, 0.0))
        src = self._grid_of(sid)
        self.grid[gid] = [src[k] if p else as_fraction(0) for k, p in zip(at, present, strict=True)]
        self.delta[gid] = self._delta_of(sid)
        self.stand_in[gid] = sid
        if any(g is None for g in self.grid[gid]):
            self.grid_why[gid] = self._grid_reason(sid)

    # ------------------------------------------------------------------ weights
    def _row_features(self, node: Any) -> None:
        """The gather heads, the comparisons and the mean (or count) of a data selector."""
        nid = node.id
        plan = self._rows[nid]
        reads = [s for s in dict.fromkeys([plan["atom"].key, plan["value"]])
                 if s is not None and s not in self.pos]
        for j in range(plan["width"]):
            targets = [k[j] if len(k) > j else -1 for k in plan["slots"]]
            blocks = self._digit_blocks(list(range(self.n)), targets, f"{nid}.row{j}")
            for sid in reads:
                gid = self._gathered_id(nid, sid, j)
                src = self.need(sid)
                deps = [b[0] for b in blocks] + [b[1] for b in blocks] + [src]
                slot = _next(max([self.slot(f) for f in deps if f != "one"] + [-1]), 0)
                self.feats[gid] = Feat(gid, 1, slot, None, "numerical", labels=[gid])
                self.heads.append(HeadSpec(nid, "aggregate", gid, blocks, [], [src], [0.0],
                                           2.0 * self.gap, slot, [gid], [nid]))
        steps = self._row_steps(nid, plan, gathered=lambda sid, j: self._gathered_id(nid, sid, j),
                                declare=False)
        count = Form(self.n)
        for s in steps:
            count = count.add(s)
        if plan["value"] is None:  # selector_width: the count itself
            self._synthetic_form(nid, nid, count)
            return
        value, default = plan["value"], float(node.default)
        if value in self.pos and len({float(v) for v in self.pos[value]}) == 1:
            v = float(self.pos[value][0])
            # v [count > 0] + default [count == 0] = default + (v - default) [count > 0]
            cid = self._synthetic_form(nid, f"{nid}.count", count)
            self.interval[cid], self.grid[cid], self.delta[cid] = (0.0, float(plan["width"])), \
                [as_fraction(1)] * self.n, 0.0
            some = _compare(">", self._var(cid), Form(self.n), self.n)
            self._step_margins(nid, some)
            out = Form.const(self.n, np.full(self.n, default)).add(some.scale(np.full(self.n, v - default)))
            self._synthetic_form(nid, nid, out)
            return
        total = Form(self.n)
        for j, s in enumerate(steps):
            if value in self.pos:
                vals = [float(self.pos[value][k[j]]) if len(k) > j else 0.0 for k in plan["slots"]]
                total = total.add(s.scale(np.array(vals)))
            else:
                total = total.add(s.mul(Form.var(self.n, self._gathered_id(nid, value, j))))
        sid = self._synthetic_form(nid, f"{nid}.sum", total)
        cid = self._synthetic_form(nid, f"{nid}.count", count)
        width = plan["width"]
        self.interval[cid] = (0.0, float(width))
        # r(c) = 1/c on the integers 1..m, r(0) = 0; z(c) = [c == 0]: interpolated through the
        # integers, exact there (the count is a sum of exact 0/1 steps)
        ys = [0.0] + [1.0 / c for c in range(1, width + 1)]
        rid = self._synthetic_mlp(nid, f"{nid}.reciprocal_count", _integer_table(cid, ys), [cid])
        units = [Unit({sid: 1.0}, 0.0, {rid: 1.0}, 0.0, ""), Unit({sid: -1.0}, 0.0, {rid: -1.0}, 0.0, "")]
        inputs = [sid, rid]
        if default != 0.0:
            units += [Unit(u.w_in, u.b_in, u.w_gate, u.b_gate * default, "")
                      for u in _integer_table(cid, [1.0] + [0.0] * width)]
            inputs.append(cid)
        self._synthetic_mlp(nid, nid, units, inputs)

    def _synthetic_form(self, owner: str, fid: str, form: Form) -> str:
        """An MLP computing ``form`` into the feature ``fid`` (step atoms need ``step_grid``)."""
        units, inputs = self._form_units(fid, form)
        return self._synthetic_mlp(owner, fid, units, inputs)


def _integer_table(x: str, ys: list[float]) -> list[Unit]:
    """The piecewise-linear function through (c, ys[c]) for c = 0..len(ys)-1, flat below 0."""
    units = [Unit({"one": 1.0}, 0.0, {}, ys[0], "")]
    prev = 0.0
    for c in range(len(ys) - 1):
        slope = ys[c + 1] - ys[c]
        if slope != prev:
            units.append(Unit({x: 1.0}, -float(c), {}, slope - prev, ""))
        prev = slope
    # flat past the last integer
    units.append(Unit({x: 1.0}, -float(len(ys) - 1), {}, -prev, ""))
    return units


__all__ = ["RowSelectors", "Aggregate"]
