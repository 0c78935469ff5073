"""Build RASP program graphs from Python, with tracr's names.

Every call makes one node, exactly as the elaborator makes one node per RASP operation, so a
program written here and the same program written as a ``.rasp`` file have the same graph (one
exception, tracr's: a map of an unnamed map is merged into one map, see ``Map``)::

    from rasp_compiler.pyapi import tokens, indices, length, select, aggregate, Comparison
    flip = select(indices, length - indices - 1, Comparison.EQ).named("flip")
    reverse = aggregate(flip, tokens).named("reverse")
    program = reverse.program()          # a rasp_compiler.graph.Program

Operators on s-ops (``sop + 1``, ``a - b``, ``sop == "x"``, ``~sop``, ``a & b``) build maps whose
functions are expression trees (readable by the compiler and by ``to_source``); ``Map(fn, sop)``
and ``SequenceMap(fn, a, b)`` with a Python callable build maps whose function is opaque
(``PyFn``): the compiler tabulates it over the input value sets.  Selectors combine with ``&``,
``|`` and ``~``.  Nodes are named with ``.named("x")``; unnamed ones get ``kind_N`` ids.  tracr's
names are classes with tracr's constructors and fields (``Map(f, inner).inner``,
``Select(keys, queries, predicate).keys``), so tracr code that inspects expressions runs.
"""

from __future__ import annotations

import copy
import enum
import itertools
import keyword
import logging
import re
import sys
from typing import Any, Callable, Union

import networkx as nx

from rasp_compiler.errors import UserError
from rasp_compiler.graph.expr import Binary, Const, Expr, PyFn, Ternary, Unary, Var, evaluate, substitute
from rasp_compiler.graph.nodes import (
    Aggregate as AggregateNode,
)
from rasp_compiler.graph.nodes import (
    Constant,
    Indices,
    Length,
    Node,
    Program,
    SourcePos,
    Tokens,
    add_node,
)
from rasp_compiler.graph.nodes import (
    Map as MapNode,
)
from rasp_compiler.graph.nodes import (
    Select as SelectNode,
)
from rasp_compiler.graph.nodes import (
    SelectorAnd as AndNode,
)
from rasp_compiler.graph.nodes import (
    SelectorNot as NotNode,
)
from rasp_compiler.graph.nodes import (
    SelectorOr as OrNode,
)
from rasp_compiler.graph.nodes import (
    SelectorWidth as WidthNode,
)
from rasp_compiler.graph.nodes import (
    SequenceMap as SequenceMapNode,
)

PYTHON_FILE = "<python>"
ATOMS = (bool, int, float, str)
_ids = itertools.count(1)
log = logging.getLogger(__name__)


def _caller() -> tuple[str, int]:
    """File and line of the user's call (the first frame outside this package)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("rasp_compiler.pyapi.builder"):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return PYTHON_FILE, 0
    return frame.f_code.co_filename, frame.f_lineno


def _tracr_kind(expr: "RASPExpr") -> str:
    """tracr's default name of an expression: its most specific class, in snake case."""
    for cls in type(expr).__mro__:
        if cls.__name__ in _TRACR_KINDS:
            return _TRACR_KINDS[cls.__name__]
    return expr.cls.kind


_TRACR_KINDS = {"LinearSequenceMap": "linear_sequence_map", "SequenceMap": "sequence_map", "Map": "map",
                "Full": "full", "ConstantSOp": "constant_sop", "SelectorWidth": "selector_width",
                "Aggregate": "aggregate", "SOp": "sop", "Select": "select", "SelectorAnd": "selector_and",
                "SelectorOr": "selector_or", "SelectorNot": "selector_not",
                "ConstantSelector": "constant_selector", "Selector": "selector"}

