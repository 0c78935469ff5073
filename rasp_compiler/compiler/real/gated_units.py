"""Maps → gated MLP units ``relu(x W_in + b_in) * (x W_gate + b_gate)``, exact up to one rounding.

Each atom of a map's form becomes units: a constant or ``c(p) * x`` gates by an embedded
coefficient, ``a * b = relu(a) * b + relu(-a) * (-b)`` (one pair per distinct coefficient, switched
off elsewhere), and ``relu`` of a linear combination is one unit (``max(a, b) = b + relu(a - b)``).
A step ``[D > 0]`` of a difference D on a grid of step h (``grids``) is two units,
``(2/h) (relu(D - h/4) - relu(D - 3h/4))``, exact while D drifts by less than h/4 (``D >= 0`` is
``D > -h``); gating a number, the same two units read it as their gate.  A map with no form gets
piecewise-linear units instead (``piecewise``).

A map that is a sum of aggregates with constant coefficients (``k * mean_1 + k * mean_2``, the
summing heads of a matmul listing) gets no units: each aggregate's head writes its coefficient
times its mean straight into the map's feature (``_folded``), and the aggregates get no feature.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rasp_compiler.compiler.real.specs import Feat, MLPSpec, Unit, _next
from rasp_compiler.compiler.real_forms import Form, Lin
from rasp_compiler.graph.nodes import Aggregate


class GatedUnits:
    """Part of ``NumericCompiler`` (``core``): the MLP of each map."""

    def _mlp(self, node: Any) -> None:
        nid = node.id
        if nid in self._recips:
            self._reciprocal_mlps(nid)
            return
        approx = getattr(self, "_approx", {})
        if nid not in approx and self._folded(nid, self.forms[nid]):
            return
        if nid in approx:
            units, bound, inputs = self._approx_units(nid, *approx[nid])
            kind = "approx"
        else:
            units, inputs = self._form_units(nid, self.forms[nid])
            bound, kind = 0.0, "exact"
        slot = _next(max([self.slot(f) for f in inputs if f != "one"] + [-1]), 1)
        self.feats[nid] = Feat(nid, 1, slot, nid, "numerical", labels=[nid])
        self.mlps.append(MLPSpec(nid, nid, units, kind, bound, slot, inputs))
        rep = {"node": nid, "kind": "map", "exact": kind == "exact", "bound": bound,
               "interval": list(self.interval[nid]), "units": len(units)}
        if nid in self.relative_bounds:
            rep["relative_bound"] = self.relative_bounds[nid]
        self.map_reports.append(rep)

    def _folded(self, nid: str, form: Form) -> bool:
        """Where ``form`` is a sum of hard aggregates over positional selectors, none built yet,
        each with a constant coefficient: plan each aggregate's head to write its coefficient times
        its mean into ``nid`` (the residual stream adds them), and give ``nid`` the last head's
        slot.  False (nothing planned) for any other form."""
        terms = []
        for atom, c in form.terms.items():
            c = np.nan_to_num(c, nan=0.0)
            if atom[0] != "x" or not np.all(c == c[0]):
                return False
            sid = atom[1]
            node = self.program.node(sid) if sid in self.graph else None
            if (type(node) is not Aggregate or node.inputs[0] not in self.pos or sid in self.feats
                    or sid in self._rows or sid in self.deferred or sid in self.pos):
                return False
            terms.append((node, float(c[0])))
        if not terms:
            return False
        slot = max(self._head(node, target=nid, weight=w) for node, w in sorted(terms, key=lambda t: t[0].id))
        self.feats[nid] = Feat(nid, 1, slot, nid, "numerical", labels=[nid])
        self.map_reports.append({"node": nid, "kind": "map", "exact": True, "bound": 0.0,
                                 "interval": list(self.interval[nid]), "units": 0,
                                 "written_by_heads": sorted(node.id for node, _ in terms)})
        return True

    def _gate(self, c: np.ndarray, label: str) -> tuple[dict[str, float], float, list[str]]:
        c = np.nan_to_num(c, nan=0.0)
        if np.all(c == c[0]):
            return {}, float(c[0]), []
        f = self.embed(c, label)
        return {f: 1.0}, 0.0, [f]

    def _form_units(self, nid: str, form: Form) -> tuple[list[Unit], list[str]]:
        units: list[Unit] = []
        inputs: list[str] = []
        for atom, c in sorted(form.terms.items(), key=lambda t: repr(t[0])):
            if atom[0] == "one":
                wg, bg, extra = self._gate(c, f"{nid}.const")
                units.append(Unit({"one": 1.0}, 0.0, wg, bg, nid))
                inputs += extra
            elif atom[0] == "x":
                x = self.need(atom[1])
                wg, bg, extra = self._gate(c, f"{nid}.coef_{atom[1]}")
                units.append(Unit({x: 1.0}, 0.0, wg, bg, nid))
                units.append(Unit({x: -1.0}, 0.0, {k: -v for k, v in wg.items()}, -bg, nid))
                inputs += [x, *extra]
            elif atom[0] == "xx":
                a, b = self.need(atom[1]), self.need(atom[2])
                inputs += [a, b]
                cc = np.nan_to_num(c, nan=0.0)
                vals = np.unique(cc[cc != 0]).tolist()  # sorted, distinct, as Python floats
                ia = self._interval_any(atom[1])
                big = 2.0 * max(abs(ia[0]), abs(ia[1])) + 1.0
                for kappa in vals:
                    w_in: dict[str, float] = {a: 1.0}
                    w_neg: dict[str, float] = {a: -1.0}
                    if len(vals) > 1 or np.any(cc == 0):  # switch the unit off where c(p) != kappa
                        off = self.embed(np.where(cc == kappa, 0.0, -big), f"{nid}.on_{kappa:g}")
                        w_in[off] = 1.0
                        w_neg[off] = 1.0
                        inputs.append(off)
                    units.append(Unit(w_in, 0.0, {b: kappa}, 0.0, nid))
                    units.append(Unit(w_neg, 0.0, {b: -kappa}, 0.0, nid))
            elif atom[0] in ("step", "stepx"):
                units += self._step_units(nid, atom, c, inputs)
            else:
                lin: Lin = atom[1]
                w_in = {}
                for s, w in lin.terms:
                    feat = self.need(s)  # a position-only s-op is an embedded feature of another id
                    w_in[feat] = w_in.get(feat, 0.0) + w
                    inputs.append(feat)
                wg, bg, extra = self._gate(c, f"{nid}.coef_relu")
                units.append(Unit(w_in, lin.const, wg, bg, nid))
                inputs += extra
        return units, inputs

    def _step_units(self, nid: str, atom: tuple, c: np.ndarray, inputs: list[str]) -> list[Unit]:
        """c(p) [D > 0] (or c(p) [D > 0] v for ``stepx``) as two ramp units per distinct gate."""
        lin: Lin = atom[1]
        h = self.step_grid[lin]
        # [D > 0] = [D - t > 0] for D on the grid: ramps from t + h/4 to t + 3h/4, t = 0 or -h
        shift = np.zeros(self.n) if atom[2] else -h
        w_in: dict[str, float] = {}
        mag = abs(lin.const)
        for s, w in lin.terms:
            feat = self.need(s)
            w_in[feat] = w_in.get(feat, 0.0) + w
            inputs.append(feat)
            mag += abs(w) * max(abs(v) for v in self._interval_any(s))
        gate = np.nan_to_num(c, nan=0.0) * 2.0 / h
        value = self.need(atom[3]) if atom[0] == "stepx" else None
        if value is not None:
            inputs.append(value)
        units: list[Unit] = []
        for lo_frac, sign in ((0.25, 1.0), (0.75, -1.0)):
            thr = shift + lo_frac * h
            w, b = dict(w_in), float(lin.const)
            if np.all(thr == thr[0]):
                b -= float(thr[0])
            else:
                f = self.embed(-thr, f"{nid}.threshold")
                w[f] = 1.0
                inputs.append(f)
            if value is None:
                wg, bg, extra = self._gate(sign * gate, f"{nid}.step_gate")
                units.append(Unit(w, b, wg, bg, nid))
                inputs += extra
                continue
            kappas = sorted({float(k) for k in gate if k != 0})
            big = 2.0 * (mag + float(np.max(np.abs(thr)))) + 1.0
            for kappa in kappas:
                wk = dict(w)
                if len(kappas) > 1 or np.any(gate == 0):  # switched off where the gate is not kappa
                    off = self.embed(np.where(gate == kappa, 0.0, -big), f"{nid}.on_{kappa:g}")
                    wk[off] = 1.0
                    inputs.append(off)
                units.append(Unit(wk, b, {value: sign * kappa}, 0.0, nid))
        return units
