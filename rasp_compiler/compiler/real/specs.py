"""What the numerical compiler plans before any weight exists: residual features, gated units,
heads and MLPs (with the sublayer slot each is written in), and deferred maps.

``assembly`` turns these into tensors.  Slots count sublayers: even slots are attention, odd ones
MLPs, -1 the embedding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

ONE, BOS = 0, 1


@dataclass
class Feat:
    """A residual subspace: ``dims`` columns, written in sublayer ``slot`` (-1: embedding)."""

    id: str
    size: int
    slot: int
    node: str | None = None
    kind: str = "numerical"
    start: int = -1
    pos_values: np.ndarray | None = None  # embedded positional features: [positions, size]
    labels: list[str] = field(default_factory=list)


@dataclass
class Unit:
    """One gated hidden unit: relu(sum w_in x + b_in) * (sum w_gate x + b_gate) -> out feature."""

    w_in: dict[str, float]
    b_in: float
    w_gate: dict[str, float]
    b_gate: float
    out: str
    out_w: float = 1.0


@dataclass
class HeadSpec:
    node: str
    kind: str  # "aggregate" | "softmax_aggregate"
    target: str
    blocks: list[tuple[str, str, np.ndarray]]  # (query feature, key feature, [q dim, k dim] weights)
    data: list[tuple[str, str]]  # softmax score: pairs (query feature, key feature), unscaled
    values: list[str]  # value features, one per target
    defaults: list[float]
    scale: float
    slot: int = -1
    targets: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    # the query side of the BOS key's score, in units of -scale/2: (feature, weight) pairs.  One
    # "one" scores BOS at -scale/2 for every query; a query whose selection is empty may score it
    # at +scale/2 instead (``ScoreBlocks.blocks_and_bos``), so that it needs no block of its own
    bos_query: tuple[tuple[str, float], ...] = (("one", 1.0),)
    weights: list[float] = field(default_factory=list)  # per target, its W_O weight (default 1)
    # (blocks, bos_query) with fewer score columns (``ScoreBlocks.blocks_and_bos(narrow=True)``):
    # assembly takes them where the layer's d_head then shrinks
    narrow: tuple[list[tuple[str, str, np.ndarray]], tuple[tuple[str, float], ...]] | None = None

    def merge_key(self) -> tuple:
        """Aggregates with the same score pattern share one head (each target is one value column)."""
        if self.kind != "aggregate":
            return (self.node,)
        return (self.slot, tuple((q, k, float(w[0, 0])) for q, k, w in self.blocks), self.scale,
                self.bos_query)


@dataclass
class MLPSpec:
    node: str
    target: str
    units: list[Unit]
    kind: str  # "exact" | "approx"
    bound: float
    slot: int = -1
    inputs: list[str] = field(default_factory=list)


@dataclass
class Deferred:
    """A map that is no form and gets no unit of its own: a consumer may inline it (the condition
    of a max), and anything that needs its value gets ``message`` at ``origin``'s line."""

    fn: Any
    inputs: tuple[str, ...]
    origin: str
    message: str
    hint: str


def _next(slot: int, parity: int) -> int:
    s = slot + 1
    return s if s % 2 == parity else s + 1