class RASPExpr:
    """One node of a program under construction: its node class, inputs and fields."""

    is_selector = False

    def __init__(self, cls: type[Node], inputs: tuple["RASPExpr", ...] = (), **fields: Any) -> None:
        self.uid = next(_ids)
        self.cls = cls
        self.inputs = inputs
        self.fields = fields
        self.ident: str | None = None  # the node id a name asks for
        self.where = _caller()

    def named(self, name: str) -> "RASPExpr":
        """Give the node an id (and a variable name in ``to_source``); returns the node itself.
        A name that is not an identifier (tracr's ``shift_by(1)``) is kept as ``.name``, and its
        id replaces each run of other characters with ``_`` (``shift_by_1``; ``shift_by(-1)`` gives
        ``shift_by_neg1``)."""
        if not isinstance(name, str) or not re.search(r"\w", name):
            raise ValueError(f"{name!r} is not a name: give a string with letters or digits")
        # a minus sign before a number is kept as "neg": shift_by(-1) and shift_by(1) stay apart
        label = re.sub(r"\W+", "_", re.sub(r"-(?=\d)", "neg", name)).strip("_") or "node"
        if label[0].isdigit() or keyword.iskeyword(label):
            label = f"n_{label}"
        if _primitive_key(self):
            # tokens, indices and length keep their node ids (as tracr keeps their labels); the
            # shared ones are never changed, so naming one names a copy, as tracr's `named` does
            named = self.copy() if any(self is p for p in PRIMITIVES) else self
            named.given_name = name
            return named
        self.ident, self.given_name = label, name
        return self

    def copy(self) -> "RASPExpr":
        """tracr's ``copy``: the same expression (inputs, name, annotations) with a new id; renaming
        either leaves the other as it was."""
        new = copy.copy(self)
        new.uid = next(_ids)
        new.extra_annotations = dict(getattr(self, "extra_annotations", {}))
        return new

    @property
    def name(self) -> str:
        """The given name; unnamed, the kind as tracr names it (``map``, ``select``, …)."""
        return getattr(self, "given_name", None) or self.ident or _tracr_kind(self)

    @property
    def label(self) -> str:
        """tracr's label: ``name_N`` (N counts every expression built); tokens, indices and length
        are labelled with their name alone."""
        return self.ident if _primitive_key(self) and self.ident else f"{self.name}_{self.uid}"

    def __call__(self, xs: Any) -> Any:
        """The interpreter's output on one input (tracr's ``program(xs)``)."""
        return evaluate_expr(self, xs)

    def program(self, source_file: str = PYTHON_FILE) -> Program:
        """The program graph computing this node."""
        return build_program(self, source_file)

    def __repr__(self) -> str:
        return f"<{self.cls.kind} {self.ident or '#' + str(self.uid)}>"

    @property
    def children(self) -> tuple["RASPExpr", ...]:
        """The direct inputs (tracr's ``children``)."""
        return self.inputs

    @property
    def unique_id(self) -> int:
        return self.uid

    @property
    def annotations(self) -> dict[str, Any]:
        """tracr's annotations: ``name``, ``encoding`` (s-ops) and any others given to
        ``annotated``.  A copy: change them with ``annotated(...)`` or ``named(...)``."""
        out = dict(getattr(self, "extra_annotations", {}))
        out["name"] = self.name
        if isinstance(self, SOp):
            from rasp_compiler.pyapi.encodings import Encoding

            out["encoding"] = Encoding(self.encoding or "categorical")
        return out

    @annotations.setter
    def annotations(self, values: dict[str, Any]) -> None:
        from rasp_compiler.pyapi.encodings import annotate

        annotate(self, **values)

    def annotated(self, **values: Any) -> "RASPExpr":
        """tracr's ``expr.annotated(name=..., encoding=...)``; see ``encodings.annotate``."""
        from rasp_compiler.pyapi.encodings import annotate

        return annotate(self, **values)


def _atom(value: Any, what: str) -> Any:
    if not isinstance(value, ATOMS):
        raise TypeError(f"{what} must be an s-op or an atom (str, int, float, bool), "
                        f"got {type(value).__name__}")
    return value


def _python_and(a: Expr, b: Expr) -> Expr:
    return Ternary(b, a, a)  # `b if a else a`


def _python_or(a: Expr, b: Expr) -> Expr:
    return Ternary(a, a, b)  # `a if a else b`


