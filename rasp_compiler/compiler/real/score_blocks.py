"""Score blocks of a positional selector: 0 on selected keys, <= -1 elsewhere.

A conjunction of comparisons gets one-hot blocks per atom (one column per query or key class), or
for ``select(indices, f, ==)`` over many integer keys a quadratic block ``-(k - f)^2`` written in
base-B digits so that it stays small; any other selector is one block over its whole matrix.
Every block's query and key columns are positional features (``embed``).

A hard head's query class that selects no key needs no block (``blocks_and_bos``): the head
scores the BOS key at +scale/2 for such queries instead of -scale/2, so BOS (the default) wins
by the same margin as every other unselected key loses.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from rasp_compiler.compiler import selectors as sl


class ScoreBlocks:
    """Part of ``NumericCompiler`` (``core``): the score blocks of selectors."""

    def _blocks(self, sel: str, nid: str, digits: bool = True) -> list[tuple[str, str, np.ndarray]]:
        """Score blocks of a positional selector: 0 on selected keys, <= -1 elsewhere.  ``digits``
        allows quadratic blocks; a softmax head must not use them: their terms cancel only in sum,
        and that cancellation would round away the low bits of the data scores added to them."""
        f = sl.formula(self.graph, sel)
        conj = sl.conjuncts(f)
        out = []
        if all(isinstance(c, sl.Atom) for c in conj):
            for a in conj:
                out.extend(self._atom_blocks(a, digits))
            return out
        return self._matrix_block(self._selector_matrix(sel), sel)

    def blocks_and_bos(self, sel: str, nid: str, narrow: bool = False
                       ) -> tuple[list[tuple[str, str, np.ndarray]], tuple[tuple[str, float], ...]]:
        """A hard head's score blocks and the query side of its BOS score (``HeadSpec.bos_query``).
        In the first one-hot block with a query class that selects no key, such classes get no
        column: BOS then scores -scale/2 (2 x [a selecting class] - 1), above every real key
        (whose blocks are all 0 or below at such a query), where it scored -scale/2 against a
        block of -1s.  ``narrow``: an == over many integer keys takes the form with the fewest
        columns instead of digits (``HeadSpec.narrow``: assembly takes it where d_head shrinks)."""
        f = sl.formula(self.graph, sel)
        conj = sl.conjuncts(f)
        if not all(isinstance(c, sl.Atom) for c in conj):
            got = self._matrix_block(self._selector_matrix(sel), sel, drop_empty=True)
            return got if isinstance(got, tuple) else (got, (("one", 1.0),))
        out: list[tuple[str, str, np.ndarray]] = []
        bos: tuple[tuple[str, float], ...] = (("one", 1.0),)
        for a in conj:
            blocks = self._atom_blocks(a, True, drop_empty=len(bos) == 1 and bos[0] == ("one", 1.0),
                                       narrow=narrow)
            if isinstance(blocks, tuple):
                blocks, bos = blocks
            out.extend(blocks)
        return out, bos

    def _matrix_block(self, m: np.ndarray, label: str, drop_empty: bool = False) -> Any:
        """A whole selector matrix as one block over distinct query rows x distinct key columns."""
        qrows, qidx = np.unique(m, axis=0, return_inverse=True)
        kcols, kidx = np.unique(m, axis=1, return_inverse=True)
        small = np.zeros((len(qrows), len(kcols)), dtype=bool)
        for q in range(m.shape[0]):
            for k in range(m.shape[1]):
                small[qidx[q], kidx[k]] = m[q, k]
        return self._onehot_block(qidx.ravel(), kidx.ravel(), small, label, drop_empty)

    def _onehot_block(self, qidx: np.ndarray, kidx: np.ndarray, small: np.ndarray,
                      label: str, drop_empty: bool = False) -> Any:
        """One-hot blocks; with ``drop_empty``, where a query class selects no key (and there is
        one column per query class), (blocks, bos_query) without that class (``blocks_and_bos``)."""
        nq, nk = small.shape
        out = []
        if nq <= nk:  # one column per query class: Q one-hot, K = truth - 1
            empty = [j for j in range(nq) if not small[j].any()] if drop_empty else []
            bos: list[tuple[str, float]] = [("one", -1.0)]
            for j in range(nq):
                if j in empty:
                    continue
                qf = self.embed((qidx == j).astype(float), f"{label}.q{j}")
                kf = self.embed(small[j, kidx].astype(float) - 1.0, f"{label}.k{j}")
                out.append((qf, kf, np.array([[1.0]])))
                bos.append((qf, 2.0))
            if empty:
                return out, tuple(bos)
        else:
            for j in range(nk):
                qf = self.embed(small[qidx, j].astype(float) - 1.0, f"{label}.q{j}")
                kf = self.embed((kidx == j).astype(float), f"{label}.k{j}")
                out.append((qf, kf, np.array([[1.0]])))
        return out

    def _atom_blocks(self, a: sl.Atom, digits: bool = True, drop_empty: bool = False,
                     narrow: bool = False) -> Any:
        info = self._atom_info(a.key, a.query)
        label = a.select
        kvals, qvals = info["kvals"], info["qvals"]
        if digits and a.op == "==" and not a.negated and info["digit_keys"]:
            if not narrow:
                return self._digit_blocks(info["keys"], self.pos[a.query], label,
                                          arrays=self._atom_digits(a.key, a.query))
            # fewer columns than the digits' 6: one-hot where it has at most 3 (a d_head of 4
            # with BOS's one column)
            if min(len(qvals), len(kvals)) > 3:
                return self._digit_blocks(info["keys"], self.pos[a.query], label,
                                          arrays=self._atom_digits(a.key, a.query))
        small = self._atom_small(a, kvals, qvals)
        return self._onehot_block(info["qidx"], info["kidx"], small, label, drop_empty)

    def _atom_info(self, key: str, query: str) -> dict[str, Any]:
        """What the blocks of a select over ``key`` and ``query`` read of their values, once a pair:
        U at d = 32 scores 2,113 heads over 97 selectors, twice each (``blocks_and_bos``), and
        read its 2,304 positions' values every time."""
        k, q = self._values_info(key), self._values_info(query)
        return {"kvals": k["distinct"], "qvals": q["distinct"], "kidx": k["idx"], "qidx": q["idx"],
                "digit_keys": k["digit_keys"], "keys": k.get("keys")}

    def _values_info(self, sid: str) -> dict[str, Any]:
        """A positional s-op's distinct values, the index of each position's value in them, and
        whether they are more than 8 distinct integers >= 0 (a key of digit blocks), once an s-op."""
        got = self._atom_cache.get(("values", sid))
        if got is None:
            vals = self.pos[sid]
            ints = [v for v in vals if _is_int(v)]
            distinct = _distinct(vals)
            index = _indexer(distinct)
            got = {"distinct": distinct, "idx": np.array([index(v) for v in vals]),
                   "digit_keys": len(ints) == len(vals) and min(ints) >= 0 and len(set(ints)) > 8}
            if got["digit_keys"]:
                got["keys"] = [int(v) for v in vals]
            self._atom_cache[("values", sid)] = got
        return got

    def _atom_digits(self, key: str, query: str) -> tuple[np.ndarray, ...]:
        got = self._atom_cache.get(("digits", key, query))
        if got is None:
            got = self._atom_cache[("digits", key, query)] = _digit_arrays(
                self._atom_info(key, query)["keys"], self.pos[query])
        return got

    def _atom_small(self, a: sl.Atom, kvals: list[Any], qvals: list[Any]) -> np.ndarray:
        """The atom's truth over distinct query x key values (negation applied), once an atom's
        key, query and predicate."""
        ck = ("small", a.key, a.query, a.op, a.negated) if a.fn is None else ("small", a.select, a.negated)
        small = self._atom_cache.get(ck)
        if small is None:
            small = np.array([[sl.holds(a, k, q) for k in kvals] for q in qvals], dtype=bool)
            if a.negated:
                small = ~small
            self._atom_cache[ck] = small
        return small

    def _digit_blocks(self, keys: list[int], qv: list[Any], label: str,
                      arrays: tuple[np.ndarray, ...] | None = None) -> list[tuple[str, str, np.ndarray]]:
        """-(k - q)^2 summed over base-B digits of key and query values (exact small integers);
        ``arrays``: ``_digit_arrays(keys, qv)`` when already computed."""
        ka, kb, qa, qb = arrays if arrays is not None else _digit_arrays(keys, qv)
        out = []
        for name, kd, qd in (("hi", ka, qa), ("lo", kb, qb)):
            # -(k - q)^2 = 2kq - q^2 - k^2 as three rank-one columns
            fk = self.embed(kd, f"{label}.key_{name}")
            fk2 = self.embed(kd * kd, f"{label}.key_{name}^2")
            fq = self.embed(qd, f"{label}.query_{name}")
            fq2 = self.embed(qd * qd, f"{label}.query_{name}^2")
            out.append((fq, fk, np.array([[2.0]])))
            out.append((fq2, "one", np.array([[-1.0]])))
            out.append(("one", fk2, np.array([[-1.0]])))
        return out


