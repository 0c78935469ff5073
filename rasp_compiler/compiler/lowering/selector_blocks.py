"""Selector blocks: a selector's additive score blocks, and the features each block reads.

Each conjunct of the selector's formula scores a block over a query side and a key side.  A side
of one s-op reads its one-hot, or a map onto its classes of values that select alike
(``_quotient``); a side of several reads the one-hot of their tuple (``_side``), after atoms
that compare an s-op with a constant are narrowed to a truth value (``_narrowed``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rasp_compiler.compiler import selectors as sl
from rasp_compiler.compiler.lowering import limits
from rasp_compiler.compiler.lowering.ops import ONE, Block
from rasp_compiler.compiler.values import label, value_key


class SelectorBlocks:
    """Part of ``Lowering`` (``core``): score blocks of selectors."""

    def blocks(self, sel_id: str, formula: sl.Formula | None = None) -> list[Block]:
        """Additive score blocks of a selector (see ``selectors``), or of part of it."""
        an = self.an
        groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[sl.Formula]] = {}
        for c in sl.conjuncts(formula if formula is not None else an.formula(sel_id)):
            c = self._narrowed(c, sel_id)
            ats = sl.atoms(c)
            ks = tuple(sorted({a.key for a in ats if an.info[a.key].base_kind != "const"}))
            qs = tuple(sorted({a.query for a in ats if an.info[a.query].base_kind != "const"}))
            groups.setdefault((ks, qs), []).append(c)
        out = []
        for (ks, qs), conj in sorted(groups.items()):
            # one s-op on a side: its one-hot (or a quotient of it) is made once the table is known
            kfeat, kassign = self._side(ks, sel_id) if len(ks) != 1 else \
                ("", [{ks[0]: v} for v in an.info[ks[0]].values])
            qfeat, qassign = self._side(qs, sel_id) if len(qs) != 1 else \
                ("", [{qs[0]: v} for v in an.info[qs[0]].values])
            # the table's size before any of it is built: a 30,000-token vocabulary made it
            # (9 * 10^8 cells) in 89 s and 1.9 GB before this refused it
            if len(qassign) * len(kassign) > limits.MAX_BLOCK:
                qname = qfeat or " and ".join(qs) or "a constant"
                kname = kfeat or " and ".join(ks) or "a constant"
                raise an.error(sel_id, f"this selector compares {qname} ({len(qassign):,} values) with "
                               f"{kname} ({len(kassign):,} values) in one attention score: a "
                               f"{len(qassign):,} x {len(kassign):,} table, too large to compile",
                               hint="a selector combining several s-ops with `or` needs a one-hot over "
                                    "their joint values: compare fewer s-ops at once, give them fewer "
                                    "possible values (a smaller --vocab), or use a smaller --max-len")
            mats: dict[sl.Atom, np.ndarray] = {}
            for c in conj:
                for a in sl.atoms(c):
                    if a in mats:
                        continue
                    kvals = an.info[a.key].values
                    qvals = an.info[a.query].values
                    small = an.atom_rows(a, qvals, kvals)
                    # each value's first index, as list.index gives it, found once (not a scan per row)
                    kpos = {v: i for i, v in reversed(list(enumerate(kvals)))}
                    qpos = {v: i for i, v in reversed(list(enumerate(qvals)))}
                    kidx = np.array([kpos[d[a.key]] if a.key in d else 0 for d in kassign], dtype=int)
                    qidx = np.array([qpos[d[a.query]] if a.query in d else 0 for d in qassign], dtype=int)
                    mats[a] = small[qidx[:, None], kidx[None, :]]
            matrix = np.ones((len(qassign), len(kassign)), dtype=bool)
            for c in conj:
                matrix &= sl.evaluate(c, mats)
            if matrix.all():
                continue  # always true: contributes nothing
            if len(ks) == 1:
                kfeat, matrix = self._quotient(ks[0], matrix.T, sel_id)
                matrix = matrix.T
            if len(qs) == 1:
                qfeat, matrix = self._quotient(qs[0], matrix, sel_id)
            out.append(Block(qfeat, kfeat, matrix))
        return out

    def _quotient(self, sid: str, matrix: np.ndarray, sel_id: str) -> tuple[str, np.ndarray]:
        """The one-hot feature a score block reads for ``sid`` (rows of ``matrix``: its values),
        and the block over it: ``sid``'s own one-hot, or a map of ``sid`` onto one representative
        per class of values that select alike (equal rows), when that saves at least half of the
        one-hot.  In ``select(indices + length - plus_at, indices, ==)``, with ``plus_at`` a mean
        of indices, the key holds hundreds of fractions that match no query: one class, instead of
        one dimension each."""
        n = matrix.shape[0]
        if n < limits.QUOTIENT_MIN or self.an.info[sid].base_kind == "const":
            return self.need_categorical(sid), matrix
        first, classes = row_classes(matrix)
        if 2 * len(first) > n:
            return self.need_categorical(sid), matrix
        values = self.an.info[sid].values
        # one map per partition: blocks of one selector (or the parts of a split width) may
        # class the same s-op differently
        qid = self._quotients.get((sid, classes))
        if qid is None:
            qid = f"{sid}~{sel_id}"
            k = 1
            while qid in self.an.info:
                k += 1
                qid = f"{sid}~{sel_id}_{k}"
            self._quotients[(sid, classes)] = qid
            rep = {value_key(v): values[first[c]] for v, c in zip(values, classes, strict=True)}
            pos = self.an.node(sel_id).pos
            self.an.info[qid] = self.an.map_info(qid, "map", (sid,), lambda v: rep[value_key(v)],
                                                 "categorical", pos)
        self.need(qid)
        index = {value_key(v): i for i, v in enumerate(values)}
        rows = [index[value_key(v)] for v in self.features[qid].values]
        return qid, matrix[rows]

    def _narrowed(self, c: sl.Formula, sel_id: str) -> sl.Formula:
        """The conjunct ``c`` with the atoms that compare an s-op with a constant (e.g.
        ``select(indices, 0, ==)``) rewritten over that comparison's truth value, where ``c``
        reads several s-ops on that side and this s-op only in such atoms.  The product one-hot
        then holds (truth values, other s-ops): the original paper's hand-made BOS,
        ``s or select(indices, 0, ==)`` with ``s = select(tokens, tokens, ==)``, needs 2·|vocab|
        values instead of max_len·|vocab|."""
        an = self.an
        ats = sl.atoms(c)

        def const(x: str) -> bool:
            return an.info[x].base_kind == "const"

        def narrowable(side: str, other: str) -> set[str]:
            """The s-ops on ``side`` ("key" / "query") read only against constants, by fewer atoms
            than it takes to tell their values apart."""
            sids = {getattr(a, side) for a in ats if not const(getattr(a, side))}
            if len(sids) < 2:
                return set()
            out = set()
            for x in sids:
                mine = [a for a in ats if getattr(a, side) == x]
                if all(const(getattr(a, other)) for a in mine) and 2 ** len(mine) < len(an.info[x].values):
                    out.add(x)
            return out
        keys, queries = narrowable("key", "query"), narrowable("query", "key")
        if not keys and not queries:
            return c

        def narrow(a: sl.Atom) -> sl.Formula:
            # a Python predicate has no operator text: name it by its select, which is unique
            op = a.op if a.fn is None else f" {a.select} "
            if a.key in keys:
                c_ = an.info[a.query].values[0]
                pred = self._predicate(a.key, f"{op}{label(c_)}", sel_id,
                                       lambda v: an.holds(a, v, c_))
                return sl.Atom(a.select, pred, self._true(), "==", a.negated)
            if a.query in queries:
                c_ = an.info[a.key].values[0]
                pred = self._predicate(a.query, f"{label(c_)}{op}", sel_id,
                                       lambda v: an.holds(a, c_, v))
                return sl.Atom(a.select, self._true(), pred, "==", a.negated)
            return a
        return sl.substitute(c, narrow)

    def _predicate(self, sid: str, text: str, sel_id: str, fn: Any) -> str:
        """A boolean map of ``sid`` (fused into whatever reads it, like any map)."""
        pid = f"[{sid}{text}]"
        if pid not in self.an.info:
            pos = self.an.node(sel_id).pos
            self.an.info[pid] = self.an.map_info(pid, "map", (sid,), fn, "categorical", pos)
        return pid

    def _true(self) -> str:
        if "const:True" not in self.an.info:
            self.an.info["const:True"] = self.an._const("const:True", "constant", True, None, "categorical")
        return "const:True"

    def _side(self, sids: tuple[str, ...], sel_id: str) -> tuple[str, list[dict]]:
        if not sids:
            return ONE, [{}]
        if len(sids) == 1:
            fid = self.need_categorical(sids[0])
            return fid, [{sids[0]: v} for v in self.features[fid].values]
        tid = "(" + ",".join(sids) + ")"
        if tid not in self.an.info:
            bound = min(math.prod(len(self.an.info[u].values) for u in sids),
                        self.an.domain_size(tuple(sorted({b for u in sids for b in self.an.info[u].bases}))))
            if bound > limits.MAX_TUPLE:  # refuse before tabulating it (that alone can take gigabytes)
                listing = " and ".join(f"{self.an.describe(u)} ({len(self.an.info[u].values):,} values)"
                                       for u in sids)
                raise self.an.error(sel_id, f"this selector needs a one-hot over the joint values of "
                                    f"{listing}: up to {bound:,} combinations, too many to compile",
                                    hint="compare fewer s-ops at once with `or`, give them fewer "
                                         "possible values, or use a smaller --max-len")
            pos = self.an.node(sel_id).pos
            self.an.info[tid] = self.an.map_info(tid, "tuple", sids, lambda *a: tuple(a), "categorical", pos)
        self.need(tid)
        return tid, [dict(zip(sids, v, strict=False)) for v in self.features[tid].values]


def row_classes(matrix: np.ndarray) -> tuple[list[int], tuple[int, ...]]:
    """``np.unique(matrix, axis=0, return_index=True, return_inverse=True)``'s index of each
    distinct row's first occurrence and each row's class, its distinct row's rank in sorted
    order.  A boolean matrix's rows are compared as their bytes (0 and 1, so in the same order
    as NumPy's field by field): ``np.unique`` along an axis costs far more on the small
    matrices of score blocks (docs/compiler-results.md, issue 50's small compiles)."""
    if matrix.dtype != np.bool_ or matrix.ndim != 2:
        _, first, cls = np.unique(matrix, axis=0, return_index=True, return_inverse=True)
        return first.tolist(), tuple(cls.ravel().tolist())
    keys = [row.tobytes() for row in np.ascontiguousarray(matrix)]
    first_at: dict[bytes, int] = {}
    for i, key in enumerate(keys):
        first_at.setdefault(key, i)
    distinct = sorted(first_at)
    rank = {key: r for r, key in enumerate(distinct)}
    return [first_at[key] for key in distinct], tuple(map(rank.__getitem__, keys))