def _elementwise(make: Callable[..., Expr], args: list[Any], simplify: bool = True) -> "SOp":
    """A Map (one distinct s-op input) or SequenceMap (several), as the elaborator builds them;
    a map of a map is merged as tracr's ``Map`` merges it, unless not ``simplify``."""
    inputs: list[SOp] = []
    exprs: list[Expr] = []
    for a in args:
        if isinstance(a, SOp):
            if not any(a is b for b in inputs):
                inputs.append(a)
            exprs.append(Var(next(i for i, b in enumerate(inputs) if b is a)))
        elif isinstance(a, Selector):
            raise TypeError("selectors combine only with &, | and ~ (with other selectors)")
        else:
            exprs.append(Const(_atom(a, "an operand")))
    fn = make(*exprs)
    return Map(fn, inputs[0], simplify) if len(inputs) == 1 else SequenceMap(fn, *inputs)


def _boolean(sop: "SOp", *operands: Any) -> "SOp":
    """Mark ``sop`` as built as a boolean; with ``operands`` (``&``/``|``, which give back an
    operand), only when each is a boolean s-op or a bool."""
    sop.boolean = all(isinstance(o, bool) or getattr(o, "boolean", False) for o in operands)
    return sop


class SOp(RASPExpr):
    """A sequence operation: one value per position."""

    def __init__(self, cls: type[Node], inputs: tuple[RASPExpr, ...] = (), encoding: str | None = None,
                 **fields: Any) -> None:
        super().__init__(cls, inputs, **fields)
        self.encoding = encoding
        # built as a boolean (a comparison, ~, & or | of booleans, tokens_bool): see ``aggregate``
        self.boolean = cls is Tokens and fields.get("type") == "bool"

    # arithmetic
    def __add__(self, o: Any) -> "SOp": return _elementwise(lambda a, b: Binary("+", a, b), [self, o])
    def __radd__(self, o: Any) -> "SOp": return _elementwise(lambda a, b: Binary("+", a, b), [o, self])
    def __sub__(self, o: Any) -> "SOp": return _elementwise(lambda a, b: Binary("-", a, b), [self, o])
    def __rsub__(self, o: Any) -> "SOp": return _elementwise(lambda a, b: Binary("-", a, b), [o, self])
    def __mul__(self, o: Any) -> "SOp": return _elementwise(lambda a, b: Binary("*", a, b), [self, o])
    def __rmul__(self, o: Any) -> "SOp": return _elementwise(lambda a, b: Binary("*", a, b), [o, self])
    def __truediv__(self, o: Any) -> "SOp": return _elementwise(lambda a, b: Binary("/", a, b), [self, o])
    def __rtruediv__(self, o: Any) -> "SOp": return _elementwise(lambda a, b: Binary("/", a, b), [o, self])
    def __mod__(self, o: Any) -> "SOp": return _elementwise(lambda a, b: Binary("%", a, b), [self, o])
    def __rmod__(self, o: Any) -> "SOp": return _elementwise(lambda a, b: Binary("%", a, b), [o, self])
    def __pow__(self, o: Any) -> "SOp": return _elementwise(lambda a, b: Binary("^", a, b), [self, o])
    def __rpow__(self, o: Any) -> "SOp": return _elementwise(lambda a, b: Binary("^", a, b), [o, self])
    def __neg__(self) -> "SOp": return _elementwise(lambda a: Unary("-", a), [self])

    # comparisons (elementwise booleans, as in tracr)
    def _compare(self, op: str, o: Any) -> "SOp":
        out = _boolean(_elementwise(lambda a, b: Binary(op, a, b), [self, o]))
        if isinstance(o, SOp) and op in ("==", "!="):
            # As a truth value (`assertEqual(a, b)`, `a in list`), s-op == s-op is identity.
            out.truth = (self is o) == (op == "==")
        return out

    def __eq__(self, o: Any) -> "SOp": return self._compare("==", o)  # type: ignore[override]
    def __ne__(self, o: Any) -> "SOp": return self._compare("!=", o)  # type: ignore[override]
    def __lt__(self, o: Any) -> "SOp": return self._compare("<", o)
    def __le__(self, o: Any) -> "SOp": return self._compare("<=", o)
    def __gt__(self, o: Any) -> "SOp": return self._compare(">", o)
    def __ge__(self, o: Any) -> "SOp": return self._compare(">=", o)

    # logic (tracr: &, |, ~ on boolean s-ops)
    # tracr's & and | are Python's `x and y` / `x or y`, which give back an operand (`2 & 0` is 0,
    # `0 | "z"` is "z"); RASP's own `and` / `or` give booleans, so these are written as ternaries.
    def __and__(self, o: Any) -> "SOp": return _boolean(_elementwise(_python_and, [self, o]), self, o)
    def __rand__(self, o: Any) -> "SOp": return _boolean(_elementwise(_python_and, [o, self]), self, o)
    def __or__(self, o: Any) -> "SOp": return _boolean(_elementwise(_python_or, [self, o]), self, o)
    def __ror__(self, o: Any) -> "SOp": return _boolean(_elementwise(_python_or, [o, self]), self, o)
    def __invert__(self) -> "SOp": return _boolean(_elementwise(lambda a: Unary("not", a), [self]))

    __hash__ = RASPExpr.__hash__

    def __bool__(self) -> bool:
        truth = getattr(self, "truth", None)
        if truth is not None:
            return truth
        raise TypeError("an s-op has no truth value while the program is built; use & | ~ for logic "
                        "and Python's if only on atoms")


