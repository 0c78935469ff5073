"""A map's rows over a set of input features, and the hidden units they cost.

A map reads its *frontier*, the nearest non-map s-ops, so a chain of maps costs one MLP; its rows
are the analysis's joint values of those inputs with the map's value.  ``_units`` is what one
hidden ReLU layer needs for them (None when it cannot compute them exactly at the dtype), and
``_separable`` finds a table that is a sum of functions of one input each.
"""

from __future__ import annotations

from typing import Any

from rasp_compiler.compiler.lowering.ops import MLPOp, is_bos_weight
from rasp_compiler.compiler.numeric import (
    group_points,
    plan_units,
    projection,
    shared_projected_steps,
    shared_steps,
    step_groups,
    step_units,
)
from rasp_compiler.compiler.tables import affine, separable


class MapRows:
    """Part of ``Lowering`` (``core``): frontiers, rows and unit counts of maps."""

    def frontier(self, sid: str) -> list[str]:
        if sid in self._frontiers:
            return self._frontiers[sid]
        out: set[str] = set()
        for u in self.an.info[sid].inputs:
            ui = self.an.info[u]
            if ui.base_kind == "const":
                continue
            if ui.kind in ("map", "sequence_map") and ui.base_kind is None:
                out |= set(self.frontier(u))
            elif ui.kind == "selector_width" and self._width_parts(u) is not None:
                out.add(u)  # a width of two heads: read the decoded sum
            elif ui.kind in ("selector_width", "length"):
                out.add(self.scratch(u))  # read the head's BOS weight directly: no decode layer
            else:
                out.add(u)
        self._frontiers[sid] = sorted(out)
        return self._frontiers[sid]

    def _partial_frontiers(self, sid: str) -> list[list[str]]:
        """The input sets between the direct inputs and the whole frontier, deepest first: the
        direct inputs with maps expanded into their own inputs k times (k = depth-1 .. 1).  When
        the whole frontier cannot be fused, a chain of maps then still costs one MLP, not one per
        map (the paper's sort by frequency: ``-filtered_freq`` beside ``filtered_freq``)."""
        an = self.an
        full = set(self.frontier(sid))
        level = sorted({u for u in an.info[sid].inputs if an.info[u].base_kind != "const"})
        cuts = []
        while True:
            grown: set[str] = set()
            for u in level:
                ui = an.info[u]
                if ui.kind in ("map", "sequence_map") and ui.base_kind is None:
                    grown |= {x for x in ui.inputs if an.info[x].base_kind != "const"}
                else:
                    grown.add(u)
            if grown == set(level) or grown == full:
                break
            level = sorted(grown)
            cuts.append(level)
        return cuts[::-1]

    def _rows(self, sid: str, inputs: list[str]) -> list[tuple[tuple, Any]]:
        info = self.an.info[sid]
        if info.base_kind is not None:  # an opaque map: tabulate on its direct inputs' values
            import itertools
            if "independent" in info.notes:
                seen: dict[tuple, None] = {}
                for ctx in self.an.ctx_all:
                    for combo in itertools.product(*(self.an.ctx_values(i, ctx) for i in inputs)):
                        seen[combo] = None
                combos = list(seen)
            elif info.base_kind == "cond":
                combos = self.an.joint(inputs)
            else:
                combos = list(itertools.product(*(self.an.info[i].values for i in inputs)))
            rows = []
            fn = info.fn
            consts = {u: self.an.info[u].values[0] for u in info.inputs
                      if self.an.info[u].base_kind == "const"}
            for combo in combos:
                # ``inputs`` are in feature order; the function takes the node's argument order
                held = dict(zip(inputs, combo, strict=True))
                args = tuple(held[u] if u in held else consts[u] for u in info.inputs)
                try:
                    rows.append((tuple(combo), fn(*args)))  # type: ignore[misc]
                except Exception:
                    continue
            return rows
        rows = self.an.table_rows(inputs, sid)
        if rows is not None:
            return rows
        return [(tuple(r[:-1]), r[-1]) for r in self.an.joint(inputs, sid)]

    def mlp_units(self, inputs: list[str], rows: list[tuple[tuple, Any]], out_numeric: bool) -> int | None:
        """Hidden units an MLP reading ``inputs`` needs for ``rows``; None if one hidden layer
        cannot compute it exactly at this precision (see ``numeric.projection``)."""
        return self._units(inputs, rows, out_numeric)

    def _units(self, inputs: list[str], rows: list[tuple[tuple, Any]], out_numeric: bool) -> int | None:
        """Hidden units the MLP would need; None if one hidden layer cannot compute it exactly
        at this precision (see ``numeric.projection``).  Counted once per list of rows: the size
        guard (``assemble._check_size``) asks again for every MLP, and a table of 374,656 rows
        took 4 s to count."""
        key = (id(rows), tuple(inputs), out_numeric)
        held = self._unit_counts.get(key)
        if held is not None and held[0] is rows:
            return held[1]
        total = self._count_units(inputs, rows, out_numeric)
        self._unit_counts[key] = (rows, total)  # holding the rows keeps their id unique
        return total

    def _count_units(self, inputs: list[str], rows: list[tuple[tuple, Any]], out_numeric: bool) -> int | None:
        num = [k for k, i in enumerate(inputs) if self.an.info[i].encoding == "numerical"]
        if not num:
            return len(rows)
        all_numbers = len(num) >= 2 and len(num) == len(inputs) and out_numeric
        if all_numbers and affine(rows) is not None:
            return len(num)
        mags = [max((abs(float(v)) for v in self.an.info[inputs[j]].values), default=0.0) for j in num]
        relative = [is_bos_weight(inputs[j]) for j in num]
        groups = group_points(rows, num)
        plan = step_groups(groups, mags, self.an.dtype, relative)
        total = None if plan is None else plan_units(plan)
        if plan is not None:  # the assembly's step MLP of these rows (``_with_shared``)
            key = (id(rows), tuple(inputs))
            held = self._step_plans.get(key)
            # whether these rows were found not affine, here or on an earlier count of the same
            # rows: the assembly need not sort them to fit them again (``blocks.mlp_weights``)
            not_affine = all_numbers or (held is not None and held[0] is rows and held[3])
            self._step_plans[key] = (rows, num, plan, not_affine)
        if total is not None and len(num) == 1 and len(inputs) > 1 and not out_numeric:
            shared = shared_steps(groups)
            if shared is not None and shared.units() < total:
                # the MLP op made from these rows shares its steps (see ``_with_shared``)
                self._shared[id(rows)] = (rows, shared)
                total = shared.units()
        elif total is not None and len(num) >= 2 and len(inputs) > len(num) and not out_numeric \
                and total > 3 * len(groups):
            # shared steps still pay a constant unit per group: where the steps one by one cost
            # no more than three units a group (sort_bos's gated pairs: 130 for 64), skip the
            # attempt, which reads every point (137,280 there) in Python
            got = shared_projected_steps(groups, mags, self.an.dtype)
            if got is not None:
                shared, coef, rest = got
                rest_units = step_units(rest, mags, self.an.dtype, relative) if rest else 0
                if rest_units is not None and shared.units() + rest_units < total:
                    shared.coef = coef  # type: ignore[attr-defined]
                    shared.rest = set(rest)  # type: ignore[attr-defined]
                    self._shared[id(rows)] = (rows, shared)
                    total = shared.units() + rest_units
        return total

    def _with_shared(self, op: MLPOp) -> MLPOp:
        """``op``, marked to share its steps where ``_units`` found that cheaper for its rows, and
        given the step MLP's groups and projections that ``_units`` found for its rows (read
        by ``blocks._step_mlp`` instead of finding them again)."""
        held = self._shared.get(id(op.rows))
        if held is not None and held[0] is op.rows:
            op.shared_steps = held[1]  # type: ignore[attr-defined]
        plan = self._step_plans.get((id(op.rows), tuple(op.inputs)))
        if plan is not None and plan[0] is op.rows:
            op.step_plan = plan[1:3]  # type: ignore[attr-defined]
            op.not_affine = plan[3]  # type: ignore[attr-defined]
        return op

    def _separable(self, inputs: list[str], rows: list[tuple[tuple, Any]]) -> tuple[int, Any] | None:
        """(hidden units, (parts, constant)) when the table is a sum of univariate parts (see
        ``separable``): steps on each numerical input, one unit per categorical input."""
        got = separable(rows, len(inputs))
        if got is None:
            return None
        parts, _ = got
        units = 0
        for j, u in enumerate(inputs):
            g = parts[j]
            if self.an.info[u].encoding == "numerical":
                pts = [((float(g[k][0]),), g[k][1]) for k in sorted(g)]
                vals = [v for _, v in pts]
                units += 2 * sum(1 for a, b in zip(vals, vals[1:], strict=False) if a != b)
                mag = max(abs(x[0]) for x, _ in pts)
                if self.an.info[u].kind != "width_scratch" and projection(pts, [mag], self.an.dtype) is None:
                    return None  # its values are too close together to step between at this dtype
            elif any(v != 0.0 for _, v in g.values()):
                units += 1
        return units, got
