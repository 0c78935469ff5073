"""Build RASP program graphs from Python, with tracr's names.

Every call makes one node, exactly as the elaborator makes one node per RASP operation, so a
program written here and the same program written as a ``.rasp`` file have the same graph::

    from rasp_compiler.pyapi import tokens, indices, length, select, aggregate, Comparison
    flip = select(indices, length - indices - 1, Comparison.EQ).named("flip")
    reverse = aggregate(flip, tokens).named("reverse")
    program = reverse.program()          # a rasp_compiler.graph.Program

Operators on s-ops (``sop + 1``, ``a - b``, ``sop == "x"``, ``~sop``, ``a & b``) build maps whose
functions are expression trees (readable by the compiler and by ``to_source``); ``Map(fn, sop)``
and ``SequenceMap(fn, a, b)`` with a Python callable build maps whose function is opaque
(``PyFn``): the compiler tabulates it over the input value sets.  Selectors combine with ``&``,
``|`` and ``~``.  Nodes are named with ``.named("x")``; unnamed ones get ``kind_N`` ids.
"""

from __future__ import annotations

import enum
import itertools
import keyword
import re
import sys
from typing import Any, Callable

import networkx as nx

from rasp_compiler.graph.expr import Binary, Const, Expr, PyFn, Ternary, Unary, Var
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


class Comparison(enum.Enum):
    """tracr's predicates: ``sel[q][k] = key OP query`` (TRUE/FALSE select everything/nothing)."""

    EQ = "=="
    NEQ = "!="
    LT = "<"
    LEQ = "<="
    GT = ">"
    GEQ = ">="
    TRUE = "true"
    FALSE = "false"