class Selector(RASPExpr):
    """A selection matrix ``sel[query][key]``.  ``&``, ``|`` and ``~`` make one node each, as
    ``and``, ``or`` and ``not`` do in a ``.rasp`` file; tracr's ``selector_and`` / ``selector_or`` /
    ``selector_not`` functions also merge two selects into one, as tracr does."""

    is_selector = True

    def __and__(self, o: "Selector") -> "Selector":
        return SelectorAnd(self, o)

    def __or__(self, o: "Selector") -> "Selector":
        return SelectorOr(self, o)

    def __invert__(self) -> "Selector":
        return SelectorNot(self)


def _selector(value: Any) -> Selector:
    if not isinstance(value, Selector):
        raise TypeError(f"expected a selector, got {type(value).__name__}")
    return value


def _sop(value: Any, what: str) -> SOp:
    """An s-op, or a fresh constant s-op (``Full``) for an atom (as the elaborator does)."""
    if isinstance(value, SOp):
        return value
    if isinstance(value, Selector):
        raise TypeError(f"{what} must be an s-op, got a selector")
    return Full(_atom(value, what))


# --------------------------------------------------------------------------- primitives
def _primitive(cls: type[Node], label: str, **fields: Any) -> SOp:
    sop = SOp(cls, (), **fields)
    sop.ident = label
    sop.where = (PYTHON_FILE, 0)
    return sop


tokens = _primitive(Tokens, "tokens", type="value")  # the input as given (tracr's tokens)
tokens_str = _primitive(Tokens, "tokens_str", type="str")
tokens_int = _primitive(Tokens, "tokens_int", type="int")
tokens_float = _primitive(Tokens, "tokens_float", type="float")
tokens_bool = _primitive(Tokens, "tokens_bool", type="bool")
indices = _primitive(Indices, "indices")
length = _primitive(Length, "length")
PRIMITIVES = (tokens, tokens_str, tokens_int, tokens_float, tokens_bool, indices, length)


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
        raise TypeError(f"{what} takes the function first, then the s-op(s): got {type(f).__name__}")
    return PyFn(f, getattr(f, "__name__", "fn"), arity)


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
            raise TypeError("SequenceMap needs at least one s-op")
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
        self.value = [_atom(v, "ConstantSOp's values") for v in value]
        self.check_length = check_length
        values = self.value
        position = _length_checked(len(values)) if check_length else indices
        fn = PyFn(lambda i: values[i] if i < len(values) else 0, "constant", 1)
        super().__init__(MapNode, (position,), fn=fn)


class Comparison(enum.Enum):
    """tracr's predicates: ``sel[q][k] = key OP query`` (TRUE/FALSE select everything/nothing).
    Called as tracr's are: ``Comparison.LT(key, query)``."""

    EQ = "=="
    NEQ = "!="
    LT = "<"
    LEQ = "<="
    GT = ">"
    GEQ = ">="
    TRUE = "true"
    FALSE = "false"

    def __call__(self, key: Any, query: Any) -> bool:
        return _predicate(self)(key, query)


