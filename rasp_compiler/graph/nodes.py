"""The program graph: the one representation the interpreter and the compiler both read.

A RASP program, once functions, loops, lists and constants are resolved by the elaborator, is a
DAG of primitive operations.  Every node is one of the dataclasses below; the graph itself is a
``networkx.DiGraph`` whose node keys are the node ids (stable, human-readable strings such as
``"reverse"`` or ``"map_7"``) and whose node attribute ``"node"`` holds the dataclass.  An edge
``a -> b`` means b reads a; the edge attribute ``"arg"`` is the argument position.

Values flowing along the graph:
* an s-op is a list with one value per position (``str``, ``int``, ``float``, ``bool`` or ``None``);
* a selector is a boolean matrix ``sel[q][k]`` (rows = query positions, columns = key positions).

Semantics of each kind (the contract of the interpreter, which the compiler must reproduce):
* ``Tokens(type)``       — the input list converted to ``type`` (str / int / float / bool), or as
                           given (``value``: the Python API's ``tokens``, as tracr's).
* ``Indices``            — 0, 1, …, n-1.
* ``Length``             — n at every position.
* ``Constant(value)``    — ``value`` at every position (an atom broadcast to an s-op).
* ``Map(fn)``            — ``fn`` applied positionwise to one input s-op.
* ``SequenceMap(fn)``    — ``fn`` applied positionwise to several input s-ops.
* ``Select(op)``         — inputs (keys, queries); ``sel[q][k] = keys[k] op queries[q]``; with
                           ``op == "fn"`` the predicate is ``fn`` (a Python callable of key and
                           query, from the Python API, as tracr's lambda predicates).
* ``Aggregate(default)`` — inputs (selector, sop); per query row: nothing selected → default;
                           one key → its value; several → the mean (numbers only).
* ``SoftmaxAggregate(default, width)`` — inputs (selector, q_1..q_m, k_1..k_m, value); per query
                           row the softmax (float64, max-subtracted) over the selected keys of
                           the scores sum_t q_t[query] * k_t[key] weights value; none → default.
* ``SelectorWidth``      — input (selector); the number of selected keys per query row.
* ``SelectorAnd`` / ``SelectorOr`` / ``SelectorNot`` — elementwise boolean combination.

Encodings (``encoding`` field on every s-op node): ``None`` lets the compiler choose;
``"categorical"`` / ``"numerical"`` are user annotations (``categorical(x)``, ``numerical(x)``).
"""

from __future__ import annotations

import difflib
import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Iterator

import networkx as nx

from rasp_compiler.errors import UserError
from rasp_compiler.graph.expr import Expr

COMPARISONS = ("==", "!=", "<", ">", "<=", ">=")


@dataclass(frozen=True)
class SourcePos:
    """Where a node came from: file, 1-based line and column, and the source text of the expression."""

    file: str
    line: int
    col: int
    text: str = ""
    # For a node made while a function of the program ran, or in a loop: the outermost call of
    # the program's own function, as written, and the loop values bound then (``entry_at(t * k +
    # m), m = 0``); empty elsewhere.  It tells apart nodes made by one line run several times.
    # Not part of equality: only plans and pictures read it.
    context: str = field(default="", compare=False)
    # For a node built inside tracr's library of the Python API: the library function the user
    # called and their line (``lib.make_sort_unique, called at prog.py:11``).  Only the
    # interpreter's errors read it, so that one located in lib.py names the user's line too.
    called: str = field(default="", compare=False)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Node:
    """Common fields. ``inputs`` are node ids, in argument order."""

    id: str
    inputs: tuple[str, ...] = ()
    pos: SourcePos | None = field(default=None, compare=False)
    name: str | None = field(default=None, compare=False)  # the variable it was bound to, if any

    kind = "node"
    is_selector = False


@dataclass(frozen=True)
class SOpNode(Node):
    encoding: str | None = None


