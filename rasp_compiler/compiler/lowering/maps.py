"""Maps: the MLP op of a positionwise function, fused over as much of its chain as fits.

``_map`` tries, in order: a linear map of numbers (no table), a column of the embedding (a
function of the token or of the index alone), the table over the whole frontier or over the
product of opaque maps' inputs, the program's output as two MLP parts (``_priority``), and the
frontiers between; last, the map reads its direct inputs, numbers turned into one-hots where one
hidden layer cannot combine them exactly.
"""

from __future__ import annotations

import math
from typing import Any

from rasp_compiler.compiler.analysis import SInfo
from rasp_compiler.compiler.lowering import limits
from rasp_compiler.compiler.lowering.ops import EmbedOp, MLPOp, is_bos_weight
from rasp_compiler.compiler.tables import priority_split
from rasp_compiler.compiler.values import value_key


class Maps:
    """Part of ``Lowering`` (``core``): the op of each map."""

    def _map(self, sid: str, info: SInfo) -> None:
        out_numeric = info.encoding == "numerical"
        linear = getattr(info, "linear", None)
        if linear is not None:  # w·x + c of numerical inputs: one unit per input, no table
            feats = [self.need(u) for u in info.inputs if self.an.info[u].base_kind != "const"]
            self._feature(sid, info, sid)
            op = MLPOp(sid, sid, sid, feats, [], info.pos, "map")
            w, c = linear
            for u, wj in zip(info.inputs, w, strict=False):
                if self.an.info[u].base_kind == "const":
                    c += wj * float(self.an.info[u].values[0])
            op.linear = ([float(wj) for u, wj in zip(info.inputs, w, strict=False)
                          if self.an.info[u].base_kind != "const"], float(c))  # type: ignore[attr-defined]
            self.ops[sid] = op
            return
        opaque = info.base_kind is not None
        if opaque and "affine" in info.notes:
            self._affine_map(sid, info)
            return
        choice: list[str] | None = None
        parts = None
        if not opaque:
            front = self.frontier(sid)
            if len(front) == 1 and self.an.info[front[0]].base_kind in ("token", "index"):
                # A function of the token alone (or of the position alone) is one more column of
                # the embedding table: no MLP, no layer.
                src = front[0]
                kind = "token_fn" if self.an.info[src].base_kind == "token" else "index_fn"
                node = self.an.node(src)
                self._feature(sid, info, sid if sid in self.an.graph else None)
                self.ops[sid] = EmbedOp(sid, sid, kind, token_type=getattr(node, "type", "str"),
                                        value={k[0]: v for k, v in self._rows(sid, front)})
                return
            fused = self._through_parts(sid, front, out_numeric) or \
                self._fused(sid, front, out_numeric, limits.MULTI_NUMERIC_CAP)
            if fused is not None:
                choice, rows, parts = fused
            if any(self.an.info[u].base_kind is not None and self.an.info[u].kind in ("map", "sequence_map")
                   for u in front) and parts is None:
                product = self._product_inputs(sid, info, front)  # see through the opaque map
                if product is not None:  # at most PRODUCT_CAP rows, and it never reads later s-ops
                    choice, rows = product
        if sid == self.an.program.output and self._priority(sid, info, choice, rows if choice else None):
            return
        if choice is None and not opaque:
            # fusing over the whole frontier saves the layers that reading the direct inputs, or a
            # partial frontier, would cost, so a larger table is worth enumerating.  That holds
            # where the frontier holds opaque maps too: they are computed before any of the maps
            # between them and this one (tracr's shuffle-Dyck-2 at max_len 20: `balance < 0` of
            # two balances took a layer of its own, 4 layers instead of 3)
            front = self.frontier(sid)
            holds_maps = any(self.an.info[u].kind in ("map", "sequence_map") for u in front)
            cap = limits.OPAQUE_FRONTIER_CAP if holds_maps else limits.MULTI_NUMERIC_LAST_CAP
            # in the compiler's plan with a wider domain cap (``compiler.plans``, wide tables), up to it
            wide = not holds_maps and (self.an.domain_cap or 0) > cap
            fused = self._fused(sid, front, out_numeric, self.an.domain_cap if wide else cap,
                                only_above=limits.MULTI_NUMERIC_CAP,
                                unit_cap=max(limits.UNIT_CAP, limits.WIDE_UNIT_CAP) if wide else None)
            if fused is not None:
                choice, rows, parts = fused
        if choice is None:
            product = self._product_inputs(sid, info)
            if product is not None:
                choice, rows = product
        if choice is None and not opaque:
            for inputs in self._partial_frontiers(sid):
                fused = self._fused(sid, inputs, out_numeric, limits.MULTI_NUMERIC_CAP)
                if fused is not None:
                    choice, rows, parts = fused
                    break
        if choice is None:
            direct = [u for u in info.inputs if self.an.info[u].base_kind != "const"]
            direct = sorted(set(direct))
            rows = self._rows(sid, direct)
            nums = [u for u in direct if self.an.info[u].encoding == "numerical"]
            if len(nums) >= 2 and self._units(direct, rows, out_numeric) is None:
                keep = max(nums, key=lambda u: (len(self.an.info[u].values), u))
                # the rows stand: the same values, now read one-hot
                direct = [u if (u == keep or u not in nums) else f"{u}:onehot" for u in direct]
                for u in nums:
                    if u != keep:
                        self.need_categorical(u)
            choice = direct
            units = self._units([u for u in choice], rows, out_numeric)
            if units is None:
                close = self._closest_values(choice, rows, out_numeric) if not any(
                    u.endswith(":onehot") for u in choice) else None
                if close is not None:  # no projection separates values this close in the dtype
                    u, a, b = close
                    raise self.an.error(sid, f"{self.an.describe(sid)} reads {u}, whose values {a!r} and "
                                        f"{b!r} differ only by float rounding: no layer of the model can "
                                        "tell them apart, but the map's answer depends on which it is",
                                        hint="round first (round(m * 10) == 1), or keep the values "
                                        "whole numbers (count instead of averaging 0.1s)")
            if units is None or units > 4 * limits.UNIT_CAP:
                raise self.an.error(sid, f"{self.an.describe(sid)} needs {units or 'unboundedly many'} "
                                    "hidden units", hint=self.an.pair_table_hint(sid) or (
                                        "shrink the value sets of its inputs (smaller vocabulary or "
                                        "--max-len) or split it into steps"), too_large=True)
        feats = [self.need(u) if not u.endswith(":onehot") else u for u in choice]
        self._feature(sid, info, sid if sid in self.an.graph else None)
        self.ops[sid] = self._with_shared(MLPOp(
            sid, sid if sid in self.an.graph else info.inputs[0], sid, feats, rows, info.pos,
            info.kind if info.kind in ("convert", "tuple") else "map"))
        if parts is not None:
            self.ops[sid].separable = parts  # type: ignore[attr-defined]

    def _fused(self, sid: str, front: list[str], out_numeric: bool, cap: int, only_above: int = -1,
               unit_cap: int | None = None) -> tuple[list[str], list[tuple[tuple, Any]], Any] | None:
        """The map fused over its frontier: (inputs, rows, separable parts or None), or None when
        that needs more units than ``unit_cap`` (default UNIT_CAP), or when it reads two or more
        numbers whose joint assignments number more than ``cap`` (or at most ``only_above``: that
        size was tried already)."""
        unit_cap = unit_cap or limits.UNIT_CAP
        n_num = sum(self.an.info[u].encoding == "numerical" for u in front)
        if n_num >= 2:
            size = self.an.domain_size(tuple(sorted({b for u in front for b in self.an.info[u].bases})))
            if size > cap or size <= only_above:
                return None
        elif only_above >= 0:
            return None
        rows = self._rows(sid, front)
        units = self._units(front, rows, out_numeric)
        sep = self._separable(front, rows) if out_numeric and len(front) >= 2 else None
        if sep is not None and sep[0] <= unit_cap and (units is None or sep[0] < units):
            return front, rows, sep[1]  # y = c + sum_j g_j(x_j): O(values) units
        if units is not None and units <= unit_cap:
            return front, rows, None
        return None

    def _product_inputs(self, sid: str, info: SInfo, start: list[str] | None = None
                        ) -> tuple[list[str], list[tuple[tuple, Any]]] | None:
        """When the fused table over the frontier is too large to enumerate jointly, fuse through
        opaque categorical maps anyway over the *product* of their inputs' value sets (an
        over-approximation of the combinations that occur, so still exact), while that product
        stays within PRODUCT_CAP.  dyck2's `indicator(bad)` at max_len 64 then reads (depth < 0,
        opener, tokens) — 50 rows — instead of computing `matched`, `bad` and the indicator in three
        MLP sublayers of their own."""
        an = self.an

        def size(sids: set[str]) -> int:
            return math.prod(len(an.info[u].values) for u in sids)

        direct = set(start) if start is not None else {u for u in info.inputs
                                                         if an.info[u].base_kind != "const"}
        leaves = set(direct)
        grown = True
        while grown:
            grown = False
            for x in sorted(leaves):
                xi = an.info[x]
                if xi.kind not in ("map", "sequence_map") or xi.fn is None or getattr(xi, "linear", None):
                    continue
                # an opaque map is replaced by its direct inputs, a fusable one by its frontier
                sub = ({u for u in xi.inputs if an.info[u].base_kind != "const"}
                       if xi.base_kind is not None else set(self.frontier(x)))
                if not sub or any(an.info[u].encoding != "categorical" or is_bos_weight(u)
                                  for u in sub):
                    continue
                bigger = (leaves - {x}) | sub
                if size(bigger) <= limits.PRODUCT_CAP:
                    leaves, grown = bigger, True
                    break
        if leaves == direct or any(an.info[u].encoding != "categorical" for u in leaves):
            return None
        order = sorted(leaves)

        import itertools
        possible = {value_key(v) for v in info.values}
        rows = []
        for combo in itertools.product(*(an.info[u].values for u in order)):
            try:
                y = _value_given(an.info, sid, dict(zip(order, combo, strict=True)))
            except Exception:  # the interpreter raises on this combination, so it cannot occur
                continue
            # a value outside the analysed (over-approximated) value set: the combination cannot
            # occur either, and the output has no dimension for it (random program seed 40910)
            if value_key(y) in possible:
                rows.append((combo, y))
        return order, rows

    def _priority(self, sid: str, info: SInfo, fused: list[str] | None = None,
                  fused_rows: list[tuple[tuple, Any]] | None = None) -> bool:
        """The program's output ``y = X if C(u) else h(v)`` over two direct inputs u, v (dyck1's
        and dyck2's last line): one MLP writes ``2·[C(u)]`` into X's output dimension and the
        one-hot of h(v) beside it, each part fused over its own frontier, and the unembedding's
        argmax reads X when C holds (2 against at most 1) and h(v) otherwise (1 against 0).  The
        residual then holds scores, not a one-hot, which is why only the output (read by nothing
        but the unembedding) may do this.  Where the fused table is too large for one MLP it saves
        the layer that computing C(u) and h(v) first would cost; where the table over ``fused``
        fits, the parts are taken only if they read nothing outside it (the same layers) and need
        fewer hidden units (dyck1_ptf at max_len 8: 982 units as one table, 22 as two parts)."""
        direct = sorted({u for u in info.inputs if self.an.info[u].base_kind != "const"})
        if len(direct) != 2 or info.encoding != "categorical":
            return False
        rows = self._rows(sid, direct)
        for k in (0, 1):
            found = priority_split(rows, k)
            if found is None:
                continue
            x_value, overriding, rest = found
            u, v = direct[k], direct[1 - k]
            part_u = self._lift(u, lambda val, s=overriding: 2.0 if value_key(val) in s else 0.0, True)
            part_v = self._lift(v, lambda val, r=rest, x=x_value: r.get(value_key(val), x), False)
            if part_u is None or part_v is None:
                continue
            if fused is not None:
                held = set(fused)
                if any(not set(inputs) <= held for inputs, _ in (part_u, part_v)):
                    continue
                cost = sum(self._units(inputs, prow, numeric) or 0
                           for (inputs, prow), numeric in ((part_u, True), (part_v, False)))
                if cost >= (self._units(fused, fused_rows or [], False) or 0):
                    continue
            self._feature(sid, info, sid)
            subs = []
            for tag, (inputs, prow) in (("override", part_u), ("rest", part_v)):
                feats = [self.need(i) for i in inputs]
                sub = self._with_shared(MLPOp(f"{sid}#{tag}", sid, sid, feats, prow, info.pos, "map"))
                subs.append(sub)
            subs[0].override = x_value  # type: ignore[attr-defined]
            feats = sorted({f for sub in subs for f in sub.inputs})
            op = MLPOp(sid, sid, sid, feats, [], info.pos, "priority")
            op.parts = subs  # type: ignore[attr-defined]
            self.ops[sid] = op
            return True
        return False

    def _lift(self, x: str, g: Any, out_numeric: bool) -> tuple[list[str], list[tuple[tuple, Any]]] | None:
        """``g(x)`` as a table over x's frontier (x's own feature if x is not a fusable map)."""
        xi = self.an.info[x]
        if xi.kind in ("map", "sequence_map") and xi.base_kind is None:
            inputs = self.frontier(x)
            rows = [(args, g(val)) for args, val in self._rows(x, inputs)]
            units = self._units(inputs, rows, out_numeric)
            if units is not None and units <= limits.UNIT_CAP:
                return inputs, rows
        rows = [((val,), g(val)) for val in xi.values]
        units = self._units([x], rows, out_numeric)
        return ([x], rows) if units is not None and units <= limits.UNIT_CAP else None

    def _closest_values(self, inputs: list[str], rows: list, out_numeric: bool = True
                        ) -> tuple[str, float, float] | None:
        """A numerical input and two of its values closer than float32 resolves (a relative gap
        under 1e-6) on which the map's rows give different answers; None when there are none.
        A categorical output keeps answers that differ only by float rounding apart (two values
        of its one-hot), so for it they count as different."""
        for j, u in enumerate(inputs):
            if self.an.info[u].encoding != "numerical":
                continue
            by_rest: dict[tuple, list[tuple[float, Any]]] = {}
            for args, y in rows:
                if isinstance(args[j], (int, float)):
                    rest = tuple(map(repr, args[:j] + args[j + 1:]))
                    by_rest.setdefault(rest, []).append((float(args[j]), y))
            for pts in by_rest.values():
                pts.sort(key=lambda p: p[0])
                for (a, ya), (b, yb) in zip(pts, pts[1:], strict=False):
                    if b - a < 1e-6 * max(1.0, abs(a), abs(b)) and (
                            _differ(ya, yb) if out_numeric else (ya, type(ya)) != (yb, type(yb))):
                        return u, a, b
        return None


def _value_given(info: dict[str, SInfo], x: str, held: dict[str, Any]) -> Any:
    """``x``'s value given the values ``held`` of the s-ops it is computed from (filled in as
    they are computed).  (A module function, not a recursive closure: a closure that calls itself
    is a reference cycle, which would hold the analysis until the cyclic collector ran.)"""
    if x in held:
        return held[x]
    xi = info[x]
    if xi.base_kind == "const":
        return xi.values[0]
    held[x] = xi.fn(*(_value_given(info, u, held) for u in xi.inputs))  # type: ignore[misc]
    return held[x]


def _differ(a: Any, b: Any) -> bool:
    """Whether two outputs of a map differ by more than float rounding (numbers) or at all."""
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    if numbers:
        return abs(a - b) > 1e-6 * max(1.0, abs(a), abs(b))
    return a != b
