"""Lookup tables: every attention head's output and every MLP op that is not folded, as a finite
table of (query point, what the source writes), and the consumers the tables write to.

* A *code* turns what a source holds into a few numbers, linearly in the stream.  A feature's
  code: a categorical one-hot reads as its value's index + 1 (no value: 0), a number x as
  x / delta, delta its smallest gap, so distinct values are at least 1 apart; several features
  read as one number in a mixed radix.
* A head's code (``HeadCode``) is what the UT's head writes (c columns).  Candidates, compared in
  ``head_code``: its features' codes (in 1..n groups), or the few columns of its *downstream
  image* (what every later reader takes from it), which merges outputs no reader tells apart.
  The head's table re-encodes the code: one row per distinct code, the row writing the output.
* An MLP op's table has one row per point of its joint input domain (the compiler's analysis)
  and BOS's point.  Its query is the code of the inputs written before the layer (one number) and
  the codes of the same-layer heads it reads.  Each row writes the op's compiled hidden layer
  run on that point.

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
# the largest |query| / (distance between rows) a table may have.  Scores are about
# MARGIN * spread^2, rounded to 1e-16 of that: at 1e7 about 50 nats, far below the margin
MAX_SPREAD = 1e7
# the most rows one table may have
MAX_ROWS = 200_000
# codes within this share of the largest code are one value (float rounding of equal sums)
MERGE = 1e-10


@dataclass
class Consumer:
    """A reader of the compiled stream: its slot, when it reads, and its image (d x w)."""

    slot: tuple     # ("q" | "key" | "vp", layer, head), ("lq", layer, table) or ("out",)
    time: int       # it reads what was written before this time
    image: torch.Tensor


@dataclass
class HeadCode:
    """How one head's output is read as a few numbers."""

    weights: torch.Tensor    # d x c: code = (what the head writes) @ weights
    domain: torch.Tensor     # n x d: what the head can write (distinct rows)
    kind: str                # "features" or "downstream"

    @property
    def columns(self) -> int:
        return self.weights.shape[1]


@dataclass
class Table:
    """One lookup: rows of (query point, written vector)."""

    layer: int
    kind: str                # "head" (re-encodes a head's output) or "op" (an MLP op)
    index: int               # the head, or the op's place among the layer's tables
    name: str                # the feature(s) written
    time: int                # when the source writes (2l+1 heads, 2l+2 MLP ops)
    query: torch.Tensor      # n x q: each row's point in the lookup's query coordinates
    slots: list[tuple]       # what each query column is: ("lq",) or ("ho", head, code column)
    written: torch.Tensor    # n x d: what each row writes into the compiled stream
    scale: float             # multiplies the scores (MARGIN / least squared distance)
    lq_image: torch.Tensor | None = None   # d: the op's code of inputs written before the layer

    @property
    def rows(self) -> int:
        return self.query.shape[0]


@dataclass
class Lookups:
    """Everything the lookup UT carries for one compiled model."""

    codes: dict[tuple[int, int], HeadCode]
    tables: list[Table]
    consumers: list[Consumer]


# ----- codes of features ---------------------------------------------------------------------
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


