"""Division by a real number, as a product with its reciprocal (a graph rewrite before the
numerical compiler runs).

``e / denom`` with ``denom`` computed from the input is no form (``real_forms``) and reads two
numbers, so no unit of its own computes it.  ``split_divisions`` rewrites every such map into

    den = denom                      (a map of its own, unless the denominator is one s-op already)
    den.reciprocal = 1 / den         (a map of one number: ``reciprocal`` compiles it)
    node = e * den.reciprocal        (a product of two numbers: exact gated units)

Every new node carries the line of the map it came from, so an error points at the division
as written.  The interpreter keeps reading the program as written: the rewrite is the compiler's.
A division by a position-only s-op (``x / length``) stays a coefficient.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from rasp_compiler.graph.expr import Binary, Const, Expr, Ternary, Unary, Var, children, substitute, variables
from rasp_compiler.graph.nodes import Map, Program, SequenceMap, Tokens, add_node

RECIPROCAL_SUFFIX = ".reciprocal"


def is_reciprocal(fn: Any) -> bool:
    """Whether a map's function is ``c / x`` for a nonzero number c (a reciprocal, scaled)."""
    return (isinstance(fn, Binary) and fn.op == "/" and isinstance(fn.right, Var)
            and isinstance(fn.left, Const) and isinstance(fn.left.value, (int, float))
            and not isinstance(fn.left.value, bool) and fn.left.value != 0)


def split_divisions(program: Program) -> Program:
    """``program`` with every division by an input-dependent number written as a product with a
    reciprocal map (see the module's docstring); the same program where there is none."""
    reads_input = _input_dependent(program)
    graph = nx.DiGraph()
    reciprocal_of: dict[str, str] = {}  # denominator s-op -> its reciprocal node
    changed = False
    for node in program.nodes():
        if isinstance(node, (Map, SequenceMap)) and not is_reciprocal(node.fn) and \
                _has_division(node.fn, node.inputs, reads_input):
            node = _rewrite(graph, node, reads_input, reciprocal_of)
            changed = True
        add_node(graph, node)
    if not changed:
        return program
    return Program(graph, program.output, dict(program.names), program.source_file, program.sources)


def _input_dependent(program: Program) -> set[str]:
    """The nodes whose value depends on the input tokens."""
    out: set[str] = set()
    for node in program.nodes():
        if isinstance(node, Tokens) or any(i in out for i in node.inputs):
            out.add(node.id)
    return out


def _has_division(expr: Expr, inputs: tuple[str, ...], reads_input: set[str]) -> bool:
    if isinstance(expr, Binary) and expr.op == "/" and \
            any(inputs[i] in reads_input for i in variables(expr.right)):
        return True
    return any(_has_division(c, inputs, reads_input) for c in children(expr))


def _rewrite(graph: nx.DiGraph, node: Any, reads_input: set[str], reciprocal_of: dict[str, str]) -> Any:
    """``node`` with each input-dependent division replaced by a product with a reciprocal node
    (added to ``graph``, with the denominator's own map where it is an expression)."""
    inputs = list(node.inputs)
    count = [0]

    def reciprocal(den: Expr) -> Var:
        used = sorted(variables(den))
        if isinstance(den, Var):
            den_id = inputs[den.index]
        else:
            count[0] += 1
            den_id = f"{node.id}.denominator{count[0] if count[0] > 1 else ''}"
            local = substitute(den, {i: Var(k) for k, i in enumerate(used)})
            cls = Map if len(used) == 1 else SequenceMap
            if den_id not in graph:
                add_node(graph, cls(id=den_id, inputs=tuple(inputs[i] for i in used), pos=node.pos, fn=local))
        rid = reciprocal_of.get(den_id)
        if rid is None:
            rid = reciprocal_of[den_id] = den_id + RECIPROCAL_SUFFIX
            add_node(graph, Map(id=rid, inputs=(den_id,), pos=node.pos, fn=Binary("/", Const(1), Var(0))))
        if rid not in inputs:
            inputs.append(rid)
        return Var(inputs.index(rid))

    def walk(expr: Expr) -> Expr:
        if isinstance(expr, Binary):
            left, right = walk(expr.left), walk(expr.right)
            if expr.op == "/" and any(inputs[i] in reads_input for i in variables(right)):
                return Binary("*", left, reciprocal(right))
            return Binary(expr.op, left, right)
        if isinstance(expr, Unary):
            return Unary(expr.op, walk(expr.arg))
        if isinstance(expr, Ternary):
            return Ternary(walk(expr.then), walk(expr.cond), walk(expr.otherwise))
        return expr

    fn = walk(node.fn)
    return SequenceMap(id=node.id, inputs=tuple(inputs), pos=node.pos, name=node.name,
                       encoding=node.encoding, fn=fn)
