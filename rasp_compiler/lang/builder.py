"""The program graph under construction, and its final naming.

While elaborating, nodes get temporary ids ("#12") because the name a node deserves is only known
later (``x = tokens + 1`` creates the map before ``x`` is bound).  ``finalize`` then gives every
node its id: the variable it was bound to (top-level names first, then ``out``, then
``function.local`` names), else ``kind_N`` in creation order; clashes get ``_2``, ``_3`` suffixes.
Only nodes that some requested root needs are kept, so library values a program never uses
(``full_s`` …) do not appear.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import networkx as nx

from rasp_compiler.graph.nodes import Node, Program, SourcePos, add_node

# Binding priorities: lower wins.
BUILTIN, TOP_LEVEL, OUT, LOCAL = -1, 0, 1, 2


class GraphBuilder:
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}  # temp id -> node (with temp ids in inputs)
        self.bindings: dict[str, tuple[int, int, str]] = {}  # temp id -> (priority, order, name)
        self._count = 0

    def add(self, cls: type[Node], inputs: tuple[str, ...] | list[str], pos: SourcePos | None,
            **fields: Any) -> str:
        self._count += 1
        tid = f"#{self._count}"
        for src in inputs:
            if src not in self.nodes:
                raise KeyError(src)
        self.nodes[tid] = cls(id=tid, inputs=tuple(inputs), pos=pos, **fields)
        return tid

    def node(self, tid: str) -> Node:
        return self.nodes[tid]

    def replace(self, tid: str, **fields: Any) -> None:
        """Change fields of a node in place (encoding annotations)."""
        self.nodes[tid] = dataclasses.replace(self.nodes[tid], **fields)

    def bind(self, tid: str, name: str, priority: int) -> None:
        self._count += 1
        old = self.bindings.get(tid)
        if old is None or priority < old[0]:  # the first binding at the best priority names it
            self.bindings[tid] = (priority, self._count, name)

    def ancestors(self, roots: list[str]) -> set[str]:
        keep: set[str] = set()
        todo = [r for r in roots if r in self.nodes]
        while todo:
            tid = todo.pop()
            if tid in keep:
                continue
            keep.add(tid)
            todo.extend(self.nodes[tid].inputs)
        return keep

    def finalize(self, roots: list[str], output: str, names: dict[str, str], source_file: str | None,
                 sources: dict[str, str] | None = None) -> tuple[Program, dict[str, str]]:
        """A Program over the nodes ``roots`` need; ``names`` maps variable -> temp id.
        Returns the program and the temp-id -> final-id map."""
        keep = self.ancestors(roots + [output])
        order = sorted(keep, key=lambda t: int(t[1:]))
        final: dict[str, str] = {}
        taken: set[str] = set()
        # Built-in nodes keep their names (tokens, indices, length); a variable's current value is
        # named after it (a top-level name before `out`); an earlier value of a rebound name keeps
        # its first name, with a suffix when that is taken.
        current_label: dict[str, tuple[int, int, str]] = {}
        for rank, (name, tid) in enumerate(names.items()):
            candidate = (OUT if name == "out" else TOP_LEVEL, rank, name)
            if tid not in current_label or candidate < current_label[tid]:
                current_label[tid] = candidate
        label: dict[str, tuple[int, int, str]] = {}
        for tid in order:
            binding = self.bindings.get(tid)
            if binding is not None and binding[0] == BUILTIN:
                label[tid] = binding
            elif tid in current_label:
                label[tid] = current_label[tid]
            elif binding is not None:
                label[tid] = binding
        current = set(names.values())
        named = sorted(label, key=lambda t: (label[t][0], t not in current, label[t][1]))
        last: dict[str, int] = {}  # name -> the last suffix given: x, x_2, x_3, … without a rescan
        for tid in named:
            final[tid] = _fresh(label[tid][2], taken, last)
        counters: dict[str, int] = {}
        for tid in order:
            if tid in final:
                continue
            kind = self.nodes[tid].kind
            while True:
                counters[kind] = counters.get(kind, 0) + 1
                candidate = f"{kind}_{counters[kind]}"
                if candidate not in taken:
                    break
            taken.add(candidate)
            final[tid] = candidate
        graph = nx.DiGraph()
        for tid in order:
            node = self.nodes[tid]
            renamed = dataclasses.replace(node, id=final[tid], inputs=tuple(final[i] for i in node.inputs),
                                          name=label[tid][2] if tid in label else None)
            add_node(graph, renamed)
        program = Program(graph, final[output], {k: final[v] for k, v in names.items() if v in final},
                          source_file, sources=sources)
        return program, final


def _fresh(name: str, taken: set[str], last: dict[str, int]) -> str:
    """``name``, or ``name_k`` with the smallest k after the last one given for ``name`` that is
    not taken (a loop binding x 20,000 times scanned x_2, x_3, … from the start each time)."""
    candidate, k = name, last.get(name, 1)
    if k > 1:
        candidate = f"{name}_{k}"
    while candidate in taken:
        k += 1
        candidate = f"{name}_{k}"
    last[name] = k
    taken.add(candidate)
    return candidate
