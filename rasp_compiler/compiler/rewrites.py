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
a value. The value at key 0 may depend on the length (``length * indicator(indices == 0)``): the
map then reads the length too.

That count misses key 0 itself where s selects it. The original RASP library's
``selector_width`` adds it back with a probe of key 0:

    def selector_width(sel) {
        at0 = select(indices, 0, ==);
        except0 = (1 / aggregate(sel or at0, indicator(indices == 0))) - 1;
        valat0 = aggregate(sel and at0, 1, 0);
        return round(except0 + valat0);
    }

After ``bos_counts`` the result is a function of a, the keys other than 0 that ``sel`` selects,
and z, whether it selects key 0 (the probe: its value at key 0 where z = 1, its default where
z = 0). The probe's head needs the same (is key 0, token) one-hot, a layer of its own.
``bos_widths`` evaluates every map over such parts of one selector (through chains of maps, with
the length where they read it) at every split a + z of every width at every length, and where
the value is always that at a + z it reads ``selector_width(sel)`` alone: the built-in's one head
and cost. Where the value depends on a alone it reads a. Anything else (``except0 + 2 * valat0``,
or the unrounded form past max_len 48, where ``1 / (1 / 49)`` is not 49) is left as written.
The rewritten map reads a width w as a = w - 1 and z = 1 (a = z = 0 at w = 0): a split that
occurs, so it evaluates nothing the program could not.

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
from rasp_compiler.graph.expr import Binary, Const, Expr, Lookup, PyFn, Ternary, Var, substitute
from rasp_compiler.graph.expr import evaluate as evaluate_expr
from rasp_compiler.graph.nodes import (
    Aggregate,
    Constant,
    Length,
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


def rewritten(program: Program, max_len: int) -> Program:
    """The program the compiler compiles for ``program`` (``compiler._weights``): every rewrite
    below, in order. Each keeps every value on every input; the nodes that survive keep their
    ids and names."""
    merged = shared_subexpressions(program)
    program = bos_widths(bos_counts(merged, max_len), max_len)
    if program is not merged:  # one pass merges every repeat: only a rewritten graph may hold new ones
        program = shared_subexpressions(program)
    return nonzero_widths(program, max_len)


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
            inputs = tuple(kept[i] for i in node.inputs)
            # (a node whose inputs were all kept is itself: a copy would be equal, and cost a
            # dataclass construction per node of every compile)
            if inputs != node.inputs:
                node = dataclasses.replace(node, inputs=inputs)
            graph.add_node(nid, node=node)
    for nid in graph:
        for arg, src in enumerate(graph.nodes[nid]["node"].inputs):
            graph.add_edge(src, nid, arg=arg)
    names = {name: kept.get(nid, nid) for name, nid in program.names.items()}
    return Program(graph, program.output, names, program.source_file, program.sources)


def _structure(node: Node, kept: dict[str, str]) -> tuple:
    """What ``node`` computes, as a hashable key: its kind, its inputs' kept ids and its parameters.
    Each value carries its type, since ``1 == True == 1.0`` in Python but not in RASP."""
    params = tuple((name, _typed(getattr(node, name))) for name in _parameters(type(node)))
    return type(node).__name__, tuple(kept[i] for i in node.inputs), params


# a node class -> the names of its compared fields but its id and inputs, an expression class ->
# the names of all its fields: ``dataclasses.fields`` builds its answer on every call, and
# ``_structure`` asks for every node and every step of every map's expression
_FIELDS: dict[tuple[type, bool], tuple[str, ...]] = {}


def _parameters(cls: type, node: bool = True) -> tuple[str, ...]:
    names = _FIELDS.get((cls, node))
    if names is None:
        names = _FIELDS[cls, node] = tuple(
            f.name for f in dataclasses.fields(cls)
            if not node or f.compare and f.name not in ("id", "inputs"))
    return names


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
        return type(value).__name__, tuple(_typed(getattr(value, name))
                                           for name in _parameters(type(value), node=False))
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
    for agg, others, first, cs in found:
        ids = [_fresh(graph, f"{agg.id}.{part}") for part in ("not_first", "others", "count")]
        not_first, rest, count = ids
        add_node(graph, SelectorNot(not_first, (first,), pos=agg.pos))
        add_node(graph, SelectorAnd(rest, (others, not_first), pos=agg.pos))
        add_node(graph, SelectorWidth(count, (rest,), pos=agg.pos))
        inputs: tuple[str, ...] = (count,)
        if all(_same(v, cs[0]) for v in cs):
            c: Expr = Const(cs[0])
        else:  # the value at key 0 depends on the length (`length * indicator(indices == 0)`)
            inputs = (count, _length_node(graph, agg.pos))
            by_length = list(range(1, max_len + 1))
            c = Var(1) if all(_same(v, n) for v, n in zip(cs, by_length, strict=True)) \
                else Lookup(tuple(zip(by_length, cs, strict=True)), Var(1), is_dict=True)
        # one key (w = 0): the interpreter gives that key's own value, c; else the float mean
        fn = Ternary(c, Binary("==", Var(0), Const(0)), Binary("/", c, Binary("+", Var(0), Const(1))))
        graph.remove_edges_from(list(graph.in_edges(agg.id)))
        cls = Map if len(inputs) == 1 else SequenceMap
        graph.nodes[agg.id]["node"] = cls(agg.id, inputs, pos=agg.pos, name=agg.name,
                                          encoding=agg.encoding, fn=fn)
        for i, src in enumerate(inputs):
            graph.add_edge(src, agg.id, arg=i)
    return Program(graph, program.output, program.names, program.source_file, program.sources)


# The most maps one rewritten map's expression may inline (``bos_widths``): a hand-written width
# is a handful; a chain that reads each map twice would double the expression at every step.
MAX_INLINED_MAPS = 64


class _TooLarge(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class _WidthAtom:
    """An s-op that is a function of a selector S's width split at key 0: ``others`` (a), the
    keys S selects besides key 0, and ``at_0`` (z, 0 or 1), whether it selects key 0.

    * "others": ``selector_width(S and not <key 0>)`` (what ``bos_counts`` reads), a;
    * "width": ``selector_width(S)``, a + z;
    * "probe": ``aggregate(S and <key 0>, v, d)``, v's value at key 0 where z = 1, else d."""

    kind: str
    selector: str  # S
    key_0: str = ""  # the key-0 selector it was written with (an "others" or "probe" atom)
    at_0: Any = None  # a probe's value where S selects key 0
    default: Any = None  # ... and where it does not


def bos_widths(program: Program, max_len: int) -> Program:
    """``program`` with every map over a probe of key 0 (``aggregate(S and <key 0>, 1, 0)``) and
    the other parts of a hand-made width of S that computes ``selector_width(S)`` on every input
    reading that width instead (see the module docstring); the same program when there is none."""
    atoms = _width_atoms(program, max_len)
    if not any(atom.kind == "probe" for atom in atoms.values()):
        return program
    graph = None
    made: dict[tuple[str, str], str] = {}  # (kind, S) -> the width node added for it
    leaves_of: dict[str, frozenset[str] | None] = {}  # through maps: the atoms and lengths read
    for node in program.nodes():  # topological: a map's inputs are seen before it
        if node.id in atoms or isinstance(node, Length):
            leaves_of[node.id] = frozenset({node.id})
            continue
        if not isinstance(node, (Map, SequenceMap)):
            leaves_of[node.id] = None
            continue
        parts = [leaves_of.get(i) for i in node.inputs]
        leaves = None if any(p is None for p in parts) else frozenset().union(*parts)  # type: ignore[misc]
        leaves_of[node.id] = leaves
        if leaves is None or len(leaves) > 8:
            continue
        read = [atoms[leaf] for leaf in leaves if leaf in atoms]
        if not any(atom.kind == "probe" for atom in read) or len({a.selector for a in read}) != 1:
            continue
        replacement = _width_map(program, node, atoms, max_len)
        if replacement is None:
            continue
        if graph is None:
            graph = program.graph.copy()
        fn, specs = replacement
        key_0 = next(atom.key_0 for atom in read if atom.kind == "probe")
        inputs = tuple(_width_input(graph, atoms, made, spec, read[0].selector, key_0, node.pos)
                       for spec in specs)
        cls = Map if len(inputs) == 1 else SequenceMap
        graph.remove_edges_from(list(graph.in_edges(node.id)))
        graph.nodes[node.id]["node"] = cls(node.id, inputs, pos=node.pos, name=node.name,
                                           encoding=node.encoding, fn=fn)
        for i, src in enumerate(inputs):
            graph.add_edge(src, node.id, arg=i)
    if graph is None:
        return program
    return Program(graph, program.output, program.names, program.source_file, program.sources)


def _width_input(graph: nx.DiGraph, atoms: dict[str, _WidthAtom], made: dict[tuple[str, str], str],
                 spec: str, selector: str, key_0: str, pos: Any) -> str:
    """The node a rewritten map reads for ``spec``: S's "width" or "others" (the program's own
    where it has one, else one added), or the length node named by ``spec`` itself."""
    if spec not in ("width", "others"):
        return spec
    have = [nid for nid, atom in atoms.items() if atom.kind == spec and atom.selector == selector]
    if have:
        return have[0]
    if (spec, selector) not in made:
        if spec == "width":
            nid = _fresh(graph, f"{selector}.width")
            add_node(graph, SelectorWidth(nid, (selector,), pos=pos))
        else:
            not_0, rest = _fresh(graph, f"{selector}.not_first"), _fresh(graph, f"{selector}.others")
            nid = _fresh(graph, f"{selector}.count")
            add_node(graph, SelectorNot(not_0, (key_0,), pos=pos))
            add_node(graph, SelectorAnd(rest, (selector, not_0), pos=pos))
            add_node(graph, SelectorWidth(nid, (rest,), pos=pos))
        made[spec, selector] = nid
    return made[spec, selector]


def _width_atoms(program: Program, max_len: int) -> dict[str, _WidthAtom]:
    """Every s-op of ``program`` that is a width atom (``_WidthAtom``), by id."""
    atoms: dict[str, _WidthAtom] = {}
    key_0: dict[str, bool] = {}  # selector -> whether it selects key 0 alone (asked once each)
    for node in program.nodes():
        if isinstance(node, SelectorWidth):
            split = _split_at_0(program, node.inputs[0], max_len, key_0, negated=True)
            atoms[node.id] = (_WidthAtom("others", *split) if split is not None
                              else _WidthAtom("width", node.inputs[0]))
        elif isinstance(node, Aggregate):
            split = _split_at_0(program, node.inputs[0], max_len, key_0, negated=False)
            at_0 = None if split is None else _value_at_0(program, node.inputs[1], max_len)
            if split is not None and at_0 is not None:
                atoms[node.id] = _WidthAtom("probe", *split, at_0=at_0[0], default=node.default)
    return atoms


def _split_at_0(program: Program, sel_id: str, max_len: int, key_0: dict[str, bool], *,
                negated: bool) -> tuple[str, str] | None:
    """(S, the key-0 selector) where ``sel_id`` is ``S and <key 0>`` (``S and not <key 0>`` when
    ``negated``), in either order; ``key_0`` remembers the selectors asked about."""
    sel = program.node(sel_id)
    if not isinstance(sel, SelectorAnd):
        return None
    for s_id, k_id in (sel.inputs, sel.inputs[::-1]):
        k = program.node(k_id)
        if negated:
            if not isinstance(k, SelectorNot):
                continue
            k_id = k.inputs[0]
        if k_id not in key_0:
            key_0[k_id] = _selects_key_0(program, k_id, max_len)
        if key_0[k_id]:
            return s_id, k_id
    return None


def _value_at_0(program: Program, value_id: str, max_len: int) -> tuple[Any] | None:
    """(v,) when the s-op holds v at position 0 at every length (whatever it holds elsewhere)."""
    if not _positional(program, value_id):
        return None
    values = _values(program, value_id, max_len)
    if values is None or not all(_same(vals[0], values[0][0]) for vals in values):
        return None
    return (values[0][0],)


def _width_map(program: Program, node: Map | SequenceMap, atoms: dict[str, _WidthAtom],
               max_len: int) -> tuple[Expr, list[str]] | None:
    """``node``, a function of the width atoms of one selector S (and perhaps the length) through
    maps, as a function of one width: (the expression, its inputs: "width" for
    ``selector_width(S)`` or "others" for a, then perhaps the length's id); None where its value
    at some split a + z of a width at some length is not that of the width (or of a) alone, or
    where it cannot be evaluated there."""
    leaves: list[str] = []
    done: dict[str, tuple[Expr, int]] = {}  # map -> its inlined expression, the maps it repeats

    def inlined(nid: str) -> Expr:
        if nid in atoms or isinstance(program.node(nid), Length):
            if nid not in leaves:
                leaves.append(nid)
            return Var(leaves.index(nid))
        if nid not in done:
            inner = program.node(nid)
            assert isinstance(inner, (Map, SequenceMap))
            args = {i: inlined(u) for i, u in enumerate(inner.inputs)}
            size = 1 + sum(done[u][1] for u in inner.inputs if u in done)
            if size > MAX_INLINED_MAPS:  # a map read twice at each step doubles the expression
                raise _TooLarge
            done[nid] = substitute(inner.fn, args), size
        return done[nid][0]

    try:
        fn = inlined(node.id)
    except _TooLarge:
        return None
    length = next((leaf for leaf in leaves if leaf not in atoms), None)

    def value(a: int, z: int, n: int) -> Any:
        args = []
        for leaf in leaves:
            atom = atoms.get(leaf)
            if atom is None:
                args.append(n)
            elif atom.kind == "others":
                args.append(a)
            elif atom.kind == "width":
                args.append(a + z)
            else:
                args.append(atom.at_0 if z else atom.default)
        return evaluate_expr(fn, tuple(args))

    def at_width(w: int, n: int) -> Any:  # as a width w is split: z = 1 where w > 0
        return value(0, 0, n) if w == 0 else value(w - 1, 1, n)

    through_width = through_others = True
    lengths = range(1, max_len + 1) if length is not None else range(max_len, max_len + 1)
    try:  # every split a + z of a width at every length: a <= n - z, z in {0, 1}
        for n in lengths:
            for a in range(n):
                with_0 = value(a, 1, n)
                through_width = through_width and (a == 0 or _same(value(a, 0, n), value(a - 1, 1, n)))
                through_others = through_others and _same(with_0, value(a, 0, n))
        # where the value at a width is the same at every length that has it, the length is
        # not read (`round(length / (length / (a + 1)))`)
        ignores_length = length is not None and (through_width or through_others) and all(
            _same(at_width(w, n), at_width(w, max_len)) if through_width
            else _same(value(w, 0, n), value(w, 0, max_len))
            for n in lengths for w in range(n + 1 if through_width else n))
    except Exception:  # noqa: BLE001 - a map that fails somewhere is left as it is
        return None
    if not (through_width or through_others):
        return None  # a function of both parts: the probe stays (read as two widths, it cost more)
    length_value = Const(max_len) if ignores_length else Var(1)  # unread: any length will do

    def split(a: Expr, z: int) -> Expr:
        """``fn`` at others = a, the probes at z (the width a + z)."""
        bound: dict[int, Expr] = {}
        for i, leaf in enumerate(leaves):
            atom = atoms.get(leaf)
            bound[i] = (length_value if atom is None else Var(0) if atom.kind == "width"
                        else a if atom.kind == "others" else Const(atom.at_0 if z else atom.default))
        return substitute(fn, bound)

    if through_width:  # width 0 is a = z = 0; width w > 0 is read as a = w - 1, z = 1
        new = Ternary(split(Const(0), 0), Binary("==", Var(0), Const(0)),
                      split(Binary("-", Var(0), Const(1)), 1))
    else:  # z = 0 at every a
        new = split(Var(0), 0)
    inputs = ["width" if through_width else "others"]
    if length is not None and not ignores_length:
        inputs.append(length)
    return new, inputs


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


def _bos_count(program: Program, agg: Aggregate, max_len: int
               ) -> tuple[Aggregate, str, str, list[Any]] | None:
    """(the aggregate, the selector joined to position 0, the position-0 selector, c at each
    length) when ``agg`` averages ``c`` at key 0 and zeros elsewhere over ``s or <key 0>``."""
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
    cs = _only_at_0(program, value_id, max_len)
    if cs is None:
        return None
    return agg, others, first, cs


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
    """Whether the selector selects key 0, and only key 0, for every query at every length (the
    shortest first: most selectors fail at length 2, and each length costs an evaluation)."""
    from rasp_compiler.errors import UserError
    from rasp_compiler.interpreter import evaluate

    if not program.node(sel_id).is_selector or not _positional(program, sel_id):
        return False
    for n in range(1, max_len + 1):
        try:
            m = np.asarray(evaluate(program, [0] * n, [sel_id])[sel_id], dtype=bool)
        except UserError:  # fails at some length: no rewrite is proved safe
            return False
        want = np.zeros_like(m)
        want[:, 0] = True
        if not np.array_equal(m, want):
            return False
    return True


def _only_at_0(program: Program, value_id: str, max_len: int) -> list[Any] | None:
    """The numbers c(1), ..., c(max_len) when the s-op holds the number c(n) at position 0 and 0
    everywhere else at each length n (None where it does not)."""
    if not _positional(program, value_id):
        return None
    values = _values(program, value_id, max_len)
    if values is None:
        return None
    for vals in values:
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            return None
        if any(v != 0 for v in vals[1:]):
            return None
    return [vals[0] for vals in values]


def _same(a: Any, b: Any) -> bool:
    """Whether RASP cannot tell ``a`` from ``b``: the same type, and floats the same bits."""
    if type(a) is not type(b):
        return False
    return repr(a) == repr(b) if isinstance(a, float) else bool(a == b)


def _length_node(graph: nx.DiGraph, pos: Any) -> str:
    """The program's ``length`` node, added where it has none."""
    for nid, data in graph.nodes(data=True):
        if isinstance(data["node"], Length):
            return nid
    nid = _fresh(graph, "length")
    add_node(graph, Length(nid, (), pos=pos))
    return nid
