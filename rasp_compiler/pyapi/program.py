"""From an expression to a ``Program``: ``build_program`` makes the graph of everything an
expression depends on (one node per primitive, ids from ``.named``), and ``evaluate_expr`` runs it
in the interpreter after tracr's length check of constants.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from rasp_compiler.errors import UserError
from rasp_compiler.graph.expr import deep_recursion
from rasp_compiler.graph.nodes import Constant, Node, Program, SourcePos, add_node
from rasp_compiler.pyapi.base import (
    PYTHON_FILE,
    PyApiTypeError,
    PyApiValueError,
    RASPExpr,
    SOp,
    _primitive_key,
)
from rasp_compiler.pyapi.selectors import ConstantSelector
from rasp_compiler.pyapi.sops import ConstantLengthError, ConstantSOp, _length_message


def evaluate_expr(expr: RASPExpr, xs: Any) -> Any:
    """The interpreter's output of ``expr`` on ``xs``.  A constant of another length than ``xs``
    raises tracr's ``ValueError`` (``ConstantLengthError``) before evaluation."""
    from rasp_compiler.interpreter import check_input
    from rasp_compiler.interpreter import run as interpret

    xs = check_input(xs)  # once: a generator would be used up by the length check below
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


def build_program(output: RASPExpr, source_file: str = PYTHON_FILE) -> Program:
    """The program graph of everything ``output`` depends on; ids are the ``.named`` names
    (made unique with ``_2``, ``_3``) or ``kind_N`` in creation order."""
    from rasp_compiler.pyapi.source import node_text

    if not isinstance(output, RASPExpr):
        raise PyApiTypeError(f"expected an s-op or selector, got {type(output).__name__}")
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
                raise PyApiValueError(f"{key[0]} is annotated both {enc_a} and {enc_b}")
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
    with deep_recursion():  # a map merged from a chain of unnamed maps nests a step per map
        for e, node in built:
            # The position is the Python line that built the node; its text is the RASP operation,
            # which is what plans, pictures and error messages show.
            if _primitive_key(e):
                add_node(graph, node)  # built in, like the elaborator's tokens/indices/length: no position
                continue
            file, line = e.where
            try:
                text = node_text(node, {}, constants)
            except RecursionError:
                raise UserError(f"the chain of unnamed maps merged into '{node.id}' (built at {file}:{line}) "
                                "is too long", hint="name some steps of the chain with .named(...): a named "
                                                    "map is a node of its own, not merged") from None
            called = getattr(e, "called_from", "")
            add_node(graph, _with_pos(node, SourcePos(file, line, 1, text, called=called)))
    # A name given twice stands for the node whose id it is (the first built; the second's id is
    # `x_2`), as the plan and to_source show: the last one took it, so output="x" compiled x_2.
    names: dict[str, str] = {}
    for e in order:
        if e.ident:
            names.setdefault(e.ident, id_of(e))
    return Program(graph, id_of(output), names, source_file)


def _with_pos(node: Node, pos: SourcePos) -> Node:
    import dataclasses

    return dataclasses.replace(node, pos=pos)