@dataclass(frozen=True)
class Tokens(SOpNode):
    type: str = "str"  # str | int | float | bool | value (the input as given: the Python API's tokens)
    kind = "tokens"


@dataclass(frozen=True)
class Indices(SOpNode):
    kind = "indices"


@dataclass(frozen=True)
class Length(SOpNode):
    kind = "length"


@dataclass(frozen=True)
class Constant(SOpNode):
    value: Any = None
    kind = "constant"


@dataclass(frozen=True)
class Map(SOpNode):
    fn: Expr | None = None  # an expression over Var(0)
    kind = "map"


@dataclass(frozen=True)
class SequenceMap(SOpNode):
    fn: Expr | None = None  # an expression over Var(0) … Var(len(inputs)-1)
    kind = "sequence_map"


@dataclass(frozen=True)
class Aggregate(SOpNode):
    default: Any = 0
    kind = "aggregate"


@dataclass(frozen=True)
class SoftmaxAggregate(SOpNode):
    """inputs (selector, q_1..q_m, k_1..k_m, value): per query i, the softmax over the selected
    keys j of the score sum_t q_t[i] * k_t[j], used to weight value[j]; no key selected → default."""

    default: Any = 0
    width: int = 1  # m, the number of query (and key) s-ops
    kind = "softmax_aggregate"


@dataclass(frozen=True)
class SelectorWidth(SOpNode):
    kind = "selector_width"


@dataclass(frozen=True)
class Select(Node):
    op: str = "=="
    fn: Expr | None = None  # op "fn": a PyFn of (key, query)
    kind = "select"
    is_selector = True


@dataclass(frozen=True)
class SelectorAnd(Node):
    kind = "selector_and"
    is_selector = True


@dataclass(frozen=True)
class SelectorOr(Node):
    kind = "selector_or"
    is_selector = True


@dataclass(frozen=True)
class SelectorNot(Node):
    kind = "selector_not"
    is_selector = True


NODE_KINDS = {
    cls.kind: cls
    for cls in (
        Tokens, Indices, Length, Constant, Map, SequenceMap, Aggregate, SoftmaxAggregate, SelectorWidth,
        Select, SelectorAnd, SelectorOr, SelectorNot,
    )
}


class Program:
    """A program graph with a designated output node.

    ``graph`` is a networkx DiGraph (node key = id, attribute ``node`` = the dataclass).
    ``names`` maps every top-level variable the source bound to an s-op/selector to its node id,
    so ``--output NAME`` can pick any of them.
    ``sources`` maps file names to their text, so run-time errors can show the offending line.
    """

    def __init__(self, graph: nx.DiGraph, output: str, names: dict[str, str] | None = None,
                 source_file: str | None = None, sources: dict[str, str] | None = None) -> None:
        self.graph = graph
        self.output = output
        self.names = dict(names or {})
        self.source_file = source_file
        self.sources = dict(sources or {})
        self._sorted: tuple[nx.DiGraph, list[tuple[str, tuple[str, ...]]], tuple[str, ...]] | None = None

    def node(self, node_id: str) -> Node:
        """The node with this id, or bound to this name (``names``)."""
        try:
            return self.graph.nodes[node_id]["node"]
        except (KeyError, TypeError):  # not an id: a name, or neither (a UserError naming some)
            return self.graph.nodes[self.resolve(node_id)]["node"]

    def resolve(self, name_or_id: str) -> str:
        """The node id a name the source bound (``names``) stands for, or ``name_or_id`` itself
        where it is a node id; UnknownNameError where it is neither."""
        try:
            target = self.names.get(name_or_id, name_or_id)
            if target in self.graph:
                return target
        except TypeError:  # unhashable: no name or id can equal it
            pass
        raise UnknownNameError(name_or_id, self)

    def nodes(self) -> Iterator[Node]:
        """All nodes in a deterministic topological order (ties broken by id)."""
        for node_id in self.order():
            yield self.node(node_id)

    def order(self) -> tuple[str, ...]:
        """The node ids in ``nodes()``'s order (networkx's lexicographical topological sort,
        ``lexicographic_order``).

        A compile asks for it about ten times (each rewrite, the analysis, the assembly), so it is
        kept with the structure it was computed from (every node's successors) and computed again
        where the graph was changed since.  Nothing in the compiler changes a Program's graph
        after building it, but the graph is a public attribute; comparing the structure costs a
        sixth of a sort (4 µs against 27 µs for shuffle-Dyck-2's 33 nodes)."""
        graph = self.graph
        shape = [(nid, tuple(succ)) for nid, succ in graph._succ.items()]  # DiGraph's own adjacency
        if self._sorted is None or self._sorted[0] is not graph or self._sorted[1] != shape:
            self._sorted = graph, shape, tuple(lexicographic_order(graph._pred))
        return self._sorted[2]

    def with_output(self, name_or_id: str) -> "Program":
        """The same graph with another output, restricted to what that output needs."""
        target = self.resolve(name_or_id)
        keep = nx.ancestors(self.graph, target) | {target}
        return Program(self.graph.subgraph(keep).copy(), target,
                       {k: v for k, v in self.names.items() if v in keep}, self.source_file, self.sources)

    def __repr__(self) -> str:
        return f"Program(output={self.output!r}, nodes={self.graph.number_of_nodes()})"


