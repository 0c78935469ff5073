"""Selectors: tracr's ``Comparison`` predicates, ``Select``, ``ConstantSelector``, the
combinations ``SelectorAnd`` / ``SelectorOr`` / ``SelectorNot``, and tracr's ``select``,
``selector_and``, ``selector_or`` and ``selector_not`` functions (the last three merge two selects
into one, as tracr does).
"""

from __future__ import annotations

import enum
import reprlib
from typing import Any, Callable, Union

from rasp_compiler.graph.expr import PyFn
from rasp_compiler.graph.nodes import Select as SelectNode
from rasp_compiler.graph.nodes import SelectorAnd as AndNode
from rasp_compiler.graph.nodes import SelectorNot as NotNode
from rasp_compiler.graph.nodes import SelectorOr as OrNode
from rasp_compiler.pyapi.base import (
    PyApiTypeError,
    PyApiValueError,
    RASPExpr,
    Selector,
    SOp,
    _selector,
    indices,
)
from rasp_compiler.pyapi.sops import Full, _length_checked, _sop


class Comparison(enum.Enum):
    """tracr's predicates: ``sel[q][k] = key OP query`` (TRUE/FALSE select everything/nothing).
    Called as tracr's are: ``Comparison.LT(key, query)``.  The members, their order and their
    values are tracr's (``Comparison("<=")`` is ``LEQ``, ``Comparison.TRUE.value`` is ``"True"``)."""

    EQ = "=="
    LT = "<"
    LEQ = "<="
    GT = ">"
    GEQ = ">="
    NEQ = "!="
    TRUE = "True"
    FALSE = "False"

    def __call__(self, key: Any, query: Any) -> bool:
        from rasp_compiler.graph.semantics import OperatorError

        # tracr's ValueError for None; a comparison of values that do not compare is its TypeError.
        # Both are UserErrors here (a bare OperatorError escaped as a traceback)
        for what, value in (("key", key), ("query", query)):
            if value is None:
                raise PyApiValueError(f"{what} is None! ({self.name} compares two values)")
        try:
            return _predicate(self)(key, query)
        except OperatorError as err:
            raise PyApiTypeError(f"Comparison.{self.name}({key!r}, {query!r}): {err}",
                                 hint=err.hint) from None


Predicate = Union[Comparison, str, Callable[[Any, Any], Any]]
_OPS = ("==", "!=", "<", "<=", ">", ">=")
_NEGATED = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">", "true": "false",
            "false": "true"}


def _op(predicate: Any) -> str | None:
    """The comparison a predicate names (``Comparison.LT``, ``"<"``), or None for a function."""
    if isinstance(predicate, Comparison):  # TRUE/FALSE are the "true"/"false" of the graph
        value = predicate.value
        return value.lower() if predicate in (Comparison.TRUE, Comparison.FALSE) else value
    if isinstance(predicate, str):
        if predicate not in _OPS and predicate not in ("true", "false"):
            raise PyApiValueError(f"unknown comparison {predicate!r}; use Comparison.EQ/LT/... or '==', "
                                  "'<', ...")
        return predicate
    if callable(predicate):
        return None
    raise PyApiTypeError(f"a predicate is a Comparison, a comparison string or a function, got {predicate!r}")


def _predicate(predicate: Any) -> Callable[[Any, Any], bool]:
    """A predicate as a Python function of (key, query)."""
    from rasp_compiler.graph.semantics import apply_binary

    op = _op(predicate)
    if op is None:
        return predicate
    if op in ("true", "false"):
        return lambda k, q: op == "true"
    return lambda k, q: bool(apply_binary(op, k, q))


def _select_node(keys: SOp, queries: SOp, predicate: Any) -> tuple[tuple[RASPExpr, ...], dict[str, Any]]:
    """The inputs and fields of a select node."""
    op = _op(predicate)
    if op is None:
        return (keys, queries), {"op": "fn", "fn": PyFn(predicate, getattr(predicate, "__name__", "fn"), 2)}
    if op in ("true", "false"):
        # Constant keys and queries: the predicate no longer depends on the s-ops (tracr's TRUE).
        return (Full(0), Full(0)), {"op": "==" if op == "true" else "!="}
    return (keys, queries), {"op": op}


class Select(Selector):
    """``sel[q][k] = keys[k] predicate queries[q]``; ``predicate`` is a ``Comparison``, one of
    ``== != < <= > >=`` (``Comparison.TRUE`` / ``FALSE`` select all / no keys), or a Python
    function ``predicate(key, query)`` (tracr's lambda predicates; the compiler tabulates it over
    the key and query value sets).  ``.keys``, ``.queries`` and ``.predicate`` are as given."""

    def __init__(self, keys: Any, queries: Any, predicate: Predicate) -> None:
        self.keys, self.queries = _sop(keys, "select's keys"), _sop(queries, "select's queries")
        self.predicate = predicate
        inputs, fields = _select_node(self.keys, self.queries, predicate)
        super().__init__(SelectNode, inputs, **fields)