Predicate = Union[Comparison, str, Callable[[Any, Any], Any]]
_OPS = ("==", "!=", "<", "<=", ">", ">=")
_NEGATED = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">", "true": "false",
            "false": "true"}


def _op(predicate: Any) -> str | None:
    """The comparison a predicate names (``Comparison.LT``, ``"<"``), or None for a function."""
    if isinstance(predicate, Comparison):
        return predicate.value
    if isinstance(predicate, str):
        if predicate not in _OPS and predicate not in ("true", "false"):
            raise ValueError(f"unknown comparison {predicate!r}; use Comparison.EQ/LT/... or '==', '<', ...")
        return predicate
    if callable(predicate):
        return None
    raise TypeError(f"a predicate is a Comparison, a comparison string or a function, got {predicate!r}")


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
        rows = [[bool(x) for x in row] for row in value]
        if any(len(row) != len(rows) for row in rows):
            raise ValueError("ConstantSelector's value must be a square matrix (one row per query)")
        self.value, self.check_length = rows, check_length
        n = len(rows)
        queries = _length_checked(n) if check_length else indices
        inputs, fields = _select_node(indices, queries, lambda k, q: q < n and k < n and rows[q][k])
        super().__init__(SelectNode, inputs, **fields)


class SelectorWidth(SOp):
    """How many keys each query selects."""

    def __init__(self, selector: Selector) -> None:
        super().__init__(WidthNode, (_selector(selector),))

    @property
    def selector(self) -> Selector:
        return self.inputs[0]  # type: ignore[return-value]


class Aggregate(SOp):
    """Per query: the selected value (one key), their mean (several; numbers), ``default`` (none).
    tracr's ``None`` default becomes RASP's 0, or ``False`` when ``sop`` is built as a boolean
    (a comparison, ``~``, ``&``/``|`` of booleans): then the result holds one type, as tracr's
    ``shift_by`` of a comparison does, and the compiler need not refuse an output that could be
    either ``0`` or ``False`` (Python holds them equal).  ``.default`` is the default used."""

    def __init__(self, selector: Selector, sop: Any, default: Any = None) -> None:
        sop = _sop(sop, "aggregate's s-op")
        if default is None:
            default = False if sop.boolean else 0
        default = _atom(default, "aggregate's default")
        super().__init__(AggregateNode, (_selector(selector), sop), default=default)
        self.boolean = sop.boolean and isinstance(default, bool)

    selector = property(lambda self: self.inputs[0])
    sop = property(lambda self: self.inputs[1])
    default = property(lambda self: self.fields["default"])


class SelectorAnd(Selector):
    def __init__(self, fst: Selector, snd: Selector) -> None:
        super().__init__(AndNode, (_selector(fst), _selector(snd)))

    fst = property(lambda self: self.inputs[0])
    snd = property(lambda self: self.inputs[1])


class SelectorOr(Selector):
    def __init__(self, fst: Selector, snd: Selector) -> None:
        super().__init__(OrNode, (_selector(fst), _selector(snd)))

    fst = property(lambda self: self.inputs[0])
    snd = property(lambda self: self.inputs[1])


class SelectorNot(Selector):
    def __init__(self, inner: Selector) -> None:
        super().__init__(NotNode, (_selector(inner),))

    inner = property(lambda self: self.inputs[0])


# --------------------------------------------------------------------------- tracr's functions
def select(keys: Any, queries: Any, predicate: Predicate) -> Select:
    """``Select`` under its RASP name."""
    return Select(keys, queries, predicate)


def aggregate(selector: Selector, sop: Any, default: Any = 0) -> SOp:
    """``Aggregate`` with RASP's default 0 (``None`` gives tracr's default, see ``Aggregate``)."""
    return Aggregate(selector, sop, default)


def selector_width(selector: Selector) -> SOp:
    """How many keys each query selects."""
    return SelectorWidth(selector)


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
        raise TypeError(f"{encoding}(…) annotates an s-op, got {type(sop).__name__}")
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


