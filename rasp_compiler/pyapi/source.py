"""``to_source``: a program graph written back as ``.rasp`` text that elaborates to the same graph.

One statement per node, in topological order, ``name = <one RASP operation>;``, so the elaborator
(which makes one node per operation) rebuilds the same nodes with the same ids; primitives are
the built-in names (``tokens``, ``tokens_int``, ``indices``, ``length``), constant s-ops are
written as their atom where they are used (the elaborator makes a fresh constant node for each
use), and ``numerical(...)`` / ``categorical(...)`` wrap annotated nodes.

Opaque Python functions (``Map(lambda x: ..., sop)``) have no RASP text, so they are written as a
dict lookup over their tabulated value sets — ``{"a": 1, "b": 0}[tokens]`` — which needs the
value sets: pass ``vocab`` and ``max_len`` (the compiler's value-set analysis supplies them).  A
one-input function stays one map node.  A several-input function becomes a chain of lookups
selected by the first input (``{…}[y] if x == 1 else {…}[y]``), which computes the same values
with a few more map nodes.  Values where the function raises are left out, so the text raises
there too (a two-input function that raises on some pairs is one lookup by the pair's number).
Maps whose function nests several operators (which the elaborator never builds; the Python API
does for ``LinearSequenceMap`` and when it merges a map of a map, as tracr does) are written as
nested expressions and likewise elaborate to a few more nodes.
"""

from __future__ import annotations

import itertools
import json
import math
import unicodedata
from typing import Any

from rasp_compiler.errors import UserError
from rasp_compiler.graph.expr import (
    Binary,
    Const,
    Contains,
    Expr,
    Lookup,
    PyFn,
    Ternary,
    Unary,
    Var,
    deep_recursion,
)
from rasp_compiler.graph.nodes import (
    Aggregate,
    Constant,
    Indices,
    Length,
    Map,
    Node,
    Program,
    Select,
    SelectorAnd,
    SelectorNot,
    SelectorOr,
    SelectorWidth,
    SequenceMap,
    SoftmaxAggregate,
    Tokens,
)
from rasp_compiler.pyapi.base import PyApiTypeError

# Names a statement must not rebind (built-ins, keywords, and the names to_source itself reads).
RESERVED = {
    "tokens", "tokens_str", "tokens_int", "tokens_float", "tokens_bool", "indices", "length",
    "selector_width", "numerical", "categorical", "select", "aggregate", "range", "zip", "len",
    "True", "False", "out", "round", "indicator", "not", "and", "or", "if", "else", "in", "def",
    "for", "return", "load", "draw", "tokens_asis",
}