class ConstantSelector(Selector):
    """tracr's constant selector: ``value[q][k]`` selects key ``k`` for query ``q`` (a square
    matrix of booleans), with the length check of ``ConstantSOp``; without it, keys and queries
    past the matrix are not selected."""

    def __init__(self, value: Any, check_length: bool = True) -> None:
        try:
            rows = [[bool(x) for x in row] for row in value]
        except TypeError:  # not a list of rows: `ConstantSelector([1, 0])`
            raise PyApiTypeError(f"ConstantSelector takes a square matrix of booleans, one row per "
                                 f"query, got {reprlib.repr(value)}",
                                 hint="write ConstantSelector([[1, 0], [1, 1]])") from None
        if any(len(row) != len(rows) for row in rows):
            raise PyApiValueError("ConstantSelector's value must be a square matrix (one row per query)")
        self.value, self.check_length = rows, check_length
        n = len(rows)
        queries = _length_checked(n) if check_length else indices
        inputs, fields = _select_node(indices, queries, lambda k, q: q < n and k < n and rows[q][k])
        super().__init__(SelectNode, inputs, **fields)


class SelectorAnd(Selector):
    def __init__(self, fst: Selector, snd: Selector) -> None:
        super().__init__(AndNode, tuple(_selector(x, "each side of a selector &") for x in (fst, snd)))

    fst = property(lambda self: self.inputs[0])
    snd = property(lambda self: self.inputs[1])


class SelectorOr(Selector):
    def __init__(self, fst: Selector, snd: Selector) -> None:
        super().__init__(OrNode, tuple(_selector(x, "each side of a selector |") for x in (fst, snd)))

    fst = property(lambda self: self.inputs[0])
    snd = property(lambda self: self.inputs[1])


class SelectorNot(Selector):
    def __init__(self, inner: Selector) -> None:
        super().__init__(NotNode, (_selector(inner, "selector_not's input"),))

    inner = property(lambda self: self.inputs[0])


# --------------------------------------------------------------------------- tracr's functions
def select(keys: Any, queries: Any, predicate: Predicate) -> Select:
    """``Select`` under its RASP name."""
    return Select(keys, queries, predicate)


def _merge(fst: Select, snd: Select, combine: Callable[[bool, bool], bool]) -> Select | None:
    """tracr's simplification: two selects over the same keys and queries (a ``Full`` matches
    anything, its fill baked into the predicate) are one select with a combined predicate."""
    p, r = _predicate(fst.predicate), _predicate(snd.predicate)
    keys = queries = None
    if isinstance(fst.keys, Full):
        keys, p = snd.keys, (lambda k, q, p=p, fill=fst.keys.fill: p(fill, q))
    if isinstance(snd.keys, Full):
        keys, r = fst.keys, (lambda k, q, r=r, fill=snd.keys.fill: r(fill, q))
    if isinstance(fst.queries, Full):
        queries, p = snd.queries, (lambda k, q, p=p, fill=fst.queries.fill: p(k, fill))
    if isinstance(snd.queries, Full):
        queries, r = fst.queries, (lambda k, q, r=r, fill=snd.queries.fill: r(k, fill))
    if fst.keys is snd.keys:
        keys = fst.keys
    if fst.queries is snd.queries:
        queries = fst.queries
    if keys is None or queries is None:
        return None
    return Select(keys, queries, lambda k, q: combine(p(k, q), r(k, q)))


def _merged_or(node: type[Selector], fst: Selector, snd: Selector, simplify: bool,
               combine: Callable[[bool, bool], bool]) -> Selector:
    """One ``Select`` when both are selects that can merge, else ``node(fst, snd)``."""
    if simplify and isinstance(fst, Select) and isinstance(snd, Select):
        merged = _merge(fst, snd, combine)
        if merged is not None:
            return merged
    return node(fst, snd)  # type: ignore[call-arg]


def selector_and(fst: Selector, snd: Selector, simplify: bool = True) -> Selector:
    """tracr's ``selector_and``: one ``Select`` when both are selects that can merge."""
    return _merged_or(SelectorAnd, fst, snd, simplify, lambda a, b: a and b)


def selector_or(fst: Selector, snd: Selector, simplify: bool = True) -> Selector:
    """tracr's ``selector_or``: one ``Select`` when both are selects that can merge."""
    return _merged_or(SelectorOr, fst, snd, simplify, lambda a, b: a or b)


def selector_not(inner: Selector, simplify: bool = True) -> Selector:
    """tracr's ``selector_not``: a ``Select`` with the opposite predicate when ``inner`` is one."""
    if simplify and isinstance(inner, Select):
        op = _op(inner.predicate)
        if op is None:
            p = inner.predicate
            return Select(inner.keys, inner.queries, lambda k, q: not p(k, q))
        return Select(inner.keys, inner.queries, _NEGATED[op])
    return SelectorNot(inner)