def evaluate_expr(expr: RASPExpr, xs: Any) -> Any:
    """The interpreter's output of ``expr`` on ``xs``.  A constant of another length than ``xs``
    raises tracr's ``ValueError`` (``ConstantLengthError``) before evaluation."""
    from rasp_compiler.interpreter import run as interpret

    seen: set[int] = set()
    todo = [expr]
    while todo:
        e = todo.pop()
        if e.uid in seen:
            continue
        seen.add(e.uid)
        if isinstance(e, (ConstantSOp, ConstantSelector)) and e.check_length and len(e.value) != len(xs):
            raise ConstantLengthError(_length_message(len(e.value), len(xs)))
        todo.extend(e.inputs)
    return interpret(build_program(expr), xs)


# --------------------------------------------------------------------------- to a Program
def _primitive_key(e: RASPExpr) -> tuple | None:
    if e.cls in (Tokens, Indices, Length) and not e.inputs:
        return (e.cls.kind, e.fields.get("type"))
    return None


def build_program(output: RASPExpr, source_file: str = PYTHON_FILE) -> Program:
    """The program graph of everything ``output`` depends on; ids are the ``.named`` names
    (made unique with ``_2``, ``_3``) or ``kind_N`` in creation order."""
    from rasp_compiler.pyapi.source import node_text

    if not isinstance(output, RASPExpr):
        raise TypeError(f"expected an s-op or selector, got {type(output).__name__}")
    seen: dict[int, RASPExpr] = {}
    todo = [output]
    while todo:
        e = todo.pop()
        if e.uid in seen:
            continue
        seen[e.uid] = e
        todo.extend(e.inputs)
    # One node per primitive kind; an annotated copy gives it its encoding.
    # The encoding goes in this program's node only: the canonical expression may be the shared
    # `tokens` (or one of the user's), which must not keep it for the next program.
    canon: dict[tuple, RASPExpr] = {}
    alias: dict[int, int] = {}
    encodings: dict[int, str] = {}
    for e in sorted(seen.values(), key=lambda e: e.uid):
        key = _primitive_key(e)
        if key is None:
            continue
        if key in canon:
            first = canon[key]
            enc_a = encodings.get(first.uid) or getattr(first, "encoding", None)
            enc_b = getattr(e, "encoding", None)
            if enc_a and enc_b and enc_a != enc_b:
                raise ValueError(f"{key[0]} is annotated both {enc_a} and {enc_b}")
            if enc_b and not enc_a:
                encodings[first.uid] = enc_b
            alias[e.uid] = first.uid
        else:
            canon[key] = e
    order = [e for e in sorted(seen.values(), key=lambda e: e.uid) if e.uid not in alias]
    ids: dict[int, str] = {}
    taken: set[str] = set()
    for e in order:
        if e.ident:
            name, k = e.ident, 1
            while name in taken:
                k += 1
                name = f"{e.ident}_{k}"
            ids[e.uid] = name
            taken.add(name)
    counters: dict[str, int] = {}
    for e in order:
        if e.uid in ids:
            continue
        while True:
            counters[e.cls.kind] = counters.get(e.cls.kind, 0) + 1
            name = f"{e.cls.kind}_{counters[e.cls.kind]}"
            if name not in taken:
                break
        ids[e.uid] = name
        taken.add(name)

    def id_of(e: RASPExpr) -> str:
        return ids[alias.get(e.uid, e.uid)]

    graph = nx.DiGraph()
    built = []
    for e in order:
        fields = dict(e.fields)
        if isinstance(e, SOp):
            fields["encoding"] = encodings.get(e.uid) or e.encoding
        inputs = tuple(id_of(i) for i in e.inputs)
        built.append((e, e.cls(id=id_of(e), inputs=inputs, name=e.ident, **fields)))
    constants = {n.id: n.value for _, n in built if isinstance(n, Constant)}
    for e, node in built:
        # The position is the Python line that built the node; its text is the RASP operation,
        # which is what plans, pictures and error messages show.
        if _primitive_key(e):
            add_node(graph, node)  # built in, like the elaborator's tokens/indices/length: no position
            continue
        file, line = e.where
        add_node(graph, _with_pos(node, SourcePos(file, line, 1, node_text(node, {}, constants))))
    names = {e.ident: id_of(e) for e in order if e.ident}
    return Program(graph, id_of(output), names, source_file)


def _with_pos(node: Node, pos: SourcePos) -> Node:
    import dataclasses

    return dataclasses.replace(node, pos=pos)
