"""tracr's s-op constructors: ``Full``, ``Map``, ``SequenceMap``, ``LinearSequenceMap`` and
``ConstantSOp``, each one node, and the functions that make one map (``sop_not``, ``indicator``,
``rasp_round``) or an annotated copy (``numerical``, ``categorical``).

Every other constructor takes its s-op operands through ``_sop`` here, which makes an atom a
``Full``.
"""

from __future__ import annotations

import inspect
import logging
import reprlib
from collections.abc import Iterable
from typing import Any, Callable

from rasp_compiler.errors import UserError
from rasp_compiler.graph.expr import Binary, Const, Expr, PyFn, Unary, Var, evaluate, substitute
from rasp_compiler.graph.nodes import Constant
from rasp_compiler.graph.nodes import Map as MapNode
from rasp_compiler.graph.nodes import SequenceMap as SequenceMapNode
from rasp_compiler.pyapi.base import (
    PyApiTypeError,
    RASPExpr,
    Selector,
    SOp,
    _atom,
    _elementwise,
    indices,
    length,
)

log = logging.getLogger(__name__)


def _sop(value: Any, what: str) -> SOp:
    """An s-op, or a fresh constant s-op (``Full``) for an atom (as the elaborator does)."""
    if isinstance(value, SOp):
        return value
    if isinstance(value, Selector):
        raise PyApiTypeError(f"{what} must be an s-op, got a selector")
    return Full(_atom(value, what, sop_too=True))


# --------------------------------------------------------------------------- tracr's classes
# Each class builds one node, with tracr's constructor and fields (``Map(f, inner).inner``,
# ``Select(keys, queries, predicate).keys`` ...), so tracr code that inspects expressions runs.
class Full(SOp):
    """The s-op holding ``fill`` at every position (a constant node)."""

    def __init__(self, fill: Any) -> None:
        super().__init__(Constant, (), value=_atom(fill, "Full's value"))

    @property
    def fill(self) -> Any:
        return self.fields["value"]


def _function(f: Any, arity: int, what: str) -> Expr:
    """A map's function as an expression: trees are kept, Python callables become ``PyFn``."""
    if isinstance(f, Expr):
        return f
    if not callable(f) or isinstance(f, RASPExpr):
        raise PyApiTypeError(f"{what} takes the function first, then the s-op(s): got {type(f).__name__}")
    _check_arity(f, arity, what)
    return PyFn(f, getattr(f, "__name__", "fn"), arity)


def _check_arity(f: Callable[..., Any], arity: int, what: str) -> None:
    """Refuse, where it is written, a function that cannot take one value per s-op: it failed
    only when the program was run or compiled, far from the line at fault."""
    try:
        signature = inspect.signature(f)
    except (TypeError, ValueError):  # some builtins have no signature: left to the call
        return
    try:
        signature.bind(*range(arity))
    except TypeError:
        n = "one value" if arity == 1 else f"{arity} values"
        raise PyApiTypeError(f"{what}: the function {getattr(f, '__name__', 'given')}{signature} cannot "
                             f"take {n} (one per s-op)") from None


def _fusable(inner: SOp) -> bool:
    """tracr merges a map of a map into one map; here only when the inner map carries nothing the
    user gave it (a name, an encoding, annotations), so named nodes stay in the program."""
    return (isinstance(inner, Map) and not inner.ident and inner.encoding is None
            and not getattr(inner, "extra_annotations", None))


class Map(SOp):
    """``f`` applied at every position.  A Python callable is tabulated by the compiler.  With
    ``simplify`` (tracr's default) a map of an unnamed, unannotated map becomes one map."""

    def __init__(self, f: Callable[[Any], Any] | Expr, inner: SOp, simplify: bool = True) -> None:
        fn = _function(f, 1, "Map(f, sop)")
        inner = _sop(inner, "Map's input")
        if simplify and _fusable(inner):
            fn, inner = substitute(fn, {0: inner.fields["fn"]}), inner.inner
        super().__init__(MapNode, (inner,), fn=fn)

    @property
    def inner(self) -> SOp:
        return self.inputs[0]  # type: ignore[return-value]

    @property
    def f(self) -> Callable[[Any], Any]:
        fn = self.fields["fn"]
        return lambda x: evaluate(fn, (x,))