def literal(value: Any) -> str:
    """An atom as RASP source."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value) if value >= 0 else f"(-{-value})"
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UserError(f"{value!r} has no RASP literal")
        text = repr(value)
        return text if value >= 0 else f"(-{repr(-value)})"
    if isinstance(value, str):
        body = json.dumps(value, ensure_ascii=False)[1:-1]
        return f'"{body}"'
    raise UserError(f"{value!r} ({type(value).__name__}) has no RASP literal")


def _table(items: list[tuple[Any, Any]]) -> str:
    return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in items) + "}"


def expr_text(expr: Expr, args: list[str]) -> str:
    """``expr`` with ``Var(i)`` written as ``args[i]`` (fully parenthesised)."""
    if isinstance(expr, Var):
        return args[expr.index]
    if isinstance(expr, Const):
        return literal(expr.value)
    if isinstance(expr, Unary):
        inner = expr_text(expr.arg, args)
        if expr.op in ("round", "indicator"):
            return f"{expr.op}({inner})"
        sep = " " if expr.op == "not" else ""
        return f"({expr.op}{sep}{inner})"
    if isinstance(expr, Binary):
        return f"({expr_text(expr.left, args)} {expr.op} {expr_text(expr.right, args)})"
    if isinstance(expr, Ternary):
        return (f"({expr_text(expr.then, args)} if {expr_text(expr.cond, args)} "
                f"else {expr_text(expr.otherwise, args)})")
    if isinstance(expr, Lookup):
        if expr.is_dict:
            table = _table(list(expr.table))
        elif isinstance(expr.table, str):
            table = literal(expr.table)
        else:
            table = "[" + ", ".join(literal(v) for v in expr.table) + "]"
        return f"{table}[{expr_text(expr.arg, args)}]"
    if isinstance(expr, Contains):
        return f"({expr_text(expr.arg, args)} in [{', '.join(literal(v) for v in expr.collection)}])"
    if isinstance(expr, PyFn):
        return f"{expr.label}({', '.join(args[:expr.arity])})"
    raise UserError(f"no RASP text for the expression {expr!r}")


def _strip(text: str) -> str:
    return text[1:-1] if text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]) else text


def _balanced(text: str) -> bool:
    depth = 0
    for c in text:
        depth += c == "("
        depth -= c == ")"
        if depth < 0:
            return False
    return depth == 0


def node_text(node: Node, names: dict[str, str], constants: dict[str, Any] | None = None) -> str:
    """One node as the RASP operation that builds it (inputs by ``names[id]``, or by id)."""
    constants = constants or {}

    def ref(i: str) -> str:
        return literal(constants[i]) if i in constants else names.get(i, i)

    args = [ref(i) for i in node.inputs]
    if isinstance(node, Tokens):
        return "tokens" if node.type == "str" else f"tokens_{node.type}"
    if isinstance(node, Indices):
        return "indices"
    if isinstance(node, Length):
        return "length"
    if isinstance(node, Constant):
        return literal(node.value)
    if isinstance(node, (Map, SequenceMap)):
        return _strip(expr_text(node.fn, args))  # type: ignore[arg-type]
    if isinstance(node, Select):
        return f"select({args[0]}, {args[1]}, {node.fn.label if node.fn is not None else node.op})"
    if isinstance(node, Aggregate):
        return f"aggregate({args[0]}, {args[1]}, {literal(node.default)})"
    if isinstance(node, SelectorWidth):
        return f"selector_width({args[0]})"
    if isinstance(node, SoftmaxAggregate):
        m = node.width
        queries, keys = ", ".join(args[1:1 + m]), ", ".join(args[1 + m:1 + 2 * m])
        return (f"softmax_aggregate({args[0]}, [{queries}], [{keys}], {args[1 + 2 * m]}, "
                f"{literal(node.default)})")
    if isinstance(node, SelectorAnd):
        return f"{args[0]} and {args[1]}"
    if isinstance(node, SelectorOr):
        return f"{args[0]} or {args[1]}"
    if isinstance(node, SelectorNot):
        return f"not {args[0]}"
    raise UserError(f"no RASP text for a {node.kind} node")


# Latin letters that NFKD does not take apart into an ASCII letter and an accent
_LATIN = {"ß": "ss", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ø": "o", "Ø": "O", "ł": "l", "Ł": "L",
          "đ": "d", "Đ": "D", "ð": "d", "Ð": "D", "þ": "th", "Þ": "Th", "ı": "i"}


def _identifier(node_id: str) -> str:
    """``node_id`` as a RASP name, which is ASCII (``[A-Za-z_][A-Za-z_0-9]*``): ``sort_by.place``
    gives ``sort_by_place`` and ``größe`` ``grosse``: accents are dropped (``é`` is ``e``), and
    other letters are spelled by code point (``α`` is ``u03b1``); to_source makes names unique."""
    out = []
    for c in unicodedata.normalize("NFKD", node_id):
        if c.isascii():
            out.append(c if c.isalnum() or c == "_" else "_")
        elif c in _LATIN:
            out.append(_LATIN[c])
        elif c.isalnum():
            out.append(f"u{ord(c):04x}")
        elif not unicodedata.combining(c):  # an accent goes with its letter
            out.append("_")
    name = "".join(out)
    return name if name.isidentifier() else "v_" + name


def _has_pyfn(expr: Expr | None) -> bool:
    from rasp_compiler.graph.expr import children

    todo = [expr] if expr is not None else []
    while todo:  # not recursive: a merged chain of maps nests an expression per map
        e = todo.pop()
        if isinstance(e, PyFn):
            return True
        todo.extend(children(e))
    return False


def _tokens_word(vocab: list[Any] | str | None) -> str:
    """The RASP name that reads the input as the Python API's ``tokens`` (the values as given)
    does, for inputs over ``vocab``."""
    values = list(vocab) if vocab is not None else []
    if all(isinstance(v, str) for v in values):
        return "tokens"
    if all(isinstance(v, bool) for v in values):
        return "tokens_bool"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "tokens_int"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return "tokens_float"
    raise UserError("the vocabulary mixes strings, numbers and booleans; RASP reads the input as one "
                    "type (tokens, tokens_int, tokens_float or tokens_bool)",
                    hint="use tokens_str / tokens_int / ... in the program instead of tokens")


def _tabulated_select(node: Select, args: list[str], analysis: Any) -> str:
    """A select with a Python predicate as ``or`` of terms, one per group of query values that
    select the same keys: ``select(k in [..], True, ==) and select(True, q in [..], ==)``."""
    from rasp_compiler.compiler import selectors as sl

    kvals = list(analysis.info[node.inputs[0]].values)
    qvals = list(analysis.info[node.inputs[1]].values)
    atom = sl.Atom(node.id, node.inputs[0], node.inputs[1], node.op, False, node.fn)
    rows: dict[tuple[bool, ...], list[Any]] = {}
    for q in qvals:
        rows.setdefault(tuple(sl.holds(atom, k, q) for k in kvals), []).append(q)
    terms = []
    for row, qs in rows.items():
        ks = [k for k, hit in zip(kvals, row, strict=True) if hit]
        if not ks:
            continue
        parts = []
        if len(ks) < len(kvals):
            parts.append(f"select({args[0]} in [{', '.join(literal(k) for k in ks)}], True, ==)")
        if len(qs) < len(qvals):
            parts.append(f"select(True, {args[1]} in [{', '.join(literal(q) for q in qs)}], ==)")
        terms.append(" and ".join(parts) or "select(True, True, ==)")
    if not terms:
        return "select(True, True, !=)"
    return " or ".join(f"({t})" if " and " in t and len(terms) > 1 else t for t in terms)


def _tabulated(node: Node, args: list[str], analysis: Any) -> str:
    """An opaque function as dict lookups over the input value sets.  A combination where the
    function raises (one that never occurs may) is left out, so the lookup fails there as the
    function does."""
    from rasp_compiler.graph.expr import evaluate

    value_sets = [list(analysis.info[i].values) for i in node.inputs + (node.id,)]
    shown = next((v for vs in value_sets for v in vs if isinstance(v, (tuple, list))), None)
    if shown is not None:
        raise UserError(f"'{node.id}' reads or makes tuples such as {shown!r}, which a RASP value cannot be",
                        hint="compute the function of several s-ops as one SequenceMap(f, a, b, c)")
    value_sets.pop()
    if len(args) > 2:
        raise UserError(f"'{node.id}' is a Python function of {len(args)} s-ops; to_source writes opaque "
                        "functions of at most two", hint="write it with operators, or as nested maps")

    cells: dict[tuple[int, ...], Any] = {}  # value indices -> the function's value, where it has one
    failure: tuple[tuple, Exception] | None = None  # the first combination that raised, to show
    for at in itertools.product(*(range(len(vs)) for vs in value_sets)):
        given = tuple(vs[i] for vs, i in zip(value_sets, at, strict=True))
        try:
            out = evaluate(node.fn, given)  # type: ignore[arg-type]
        except RecursionError:
            raise  # too deep to write (see to_source), not a failure of the function
        except Exception as err:  # the user's function: that combination is left out of the table
            failure = failure or (given, err)
            continue
        if out is None:  # tracr's "no value": the text would have to invent one
            raise UserError(f"'{node.id}' returns None on {given!r}, which RASP text cannot "
                            "write", hint="return a value such as 0, \"\" or False instead of None")
        cells[at] = out
    if not cells:
        why = ""
        if failure is not None:
            given, err = failure
            why = (f": its function raises on every value it may receive ({type(err).__name__}: {err} "
                   f"on {', '.join(map(repr, given))})")
        raise UserError(f"'{node.id}' has no value on any input{why}",
                        hint="fix the function; as it is, the compiled model answers no input either")
    if len(args) == 1:
        return f"{_table([(value_sets[0][i], out) for (i,), out in cells.items()])}[{args[0]}]"
    firsts, lasts = value_sets
    if len(cells) < len(firsts) * len(lasts):
        # Both branches of `a if c else b` are nodes evaluated at every position, so a lookup
        # chosen by the first input would fail where it is not chosen: number the pairs instead.
        pairs = _table([(i * len(lasts) + j, out) for (i, j), out in cells.items()])
        first = _table([(v, i) for i, v in enumerate(firsts)])
        last = _table([(v, j) for j, v in enumerate(lasts)])
        return f"{pairs}[{first}[{args[0]}] * {len(lasts)} + {last}[{args[1]}]]"

    def row(i: int) -> str:
        return f"{_table([(v, cells[i, j]) for j, v in enumerate(lasts)])}[{args[1]}]"

    text = row(len(firsts) - 1)
    for i in reversed(range(len(firsts) - 1)):
        text = f"({row(i)} if {args[0]} == {literal(firsts[i])} else {text})"
    return _strip(text)


def to_source(program: Program, vocab: list[Any] | str | None = None, max_len: int | None = None,
              header: str | None = None) -> str:
    """``program`` as ``.rasp`` text; ``vocab``/``max_len`` are needed only to tabulate opaque
    Python functions (see the module docstring).  ``program`` may also be a Python-API s-op."""
    if not isinstance(program, Program) and callable(getattr(program, "program", None)):
        program = program.program()
    if not isinstance(program, Program):
        raise PyApiTypeError(f"to_source takes a Program or a Python-API s-op, got {type(program).__name__}")
    try:
        with deep_recursion():  # a map merged from a long chain nests a step per map
            return _source(program, vocab, max_len, header)
    except RecursionError:
        raise UserError("the program's chains of operations are too long to write as text",
                        hint="name some steps of a long chain with .named(...), so that they are "
                             "nodes of their own") from None


def _source(program: Program, vocab: list[Any] | str | None, max_len: int | None,
            header: str | None) -> str:
    nodes = list(program.nodes())
    constants = {n.id: n.value for n in nodes if isinstance(n, Constant)}
    analysis = None
    if any(_has_pyfn(getattr(n, "fn", None)) for n in nodes):
        if vocab is None or max_len is None:
            raise UserError("the program has Python functions (Map/SequenceMap of a lambda, or a "
                            "Select with a lambda predicate); to_source "
                            "writes them as lookup tables over their value sets",
                            hint="pass vocab= and max_len= (the inputs the program will see)")
        from rasp_compiler.compiler import _whole_number
        from rasp_compiler.compiler.analysis import Analysis
        from rasp_compiler.compiler.values import vocab_list

        # the tables hold the values of inputs up to max_len: at 0 an index's table was empty,
        # and the text raised on every input (a float or a string reached the analysis)
        if _whole_number(max_len, "to_source's max_len") < 1:
            raise UserError(f"to_source's max_len must be a positive integer, got {max_len!r}")
        vocab = vocab_list(vocab)
        if not vocab:
            raise UserError("to_source's vocab is empty", hint='give the tokens: vocab="abc" or ["a", "b"]')
        analysis = Analysis(program, vocab, max_len, whole_program=True)
    names: dict[str, str] = {}
    taken = set(RESERVED)
    lines = [f"# {line}" for line in (header or "written by rasp_compiler.pyapi.to_source").splitlines()]
    if vocab is None and any(isinstance(n, Tokens) and n.type == "value" for n in nodes):
        lines.append("# `tokens` reads the input as strings here; for numbers pass to_source(..., vocab=...)")
    for n in nodes:
        if isinstance(n, (Tokens, Indices, Length)):
            names[n.id] = _tokens_word(vocab) if getattr(n, "type", None) == "value" else node_text(n, {})
            if n.encoding:
                lines.append(f"{n.encoding}({names[n.id]});")
            continue
        if isinstance(n, Constant):
            continue
        if any(i in constants for i in n.inputs) and isinstance(n, (Map, SequenceMap)):
            raise UserError(f"'{n.id}' maps a constant s-op, which RASP writes as an atom (no node)",
                            hint="apply the function to the atom in Python instead")
        name = _identifier(n.id)
        base, k = name, 1
        while name in taken:
            k += 1
            name = f"{base}_{k}" if base not in RESERVED else f"{base}_{k - 1}" if k > 2 else f"{base}_"
        taken.add(name)
        names[n.id] = name
        fn = getattr(n, "fn", None)
        if _has_pyfn(fn):
            if not isinstance(fn, PyFn):
                raise UserError(f"'{n.id}' mixes a Python function into an expression; to_source cannot "
                                "tabulate that part alone")
            args = [names.get(i, literal(constants[i]) if i in constants else i) for i in n.inputs]
            text = _tabulated_select(n, args, analysis) if isinstance(n, Select) else \
                _tabulated(n, [names[i] for i in n.inputs], analysis)
        else:
            text = node_text(n, names, constants)
        encoding = getattr(n, "encoding", None)
        if encoding:
            text = f"{encoding}({text})"
        lines.append(f"{name} = {text};")
    out = program.output
    lines.append(f"{names.get(out, literal(constants[out]) if out in constants else out)};")
    return "\n".join(lines) + "\n"
