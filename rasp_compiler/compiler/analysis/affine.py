"""Positional affine maps: integer ``a·index + b·length + c``, exact at every length.

Such a map (``length - indices - 1``) is recognised from its expression, and past DOMAIN_CAP
(index, length) pairs it needs no table: a conditional base computes its value at each pair on
demand, and the lowering builds it from the index and the length head without a table.  The
length may be tracr's ``selector_width(select(1, 1, ==))`` (``length_like``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Iterator

import numpy as np

from rasp_compiler.compiler.analysis import limits
from rasp_compiler.compiler.analysis.sinfo import SInfo
from rasp_compiler.compiler.values import sorted_values
from rasp_compiler.graph.expr import Binary, Const, Unary, Var
from rasp_compiler.graph.nodes import Node, SelectorWidth


class PositionalAffine:
    """Part of ``Analysis`` (``core``): recognising and representing positional affine maps."""

    def _positional_affine(self, node: Node, call: Callable[..., Any]) -> tuple[int, int, int] | None:
        """(a, b, c) when the map is ``a·index + b·length + c`` with integers a, b and c: its
        expression is a sum of integer multiples of the index, the length, integer constants and
        maps of that form (``length - indices - 1``).  Python's integer arithmetic is exact, so
        this is the value the interpreter computes at every position (checked here on a few
        positions too).  Only a map of both (a and b nonzero) past DOMAIN_CAP skips the table."""
        form = _int_affine(getattr(node, "fn", None), len(node.inputs))
        if form is None:
            return None
        w, c = form
        a = b = 0
        for u, wu in zip(node.inputs, w, strict=True):
            ui = self.info[u]
            if ui.base_kind == "index":
                pa = (1, 0, 0)
            elif self.length_like(u):
                pa = (0, 1, 0)
            elif ui.base_kind == "const" and type(ui.values[0]) is int:
                pa = (0, 0, ui.values[0])
            else:
                pa = ui.posaff
                if pa is None:
                    return None
            a, b, c = a + wu * pa[0], b + wu * pa[1], c + wu * pa[2]
        top = max(self.lengths)
        for i, n in ((0, 1), (1, 2), (0, top), (top // 2, top), (top - 1, top)):
            if not (0 <= i < n and n in self.lengths):
                continue
            args = []
            for u in node.inputs:
                ui = self.info[u]
                pa = (1, 0, 0) if ui.base_kind == "index" else (0, 1, 0) if self.length_like(u) else \
                    ((0, 0, ui.values[0]) if ui.base_kind == "const" else ui.posaff)  # type: ignore[misc]
                args.append(pa[0] * i + pa[1] * n + pa[2])
            try:
                got = call(*args)
            except Exception:
                return None
            if type(got) is not int or got != a * i + b * n + c:
                return None
        return a, b, c

    def length_like(self, sid: str) -> bool:
        """Whether ``sid`` is the length: the built-in one, or the width of a selector that selects
        every key for every query (tracr's ``selector_width(select(1, 1, ==))``)."""
        info = self.info[sid]
        if info.base_kind == "length":
            return True
        if info.base_kind != "cond" or sid not in self.graph or not isinstance(self.node(sid), SelectorWidth):
            return False
        if sid not in self._length_like:
            w = self.widths(self.node(sid).inputs[0])
            self._length_like[sid] = w is not None and len(w) == len(self.ctx_all) and all(
                v == n for (_, n), v in w.items())
        return self._length_like[sid]

    def pair_table_hint(self, sid: str) -> str | None:
        """What to change when ``sid`` is a map of both the index and the length that was too large
        to tabulate (more (index, length) pairs than DOMAIN_CAP), so that it costs a table (or a
        one-hot of the length) per pair; None for any other s-op."""
        info = self.info.get(sid)
        if info is None or "opaque" not in info.notes or "affine" in info.notes or \
                info.kind not in ("map", "sequence_map"):
            return None
        kinds: set[str] = set()
        todo, seen = list(info.inputs), set()
        while todo:
            u = todo.pop()
            if u in seen or u not in self.info:
                continue
            seen.add(u)
            ui = self.info[u]
            if ui.posaff is not None:
                kinds |= {"index", "length"}
            elif ui.base_kind == "index" or self.length_like(u):
                kinds.add(ui.base_kind if ui.base_kind == "index" else "length")
            elif ui.base_kind is None:  # tabulated over its bases
                kinds |= {self.info[b].base_kind for b in ui.bases} - {"const"}
            elif "opaque" in ui.notes and ui.kind in ("map", "sequence_map"):
                todo.extend(ui.inputs)
            elif ui.base_kind != "const":  # tokens, or an aggregate: not what made it too large
                kinds.add("other")
        if kinds != {"index", "length"} or len(self.ctx_all) <= limits.DOMAIN_CAP:
            return None
        top = int((np.sqrt(1 + 8 * limits.DOMAIN_CAP) - 1) // 2)
        return (f"{self.describe(sid)} is a function of the index and the length, and --max-len "
                f"{max(self.lengths)} has {len(self.ctx_all):,} (index, length) pairs, more than the "
                f"{limits.DOMAIN_CAP:,} the compiler tabulates (up to --max-len {top}): use a smaller "
                "--max-len, or write it as a sum of integer multiples of indices and length plus a "
                "constant (such as length - indices - 1), which needs no table at any length")

    def _ctx_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The index and the length of every context of ``ctx_all``, as arrays."""
        if not hasattr(self, "_ctx_arr"):
            arr = np.array(self.ctx_all, dtype=np.int64).reshape(-1, 2)
            self._ctx_arr = (arr[:, 0], arr[:, 1])
        return self._ctx_arr

    def _affine_base(self, node: Node, call: Callable[..., Any], encoding: str,
                     posaff: tuple[int, int, int]) -> SInfo:
        """A map ``a·index + b·length + c`` over more (index, length) pairs than DOMAIN_CAP: a
        conditional base whose value at each pair is computed on demand (no table), with
        ``posaff`` for the lowering, which builds it from the length head's BOS weight and the
        index without a table (``Lowering._affine_number``)."""
        a, b, c = posaff
        ii, nn = self._ctx_arrays()
        values = sorted_values(int(v) for v in np.unique(a * ii + b * nn + c))
        return SInfo(node.id, node.kind, encoding, values, (node.id,), {(v,): v for v in values},
                     base_kind="cond", cond=_AffineCond(posaff, self.ctx_all), pos=node.pos,
                     inputs=node.inputs, fn=call, notes=["opaque", "affine"])


class _AffineCond(Mapping):
    """The per-(index, length) values of ``a·index + b·length + c`` (``Analysis._affine_base``),
    computed on lookup.  A value's list is one object wherever it occurs, so contexts with the
    same value have the same choices (``Analysis._contexts`` compares the lists by identity)."""

    def __init__(self, posaff: tuple[int, int, int], ctx_all: list[tuple[int, int]]) -> None:
        self.posaff = posaff
        self._ctx_all = ctx_all
        self._lists: dict[int, list[int]] = {}

    def __getitem__(self, ctx: tuple[int, int]) -> list[int]:
        i, n = ctx
        if not (isinstance(i, int) and isinstance(n, int) and 0 <= i < n):
            raise KeyError(ctx)
        a, b, c = self.posaff
        v = a * i + b * n + c
        got = self._lists.get(v)
        if got is None:
            got = self._lists[v] = [v]
        return got

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(self._ctx_all)

    def __len__(self) -> int:
        return len(self._ctx_all)


def _int_affine(expr: Any, arity: int) -> tuple[list[int], int] | None:
    """(w, c) with ``expr`` = sum_j w_j·x_j + c, all integers, built from inputs, integer constants
    (not booleans), unary + and -, + and -, and * by a constant; else None (division, floats,
    comparisons, lookups)."""
    if isinstance(expr, Var):
        w = [0] * arity
        w[expr.index] = 1
        return w, 0
    if isinstance(expr, Const):
        return ([0] * arity, expr.value) if type(expr.value) is int else None
    if isinstance(expr, Unary) and expr.op in ("-", "+"):
        inner = _int_affine(expr.arg, arity)
        if inner is None or expr.op == "+":
            return inner
        return [-x for x in inner[0]], -inner[1]
    if isinstance(expr, Binary) and expr.op in ("+", "-", "*"):
        left, right = _int_affine(expr.left, arity), _int_affine(expr.right, arity)
        if left is None or right is None:
            return None
        if expr.op == "+":
            return [x + y for x, y in zip(left[0], right[0], strict=True)], left[1] + right[1]
        if expr.op == "-":
            return [x - y for x, y in zip(left[0], right[0], strict=True)], left[1] - right[1]
        if not any(right[0]):
            return [x * right[1] for x in left[0]], left[1] * right[1]
        if not any(left[0]):
            return [x * left[1] for x in right[0]], right[1] * left[1]
    return None
