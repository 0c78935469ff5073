"""Scheduling: every head and MLP op → a layer, as early as its inputs allow.

Sublayer slots are numbered 0, 1, 2, … = layer 0 attention, layer 0 MLP, layer 1 attention, …;
the embeddings are slot -1.  Each op goes to the first slot of its kind after all the slots that
write its inputs (as-soon-as-possible on the dependency DAG), which gives the fewest layers the
dependencies allow; independent ops land in the same layer.  ``reason`` records, for each op, the
input that forced its slot, so the plan can say why a program needs the layers it has.

Aggregates of one layer whose attention patterns are identical (the same selector blocks, BOS
treatment and sharpness) share one head: the pattern is computed once and the value/output
circuit carries each aggregate in its own columns.  This is the original RASP analysis's count
(a head per distinct selector per layer): Dyck-1's counts of openers and closers are one head.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rasp_compiler.compiler.lowering import EmbedOp, HeadOp, Lowering, MLPOp
from rasp_compiler.graph.nodes import lexicographic_order


@dataclass
class Schedule:
    slot: dict[str, int]
    reason: dict[str, str | None]
    n_layers: int
    # per layer, per head: the ids of the ops that head computes (several when they share a pattern)
    heads: list[list[list[str]]] = field(default_factory=list)
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
    slot: dict[str, int] = {}
    reason: dict[str, str | None] = {}
    for fid in in_order(low):
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
    head_ops: list[list[str]] = [[] for _ in range(n_layers)]
    mlps: list[list[str]] = [[] for _ in range(n_layers)]
    for f in sorted(compute, key=lambda f: (slot[f], f)):
        (head_ops if isinstance(low.ops[f], HeadOp) else mlps)[slot[f] // 2].append(f)
    assert all(isinstance(low.ops[f], MLPOp) for layer in mlps for f in layer)
    heads = [shared_heads(low, ids) for ids in head_ops]
    return Schedule(slot, reason, n_layers, heads, mlps)


def head_depth(low: Lowering) -> int:
    """The most heads on one chain of dependencies among ``low``'s ops (1 for MLPs alone): no
    schedule of these heads has fewer layers, however the maps between them are built."""
    depth: dict[str, int] = {}
    for fid in in_order(low):
        op = low.ops[fid]
        depth[fid] = max((depth[i] for i in op.inputs), default=0) + isinstance(op, HeadOp)
    computes = any(not isinstance(op, EmbedOp) for op in low.ops.values())
    return max(max(depth.values(), default=0), int(computes))


def in_order(low: Lowering) -> list[str]:
    """The ops' ids (and their inputs') in the order networkx's ``lexicographical_topological_sort``
    gives the graph of their dependencies (``graph.nodes.lexicographic_order``), without building
    that graph: networkx's graph and its call cost more than a small program's whole schedule."""
    return lexicographic_order({fid: op.inputs for fid, op in low.ops.items()})


def shared_heads(low: Lowering, op_ids: list[str]) -> list[list[str]]:
    """``op_ids`` (one layer's head ops) grouped into heads: aggregates with the same attention
    pattern share one; every other op has a head of its own.  Groups keep the order of their
    first op."""
    groups: dict[object, list[str]] = {}
    for fid in op_ids:
        op = low.ops[fid]
        assert isinstance(op, HeadOp)
        key = pattern_key(op) if op.kind == "aggregate" else ("own", fid)
        groups.setdefault(key, []).append(fid)
    return list(groups.values())


def pattern_key(op: HeadOp) -> tuple:
    """Everything that decides a head's attention weights (see ``blocks.head_weights`` and the
    scale in ``assemble``): two aggregates with equal keys attend identically on every input."""
    blocks = tuple((b.query, b.key, b.matrix.shape, str(b.matrix.dtype), b.matrix.tobytes(),
                    None if b.quad is None else (tuple(b.quad[0]), b.quad[1], b.quad[2]))
                   for b in op.blocks)
    return (blocks, op.bos, op.bos_score, op.bos_log, op.mean)