class UnknownNameError(UserError, KeyError):
    """A name or node id the program does not have: a UserError that names some it has, and a
    KeyError, as ``program.node`` and ``with_output`` raised before (``except KeyError`` still
    catches it)."""

    SHOWN = 8  # names listed in the message; a long program has hundreds of node ids

    def __init__(self, name: Any, program: Program) -> None:
        known = sorted(program.names) or sorted(program.graph)
        shown = ", ".join(known[:self.SHOWN]) + (f", … ({len(known)} in all)" if len(known) > self.SHOWN
                                                 else "")
        close = difflib.get_close_matches(name, [*program.names, *program.graph], n=1) \
            if isinstance(name, str) else []
        hint = f"did you mean {close[0]!r}?" if close else (
            "program.names lists every name" if len(known) > self.SHOWN else None)
        super().__init__(f"the program has no s-op or selector named {name!r} (names: {shown or 'none'})",
                         hint=hint)


def lexicographic_order(inputs: Mapping[Any, Iterable[Any]]) -> list[Any]:
    """The ids of a graph with an edge to each id from each of its ``inputs`` (ids that are only
    inputs included), in networkx's ``lexicographical_topological_sort`` order: at each step the
    smallest id whose inputs all came before it (Kahn's algorithm on a heap; ids are distinct, so
    networkx's tie-break by insertion never applies).  A cycle raises networkx's error.  Without
    networkx's graph views and dispatch, which cost more than the sort of a small program."""
    readers: dict[Any, list[Any]] = {}
    waiting: dict[Any, int] = {}  # id -> its inputs not yet placed
    for nid, ins in inputs.items():
        waiting.setdefault(nid, 0)
        for src in dict.fromkeys(ins):  # an input read twice is one edge
            waiting.setdefault(src, 0)
            readers.setdefault(src, []).append(nid)
            waiting[nid] += 1
    ready = [nid for nid, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        nid = heapq.heappop(ready)
        order.append(nid)
        for reader in readers.get(nid, ()):
            waiting[reader] -= 1
            if not waiting[reader]:
                heapq.heappush(ready, reader)
    if len(order) < len(waiting):
        raise nx.NetworkXUnfeasible("Graph contains a cycle or graph changed during iteration")
    return order


def add_node(graph: nx.DiGraph, node: Node) -> Node:
    """Insert ``node`` with edges from its inputs (which must already be in the graph)."""
    graph.add_node(node.id, node=node)
    for arg, src in enumerate(node.inputs):
        if src not in graph:
            raise KeyError(f"input {src!r} of {node.id!r} is not in the graph")
        graph.add_edge(src, node.id, arg=arg)
    return node
