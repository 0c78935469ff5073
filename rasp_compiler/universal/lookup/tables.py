"""Lookup tables: every attention head's output and every MLP op that is not folded, as a finite
table of (query point, what the source writes).

* A *code* turns a feature's value into one number, linearly in the stream: a categorical one-hot
  reads as its value's index + 1 (no value: 0), a number x as x / delta, delta its smallest gap.
  Distinct values then have codes at least 1 apart.
* A head's table re-encodes its output: its query is the code of what the head wrote (the UT's
  head writes that code, one column), its rows are the feature's possible values (and no value,
  and what the head writes at BOS).
* An MLP op's table has one row per point of its joint input domain (the compiler's analysis)
  and BOS's point.  Its query is one number for the inputs written before the layer, their codes in
  a mixed radix (so distinct points are at least 1 apart), plus the code of each same-layer head
  output it reads.  Each row's output is the op's compiled hidden layer run on that point.

Hard attention with score ``scale * (2 q.k - |k|^2)`` (``= scale * (|q|^2 - |q - k|^2)``, the
``|q|^2`` the same for every row) picks the nearest row; ``scale`` makes the nearest row win by
``MARGIN`` nats, so the others' weights are exactly 0 in float64 and the lookup is exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rasp_compiler.universal.lookup.parts import (
    F64,
    CompiledParts,
    HeadPart,
    OpPart,
    ProgramOutsideConstruction,
)

# nats by which the nearest row beats the next one: exp(-745) is below float64's least subnormal
MARGIN = 1500.0
# the largest |query| / (distance between rows) a table may have: scores are ~ scale * |q|^2, and
# their float64 rounding (|q|^2 * 1e-16 relative) must stay far below the margin
MAX_SPREAD = 1e6
# the most rows one table may have
MAX_ROWS = 200_000


@dataclass
class HeadCode:
    """How one head's output is read as one number."""

    weights: torch.Tensor    # d: code = (what the head writes) . weights
    domain: torch.Tensor     # n x d: what the head can write (distinct rows)


@dataclass
class Table:
    """One lookup: rows of (query point, written vector)."""

    layer: int
    kind: str                # "head" (re-encodes a head's output) or "op" (an MLP op)
    index: int               # the head, or the op's place among the layer's tables
    name: str                # the feature written
    time: int                # when the source writes (2l+1 heads, 2l+2 MLP ops)
    query: torch.Tensor      # n x q: each row's point in the lookup's query coordinates
    written: torch.Tensor    # n x d: what each row writes into the compiled stream
    scale: float             # multiplies the scores (MARGIN / least squared distance)
    lq_image: torch.Tensor | None = None   # d: the op's code of inputs written before the layer

    @property
    def rows(self) -> int:
        return self.query.shape[0]


def _code_weights(parts: CompiledParts, feature: str, extra: list[float]) -> tuple[torch.Tensor, int]:
    """(d code weights of ``feature``, the span of its codes); ``extra`` are numbers the feature
    may also hold (no value, BOS's)."""
    e, w = parts.features[feature], torch.zeros(parts.d, dtype=F64)
    if e["encoding"] == "categorical":
        w[e["start"]:e["start"] + e["size"]] = torch.arange(1, e["size"] + 1, dtype=F64)
        return w, e["size"]
    vals = sorted({float(v) for v in parts.values(feature)} | set(extra))
    gaps = [b - a for a, b in zip(vals, vals[1:], strict=False)]
    delta = min(gaps) if gaps else 1.0
    w[e["start"]] = 1.0 / delta
    return w, math.ceil((vals[-1] - vals[0]) / delta)


def _mixed_radix(parts: CompiledParts, features: list[str], bos: torch.Tensor) -> torch.Tensor:
    """d weights reading ``features`` as one number: each feature's code times the product of
    (span + 1) of the features before it, so distinct values are at least 1 apart."""
    weights, base = torch.zeros(parts.d, dtype=F64), 1
    for f in features:
        extra = [0.0, float(bos[parts.columns(f)[0]])] if parts.features[f]["encoding"] == "numerical" else []
        w, span = _code_weights(parts, f, extra)
        weights += base * w
        base *= span + 1
    return weights


