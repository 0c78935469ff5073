"""The lowering's output: residual features and the ops that write them.

A ``Feature`` is an s-op held in the residual stream (a one-hot, or one dimension); ``ONE`` is the
constant dimension a block reads for a side without s-ops.  Each op writes one feature:
``EmbedOp`` (embeddings), ``HeadOp`` (one attention head, scored by ``Block``s) and ``MLPOp``
(one positionwise function, a row per value combination of its input features).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rasp_compiler.graph.nodes import SourcePos

ONE = "one"
BOS_WEIGHT = ".bos_weight"  # suffix of the feature a width head writes: BOS's weight 1/(w+1)


def is_bos_weight(feature_id: str) -> bool:
    """Whether ``feature_id`` is a width head's BOS weight (``Widths.scratch``), a number that
    float rounds relative to its own size (``numeric.projection``)."""
    return feature_id.endswith(BOS_WEIGHT)


@dataclass
class Feature:
    id: str
    encoding: str  # "categorical" | "numerical"
    values: list[Any]  # one-hot order (categorical) / possible values (numerical)
    node: str | None  # program node it holds, if any
    kind: str = ""

    @property
    def size(self) -> int:
        return len(self.values) if self.encoding == "categorical" else 1


@dataclass
class Block:
    query: str  # feature id or ONE
    key: str
    matrix: np.ndarray  # bool [len(query values), len(key values)]
    # A quadratic block (``Lowering._quadratic``): the query is one number q, the key a one-hot
    # over the numbers ``values``; key v scores (2(v-c)(q-c) - (v-c)^2) / d2 = ((q-c)^2 - (q-v)^2) / d2.
    quad: tuple[list[float], float, float] | None = None  # (key values, c, 1/d2)
    # scored exactly (``Lowering._exact_quadratic``): a power-of-two scale, d_head a power of 4
    quad_exact: bool = False


@dataclass
class HeadOp:
    id: str
    node: str
    kind: str  # "aggregate" | "width" | "length"
    target: str
    blocks: list[Block]
    bos: str  # "default": BOS wins only when nothing is selected; "always": BOS is one of the selected
    value: str | None = None  # feature read as the value
    value_weights: list[Any] = field(default_factory=list)  # per value-feature entry
    default: Any = None
    mean: bool = False  # whether several keys may be averaged (numerical) — sets the margin
    pos: SourcePos | None = None
    bos_score: float | None = None  # the BOS key's score (units of S) when not the usual m - 1/2 / m
    bos_log: float = 0.0  # nats added to the BOS key's score: BOS counts as e^bos_log keys
    # a width part (``width_parts``): the head writes the selected keys' total weight w/(w+c)
    # instead of BOS's c/(w+c), a sum of small weights that float rounds relative to itself
    selected_mass: bool = False

    @property
    def inputs(self) -> list[str]:
        out = [b.query for b in self.blocks] + [b.key for b in self.blocks]
        if self.value:
            out.append(self.value)
        return sorted({f for f in out if f != ONE})


@dataclass
class MLPOp:
    id: str
    node: str | None
    target: str
    inputs: list[str]
    rows: list[tuple[tuple, Any]]
    pos: SourcePos | None = None
    kind: str = "map"


@dataclass
class EmbedOp:
    id: str
    target: str
    kind: str  # "token" | "index" | "const" | "token_fn" | "index_fn" (a map of one of them)
    value: Any = None
    token_type: str = "str"

    inputs: list[str] = field(default_factory=list)


Op = HeadOp | MLPOp | EmbedOp