def _digit_arrays(keys: list[int], qv: list[Any]) -> tuple[np.ndarray, ...]:
    """The base-B digits (hi, lo) of the keys and of the queries (a query with no valid target
    gets the digits (-2, 0), which match no key)."""
    base = max(2, math.isqrt(max(keys)) + 1)
    ka = np.array([k // base for k in keys], dtype=float)
    kb = np.array([k % base for k in keys], dtype=float)
    qa = np.full(len(qv), -2.0)  # a query with no valid target: digit -2 matches no key
    qb = np.zeros(len(qv))
    for p, v in enumerate(qv):
        if _is_int(v) and 0 <= int(v) < base * base:
            qa[p], qb[p] = int(v) // base, int(v) % base
    return ka, kb, qa, qb


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer()


def _distinct(vals: list[Any]) -> list[Any]:
    """The values of ``vals`` in first-seen order, equal as ``_index`` compares them."""
    out: list[Any] = []
    seen: set = set()
    for v in vals:
        key = _key(v)
        if key is None:  # unhashable or NaN: compared one by one, as before
            if _index(out, v) < 0:
                out.append(v)
        elif key not in seen:
            seen.add(key)
            out.append(v)
    return out


def _key(v: Any) -> Any:
    """A hashable key with _index's equality (an integer-valued number by its value, anything
    else by type and value), or None where only _index can tell.  Linear searches of _distinct and
    _index over one value a position made U at L = 4,096 take 149 s to compile, 127 s of it here."""
    if v is None:
        return ("none",)
    if _is_int(v):
        return ("int", float(v))
    if isinstance(v, float) and v != v:
        return None
    try:
        hash(v)
    except TypeError:
        return None
    return (type(v), v)


def _indexer(vals: list[Any]) -> Callable[[Any], int]:
    """``lambda v: _index(vals, v)`` by a dict where the key allows (first position wins)."""
    first: dict = {}
    for i, u in enumerate(vals):
        key = _key(u)
        if key is not None:
            first.setdefault(key, i)

    def index(v: Any) -> int:
        key = _key(v)
        if key is None:
            return _index(vals, v)
        return first.get(key, -1)
    return index


def _index(vals: list[Any], v: Any) -> int:
    for i, u in enumerate(vals):
        if type(u) is type(v) and u == v or (u is None and v is None) or (
                _is_int(u) and _is_int(v) and float(u) == float(v)):
            return i
    return -1