class SequenceMap(SOp):
    """``f(a[i], b[i], …)`` at every position (tracr's two s-ops, or more).  An s-op given twice
    is one input of the node."""

    def __init__(self, f: Callable[..., Any] | Expr, *sops: SOp) -> None:
        if not sops:
            raise PyApiTypeError("SequenceMap needs at least one s-op")
        sops = tuple(_sop(s, "SequenceMap's input") for s in sops)
        if len(sops) == 2 and sops[0] is sops[1]:
            log.warning("Creating a SequenceMap with both inputs being the same SOp is discouraged. "
                        "You should use a Map instead.")  # tracr's warning
        self.function = _function(f, len(sops), "SequenceMap(f, a, b)")
        self.fst, self.snd = sops[0], sops[-1]
        distinct: list[SOp] = []
        for s in sops:
            if not any(s is d for d in distinct):
                distinct.append(s)
        order = [next(j for j, d in enumerate(distinct) if d is s) for s in sops]
        fn = self.function
        if order != list(range(len(sops))):
            fn = substitute(fn, {i: Var(j) for i, j in enumerate(order)})
        super().__init__(MapNode if len(distinct) == 1 else SequenceMapNode, tuple(distinct), fn=fn)

    @property
    def f(self) -> Callable[..., Any]:
        fn = self.function
        return lambda *xs: evaluate(fn, xs)


class LinearSequenceMap(SequenceMap):
    """tracr's ``fst_fac * fst + snd_fac * snd``, as an expression the compiler can read."""

    def __init__(self, fst: SOp, snd: SOp, fst_fac: float, snd_fac: float) -> None:
        if (fst_fac, snd_fac) == (1, 1):
            fn: Expr = Binary("+", Var(0), Var(1))  # one operation, as the RASP text `a + b` elaborates
        elif (fst_fac, snd_fac) == (1, -1):
            fn = Binary("-", Var(0), Var(1))
        else:
            fn = Binary("+", Binary("*", Const(fst_fac), Var(0)), Binary("*", Const(snd_fac), Var(1)))
        super().__init__(fn, fst, snd)
        self.fst_fac, self.snd_fac = fst_fac, snd_fac


class ConstantLengthError(UserError, ValueError):
    """A constant s-op or selector evaluated on an input of another length (a ValueError, as in
    tracr)."""


def _length_checked(n_values: int) -> SOp:
    """``indices`` on inputs of length ``n_values``; any other length is an error, as tracr's
    constant s-ops and selectors raise (compiled, the other lengths have no answer either)."""
    def position(i: Any, n: Any) -> Any:
        if n != n_values:
            raise ConstantLengthError(_length_message(n_values, n))
        return i
    return SequenceMap(position, indices, length)


def _length_message(n_values: int, n: int) -> str:
    return (f"Constant len {n_values} doesn't match input len {n}: the constant has length {n_values} "
            f"but the input has length {n}")


class ConstantSOp(SOp):
    """tracr's constant s-op: ``value[i]`` at position ``i`` (a sequence of atoms).  With
    ``check_length`` an input of another length is an error; without it, positions past the
    constant hold 0 (tracr's evaluator gives the constant as it is)."""

    def __init__(self, value: Any, check_length: bool = True) -> None:
        if isinstance(value, RASPExpr) or not isinstance(value, Iterable):
            raise PyApiTypeError(f"ConstantSOp takes a sequence of values, one per position, got "
                                 f"{reprlib.repr(value)}",
                                 hint="write ConstantSOp([5, 5, 5]); Full(5) is 5 at every position")
        self.value = [_atom(v, "each of ConstantSOp's values") for v in value]
        self.check_length = check_length
        values = self.value
        position = _length_checked(len(values)) if check_length else indices
        fn = PyFn(lambda i: values[i] if i < len(values) else 0, "constant", 1)
        super().__init__(MapNode, (position,), fn=fn)


def sop_not(sop: SOp) -> SOp:
    """tracr's ``sop_not``: ``~sop``."""
    return ~sop


# indicator and rasp_round are RASP's built-ins, not tracr's: one node per call, as in .rasp text
def indicator(sop: SOp) -> SOp:
    """1 where ``sop`` is true, else 0 (numbers a numerical aggregate can average)."""
    return _elementwise(lambda a: Unary("indicator", a), [sop], simplify=False)


def rasp_round(sop: SOp) -> SOp:
    return _elementwise(lambda a: Unary("round", a), [sop], simplify=False)


def _annotate(sop: SOp, encoding: str) -> SOp:
    if not isinstance(sop, SOp):
        raise PyApiTypeError(f"{encoding}(…) annotates an s-op, got {type(sop).__name__}")
    sop = sop.copy()
    sop.encoding = encoding
    return sop


def numerical(sop: SOp) -> SOp:
    """A copy of ``sop`` marked as one residual dimension holding its value (tracr's
    ``numerical``: ``sop`` itself keeps its encoding)."""
    return _annotate(sop, "numerical")


def categorical(sop: SOp) -> SOp:
    """A copy of ``sop`` marked as one-hot over its values (tracr's ``categorical``)."""
    return _annotate(sop, "categorical")
