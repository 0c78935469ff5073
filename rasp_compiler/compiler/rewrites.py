"""Rewrites of the program graph that keep every value and save layers (run before the analysis).

The original RASP paper, which has no BOS of its own, counts with one by hand. Position 0 is
joined to a selector and averaged:

    def _with_bos_selector_width(s) {
        s = s or select(indices, 0, ==);
        return (1 / aggregate(s, indicator(indices == 0))) - 1;
    }

One head cannot score ``s or select(indices, 0, ==)`` from additive token and position
embeddings. Key 0 must tie with the selected keys whatever its token, so the head would need a
one-hot of (is key 0, token) built by an MLP first: one more layer than the paper counts. The
aggregate is a count, though. Key 0 is always selected, and its value c is the only nonzero one,
so the mean is c/(w+1), where w counts the other selected keys (just c when w = 0, as the
interpreter returns a single key's own value). ``bos_counts`` rewrites such an aggregate into
that map of ``selector_width(s and not select(indices, 0, ==))``. That is one width head in the
first layer whose BOS is the compiler's own. Each condition is checked at every length up to the
maximum by evaluating the positional parts (which read no tokens), so the rewrite never changes
a value.

A map that reads a selector width only to ask whether it is zero (``num_prev_copies > 0``)
becomes a map of ``aggregate(s, 1, 0)``, which is 0 or 1 (``nonzero_widths``). The head's output
then has two values, far apart, instead of the N + 1 BOS weights 1/(w+1) whose gaps shrink as
1/N². An MLP can combine that 0/1 with another number exactly. The paper's sort by frequency
subtracts ``indicator(has_earlier) * max_len`` from a histogram in this way.

Programs built by functions repeat themselves: a helper called twice builds its
``select(indices, indices - 1, ==)`` twice, and tracr-style Python code calls ``make_length()``
in every function that needs it. ``shared_subexpressions`` merges nodes that apply the same
operation to the same inputs, so each is computed once, in one head or MLP unit, whatever the
program's names for it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import networkx as nx
import numpy as np

from rasp_compiler.compiler.forms import linear_form
from rasp_compiler.graph.expr import Binary, Const, Expr, PyFn, Ternary, Var, substitute
from rasp_compiler.graph.expr import evaluate as evaluate_expr
from rasp_compiler.graph.nodes import (
    Aggregate,
    Constant,
    Map,
    Node,
    Program,
    SelectorAnd,
    SelectorNot,
    SelectorOr,
    SelectorWidth,
    SequenceMap,
    Tokens,
    add_node,
)


def shared_subexpressions(program: Program) -> Program:
    """``program`` with every set of nodes that compute the same thing (the same kind, the same
    inputs after merging, equal parameters of equal types) merged into one; the same program
    when no two are alike. The output node keeps its id; every other set is kept as its first
    node in topological order, and names bound to a merged node name the one kept."""
    first: dict[tuple, str] = {}
    kept: dict[str, str] = {}  # node id -> the id of the node that stands for it
    for node in program.nodes():  # topological: a node's inputs are resolved before it
        key = _structure(node, kept)
        kept[node.id] = first.setdefault(key, node.id)
    if all(nid == rep for nid, rep in kept.items()):
        return program
    out_rep = kept[program.output]
    if out_rep != program.output:  # the output's set is kept under the output's id
        kept = {nid: program.output if rep == out_rep else rep for nid, rep in kept.items()}
    graph = nx.DiGraph()
    for nid, rep in kept.items():
        if nid == rep:
            node = program.node(nid)
            graph.add_node(nid, node=dataclasses.replace(node, inputs=tuple(kept[i] for i in node.inputs)))
    for nid in graph:
        for arg, src in enumerate(graph.nodes[nid]["node"].inputs):
            graph.add_edge(src, nid, arg=arg)
    names = {name: kept.get(nid, nid) for name, nid in program.names.items()}
    return Program(graph, program.output, names, program.source_file, program.sources)


def _structure(node: Node, kept: dict[str, str]) -> tuple:
    """What ``node`` computes, as a hashable key: its kind, its inputs' kept ids and its parameters.
    Each value carries its type, since ``1 == True == 1.0`` in Python but not in RASP."""
    params = tuple((f.name, _typed(getattr(node, f.name))) for f in dataclasses.fields(node)
                   if f.compare and f.name not in ("id", "inputs"))
    return type(node).__name__, tuple(kept[i] for i in node.inputs), params


def _typed(value: Any) -> Any:
    """A hashable stand-in for ``value`` that two values share only where RASP cannot tell them
    apart: floats by repr (``-0.0`` is not ``0.0``), a Python callable by identity."""
    if value is None or isinstance(value, (bool, int, float, complex, str)):
        return type(value).__name__, repr(value)
    if isinstance(value, (tuple, list)):
        return type(value).__name__, tuple(_typed(v) for v in value)
    if isinstance(value, PyFn):
        return "PyFn", id(value.fn), value.arity
    if isinstance(value, Expr):
        return type(value).__name__, tuple(_typed(getattr(value, f.name)) for f in dataclasses.fields(value))
    return "object", id(value)  # anything else is its own: never merged with another


def bos_counts(program: Program, max_len: int) -> Program:
    """``program`` with every count through position 0 (see the module docstring) read from a
    selector width; the same program when there is none."""
    found = []
    for node in program.nodes():
        if isinstance(node, Aggregate) and node.encoding != "categorical":
            match = _bos_count(program, node, max_len)
            if match is not None:
                found.append(match)
    if not found:
        return program
    graph = program.graph.copy()
    for agg, others, first, c in found:
        ids = [_fresh(graph, f"{agg.id}.{part}") for part in ("not_first", "others", "count")]
        not_first, rest, count = ids
        add_node(graph, SelectorNot(not_first, (first,), pos=agg.pos))
        add_node(graph, SelectorAnd(rest, (others, not_first), pos=agg.pos))
        add_node(graph, SelectorWidth(count, (rest,), pos=agg.pos))
        # one key (w = 0): the interpreter gives that key's own value, c; else the float mean
        fn = Ternary(Const(c), Binary("==", Var(0), Const(0)),
                     Binary("/", Const(c), Binary("+", Var(0), Const(1))))
        graph.remove_edges_from(list(graph.in_edges(agg.id)))
        graph.nodes[agg.id]["node"] = Map(agg.id, (count,), pos=agg.pos, name=agg.name,
                                          encoding=agg.encoding, fn=fn)
        graph.add_edge(count, agg.id, arg=0)
    return Program(graph, program.output, program.names, program.source_file, program.sources)


def nonzero_widths(program: Program, max_len: int) -> Program:
    """``program`` with every map that depends on a selector width w only through w > 0 (through
    a chain of one-input maps) reading ``aggregate(s, 1, 0)`` instead (see the module docstring)."""
    graph = None
    chains: dict[str, tuple[str, list[Any]]] = {}
    for node in program.nodes():  # topological: a map's input chain is seen before the map
        if not isinstance(node, Map):
            continue
        found = _width_test(program, node, max_len, chains)
        if found is None:
            continue
        sel_id, at_zero, above = found
        if graph is None:
            graph = program.graph.copy()
        one, has = _fresh(graph, f"{node.id}.one"), _fresh(graph, f"{node.id}.any")
        add_node(graph, Constant(one, (), pos=node.pos, value=1))
        add_node(graph, Aggregate(has, (sel_id, one), pos=node.pos, default=0, encoding="numerical"))
        fn = Ternary(Const(at_zero), Binary("==", Var(0), Const(0)), Const(above))
        graph.remove_edges_from(list(graph.in_edges(node.id)))
        graph.nodes[node.id]["node"] = Map(node.id, (has,), pos=node.pos, name=node.name,
                                           encoding=node.encoding, fn=fn)
        graph.add_edge(has, node.id, arg=0)
    if graph is None:
        return program
    return Program(graph, program.output, program.names, program.source_file, program.sources)


def numerical_output(program: Program) -> Program | None:
    """``program`` with its output encoded numerical and, where it is linear through a chain of
    linear maps, read from what the chain reads (``_linear_through_maps``); None where the output
    is no map, is marked categorical, or is marked numerical with no such chain.  Not a rewrite of
    the default plan: the compiler takes it only where the first plan is past the size guard
    (``compiler.plans.choose``).  Maps are categorical by default, as in tracr, so that they fuse into
    their readers and decode exactly; but the output has no readers, and a sum of two means at
    max_len 64 holds 3,900 values, which a one-hot (and the conversions of the means to one-hots)
    cannot afford, while one dimension holds them all."""
    node = program.node(program.output)
    if not isinstance(node, (Map, SequenceMap)) or node.encoding == "categorical":
        return None
    through = _linear_through_maps(program, node)
    if through is None and node.encoding == "numerical":
        return None  # nothing to try that the first plan did not
    graph = program.graph.copy()
    if through is None:
        graph.nodes[node.id]["node"] = dataclasses.replace(node, encoding="numerical")
    else:
        graph.remove_edges_from(list(graph.in_edges(node.id)))
        graph.nodes[node.id]["node"] = through
        for i, src in enumerate(through.inputs):
            graph.add_edge(src, node.id, arg=i)
        keep = nx.ancestors(graph, node.id) | {node.id}  # the maps it read directly may be unread now
        graph = graph.subgraph(keep).copy()
    names = {k: v for k, v in program.names.items() if v in graph}
    return Program(graph, program.output, names, program.source_file, program.sources)


def _linear_through_maps(program: Program, node: Map | SequenceMap) -> Map | SequenceMap | None:
    """``node`` as one numerical w·x + c of what its chain of unannotated linear maps reads
    (``m - n * 2`` reads ``m`` and the map ``n * 2``: it becomes ``m - 2·n`` of the two means), or
    None where it reads no such map or the whole is not linear.  The analysis reads a linear map of
    numerical s-ops as such only over the s-ops themselves (``MapTables._linear_map``); over the
    map ``n * 2`` it would tabulate the joint values of both means.  The expression is the same
    tree with its variables replaced, so it computes every value exactly as the chain does."""
    inputs: list[str] = []

    def inlined(nid: str) -> Expr:
        inner = program.node(nid)
        if isinstance(inner, (Map, SequenceMap)) and inner.encoding is None \
                and linear_form(inner.fn, len(inner.inputs)) is not None:
            return substitute(inner.fn, {i: inlined(u) for i, u in enumerate(inner.inputs)})
        if nid not in inputs:
            inputs.append(nid)
        return Var(inputs.index(nid))

    fn = substitute(node.fn, {i: inlined(u) for i, u in enumerate(node.inputs)})
    if inputs == list(node.inputs) or linear_form(fn, len(inputs)) is None:
        return None
    cls = Map if len(inputs) == 1 else SequenceMap
    return cls(node.id, tuple(inputs), pos=node.pos, name=node.name, encoding="numerical", fn=fn)


def _width_test(program: Program, node: Map, max_len: int,
                chains: dict[str, tuple[str, list[Any]]]) -> tuple[str, Any, Any] | None:
    """(the width's selector, the map's value at w = 0, its value at every w > 0) when ``node``
    is a chain of one-input maps over a selector width that takes one value for every w > 0.

    ``chains`` holds, for each one-input map already seen over such a chain, (the selector, its
    values at w = 0..max_len); a map extends its input's entry instead of evaluating the whole
    chain again, which made a chain of k maps cost k² evaluations."""
    src = program.node(node.inputs[0])
    if isinstance(src, SelectorWidth):
        sel_id, below = src.inputs[0], list(range(max_len + 1))
    elif src.id in chains:
        sel_id, below = chains[src.id]
    else:
        return None
    try:
        outs = [evaluate_expr(node.fn, (w,)) for w in below]  # type: ignore[arg-type]
    except Exception:
        return None
    if len(node.inputs) == 1:
        chains[node.id] = sel_id, outs
    above = outs[1:]
    if not above or any(type(v) is not type(above[0]) or v != above[0] for v in above):
        return None
    if type(outs[0]) is type(above[0]) and outs[0] == above[0]:
        return None  # a constant: nothing to test
    return sel_id, outs[0], above[0]


def _fresh(graph: nx.DiGraph, base: str) -> str:
    name, k = base, 1
    while name in graph:
        k += 1
        name = f"{base}_{k}"
    return name


def _bos_count(program: Program, agg: Aggregate, max_len: int) -> tuple[Aggregate, str, str, Any] | None:
    """(the aggregate, the selector joined to position 0, the position-0 selector, c) when
    ``agg`` averages ``c`` at key 0 and zeros elsewhere over ``s or <key 0>``."""
    sel_id, value_id = agg.inputs
    sel = program.node(sel_id)
    if not isinstance(sel, SelectorOr):
        return None
    a, b = sel.inputs
    if _selects_key_0(program, b, max_len):
        first, others = b, a
    elif _selects_key_0(program, a, max_len):
        first, others = a, b
    else:
        return None
    c = _only_at_0(program, value_id, max_len)
    if c is None:
        return None
    return agg, others, first, c


def _positional(program: Program, nid: str) -> bool:
    """Whether ``nid`` depends only on the position and the length: neither it nor anything it reads
    is the tokens."""
    nodes = nx.ancestors(program.graph, nid) | {nid}
    return not any(isinstance(program.node(a), Tokens) for a in nodes)


def _values(program: Program, nid: str, max_len: int) -> list[Any] | None:
    """The value of a positional node at every length 1..max_len; None when it fails at one of
    them (e.g. a constant s-op checked against one length): then no rewrite is proved safe."""
    from rasp_compiler.errors import UserError
    from rasp_compiler.interpreter import evaluate

    try:
        return [evaluate(program, [0] * n, [nid])[nid] for n in range(1, max_len + 1)]
    except UserError:
        return None


def _selects_key_0(program: Program, sel_id: str, max_len: int) -> bool:
    """Whether the selector selects key 0, and only key 0, for every query at every length."""
    if not program.node(sel_id).is_selector or not _positional(program, sel_id):
        return False
    values = _values(program, sel_id, max_len)
    if values is None:
        return False
    for m in values:
        want = np.zeros_like(m, dtype=bool)
        want[:, 0] = True
        if not np.array_equal(np.asarray(m, dtype=bool), want):
            return False
    return True


def _only_at_0(program: Program, value_id: str, max_len: int) -> Any:
    """c when the s-op holds the number c at position 0 and 0 everywhere else, at every length."""
    if not _positional(program, value_id):
        return None
    values = _values(program, value_id, max_len)
    if values is None:
        return None
    c = None
    for vals in values:
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            return None
        if any(v != 0 for v in vals[1:]):
            return None
        if c is None:
            c = vals[0]
        elif vals[0] != c or type(vals[0]) is not type(c):
            return None
    return c
