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
with a few more map nodes.  Maps whose function nests several operators (which the elaborator
never builds; the Python API does for ``LinearSequenceMap`` and when it merges a map of a map, as
tracr does) are written as nested expressions and likewise elaborate to a few more nodes.
"""

from __future__ import annotations

import json
import math
from typing import Any

from rasp_compiler.errors import UserError
from rasp_compiler.graph.expr import Binary, Const, Contains, Expr, Lookup, PyFn, Ternary, Unary, Var
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


def _has_pyfn(expr: Expr | None) -> bool:
    from rasp_compiler.graph.expr import children

    if expr is None:
        return False
    return isinstance(expr, PyFn) or any(_has_pyfn(c) for c in children(expr))


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
    """An opaque function as dict lookups over the input value sets."""
    from rasp_compiler.graph.expr import evaluate

    value_sets = [list(analysis.info[i].values) for i in node.inputs + (node.id,)]
    shown = next((v for vs in value_sets for v in vs if isinstance(v, (tuple, list))), None)
    if shown is not None:
        raise UserError(f"'{node.id}' reads or makes tuples such as {shown!r}, which a RASP value cannot be",
                        hint="compute the function of several s-ops as one SequenceMap(f, a, b, c)")
    value_sets.pop()

    failed = object()

    def table(fixed: tuple) -> list[tuple[Any, Any]]:
        rows, fallback = [], None
        for v in value_sets[-1]:
            try:
                out = evaluate(node.fn, fixed + (v,))  # type: ignore[arg-type]
            except Exception:  # a combination that never occurs may make the function fail
                out = failed
            if out is None:  # tracr's "no value": the text would have to invent one
                raise UserError(f"'{node.id}' returns None on {fixed + (v,)!r}, which RASP text cannot "
                                "write", hint="return a value such as 0, \"\" or False instead of None")
            rows.append((v, out))
            if out is not failed and fallback is None:
                fallback = out
        return [(k, fallback if o is failed else o) for k, o in rows]

    last = args[-1]
    if len(args) == 1:
        return f"{_table(table(()))}[{last}]"
    if len(args) > 2:
        raise UserError(f"'{node.id}' is a Python function of {len(args)} s-ops; to_source writes opaque "
                        "functions of at most two", hint="write it with operators, or as nested maps")
    firsts = value_sets[0]
    text = f"{_table(table((firsts[-1],)))}[{last}]"
    for v in reversed(firsts[:-1]):
        text = f"({_table(table((v,)))}[{last}] if {args[0]} == {literal(v)} else {text})"
    return _strip(text)


def to_source(program: Program, vocab: list[Any] | str | None = None, max_len: int | None = None,
              header: str | None = None) -> str:
    """``program`` as ``.rasp`` text; ``vocab``/``max_len`` are needed only to tabulate opaque
    Python functions (see the module docstring).  ``program`` may also be a Python-API s-op."""
    if not isinstance(program, Program) and callable(getattr(program, "program", None)):
        program = program.program()
    nodes = list(program.nodes())
    constants = {n.id: n.value for n in nodes if isinstance(n, Constant)}
    analysis = None
    if any(_has_pyfn(getattr(n, "fn", None)) for n in nodes):
        if vocab is None or max_len is None:
            raise UserError("the program has Python functions (Map/SequenceMap of a lambda, or a "
                            "Select with a lambda predicate); to_source "
                            "writes them as lookup tables over their value sets",
                            hint="pass vocab= and max_len= (the inputs the program will see)")
        from rasp_compiler.compiler.analysis import Analysis
        from rasp_compiler.compiler.values import vocab_list

        analysis = Analysis(program, vocab_list(vocab), max_len, whole_program=True)
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
        name = "".join(c if c.isalnum() or c == "_" else "_" for c in n.id)  # sort_by.place -> sort_by_place
        if not name.isidentifier():
            name = "v_" + name
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
