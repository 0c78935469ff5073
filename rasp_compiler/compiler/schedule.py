"""Scheduling: every head and MLP op → a layer, as early as its inputs allow.

Sublayer slots are numbered 0, 1, 2, … = layer 0 attention, layer 0 MLP, layer 1 attention, …;
the embeddings are slot -1.  Each op goes to the first slot of its kind after all the slots that
write its inputs (as-soon-as-possible on the dependency DAG), which gives the fewest layers the
dependencies allow; independent ops land in the same layer.  ``reason`` records, for each op, the
input that forced its slot, so the plan can say why a program needs the layers it has.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from rasp_compiler.compiler.lowering import EmbedOp, HeadOp, Lowering, MLPOp


@dataclass
class Schedule:
    slot: dict[str, int]
    reason: dict[str, str | None]
    n_layers: int
    heads: list[list[str]] = field(default_factory=list)  # per layer: op ids, in head order
    mlps: list[list[str]] = field(default_factory=list)  # per layer: op ids

    def critical_path(self) -> list[str]:
        """The chain of ops that forces the last layer (last op first)."""
        if not self.slot:
            return []
        op = max(self.slot, key=lambda o: (self.slot[o], o))
        chain = [op]
        while self.reason.get(op):
            op = self.reason[op]  # type: ignore[assignment]
            chain.append(op)
        return chain


def schedule(low: Lowering) -> Schedule:
    dag = nx.DiGraph()
    for fid, op in low.ops.items():
        dag.add_node(fid)
        for inp in op.inputs:
            dag.add_edge(inp, fid)
    slot: dict[str, int] = {}
    reason: dict[str, str | None] = {}
    for fid in nx.lexicographical_topological_sort(dag):
        op = low.ops[fid]
        if isinstance(op, EmbedOp):
            slot[fid], reason[fid] = -1, None
            continue
        deps = sorted(op.inputs, key=lambda d: (slot[d], d))
        last = slot[deps[-1]] if deps else -1
        parity = 0 if isinstance(op, HeadOp) else 1
        s = last + 1
        if s % 2 != parity:
            s += 1
        slot[fid] = s
        reason[fid] = deps[-1] if deps and slot[deps[-1]] >= 0 else None
    compute = [f for f in slot if slot[f] >= 0]
    n_layers = max((slot[f] // 2 for f in compute), default=-1) + 1
    heads: list[list[str]] = [[] for _ in range(n_layers)]
    mlps: list[list[str]] = [[] for _ in range(n_layers)]
    for f in sorted(compute, key=lambda f: (slot[f], f)):
        (heads if isinstance(low.ops[f], HeadOp) else mlps)[slot[f] // 2].append(f)
    assert all(isinstance(low.ops[f], MLPOp) for layer in mlps for f in layer)
    return Schedule(slot, reason, n_layers, heads, mlps)
