"""Selector formulas: each selector's formula, simplified before anything reads it.

Two rewrites, both keeping the selection the same on every input: an order comparison of a
*lexicographic key* (tracr's ``x + i / max_seq_len``) with itself becomes a comparison of its two
parts, and a disjunct that tests positions alone and never holds without the others is dropped.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rasp_compiler.compiler import selectors as sl
from rasp_compiler.compiler.values import sorted_values
from rasp_compiler.errors import UserError
from rasp_compiler.graph.semantics import OperatorError


class SelectorFormulas:
    """Part of ``Analysis`` (``core``): ``formula`` and the rewrites it applies."""

    def formula(self, sel_id: str) -> sl.Formula:
        """The selector's formula in negation normal form, with every order comparison of a
        lexicographic key with itself (``lexicographic_key``) rewritten over its two parts: the
        same selection on every input, without a one-hot over the key's (X, index) pairs."""
        if sel_id not in self._formulas:
            f = sl.substitute(sl.formula(self.graph, sel_id), self._lex_atom)
            self._formulas[sel_id] = self._absorbed(f)
        return self._formulas[sel_id]

    def check_predicates(self, sel_id: str) -> None:
        """Refuse a selector with a select whose predicate raises on every pair of values it may
        compare (no input then has an answer: the interpreter raises on all of them), and record
        one that raises on some pairs in ``failures``, as a map that raises on some values is: the
        inputs that hold such a pair have no answer, and the compile notes it."""
        for atom in sl.atoms(sl.formula(self.graph, sel_id)):
            if atom.select in self._checked_selects:
                continue
            self._checked_selects.add(atom.select)
            if atom.fn is None:
                found = sl.failing_pairs(atom, self.info[atom.key].values, self.info[atom.query].values)
            else:
                table = self.predicate_table(atom)
                found = None if table is None or not table.failing else \
                    (table.failing, table.holds.size, table.first_failure)
            if found is None:
                continue
            failing, total, (key, query, err) = found
            if failing == total:
                what = "predicate" if atom.fn is not None else f"comparison '{atom.op}'"
                hint = ("a select's predicate takes (key, query) and returns a bool"
                        if atom.fn is not None else
                        "an order comparison needs values of one type: map one side first "
                        "(to numbers, or to strings)")
                raise self.error(atom.select, f"the {what} of {self.describe(atom.select)} fails on "
                                 f"every pair of values it may compare, so no input has an answer: "
                                 f"on key {key!r} and query {query!r}, {failure_reason(err)}", hint=hint)
            self.failures.setdefault(atom.select, ((key, query), err))

    def _absorbed(self, f: sl.Formula) -> sl.Formula:
        """``A or B`` as ``A`` where B, a test of positions alone, never holds without A.  The
        original paper's sort lets the BOS query grab itself with ``select(num_before, indices - 1,
        ==) or (select(indices, 0, ==) and select(indices, indices, ==))``, where num_before is
        -1 at index 0: the second disjunct adds nothing, but its indices would need a one-hot of
        (num_before, indices) on the key side, an MLP layer before the head."""
        if not isinstance(f, sl.Any_) or len(f.parts) < 2:
            return f
        parts = list(f.parts)
        for b in list(parts):
            rest = [p for p in parts if p is not b]
            if rest and self._implies(b, rest[0] if len(rest) == 1 else sl.Any_(tuple(rest))):
                parts = rest
        return parts[0] if len(parts) == 1 else sl.Any_(tuple(parts))

    def _implies(self, b: sl.Formula, a: sl.Formula, max_pairs: int = 200_000) -> bool:
        """Whether ``a`` holds at every (query, key) position pair, on every input, where the
        positional formula ``b`` holds (``a``'s s-ops judged by the values they can take at the
        two positions)."""
        if not all(self.positional(x.key) and self.positional(x.query) for x in sl.atoms(b)):
            return False
        pairs = 0
        for n in self.lengths:
            for i, j in zip(*np.nonzero(self._selection(b, n)), strict=True):
                pairs += 1
                if pairs > max_pairs:
                    return False
                known = {}
                for x in sl.atoms(a):
                    kv, qv = self._values_at(x.key, int(j), n), self._values_at(x.query, int(i), n)
                    if kv is None or qv is None:
                        continue
                    known[x] = self.atom_rows(x, qv, kv)
                can_true, can_false = _pair_truth(a, known)
                if can_false:
                    return False
        return True

    def _values_at(self, sid: str, i: int, n: int) -> list[Any] | None:
        """The values ``sid`` can take at position ``i`` of a length-``n`` input (None: unknown)."""
        cache = self._at_cache
        if sid not in cache:
            info = self.info[sid]
            kinds = [self.info[b].base_kind for b in info.bases]
            by_pos: dict[tuple[int, int], set] | None = None
            if info.table and ("index" in kinds or "length" in kinds) and len(info.table) <= 200_000:
                ii = kinds.index("index") if "index" in kinds else None
                nn = kinds.index("length") if "length" in kinds else None
                by_pos = {}
                for key, v in info.table.items():
                    by_pos.setdefault((key[ii] if ii is not None else -1, key[nn] if nn is not None else -1),
                                      set()).add(v)
                cache[sid] = (by_pos, ii is not None, nn is not None)
            else:
                cache[sid] = (None, False, False)
        by_pos, has_i, has_n = cache[sid]
        if by_pos is None:
            return list(self.info[sid].values) or None
        found = by_pos.get((i if has_i else -1, n if has_n else -1))
        return sorted_values(found) if found else None

    def _lex_atom(self, atom: sl.Atom) -> sl.Formula:
        if atom.key != atom.query or atom.op not in ("<", "<=", ">", ">="):
            return atom
        found = self.lexicographic_key(atom.key)
        if found is None:
            return atom
        return sl.lexicographic(atom, *found) or atom

    def lexicographic_key(self, sid: str) -> tuple[str, str, bool, bool] | None:
        """(X, indices, X increasing, index increasing) when the numbers ``sid`` holds order the
        positions by X first and by the index among positions of equal X, as tracr's unique sort
        keys ``x + i / max_seq_len`` do (x integer, i < max_seq_len): ``sid`` is a map whose table
        is over exactly two bases, X and the index, and on that table (every pair of its rows,
        which covers every pair of positions of every input)

        * along the rows of each X value, the key strictly increases with the index (or strictly
          decreases, the same direction for every X value), and
        * the ranges of the key over the rows of different X values do not overlap, and are
          ordered as the X values are (or in reverse).

        Then ``K_k < K_q`` holds exactly when X_k comes first, or X_k == X_q and i_k comes first
        — for K = a(X) + b(i) this is: the whole range of b is smaller than the smallest gap
        between distinct values of a (checked here on the values the interpreter computes, so
        float rounding is accounted for)."""
        if sid not in self._lex_cache:
            self._lex_cache[sid] = self._find_lexicographic(sid)
        return self._lex_cache[sid]

    def _find_lexicographic(self, sid: str) -> tuple[str, str, bool, bool] | None:
        info = self.info.get(sid)
        if info is None or info.base_kind is not None or len(info.bases) != 2 or not info.table:
            return None
        kinds = [self.info[b].base_kind for b in info.bases]
        if sorted(k == "index" for k in kinds) != [False, True]:
            return None
        j = kinds.index("index")
        i_id, x_id = info.bases[j], info.bases[1 - j]
        if kinds[1 - j] not in ("token", "free", "cond"):
            return None
        xvals = self.info[x_id].values
        # X's values are compared by the rewritten atoms: they must be totally ordered by Python
        # and pairwise unequal (1, 1.0 and True would be one value to ``==`` but two rows here)
        if not xvals or not sl._comparable(xvals) or len(set(xvals)) != len(xvals) or \
                any(isinstance(v, bool) for v in xvals):
            return None
        groups: dict[Any, list[tuple[int, float]]] = {}
        for key, k in info.table.items():
            if isinstance(k, bool) or not isinstance(k, (int, float)) or k != k or \
                    k in (float("inf"), float("-inf")):
                return None
            groups.setdefault(key[1 - j], []).append((key[j], k))
        if len(groups) < 2:
            return None
        i_dir = 0
        spans: dict[Any, tuple[float, float]] = {}
        for x, rows in groups.items():
            rows.sort()
            ks = [k for _, k in rows]
            for a, b in zip(ks, ks[1:], strict=False):
                d = 1 if b > a else -1 if b < a else 0
                if d == 0 or (i_dir and d != i_dir):
                    return None
                i_dir = d
            spans[x] = (min(ks), max(ks))
        if i_dir == 0:  # no X value occurs at two indices: the index never matters
            return None
        order = sorted(spans)
        lows = [spans[x][0] for x in order]
        highs = [spans[x][1] for x in order]
        if all(h < lo for h, lo in zip(highs, lows[1:], strict=False)):
            return x_id, i_id, True, i_dir > 0
        if all(lo > h for lo, h in zip(lows, highs[1:], strict=False)):
            return x_id, i_id, False, i_dir > 0
        return None


def _pair_truth(f: sl.Formula, known: dict[sl.Atom, np.ndarray]) -> tuple[bool, bool]:
    """(can be true, can be false) of ``f`` at one position pair, from each known atom's truth
    table over the values its s-ops can take there (other atoms: unknown)."""
    if isinstance(f, sl.Atom):
        m = known.get(f)
        return (True, True) if m is None else (bool(m.any()), bool((~m).any()))
    parts = [_pair_truth(p, known) for p in f.parts]
    if isinstance(f, sl.All):
        return all(t for t, _ in parts), any(fl for _, fl in parts)
    return any(t for t, _ in parts), all(fl for _, fl in parts)


def failure_reason(err: Exception) -> str:
    """The interpreter's words for a failed operation; a Python error with its type."""
    return str(err) if isinstance(err, (UserError, OperatorError)) else f"{type(err).__name__}: {err}"