def _points(parts: CompiledParts, features: list[str], extra: list[torch.Tensor]) -> torch.Tensor:
    """The distinct streams (n x d) holding the joint values ``features`` can take at one
    position (the compiler's analysis), and the streams ``extra``."""
    combos = parts.analysis.joint(features)
    if len(combos) > MAX_ROWS:
        raise ProgramOutsideConstruction(f"{', '.join(features)} take {len(combos):,} joint values, more "
                                         f"rows than a lookup table holds ({MAX_ROWS:,})")
    rows = [sum((parts.vector(f, v) for f, v in zip(features, combo, strict=True)),
                torch.zeros(parts.d, dtype=F64)) for combo in combos]
    return torch.unique(torch.stack(rows + extra), dim=0)


def head_code(parts: CompiledParts, head: HeadPart) -> HeadCode:
    weights = _mixed_radix(parts, head.features, head.bos_output)
    domain = _points(parts, head.features, [torch.zeros(parts.d, dtype=F64), head.bos_output])
    return HeadCode(weights, domain)


def head_table(parts: CompiledParts, head: HeadPart, code: HeadCode) -> Table:
    query = (code.domain @ code.weights)[:, None]
    return _table(head.layer, "head", head.head, ", ".join(head.features), 2 * head.layer + 1, query,
                  code.domain)


def op_table(parts: CompiledParts, op: OpPart, index: int, codes: dict[tuple[int, int], HeadCode]) -> Table:
    """The table of a non-folded MLP op; ``codes`` are the head codes of the op's layer."""
    heads = parts.heads[op.layer]
    by_feature = {f: h for h in heads for f in h.features}
    read_heads = sorted({by_feature[f].head for f in op.inputs if f in by_feature})
    before = [f for f in op.inputs if f not in by_feature]
    # a head read here is read whole (all the features it writes: its code holds them all)
    features = before + [f for h in read_heads for f in heads[h].features]
    bos = torch.zeros(parts.d, dtype=F64)
    cols = [c for f in features for c in parts.columns(f)]
    bos[cols] = op.bos_point[cols]
    bos = parts.snapped(bos, features)
    points = _points(parts, features, [bos])
    lq_image = _mixed_radix(parts, before, bos)
    query = torch.zeros(points.shape[0], 1 + len(heads), dtype=F64)
    query[:, 0] = points @ lq_image
    for h in read_heads:
        query[:, 1 + h] = points @ codes[(op.layer, h)].weights
    written = parts.op_output(op, points)
    # points that read alike must write alike (the codes are one-to-one on the values)
    key, inverse = torch.unique(query, dim=0, return_inverse=True)
    first = torch.full((key.shape[0],), -1, dtype=torch.long)
    for r in range(points.shape[0]):
        j = int(inverse[r])
        if first[j] < 0:
            first[j] = r
        elif not torch.equal(written[r], written[first[j]]):
            raise ProgramOutsideConstruction(f"MLP op {op.feature} of layer {op.layer}: two input points "
                                             "read alike but write differently")
    table = _table(op.layer, "op", index, op.feature, 2 * op.layer + 2, key, written[first])
    table.lq_image = lq_image
    return table


def _table(layer: int, kind: str, index: int, name: str, time: int, query: torch.Tensor,
           written: torch.Tensor) -> Table:
    if query.shape[0] > 1:
        dist = torch.cdist(query, query, compute_mode="donot_use_mm_for_euclid_dist")
        dist.fill_diagonal_(float("inf"))
        least = float(dist.min())
    else:
        least = 1.0
    spread = float(query.abs().max()) / least if query.numel() else 0.0
    if not least > 0 or spread > MAX_SPREAD:
        raise ProgramOutsideConstruction(
            f"the lookup of {name} (layer {layer}) cannot separate its rows exactly in float64: its "
            f"query spans {spread:.3g} times the least distance between rows (at most {MAX_SPREAD:g})",
            hint="give its inputs fewer possible values (a smaller --max-len or vocabulary)")
    return Table(layer, kind, index, name, time, query, written, MARGIN / least ** 2)


def tables(parts: CompiledParts) -> tuple[dict[tuple[int, int], HeadCode], list[Table]]:
    """The head codes and every table of a compiled model, layer by layer: the heads' tables
    first, then the tabulated MLP ops in plan order."""
    codes = {(h.layer, h.head): head_code(parts, h) for layer in parts.heads for h in layer}
    out = []
    for layer in range(parts.layers):
        for h in parts.heads[layer]:
            out.append(head_table(parts, h, codes[(layer, h.head)]))
        tabulated = [op for op in parts.ops[layer] if op.strategy == "table"]
        for index, op in enumerate(tabulated):
            out.append(op_table(parts, op, index, codes))
    return codes, out
