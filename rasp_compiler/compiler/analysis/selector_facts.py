"""Facts about selections and keys that the rest of the compiler relies on.

Positional selectors (that read only the index and the length) are evaluated outright: their width
at every (index, length).  For others, what can be proved from the value sets: a selector never
selects nothing, or at most one key; an s-op differs at every position (``injective``) or holds
one value across an input (``uniform``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rasp_compiler.compiler import selectors as sl
from rasp_compiler.compiler.values import value_key
from rasp_compiler.graph.nodes import Aggregate, SelectorWidth


class SelectorFacts:
    """Part of ``Analysis`` (``core``): widths and provable properties of selectors and keys."""

    def positional(self, sid: str) -> bool:
        """Whether ``sid`` is a function of the index and the length only."""
        return all(self.info[b].base_kind in ("index", "length") for b in self.info[sid].bases)

    def widths(self, sel_id: str) -> dict[tuple[int, int], int] | None:
        """For a selector that reads only positional s-ops: its width at each (index, length)."""
        if sel_id in self._width_cache:
            return self._width_cache[sel_id]
        f = self.formula(sel_id)
        # two selects of the same comparison of the same s-ops (each make_frac_prevs builds its
        # own select(indices, indices, <=)) have the same widths: computed once
        shape = _shape(f)
        if shape is not None and shape in self._width_cache:
            self._width_cache[sel_id] = self._width_cache[shape]
            return self._width_cache[sel_id]
        result: dict[tuple[int, int], int] | None = None
        atoms = sl.atoms(f)
        if all(self.positional(a.key) and self.positional(a.query) for a in atoms):
            if all(self.info[b].base_kind == "index" for a in atoms for sid in (a.key, a.query)
                   for b in self.info[sid].bases):
                result = self._index_widths(f)
            else:
                result = {}
                for n in self.lengths:
                    sel = self._selection(f, n)
                    for i, w in enumerate(sel.sum(axis=1).tolist()):
                        result[(i, n)] = int(w)
        self._width_cache[sel_id] = result
        if shape is not None:
            self._width_cache[shape] = result
        return result

    def _index_widths(self, f: sl.Formula) -> dict[tuple[int, int], int]:
        """``widths`` of a selector whose atoms read functions of the index alone: its selection
        at length n is then the top-left n x n block of its selection at the longest length, so
        the width at (i, n) is the count of the first n keys of row i of that one matrix (a
        running sum), not a selection built per length: the sum of n^2 over the lengths, 2.9G
        entries for dyck2's ``select(indices, indices, <=)`` at max_len 2,048 (30 s of CPU before
        its mean was refused)."""
        top = max(self.lengths)
        counts = np.cumsum(self._selection(f, top), axis=1, dtype=np.int64)
        # (i, n) in ``ctx_all``'s order: each length's queries in turn
        column = np.concatenate([counts[:n, n - 1] for n in self.lengths])
        return dict(zip(self.ctx_all, column.tolist(), strict=True))

    def _selection(self, f: sl.Formula, n: int) -> np.ndarray:
        """The selection matrix [query, key] at length ``n`` of a selector whose atoms read
        positional s-ops only."""
        return sl.evaluate(f, {a: self.positional_rows(a, n) for a in sl.atoms(f)})

    def positional_rows(self, a: sl.Atom, n: int) -> np.ndarray:
        """The atom's truth [query position, key position] at length ``n``, for s-ops that are
        functions of the position (and the length) alone."""
        kv = [self._positional_value(a.key, j, n) for j in range(n)]
        qv = [self._positional_value(a.query, i, n) for i in range(n)]
        # compare distinct values once, then index (n² Python comparisons is slow)
        kd, qd = list(dict.fromkeys(kv)), list(dict.fromkeys(qv))
        small = self.atom_rows(a, qd, kd)
        kpos = {v: j for j, v in enumerate(kd)}
        qpos = {v: j for j, v in enumerate(qd)}
        return small[np.array([qpos[v] for v in qv], dtype=np.intp)[:, None],
                     np.array([kpos[v] for v in kv], dtype=np.intp)[None, :]]

    def atom_rows(self, a: sl.Atom, qvalues: list, kvalues: list) -> np.ndarray:
        """``sl.atom_matrix(a, qvalues, kvalues)``; a Python predicate is called once per pair of
        values of its s-ops in all (``predicate_table``), not again at every length or by every
        reader (the failure check, the selection facts and the lowering)."""
        table = self.predicate_table(a)
        if table is not None:
            try:
                return table.rows(a, qvalues, kvalues)
            except KeyError:  # a value outside the value sets (none is expected)
                pass
        return sl.atom_matrix(a, qvalues, kvalues)

    def holds(self, a: sl.Atom, key: Any, query: Any) -> bool:
        """``sl.holds(a, key, query)``, read from the predicate's table where it has one (see
        ``atom_rows``)."""
        table = self.predicate_table(a)
        if table is not None:
            i, j = table.qpos.get(query), table.kpos.get(key)
            if i is not None and j is not None:
                return bool(table.holds[i, j])
        return sl.holds(a, key, query)

    def predicate_table(self, a: sl.Atom) -> sl.PredicateTable | None:
        """A Python predicate's table over its s-ops' value sets (None: a built-in comparison,
        vectorised already, or more than 2^24 pairs)."""
        if a.fn is None:
            return None
        key = (a.select, a.key, a.query)
        if key not in self._atom_tables:
            kv, qv = self.info[a.key].values, self.info[a.query].values
            self._atom_tables[key] = None if len(kv) * len(qv) > 1 << 24 else sl.tabulate_predicate(a, qv, kv)
        return self._atom_tables[key]

    def _positional_value(self, sid: str, i: int, n: int) -> Any:
        info = self.info[sid]
        key = tuple(i if self.info[b].base_kind == "index" else n for b in info.bases)
        return info.table.get(key)

    def _never_empty(self, sel_id: str) -> bool:
        """Whether the selector provably selects some key for every query: its widths (a
        positional selector) are never 0, or it is ``select(indices, q, ==)`` with q a valid index
        at every position (tracr's ``select(indices, length - 1, ==)``), or a disjunction with
        such a part, or ``select(R, indices, ==)`` with R numbering the positions
        (``numbers_positions``: the library sort).  Otherwise an aggregate's default is taken to
        occur."""
        w = self.widths(sel_id)
        if w is not None:
            return min(w.values(), default=0) > 0

        return self._covered(self.formula(sel_id))

    def _covered(self, f: sl.Formula) -> bool:
        """``_never_empty`` of a formula: an ``==`` of the index against a valid index, or a
        disjunction with such a part.  (A method, not a recursive closure: a closure that calls
        itself is a reference cycle, which would hold the analysis until the cyclic collector ran.)"""
        if isinstance(f, sl.Any_):
            return any(self._covered(p) for p in f.parts)
        if isinstance(f, sl.Atom) and f.op == "==" and not f.negated and f.fn is None \
                and self.info[f.query].base_kind == "index" and self.numbers_positions(f.key):
            return True  # the library sort's select(target_position, indices, ==)
        if not isinstance(f, sl.Atom) or f.op != "==" or f.negated \
                or self.info[f.key].base_kind != "index":
            return False
        for ctx in self.ctx_all:
            for v in self.ctx_values(f.query, ctx):
                if not (isinstance(v, (int, float)) and float(v).is_integer() and 0 <= v < ctx[1]):
                    return False
        return True

    def at_most_one(self, sel_id: str) -> bool:
        """Whether the selector provably selects at most one key for every query: some conjunct
        is an atom that matches at most one value of an injective key, or the conjunction's ``==``
        atoms pin the key's (X, rank of X) pair, which differs at every position."""
        w = self.widths(sel_id)
        if w is not None:
            return max(w.values(), default=0) <= 1
        pinned = set()
        for c in self._pinning_atoms(sel_id):
            if self.injective(c.key):
                return True
            pinned.add(c.key)
        return any(self.rank_of(k) in pinned for k in pinned)

    def _pinning_atoms(self, sel_id: str) -> list[sl.Atom]:
        """The conjuncts of the selector that match at most one key value for each query value."""
        out = []
        for c in sl.conjuncts(self.formula(sel_id)):
            if isinstance(c, sl.Atom):
                kv, qv = self.info[c.key].values, self.info[c.query].values
                if self.atom_rows(c, qv, kv).sum(axis=1).max(initial=0) <= 1:
                    out.append(c)
        return out

    def selected_values_agree(self, sel_id: str, src: str) -> bool:
        """Whether every key the selector may pick for one query holds the same value of ``src``:
        some conjunct matches at most one key value per query value, and ``src`` is a function of
        that key (``aggregate(select(tokens, tokens, ==), f(tokens))``).  The mean of those keys is
        then that value, so a categorical aggregate of numbers is exact (tracr compiles it too)."""
        for c in self._pinning_atoms(sel_id):
            if c.key == src:
                return True
            of_key: dict[Any, Any] = {}
            if all(of_key.setdefault(value_key(k), value_key(v)) == value_key(v)
                   for k, v in self.joint([c.key, src])):
                return True
        return False

    def injective(self, sid: str) -> bool:
        """Whether ``sid`` holds a different value at every position of every input: a positional
        s-op checked at every length, or a function of the index and of s-ops that hold one value
        across an input (``uniform``) that differs at every index for each of their values, such
        as ``indices + length - add_index`` with ``add_index`` the position of the "+" token."""
        if self.info[sid].base_kind == "index":
            return True
        posaff = self.info[sid].posaff
        if posaff is not None and posaff[0] != 0:  # a·index + b·length + c, a != 0: i -> value is 1-1
            return True
        if not self.positional(sid):
            return self._injective_given_uniform(sid)
        for n in self.lengths:
            vals = [self._positional_value(sid, i, n) for i in range(n)]
            if None in vals or len(set(vals)) != n:
                return False
        return True

    def _injective_given_uniform(self, sid: str) -> bool:
        info = self.info[sid]
        kinds = [self.info[b].base_kind for b in info.bases]
        if kinds.count("index") != 1 or not info.table:
            return False
        if not all(k == "index" or self.uniform(b) for b, k in zip(info.bases, kinds, strict=True)):
            return False
        at = kinds.index("index")
        seen: dict[tuple, dict[tuple, Any]] = {}
        for key, v in info.table.items():
            held = seen.setdefault(key[:at] + key[at + 1:], {})
            if held.setdefault(value_key(v), key[at]) != key[at]:
                return False
        return True

    def uniform(self, sid: str) -> bool:
        """Whether ``sid`` holds one value at every position of an input: the length, constants,
        and attention outputs whose selector gives every query the same keys (each atom's query
        side is itself uniform), and maps of those."""
        cache = self._uniform_cache
        if sid in cache:
            return cache[sid]
        cache[sid] = False  # no cycles in a DAG; guards the recursion
        info = self.info[sid]
        if info.bases != (sid,):
            result = all(self.uniform(b) for b in info.bases)
        elif info.base_kind in ("length", "const"):
            result = True
        elif info.base_kind in ("free", "cond") and sid in self.graph:
            node = self.node(sid)
            result = isinstance(node, (Aggregate, SelectorWidth)) and all(
                self.uniform(a.query) for a in sl.atoms(self.formula(node.inputs[0])))
        else:
            result = False
        cache[sid] = result
        return result

    def numbers_positions(self, sid: str) -> bool:
        """Whether ``sid`` numbers the positions 0..n-1, each once, in every input: the width of a
        strict total order on the positions, ``select(K, K, <)`` (or ``>``) with K injective, or
        the library sort's ``select(K, K, <) or (select(K, K, ==) and select(indices, indices, <))``,
        which orders the positions by (K, index).  At a query, the width counts the positions
        before it in that order: its rank."""
        node = self.node(sid) if sid in self.graph else None
        if not isinstance(node, SelectorWidth):
            return False

        def strict(a: sl.Formula) -> bool:
            return (isinstance(a, sl.Atom) and not a.negated and a.fn is None and a.op in ("<", ">")
                    and a.key == a.query)

        def always(a: sl.Formula) -> bool:  # `select(length, length, ==)`: one value per input
            return (isinstance(a, sl.Atom) and not a.negated and a.fn is None and a.op in ("==", "<=", ">=")
                    and a.key == a.query and self.uniform(a.key))

        f = self.formula(node.inputs[0])
        if isinstance(f, sl.All):  # the sort by a uniform key: `select(K, K, <)` was simplified away
            rest = [p for p in sl.conjuncts(f) if not always(p)]
            f = rest[0] if len(rest) == 1 else f
        if strict(f):
            return self.injective(f.key)  # type: ignore[union-attr]
        if not isinstance(f, sl.Any_) or len(f.parts) != 2:
            return False
        for order, ties in (f.parts, f.parts[::-1]):
            parts = sl.conjuncts(ties)
            if not strict(order) or len(parts) != 2:
                continue
            same = any(isinstance(p, sl.Atom) and not p.negated and p.fn is None and p.op == "=="
                       and p.key == p.query == order.key for p in parts)
            if same and any(strict(p) and self.injective(p.key) for p in parts):
                return True
        return False

    def rank_of(self, sid: str) -> str | None:
        """X when ``sid`` is ``selector_width(select(X, X, ==) and select(indices, indices, op))``
        with op one of < <= > >=: the number of earlier (or later) positions holding the same X.
        It strictly increases (decreases) along the positions of equal X, so the pair (X, sid)
        differs at every position."""
        node = self.node(sid) if sid in self.graph else None
        if not isinstance(node, SelectorWidth):
            return None
        parts = sl.conjuncts(self.formula(node.inputs[0]))
        if len(parts) != 2 or not all(isinstance(p, sl.Atom) and not p.negated for p in parts):
            return None
        same = [p for p in parts if p.op == "==" and p.key == p.query]
        order = [p for p in parts if p.op in ("<", "<=", ">", ">=") and p.key == p.query
                 and self.info[p.key].base_kind == "index"]
        if len(same) == 1 and len(order) == 1:
            return same[0].key
        return None


def _shape(f: sl.Formula) -> tuple | None:
    """The formula without the names of its selects, which a built-in comparison does not read
    (``sl.atom_matrix``): equal shapes select alike.  None where an atom calls a predicate."""
    if isinstance(f, sl.Atom):
        return None if f.fn is not None else ("atom", f.key, f.query, f.op, f.negated)
    parts = tuple(_shape(p) for p in f.parts)
    return None if None in parts else (type(f).__name__, parts)
