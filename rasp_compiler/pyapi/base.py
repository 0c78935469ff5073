"""Build RASP program graphs from Python, with tracr's names: the expression classes.

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

This module holds what every node shares: ``RASPExpr``, ``SOp`` and ``Selector`` with their
operators, and the primitives ``tokens``, ``indices``, ``length``.  The constructors are in
``sops`` (maps, constants), ``selectors`` (selects and their combinations) and ``aggregates``
(aggregate, selector width); ``program`` turns an expression into a ``Program``.  Those modules
import this one, so what the classes here build from them (an operator's ``Map``, ``&``'s
``SelectorAnd``, ``.program()``) is imported where it is called.
"""

from __future__ import annotations

import copy
import itertools
import keyword
import re
import sys
from typing import Any, Callable

from rasp_compiler.errors import UserError
from rasp_compiler.graph.expr import Binary, Const, Expr, PyFn, Ternary, Unary, Var
from rasp_compiler.graph.nodes import Indices, Length, Node, Program, Tokens

PYTHON_FILE = "<python>"
ATOMS = (bool, int, float, str)
_ids = itertools.count(1)
# The Python API's builder modules: _caller looks past their frames to the line the user wrote
_BUILDER_MODULES = frozenset(
    f"rasp_compiler.pyapi.{m}" for m in ("base", "sops", "selectors", "aggregates", "program"))


class PyApiTypeError(UserError, TypeError):
    """A builder given the wrong kind of value (``Map(3, tokens)``, ``tokens + [1]``): a TypeError,
    as tracr raises, and a UserError, so the command line and ``except UserError`` catch it."""


class PyApiKeyError(UserError, KeyError):
    """An annotation an expression does not have (``expr.annotations["foo"]``): tracr's KeyError,
    and a UserError."""


class _Annotations(dict):
    """An expression's annotations; a missing key is one ``PyApiKeyError`` (it was a bare KeyError)."""

    def __missing__(self, key: Any) -> Any:
        raise PyApiKeyError(f"No annotation exists for key {key!r}. Available keys: {sorted(self)}",
                            hint="add one with expr.annotated(key=value)")


class PyApiValueError(UserError, ValueError):
    """A builder given a value it cannot take (``Select(k, q, "eq")``, ``.named("")``): a
    ValueError, as tracr raises, and a UserError."""


def _caller() -> tuple[str, int]:
    """File and line of the user's call (the first frame outside the builder modules)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "") in _BUILDER_MODULES:
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return PYTHON_FILE, 0
    return frame.f_code.co_filename, frame.f_lineno


_LIBRARY = "rasp_compiler.pyapi.lib"


def _library_call() -> str:
    """For an expression built inside tracr's library (``lib.make_sort_unique``): which library
    function the user called, and where (``lib.make_sort_unique, called at prog.py:11``), so that
    an error located in lib.py also names the user's line (SourcePos.called); "" otherwise."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "") in _BUILDER_MODULES:
        frame = frame.f_back  # type: ignore[assignment]
    called = ""
    while frame is not None and frame.f_globals.get("__name__", "") == _LIBRARY:
        called = frame.f_code.co_name  # the outermost library function: the one the user called
        frame = frame.f_back  # type: ignore[assignment]
    if not called or frame is None:
        return ""
    return f"lib.{called}, called at {frame.f_code.co_filename}:{frame.f_lineno}"


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
        self.called_from = _library_call()  # "" unless tracr's library built it

    def named(self, name: str) -> "RASPExpr":
        """Give the node an id (and a variable name in ``to_source``); returns the node itself.
        A name that is not an identifier (tracr's ``shift_by(1)``) is kept as ``.name``, and its
        id replaces each run of other characters with ``_`` (``shift_by_1``; ``shift_by(-1)`` gives
        ``shift_by_neg1``)."""
        if not isinstance(name, str) or not re.search(r"\w", name):
            raise PyApiValueError(f"{name!r} is not a name: give a string with letters or digits")
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
        from rasp_compiler.pyapi.program import evaluate_expr

        return evaluate_expr(self, xs)

    def program(self, source_file: str = PYTHON_FILE) -> Program:
        """The program graph computing this node."""
        from rasp_compiler.pyapi.program import build_program

        return build_program(self, source_file)

    def __repr__(self) -> str:
        # what the node computes from what, by the names the user sees (.label, or the name
        # given): "<select #8>" said neither, and its number was not the label's
        def who(e: "RASPExpr") -> str:
            return e.ident or e.label

        kind = self.cls.kind
        if not self.inputs and self.ident == kind:  # tokens, indices, length (a named copy: its name)
            given = getattr(self, "given_name", None)
            return f"<{kind} named {given!r}>" if given and given != kind else f"<{kind}>"
        parts = [who(i) for i in self.inputs]
        fields = self.fields
        fn = fields.get("fn")
        if isinstance(fn, PyFn):  # Map(f, sop) names f first, Select(keys, queries, predicate) last
            parts.insert(len(parts) if self.is_selector else 0, fn.label)
        if "op" in fields and fields["op"] != "fn":
            parts.append(str(fields["op"]))
        if "default" in fields:
            parts.append(f"default={fields['default']!r}")
        if "value" in fields:
            parts.append(repr(fields["value"]))
        return f"<{kind} {who(self)}({', '.join(parts)})>"

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
        ``annotated``.  A copy: change them with ``annotated(...)`` or ``named(...)``.  A key it
        lacks is tracr's KeyError, naming the keys there are (and a UserError)."""
        out = _Annotations(getattr(self, "extra_annotations", {}))
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


