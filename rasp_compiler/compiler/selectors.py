"""Selector formulas: and/or/not of selects, rewritten into additive score blocks.

A selector is a boolean formula over its leaf selects.  ``formula`` turns the graph into negation
normal form (a ``not`` is pushed down to the leaves, where it complements the predicate).  The
top-level conjunction is split into conjuncts; conjuncts that read the same key s-ops and query
s-ops are merged into one *block*.  A head then scores ``S * sum(block predicates)``: a key is
selected exactly when every block holds, because each block contributes 0 or S.  A block that
reads several key (or query) s-ops needs a product encoding of them (one one-hot over the value
tuples that can occur, built by an MLP), so that one bilinear form carries any predicate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rasp_compiler.graph.nodes import Select, SelectorAnd, SelectorNot, SelectorOr
from rasp_compiler.graph.semantics import apply_binary


@dataclass(frozen=True)
class Atom:
    select: str  # the Select node id
    key: str  # key s-op id
    query: str  # query s-op id
    op: str
    negated: bool = False
    fn: Any = None  # op "fn": the Select's PyFn of (key, query)


@dataclass(frozen=True)
class All:
    parts: tuple


@dataclass(frozen=True)
class Any_:
    parts: tuple


Formula = Atom | All | Any_


def formula(graph: Any, sel_id: str, negated: bool = False) -> Formula:
    """Negation normal form of the selector ``sel_id`` of a program graph."""
    node = graph.nodes[sel_id]["node"]
    if isinstance(node, Select):
        keys, queries = node.inputs
        return Atom(sel_id, keys, queries, node.op, negated, node.fn)
    if isinstance(node, SelectorNot):
        return formula(graph, node.inputs[0], not negated)
    if isinstance(node, (SelectorAnd, SelectorOr)):
        parts = tuple(formula(graph, i, negated) for i in node.inputs)
        conj = isinstance(node, SelectorAnd) != negated
        return All(parts) if conj else Any_(parts)
    raise TypeError(f"{sel_id} is not a selector")


def atoms(f: Formula) -> list[Atom]:
    if isinstance(f, Atom):
        return [f]
    return [a for p in f.parts for a in atoms(p)]


def conjuncts(f: Formula) -> list[Formula]:
    if isinstance(f, All):
        return [c for p in f.parts for c in conjuncts(p)]
    return [f]


def compare(op: str, key: Any, query: Any) -> bool:
    """``key op query``; values that cannot be compared count as not selected (the interpreter
    raises on them, so they cannot reach a result)."""
    try:
        return bool(apply_binary(op, key, query))
    except Exception:
        return False


def holds(atom: Atom, key: Any, query: Any) -> bool:
    """The atom's predicate (before its negation) on one key and query value."""
    if atom.fn is None:
        return compare(atom.op, key, query)
    try:
        return bool(atom.fn.fn(key, query))
    except Exception:  # as in ``compare``: the interpreter raises on such a pair
        return False


def failure(op: str, key: Any, query: Any) -> Exception | None:
    """The error the interpreter raises comparing this key and query value with ``op``, or None."""
    try:
        apply_binary(op, key, query)
    except Exception as err:  # noqa: BLE001 - Python's own comparison errors, whatever they are
        return err
    return None


@dataclass(frozen=True)
class PredicateTable:
    """A Python predicate on every (query, key) pair of its s-ops' values, from one call per pair:
    whether it holds (before the atom's negation; False where it raises, as in ``holds``), where
    each value sits, and how many pairs raise with the first (key, query, error)."""
    holds: np.ndarray  # [query value, key value]
    qpos: dict
    kpos: dict
    failing: int
    first_failure: tuple[Any, Any, Exception] | None

    def rows(self, atom: Atom, qvalues: list, kvalues: list) -> np.ndarray:
        """``atom_matrix(atom, qvalues, kvalues)`` read from the table (KeyError: a value not in it)."""
        m = self.holds[np.ix_([self.qpos[v] for v in qvalues], [self.kpos[v] for v in kvalues])]
        return ~m if atom.negated else m


def tabulate_predicate(atom: Atom, qvalues: list, kvalues: list) -> PredicateTable:
    m = np.zeros((len(qvalues), len(kvalues)), dtype=bool)
    failing, first = 0, None
    fn = atom.fn.fn
    for i, q in enumerate(qvalues):
        for j, k in enumerate(kvalues):
            try:
                m[i, j] = bool(fn(k, q))
            except Exception as err:  # noqa: BLE001 - whatever the user's predicate raises
                failing += 1
                first = first or (k, q, err)
    return PredicateTable(m, {v: i for i, v in enumerate(qvalues)}, {v: j for j, v in enumerate(kvalues)},
                          failing, first)


def failing_pairs(atom: Atom, kvalues: list, qvalues: list,
                  limit: int = 1 << 22) -> tuple[int, int, tuple[Any, Any, Exception]] | None:
    """How many (key, query) value pairs the atom's built-in comparison raises on, of how many, and
    the first (key, query, error); None when it raises on none.  (A Python predicate's failures are
    counted as it is tabulated: ``tabulate_predicate``.)"""
    total = len(kvalues) * len(qvalues)
    if _comparable(list(kvalues) + list(qvalues)):
        return None  # Python compares these values without raising
    keys, queries = [(v, 1) for v in kvalues], [(v, 1) for v in qvalues]
    if total > limit:
        # a built-in comparison of atoms raises by their types alone: one value of each type,
        # weighed by how many values have that type
        keys, queries = _by_type(kvalues), _by_type(qvalues)
    failing, first = 0, None
    for k, kn in keys:
        for q, qn in queries:
            err = failure(atom.op, k, q)
            if err is not None:
                failing += kn * qn
                first = first or (k, q, err)
    return None if first is None else (failing, total, first)


