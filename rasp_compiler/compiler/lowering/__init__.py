"""Lowering: the analysed program → residual *features* and the *ops* that write them.

A feature is an s-op held in the residual stream (one-hot or one dimension).  Ops:
* ``EmbedOp``  — tokens, indices, constants and maps of the token alone or of the index alone,
  written by the embeddings;
* ``HeadOp``   — one attention head: an aggregate, the BOS share of a selector width, or length;
* ``MLPOp``    — one positionwise function, a row per value combination of its input features.

Maps are fused: a map's MLP reads the nearest non-map s-ops (its *frontier*), so a chain of maps
costs one MLP sublayer, and only maps that something else reads are written to the residual.
Where the fused table would be too large, or would need a nonlinear function of two numerical
inputs (one hidden ReLU layer cannot do that exactly), the map reads its direct inputs instead,
with numerical ones converted to one-hot first.

The lowering is one class, ``Lowering`` (``core``), built from parts with one job each:

* ``ops``: features and ops, what the lowering hands to the schedule and the blocks;
* ``map_rows``: a map's frontier, its rows and the hidden units they cost; ``maps``: the op of
  each map; ``affine``: integer maps of the index and the length, without a table;
* ``selector_blocks``: the score blocks of a selector; ``causal``: the check that a causal
  model's head never looks ahead; ``aggregates``: the head of each aggregate;
* ``widths``: selector widths and length; ``width_parts``: widths split into part heads;
* ``limits``: the size limits past which another form is taken.
"""

from __future__ import annotations

from rasp_compiler.compiler.lowering.core import Lowering
from rasp_compiler.compiler.lowering.ops import ONE, Block, EmbedOp, Feature, HeadOp, MLPOp, Op, is_bos_weight

__all__ = ["ONE", "Block", "EmbedOp", "Feature", "HeadOp", "Lowering", "MLPOp", "Op", "is_bos_weight"]