def _distinct(query: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the first row index of each distinct query, each row's class), rows within ``MERGE`` of
    the largest |code| counted as one (equal sums rounded differently)."""
    grid = MERGE * max(1.0, float(query.abs().max()) if query.numel() else 1.0)
    _, inverse = torch.unique(torch.round(query / grid), dim=0, return_inverse=True)
    first = torch.full((int(inverse.max()) + 1 if inverse.numel() else 0,), query.shape[0], dtype=torch.long)
    first.scatter_reduce_(0, inverse, torch.arange(query.shape[0]), reduce="amin")
    return first, inverse


def _spread(query: torch.Tensor) -> tuple[float, float]:
    """(least distance between rows, largest |coordinate| / that distance)."""
    if query.shape[0] > 1:
        dist = torch.cdist(query, query, compute_mode="donot_use_mm_for_euclid_dist")
        dist.fill_diagonal_(float("inf"))
        least = float(dist.min())
    else:
        least = 1.0
    if not least > 0:
        return least, float("inf")
    return least, float(query.abs().max()) / least if query.numel() else 0.0


# ----- heads ---------------------------------------------------------------------------------
def _feature_codes(parts: CompiledParts, head: HeadPart) -> list[torch.Tensor]:
    """Candidate weights: the head's features in 1..n consecutive groups, one number a group."""
    n = len(head.features)
    out = []
    for columns in range(1, n + 1):
        groups = [head.features[g * n // columns:(g + 1) * n // columns] for g in range(columns)]
        out.append(torch.stack([_mixed_radix(parts, g, head.bos_output) for g in groups], dim=1))
    return out


def _downstream_code(parts: CompiledParts, head: HeadPart, downstream: torch.Tensor,
                     same_layer: list[torch.Tensor]) -> torch.Tensor | None:
    """Candidate weights: independent columns of everything later readers take from the head
    (``downstream``, d x W) and the codes same-layer ops read (``same_layer``); None when that is
    more columns than the head has features."""
    cols = [c for f in head.features for c in parts.columns(f)]
    if downstream.numel():
        downstream = downstream[:, downstream[cols].abs().amax(dim=0) > 0]
    stacked = torch.cat([downstream] + [w[:, None] for w in same_layer], dim=1)
    if stacked.shape[1] == 0:
        return torch.zeros(parts.d, 1, dtype=F64)
    chosen: list[int] = []
    for j in range(stacked.shape[1]):    # greedy: keep a column that raises the rank
        trial = stacked[cols][:, chosen + [j]]
        if int(torch.linalg.matrix_rank(trial)) == len(chosen) + 1:
            chosen.append(j)
        if len(chosen) > len(head.features):
            return None
    out = torch.zeros(parts.d, len(chosen), dtype=F64)
    out[cols] = stacked[cols][:, chosen]
    return out


def head_code(parts: CompiledParts, head: HeadPart, downstream: torch.Tensor,
              same_layer: list[torch.Tensor]) -> HeadCode:
    """The head's code: of the candidates whose rows separate within ``MAX_SPREAD``, the one with
    the fewest columns, then the fewest rows."""
    domain = _points(parts, head.features, [torch.zeros(parts.d, dtype=F64), head.bos_output])
    candidates = [("features", w) for w in _feature_codes(parts, head)]
    down = _downstream_code(parts, head, downstream, same_layer)
    if down is not None:
        candidates.append(("downstream", down))
    # what readers take from each output: outputs one code merges must give them the same
    read = domain @ torch.cat([downstream] + [w[:, None] for w in same_layer], dim=1)
    best, spreads = None, []
    for kind, weights in candidates:
        first, inverse = _distinct(domain @ weights)
        spreads.append(_spread((domain @ weights)[first])[1])
        key = (weights.shape[1], first.numel())
        alike = torch.allclose(read, read[first][inverse], rtol=1e-9, atol=1e-9)
        if alike and spreads[-1] <= MAX_SPREAD and (best is None or key < best[0]):
            best = (key, HeadCode(weights, domain, kind))
    if best is None:
        raise ProgramOutsideConstruction(
            f"the lookup of {', '.join(head.features)} (layer {head.layer}) cannot separate its rows "
            f"exactly in float64: its codes span at least {min(spreads):.3g} times the least distance "
            f"between rows (at most {MAX_SPREAD:g})",
            hint="give them fewer possible values (a smaller --max-len or vocabulary)")
    return best[1]


def head_table(head: HeadPart, code: HeadCode) -> Table:
    query = code.domain @ code.weights
    first, _ = _distinct(query)
    slots = [("ho", head.head, j) for j in range(code.columns)]
    return _table(head.layer, "head", head.head, ", ".join(head.features), 2 * head.layer + 1,
                  query[first], slots, code.domain[first])


# ----- MLP ops -------------------------------------------------------------------------------
def _op_reads(parts: CompiledParts, op: OpPart) -> tuple[list[int], list[str]]:
    """(same-layer heads the op reads, its inputs written before the layer)."""
    by_feature = {f: h.head for h in parts.heads[op.layer] for f in h.features}
    return (sorted({by_feature[f] for f in op.inputs if f in by_feature}),
            [f for f in op.inputs if f not in by_feature])


def _op_bos(parts: CompiledParts, op: OpPart, features: list[str]) -> torch.Tensor:
    bos = torch.zeros(parts.d, dtype=F64)
    cols = [c for f in features for c in parts.columns(f)]
    bos[cols] = op.bos_point[cols]
    return parts.snapped(bos, features)


def op_table(parts: CompiledParts, op: OpPart, index: int, codes: dict[tuple[int, int], HeadCode]) -> Table:
    """The table of a non-folded MLP op; ``codes`` hold the head codes of the op's layer."""
    heads = parts.heads[op.layer]
    read_heads, before = _op_reads(parts, op)
    # a head read here is read whole (its code may mix all the features it writes)
    features = before + [f for h in read_heads for f in heads[h].features]
    bos = _op_bos(parts, op, features)
    points = _points(parts, features, [bos])
    lq_image = _mixed_radix(parts, before, bos)
    slots = [("lq",)] + [("ho", h, j) for h in read_heads for j in range(codes[(op.layer, h)].columns)]
    query = torch.cat([(points @ lq_image)[:, None]]
                      + [points @ codes[(op.layer, h)].weights for h in read_heads], dim=1)
    written = parts.op_output(op, points)
    # points that read alike must write alike (the codes are one-to-one on what the op reads)
    first, inverse = _distinct(query)
    if not torch.allclose(written, written[first][inverse], rtol=0, atol=1e-12):
        raise ProgramOutsideConstruction(f"MLP op {op.feature} of layer {op.layer}: two input points "
                                         "read alike but write differently")
    table = _table(op.layer, "op", index, op.feature, 2 * op.layer + 2, query[first], slots, written[first])
    table.lq_image = lq_image
    return table


def _table(layer: int, kind: str, index: int, name: str, time: int, query: torch.Tensor,
           slots: list[tuple], written: torch.Tensor) -> Table:
    least, spread = _spread(query)
    if spread > MAX_SPREAD:
        raise ProgramOutsideConstruction(
            f"the lookup of {name} (layer {layer}) cannot separate its rows exactly in float64: its "
            f"query spans {spread:.3g} times the least distance between rows (at most {MAX_SPREAD:g})",
            hint="give its inputs fewer possible values (a smaller --max-len or vocabulary)")
    return Table(layer, kind, index, name, time, query, slots, written, MARGIN / least ** 2)


# ----- the whole model -----------------------------------------------------------------------
def lookups(parts: CompiledParts) -> Lookups:
    """Head codes, tables and consumers of a compiled model.  Layers run from the last to the
    first: a head's code may depend on what later layers read from it."""
    codes: dict[tuple[int, int], HeadCode] = {}
    tables: list[Table] = []
    consumers = [Consumer(("out",), 2 * parts.layers + 1, parts.unembed)]
    for layer in reversed(range(parts.layers)):
        ops = [op for op in parts.ops[layer] if op.strategy == "table"]
        for h in parts.heads[layer]:
            later = [parts.transfer(2 * layer + 1, c.time) @ c.image for c in consumers
                     if c.time > 2 * layer + 2]
            downstream = torch.cat(later, dim=1) if later else torch.zeros(parts.d, 0, dtype=F64)
            same_layer = []
            for op in ops:
                read_heads, _ = _op_reads(parts, op)
                if h.head in read_heads:
                    mine = [f for f in h.features if f in op.inputs]
                    same_layer.append(_mixed_radix(parts, mine, _op_bos(parts, op, mine)))
            codes[(layer, h.head)] = head_code(parts, h, downstream, same_layer)
        layer_tables = [head_table(h, codes[(layer, h.head)]) for h in parts.heads[layer]]
        layer_tables += [op_table(parts, op, t, codes) for t, op in enumerate(ops)]
        tables = layer_tables + tables
        time = 2 * layer + 1
        for h in parts.heads[layer]:
            code = codes[(layer, h.head)]
            consumers += [Consumer(("q", layer, h.head), time, h.query),
                          Consumer(("key", layer, h.head), time, h.key),
                          Consumer(("vp", layer, h.head), time, h.value @ code.weights)]
        consumers += [Consumer(("lq", layer, t.index), time + 1, t.lq_image[:, None])
                      for t in layer_tables if t.kind == "op"]
    return Lookups(codes, tables, consumers)