def _atom(value: Any, what: str, sop_too: bool = False) -> Any:
    """``value``, an atom; ``sop_too`` where the caller also takes an s-op (an operand), so that the
    message names what it takes (`Full(tokens)` was told it "must be an s-op ... got SOp")."""
    if not isinstance(value, ATOMS):
        got = f"an s-op ({value.label})" if isinstance(value, SOp) else type(value).__name__
        raise PyApiTypeError(f"{what} must be {'an s-op or ' * sop_too}an atom (str, int, float, bool), "
                             f"got {got}")
    return value


def _python_and(a: Expr, b: Expr) -> Expr:
    return Ternary(b, a, a)  # `b if a else a`


def _python_or(a: Expr, b: Expr) -> Expr:
    return Ternary(a, a, b)  # `a if a else b`


def _elementwise(make: Callable[..., Expr], args: list[Any], simplify: bool = True) -> "SOp":
    """A Map (one distinct s-op input) or SequenceMap (several), as the elaborator builds them;
    a map of a map is merged as tracr's ``Map`` merges it, unless not ``simplify``."""
    from rasp_compiler.pyapi.sops import Map, SequenceMap

    inputs: list[SOp] = []
    exprs: list[Expr] = []
    for a in args:
        if isinstance(a, SOp):
            if not any(a is b for b in inputs):
                inputs.append(a)
            exprs.append(Var(next(i for i, b in enumerate(inputs) if b is a)))
        elif isinstance(a, Selector):
            raise PyApiTypeError("selectors combine only with &, | and ~ (with other selectors)")
        else:
            exprs.append(Const(_atom(a, "an operand", sop_too=True)))
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
        raise PyApiTypeError("an s-op has no truth value while the program is built; use & | ~ for "
                             "logic and Python's if only on atoms")


class Selector(RASPExpr):
    """A selection matrix ``sel[query][key]``.  ``&``, ``|`` and ``~`` make one node each, as
    ``and``, ``or`` and ``not`` do in a ``.rasp`` file; tracr's ``selector_and`` / ``selector_or`` /
    ``selector_not`` functions also merge two selects into one, as tracr does."""

    is_selector = True

    def __and__(self, o: "Selector") -> "Selector":
        from rasp_compiler.pyapi.selectors import SelectorAnd

        return SelectorAnd(self, o)

    def __or__(self, o: "Selector") -> "Selector":
        from rasp_compiler.pyapi.selectors import SelectorOr

        return SelectorOr(self, o)

    def __invert__(self) -> "Selector":
        from rasp_compiler.pyapi.selectors import SelectorNot

        return SelectorNot(self)


def _selector(value: Any, what: str) -> Selector:
    """``value`` if it is a selector; else an error naming the argument (``what``), since
    ``Aggregate(tokens, tokens)`` (the arguments swapped or the select left out) is common."""
    if not isinstance(value, Selector):
        got = f"an s-op ({value.label})" if isinstance(value, SOp) else type(value).__name__
        raise PyApiTypeError(f"{what} must be a selector, got {got}",
                             hint="build one with Select(keys, queries, predicate)")
    return value


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


def _primitive_key(e: RASPExpr) -> tuple | None:
    if e.cls in (Tokens, Indices, Length) and not e.inputs:
        return (e.cls.kind, e.fields.get("type"))
    return None
