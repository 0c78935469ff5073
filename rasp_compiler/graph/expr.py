"""Positionwise functions of map nodes, as small expression trees.

A map's function is kept as a tree rather than an opaque Python callable so that every later
stage can read it: the compiler tabulates it over value sets (categorical lookup MLPs), recognises
linear and product forms (numerical units), bounds it by interval analysis, and ``to_source``
prints it back as RASP text.  ``PyFn`` is the escape hatch for functions written in Python (the
Python API); it can be tabulated but not analysed.

``evaluate(expr, args)`` is the compiler's walk of a tree; the interpreter turns each tree into a
closure of its own (``interpreter._compile``).  Both take each operator's meaning from
``rasp_compiler.graph.semantics``, so the two cannot disagree on, say, what ``/`` does to ints.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

# Python frames allowed while walking a long chain of operations (the compiler and the
# elaborator allow as many)
DEEP_RECURSION = 20000


@contextmanager
def deep_recursion() -> Iterator[None]:
    """Room for the recursive walks of a long chain: the Python API merges a map of an unnamed map
    into one map (as tracr does), so ``x = x + 1`` 1,000 times is one expression 1,000 deep, and
    Python's default 1,000 frames ran out at about 800 steps."""
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, DEEP_RECURSION))
    try:
        yield
    finally:
        sys.setrecursionlimit(old_limit)


class Expr:
    """Base class of expression nodes (immutable, hashable)."""


@dataclass(frozen=True)
class Var(Expr):
    index: int  # which input of the map


@dataclass(frozen=True)
class Const(Expr):
    value: Any


@dataclass(frozen=True)
class Unary(Expr):
    op: str  # "not" | "-" | "+" | "round" | "indicator"
    arg: Expr


@dataclass(frozen=True)
class Binary(Expr):
    op: str  # + - * / % ^ == != < > <= >= and or
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Ternary(Expr):
    then: Expr
    cond: Expr
    otherwise: Expr


@dataclass(frozen=True)
class Lookup(Expr):
    """``table[arg]`` where table is a constant list, string or dict (stored as a tuple of pairs
    for dicts, to stay hashable)."""

    table: Any
    arg: Expr
    is_dict: bool = False


@dataclass(frozen=True)
class Contains(Expr):
    """``arg in collection`` for a constant collection (tuple)."""

    arg: Expr
    collection: tuple


@dataclass(frozen=True)
class PyFn(Expr):
    """A Python callable over the map's inputs, named for display."""

    fn: Callable[..., Any]
    label: str = "fn"
    arity: int = 1


_SEMANTICS: tuple | None = None  # (apply_binary, apply_unary, lookup), imported on first use


def _semantics() -> tuple:
    global _SEMANTICS
    if _SEMANTICS is None:
        from rasp_compiler.graph.semantics import apply_binary, apply_unary, lookup
        _SEMANTICS = (apply_binary, apply_unary, lookup)
    return _SEMANTICS


def evaluate(expr: Expr, args: tuple) -> Any:
    """Value of ``expr`` with ``Var(i)`` bound to ``args[i]``."""
    # Imported on first use so that this module stays a pure data definition; the operator
    # meanings live in apply_unary / apply_binary of rasp_compiler.graph.semantics.  (Not an
    # import statement per call: the analysis evaluates maps tens of thousands of times.)
    apply_binary, apply_unary, lookup = _SEMANTICS or _semantics()
    if isinstance(expr, Var):
        return args[expr.index]
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Unary):
        return apply_unary(expr.op, evaluate(expr.arg, args))
    if isinstance(expr, Binary):
        return apply_binary(expr.op, evaluate(expr.left, args), evaluate(expr.right, args))
    if isinstance(expr, Ternary):
        return evaluate(expr.then, args) if evaluate(expr.cond, args) else evaluate(expr.otherwise, args)
    if isinstance(expr, Lookup):
        return lookup(expr.table, evaluate(expr.arg, args), expr.is_dict)
    if isinstance(expr, Contains):
        return evaluate(expr.arg, args) in expr.collection
    if isinstance(expr, PyFn):
        return expr.fn(*args)
    raise TypeError(f"not an expression: {expr!r}")


def variables(expr: Expr) -> set[int]:
    """Indices of the inputs ``expr`` reads."""
    if isinstance(expr, Var):
        return {expr.index}
    if isinstance(expr, PyFn):
        return set(range(expr.arity))
    out: set[int] = set()
    for child in children(expr):
        out |= variables(child)
    return out


def children(expr: Expr) -> tuple[Expr, ...]:
    if isinstance(expr, Unary):
        return (expr.arg,)
    if isinstance(expr, Binary):
        return (expr.left, expr.right)
    if isinstance(expr, Ternary):
        return (expr.then, expr.cond, expr.otherwise)
    if isinstance(expr, (Lookup, Contains)):
        return (expr.arg,)
    return ()


def substitute(expr: Expr, bindings: dict[int, Expr]) -> Expr:
    """Replace ``Var(i)`` by ``bindings[i]`` (used to fuse chains of maps into one function)."""
    if isinstance(expr, Var):
        return bindings.get(expr.index, expr)
    if isinstance(expr, Unary):
        return Unary(expr.op, substitute(expr.arg, bindings))
    if isinstance(expr, Binary):
        return Binary(expr.op, substitute(expr.left, bindings), substitute(expr.right, bindings))
    if isinstance(expr, Ternary):
        return Ternary(substitute(expr.then, bindings), substitute(expr.cond, bindings),
                       substitute(expr.otherwise, bindings))
    if isinstance(expr, Lookup):
        return Lookup(expr.table, substitute(expr.arg, bindings), expr.is_dict)
    if isinstance(expr, Contains):
        return Contains(substitute(expr.arg, bindings), expr.collection)
    if isinstance(expr, PyFn):
        if all(isinstance(bindings.get(i, Var(i)), Var) for i in range(expr.arity)):
            order = [bindings.get(i, Var(i)).index for i in range(expr.arity)]  # type: ignore[union-attr]
            inner = expr.fn
            return PyFn(lambda *a: inner(*(a[j] for j in order)), expr.label, max(order) + 1)
        inner_fn, subs = expr.fn, [bindings.get(i, Var(i)) for i in range(expr.arity)]
        arity = max((max(variables(s), default=-1) for s in subs), default=-1) + 1
        return PyFn(lambda *a: inner_fn(*(evaluate(s, a) for s in subs)), expr.label, arity)
    return expr