def _by_type(values: list) -> list[tuple[Any, int]]:
    """One value of each type among ``values``, with the number of values of that type."""
    first: dict[type, Any] = {}
    count: dict[type, int] = {}
    for v in values:
        first.setdefault(type(v), v)
        count[type(v)] = count.get(type(v), 0) + 1
    return [(first[t], count[t]) for t in first]


_RANK_OPS = {"==": np.equal, "!=": np.not_equal, "<": np.less, ">": np.greater,
             "<=": np.less_equal, ">=": np.greater_equal}


def _comparable(values: list) -> bool:
    """Whether Python orders all ``values`` totally: all strings, or all non-NaN numbers."""
    if all(type(v) is str for v in values):
        return True
    return all(isinstance(v, (bool, int, float)) and v == v for v in values)


def atom_matrix(atom: Atom, qvalues: list, kvalues: list) -> np.ndarray:
    """The atom's truth table [query value, key value]."""
    op = _RANK_OPS.get(atom.op)
    if op is not None and _comparable(list(qvalues) + list(kvalues)):
        # Rank every value in one order that Python's own comparisons give (equal values, e.g. 1,
        # 1.0 and True, share a rank), then compare the ranks: the same table as ``compare`` per
        # pair, without len(q) * len(k) Python calls.
        ranks = {v: r for r, v in enumerate(sorted(set(qvalues) | set(kvalues)))}
        kr = np.array([ranks[v] for v in kvalues], dtype=np.int64)
        qr = np.array([ranks[v] for v in qvalues], dtype=np.int64)
        m = op(kr[None, :], qr[:, None]).reshape(len(qvalues), len(kvalues))
    else:
        m = np.array([[holds(atom, k, q) for k in kvalues] for q in qvalues], dtype=bool)
        m = m.reshape(len(qvalues), len(kvalues))
    return ~m if atom.negated else m


def evaluate(f: Formula, mats: dict[Atom, np.ndarray]) -> np.ndarray:
    """Combine precomputed atom matrices (all of one shape) with the formula's logic."""
    if isinstance(f, Atom):
        return mats[f]
    parts = [evaluate(p, mats) for p in f.parts]
    out = parts[0].copy()
    for p in parts[1:]:
        out = (out & p) if isinstance(f, All) else (out | p)
    return out


def tri_evaluate(f: Formula, known: dict[Atom, Any], shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Three-valued evaluation: (can be true, can be false), atoms not in ``known`` unknown.  A
    known atom is its truth matrix, or the pair (can be true, can be false) where it is known only
    in part."""
    if isinstance(f, Atom):
        if f in known:
            m = known[f]
            return m if isinstance(m, tuple) else (m, ~m)
        return np.ones(shape, bool), np.ones(shape, bool)
    parts = [tri_evaluate(p, known, shape) for p in f.parts]
    ct, cf = parts[0]
    for t, fl in parts[1:]:
        if isinstance(f, All):
            ct, cf = ct & t, cf | fl
        else:
            ct, cf = ct | t, cf & fl
    return ct, cf


def substitute(f: Formula, fn: Any) -> Formula:
    """``f`` with every atom ``a`` replaced by ``fn(a)`` (a formula; ``a`` itself to keep it)."""
    if isinstance(f, Atom):
        return fn(f)
    parts = tuple(substitute(p, fn) for p in f.parts)
    return All(parts) if isinstance(f, All) else Any_(parts)


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_COMPLEMENT = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def lexicographic(atom: Atom, x: str, i: str, x_up: bool, i_up: bool) -> Formula | None:
    """The atom ``K_k op K_q`` (op one of < <= > >=, key and query the same s-op K) rewritten for
    a K that orders positions by X first and by the index i among equal X: K increases with X
    when ``x_up`` (decreases otherwise), and along the positions of equal X it strictly increases
    with i when ``i_up`` (decreases otherwise).  Then

        K_k < K_q  ==  X_k <' X_q  or  (X_k == X_q  and  i_k <'' i_q)

    (<' is < or >, by the direction of X; <'' likewise by the direction of i; for <= the index
    comparison is <=, as equal K means the same (X, i) pair, i.e. the same position).  A negated
    atom is first complemented (numbers are totally ordered).  The two disjuncts never hold
    together, so the selector width of the result splits into one head per disjunct."""
    if atom.key != atom.query or atom.op not in _FLIP:
        return None
    op = _COMPLEMENT[atom.op] if atom.negated else atom.op
    strict = op.rstrip("=")
    xop = strict if x_up else _FLIP[strict]
    iop = op if i_up else _FLIP[op]
    sel = atom.select
    return Any_((Atom(sel, x, x, xop), All((Atom(sel, x, x, "=="), Atom(sel, i, i, iop)))))