def _caller() -> tuple[str, int]:
    """File and line of the user's call (the first frame outside this package)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("rasp_compiler.pyapi.builder"):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return PYTHON_FILE, 0
    return frame.f_code.co_filename, frame.f_lineno


class RASPExpr:
    """One node of a program under construction: its node class, inputs and fields."""

    is_selector = False

    def __init__(self, cls: type[Node], inputs: tuple["RASPExpr", ...] = (), **fields: Any) -> None:
        self.uid = next(_ids)
        self.cls = cls
        self.inputs = inputs
        self.fields = fields
        self.label: str | None = None
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
        if any(self is p for p in PRIMITIVES):
            return self  # shared by every program (tokens, indices, length): they keep their names
        self.label, self.given_name = label, name
        return self

    @property
    def name(self) -> str:
        """The given name; unnamed, ``kind_N`` (N counts every expression built), as in tracr."""
        return getattr(self, "given_name", None) or self.label or f"{self.cls.kind}_{self.uid}"

    def __call__(self, xs: Any) -> Any:
        """The interpreter's output on one input (tracr's ``program(xs)``)."""
        from rasp_compiler.interpreter import run as interpret

        return interpret(self.program(), xs)

    def program(self, source_file: str = PYTHON_FILE) -> Program:
        """The program graph computing this node."""
        return build_program(self, source_file)

    def __repr__(self) -> str:
        return f"<{self.cls.kind} {self.label or '#' + str(self.uid)}>"

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


def _elementwise(make: Callable[..., Expr], args: list[Any]) -> "SOp":
    """A Map (one distinct s-op input) or SequenceMap (several), as the elaborator builds them."""
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
    cls = MapNode if len(inputs) == 1 else SequenceMapNode
    return SOp(cls, tuple(inputs), fn=fn)


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
        return _boolean(_elementwise(lambda a, b: Binary(op, a, b), [self, o]))

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
        raise TypeError("an s-op has no truth value while the program is built; use & | ~ for logic "
                        "and Python's if only on atoms")


class Selector(RASPExpr):
    """A selection matrix ``sel[query][key]``."""

    is_selector = True

    def __and__(self, o: "Selector") -> "Selector":
        return Selector(AndNode, (self, _selector(o)))

    def __or__(self, o: "Selector") -> "Selector":
        return Selector(OrNode, (self, _selector(o)))

    def __invert__(self) -> "Selector":
        return Selector(NotNode, (self,))


def _selector(value: Any) -> Selector:
    if not isinstance(value, Selector):
        raise TypeError(f"expected a selector, got {type(value).__name__}")
    return value


def _sop(value: Any, what: str) -> SOp:
    """An s-op, or a fresh Constant s-op for an atom (as the elaborator does)."""
    if isinstance(value, SOp):
        return value
    if isinstance(value, Selector):
        raise TypeError(f"{what} must be an s-op, got a selector")
    return SOp(Constant, (), value=_atom(value, what))


# --------------------------------------------------------------------------- primitives
def _primitive(cls: type[Node], label: str, **fields: Any) -> SOp:
    sop = SOp(cls, (), **fields)
    sop.label = label
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


def Full(value: Any) -> SOp:  # noqa: N802 - tracr's name
    """The s-op holding ``value`` at every position (tracr's ``Full``)."""
    return SOp(Constant, (), value=_atom(value, "Full's value"))


def _length_checked(n_values: int) -> SOp:
    """``indices`` on inputs of length ``n_values``; any other length is an error, as tracr's
    constant s-ops and selectors raise (compiled, the other lengths have no answer either)."""
    def position(i: Any, n: Any) -> Any:
        if n != n_values:
            raise ValueError(f"the constant has length {n_values} but the input has length {n}")
        return i
    return SequenceMap(position, indices, length)


def ConstantSOp(value: Any, check_length: bool = True) -> SOp:  # noqa: N802 - tracr's name
    """tracr's constant s-op: ``value[i]`` at position ``i`` (a sequence of atoms).  With
    ``check_length`` an input of another length is an error; without it, a longer input is."""
    values = [_atom(v, "ConstantSOp's values") for v in value]
    if check_length:
        return Map(lambda i: values[i], _length_checked(len(values)))
    return Map(lambda i: values[i], indices)


def ConstantSelector(value: Any, check_length: bool = True) -> "Selector":  # noqa: N802 - tracr's name
    """tracr's constant selector: ``value[q][k]`` selects key ``k`` for query ``q`` (a square
    matrix of booleans), with the length check of ``ConstantSOp``."""
    rows = [[bool(x) for x in row] for row in value]
    if any(len(row) != len(rows) for row in rows):
        raise ValueError("ConstantSelector's value must be a square matrix (one row per query)")
    queries = _length_checked(len(rows)) if check_length else indices
    return select(indices, queries, lambda k, q: rows[q][k])


# --------------------------------------------------------------------------- operations
def select(keys: Any, queries: Any, predicate: Comparison | str | Callable[[Any, Any], Any]) -> Selector:
    """``sel[q][k] = keys[k] predicate queries[q]``; ``predicate`` is a ``Comparison``, one of
    ``== != < <= > >=`` (``Comparison.TRUE`` / ``FALSE`` select all / no keys), or a Python
    function ``predicate(key, query)`` (tracr's lambda predicates; the compiler tabulates it over
    the key and query value sets)."""
    if callable(predicate) and not isinstance(predicate, (Comparison, str)):
        fn = PyFn(predicate, getattr(predicate, "__name__", "fn"), 2)
        return Selector(SelectNode, (_sop(keys, "select's keys"), _sop(queries, "select's queries")),
                        op="fn", fn=fn)
    op = predicate.value if isinstance(predicate, Comparison) else predicate
    if op in ("true", "false"):
        # Constant keys and queries: the predicate no longer depends on the s-ops (tracr's TRUE).
        return Selector(SelectNode, (_sop(0, "keys"), _sop(0, "queries")), op="==" if op == "true" else "!=")
    if op not in ("==", "!=", "<", "<=", ">", ">="):
        raise ValueError(f"unknown comparison {predicate!r}; use Comparison.EQ/LT/... or '==', '<', ...")
    return Selector(SelectNode, (_sop(keys, "select's keys"), _sop(queries, "select's queries")), op=op)


def aggregate(selector: Selector, sop: Any, default: Any = 0) -> SOp:
    """Per query: the selected value (one key), their mean (several; numbers), ``default`` (none).
    tracr's ``None`` default becomes RASP's 0, or ``False`` when ``sop`` is built as a boolean
    (a comparison, ``~``, ``&``/``|`` of booleans): then the result holds one type, as tracr's
    ``shift_by`` of a comparison does, and the compiler need not refuse an output that could be
    either ``0`` or ``False`` (Python holds them equal)."""
    sop = _sop(sop, "aggregate's s-op")
    if default is None:
        default = False if sop.boolean else 0
    out = SOp(AggregateNode, (_selector(selector), sop), default=_atom(default, "aggregate's default"))
    out.boolean = sop.boolean and isinstance(default, bool)
    return out


def selector_width(selector: Selector) -> SOp:
    """How many keys each query selects."""
    return SOp(WidthNode, (_selector(selector),))


def Map(fn: Callable[[Any], Any] | Expr, sop: SOp, simplify: bool = True) -> SOp:  # noqa: N802
    """``fn`` applied at every position (a Python callable: tabulated by the compiler)."""
    del simplify  # tracr's flag; maps are fused by the compiler anyway
    if isinstance(fn, Expr):
        return SOp(MapNode, (_sop(sop, "Map's input"),), fn=fn)
    return SOp(MapNode, (_sop(sop, "Map's input"),), fn=PyFn(fn, getattr(fn, "__name__", "fn"), 1))


def SequenceMap(fn: Callable[..., Any], *sops: SOp) -> SOp:  # noqa: N802
    """``fn(a[i], b[i], …)`` at every position."""
    if not sops:
        raise TypeError("SequenceMap needs at least one s-op")
    distinct: list[SOp] = []
    for s in sops:
        s = _sop(s, "SequenceMap's input")
        if not any(s is d for d in distinct):
            distinct.append(s)
    order = [next(i for i, d in enumerate(distinct) if d is s) for s in sops]
    inner = fn
    call = inner if order == list(range(len(sops))) else (lambda *a: inner(*(a[j] for j in order)))
    label = getattr(fn, "__name__", "fn")
    cls = MapNode if len(distinct) == 1 else SequenceMapNode
    return SOp(cls, tuple(distinct), fn=PyFn(call, label, len(distinct)))


def LinearSequenceMap(a: SOp, b: SOp, coeff_a: float, coeff_b: float) -> SOp:  # noqa: N802
    """tracr's ``coeff_a * a + coeff_b * b``, as an expression the compiler can read."""
    if (coeff_a, coeff_b) == (1, 1):
        return a + b  # one operation, as the RASP text `a + b` elaborates
    if (coeff_a, coeff_b) == (1, -1):
        return a - b
    fn = Binary("+", Binary("*", Const(coeff_a), Var(0)), Binary("*", Const(coeff_b), Var(1)))
    return SOp(SequenceMapNode, (a, b), fn=fn)


def indicator(sop: SOp) -> SOp:
    """1 where ``sop`` is true, else 0 (numbers a numerical aggregate can average)."""
    return _elementwise(lambda a: Unary("indicator", a), [sop])


def rasp_round(sop: SOp) -> SOp:
    return _elementwise(lambda a: Unary("round", a), [sop])


def _annotate(sop: SOp, encoding: str) -> SOp:
    if not isinstance(sop, SOp):
        raise TypeError(f"{encoding}(…) annotates an s-op, got {type(sop).__name__}")
    if any(sop is p for p in PRIMITIVES):
        # The primitives are shared by every program: annotate a copy, merged by build_program.
        copy = _primitive(sop.cls, sop.label or sop.cls.kind, **sop.fields)
        copy.encoding = encoding
        return copy
    sop.encoding = encoding
    return sop


def numerical(sop: SOp) -> SOp:
    """Mark ``sop`` as one residual dimension holding its value."""
    return _annotate(sop, "numerical")


def categorical(sop: SOp) -> SOp:
    """Mark ``sop`` as one-hot over its values."""
    return _annotate(sop, "categorical")


Select, Aggregate, SelectorWidth = select, aggregate, selector_width


def SelectorAnd(a: Selector, b: Selector) -> Selector:  # noqa: N802
    return _selector(a) & b


def SelectorOr(a: Selector, b: Selector) -> Selector:  # noqa: N802
    return _selector(a) | b


def SelectorNot(a: Selector) -> Selector:  # noqa: N802
    return ~_selector(a)


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
    canon: dict[tuple, RASPExpr] = {}
    alias: dict[int, int] = {}
    for e in sorted(seen.values(), key=lambda e: e.uid):
        key = _primitive_key(e)
        if key is None:
            continue
        if key in canon:
            first = canon[key]
            enc_a, enc_b = getattr(first, "encoding", None), getattr(e, "encoding", None)
            if enc_a and enc_b and enc_a != enc_b:
                raise ValueError(f"{key[0]} is annotated both {enc_a} and {enc_b}")
            if enc_b and not enc_a:
                first.encoding = enc_b  # type: ignore[attr-defined]
            alias[e.uid] = first.uid
        else:
            canon[key] = e
    order = [e for e in sorted(seen.values(), key=lambda e: e.uid) if e.uid not in alias]
    ids: dict[int, str] = {}
    taken: set[str] = set()
    for e in order:
        if e.label:
            name, k = e.label, 1
            while name in taken:
                k += 1
                name = f"{e.label}_{k}"
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
            fields["encoding"] = e.encoding
        inputs = tuple(id_of(i) for i in e.inputs)
        built.append((e, e.cls(id=id_of(e), inputs=inputs, name=e.label, **fields)))
    constants = {n.id: n.value for _, n in built if isinstance(n, Constant)}
    for e, node in built:
        # The position is the Python line that built the node; its text is the RASP operation,
        # which is what plans, pictures and error messages show.
        if _primitive_key(e):
            add_node(graph, node)  # built in, like the elaborator's tokens/indices/length: no position
            continue
        file, line = e.where
        add_node(graph, _with_pos(node, SourcePos(file, line, 1, node_text(node, {}, constants))))
    names = {e.label: id_of(e) for e in order if e.label}
    return Program(graph, id_of(output), names, source_file)


def _with_pos(node: Node, pos: SourcePos) -> Node:
    import dataclasses

    return dataclasses.replace(node, pos=pos)
