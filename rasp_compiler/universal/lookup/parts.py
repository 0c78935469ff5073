"""A compiled model read as *sources* that write the residual stream and *consumers* that read it.

The compiled model's residual stream is a sum of what its sources wrote: the embedding, every
attention head's output, every MLP op's output and the MLPs' biases, each in the columns of the
feature it writes.  A consumer reads a linear image of the stream at one moment: a head's query,
key and value, an MLP op's inputs, the unembedding.  The lookup UT carries, for every consumer, its
image of every source written before it, so no program-dependent matrix is ever applied to data
inside the backbone (docs/universal.md, "Programs with MLPs").

Moments (``time``): 0 is the embedding; attention sublayer i writes at 2i+1, MLP sublayer i at
2i+2.  A consumer at time t reads the stream after everything written before t.  An MLP op whose
hidden units are all linear on its inputs' range is *folded*: it is the linear map ``x -> x M + c``,
applied to every source written before it (``transfer``); every other op is a lookup table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from rasp_compiler.errors import UserError

if TYPE_CHECKING:
    from rasp_compiler.runtime import RaspModel

F64 = torch.float64
# |BOS stream of two inputs| differences above this mean BOS depends on the input (it never should)
BOS_TOLERANCE = 1e-9
# a number within this (relative) of a listed value is that value, rounded
SNAP = 1e-9


class ProgramOutsideConstruction(UserError):
    """A compiled model the lookup construction cannot carry exactly (real-valued input, a mean
    with too many values to tabulate, an unexpected weight layout)."""


@dataclass
class HeadPart:
    """One compiled attention head: its query and key images (scale folded in, all-zero columns
    dropped), its value map V = W_V W_O and the feature it writes."""

    layer: int
    head: int
    query: torch.Tensor     # d x k
    key: torch.Tensor       # d x k
    value: torch.Tensor     # d x d
    features: list[str]     # what it writes (a head may write several features at once)
    bos_output: torch.Tensor  # d: what it writes at BOS (BOS attends only to itself)


@dataclass
class OpPart:
    """One MLP op (a group of hidden units writing one feature) of a compiled layer."""

    layer: int
    index: int              # its place among the layer's ops
    feature: str            # the feature it writes
    inputs: list[str]       # the features it reads
    units: tuple[int, int]  # its hidden units [start, stop)
    strategy: str           # "fold" (linear on its inputs' range) or "table" (a lookup)
    linear: tuple[torch.Tensor, torch.Tensor] | None = None   # (M d x d, c d) when folded
    bos_point: torch.Tensor | None = None   # d: the stream it reads at BOS


@dataclass
class CompiledParts:
    """Everything the lookup UT needs from one compiled model, in float64."""

    model: Any                       # the CompiledModel (decoding, the reference forward)
    d: int
    layers: int
    heads: list[list[HeadPart]]      # per layer
    ops: list[list[OpPart]]          # per layer, in plan order
    mlp: list[dict[str, torch.Tensor] | None]   # per layer: W_in, b_in, W_out, b_out
    unembed: torch.Tensor            # d x d_out
    unembed_bias: torch.Tensor       # d_out
    token_embed: torch.Tensor        # (vocab + 2) x d
    pos_embed: torch.Tensor          # (max_len + 1) x d
    features: dict[str, dict]        # the config's residual layout by feature name
    causal: bool
    analysis: Any

    # ----- the stream's columns ---------------------------------------------------------------
    def columns(self, feature: str) -> list[int]:
        e = self.features[feature]
        return list(range(e["start"], e["start"] + e["size"]))

    def values(self, feature: str) -> list[Any]:
        """The values a feature can hold (the compiler's analysis; one-hot order if categorical)."""
        info = self.analysis.info.get(feature)
        if info is None:
            raise ProgramOutsideConstruction(f"the compiler's analysis has no value set for {feature}")
        if "unbounded" in info.notes or not info.values:
            raise ProgramOutsideConstruction(
                f"{feature} is a number with too many possible values to list, so no finite table "
                "holds what reads it", hint="give it fewer possible values (a smaller --max-len)")
        return list(info.values)

    def vector(self, feature: str, value: Any) -> torch.Tensor:
        """The stream (d) holding ``value`` in ``feature``'s columns and zero elsewhere."""
        e, out = self.features[feature], torch.zeros(self.d, dtype=F64)
        if e["encoding"] == "categorical":
            vals = self.values(feature)
            if value is not None and value in vals:
                out[e["start"] + vals.index(value)] = 1.0
        else:
            out[e["start"]] = float(value)
        return out

    def snapped(self, vector: torch.Tensor, features: list[str]) -> torch.Tensor:
        """``vector`` with each numerical feature's entry replaced by the listed value it equals up
        to float rounding (BOS's stream carries such rounding: 1e-18 where the list has 0)."""
        out = vector.clone()
        for f in features:
            if self.features[f]["encoding"] == "numerical":
                col = self.features[f]["start"]
                x = float(out[col])
                near = min((float(v) for v in self.values(f)), key=lambda v: abs(v - x))
                if abs(near - x) <= SNAP * max(1.0, abs(x)):
                    out[col] = near
        return out

    # ----- moments and the folded MLP ops -----------------------------------------------------
    def transfer(self, written: int, read: int) -> torch.Tensor:
        """d x d: what a source written at time ``written`` has become when read at time ``read``
        (the folded MLP ops in between applied; the identity when there are none)."""
        out = torch.eye(self.d, dtype=F64)
        for layer in range(self.layers):
            if written < 2 * layer + 2 < read:
                folds = [op.linear[0] for op in self.ops[layer] if op.strategy == "fold"]
                if folds:
                    out = out @ (torch.eye(self.d, dtype=F64) + sum(folds))
        return out

    def constants(self) -> list[tuple[int, torch.Tensor]]:
        """(time, vector) of what an MLP sublayer adds whatever its input: its output bias and the
        constant part of its folded ops."""
        out = []
        for layer, w in enumerate(self.mlp):
            if w is None:
                continue
            c = w["b_out"].clone()
            for op in self.ops[layer]:
                if op.strategy == "fold":
                    c = c + op.linear[1]
            if bool(c.any()):
                out.append((2 * layer + 2, c))
        return out

    def op_output(self, op: OpPart, points: torch.Tensor) -> torch.Tensor:
        """The op's own output (n x d) at ``points`` (n x d), computed with the compiled weights
        (the layer's output bias is a constant of its own, see ``constants``)."""
        w = self.mlp[op.layer]
        a, b = op.units
        hidden = torch.relu(points @ w["W_in"][:, a:b] + w["b_in"][a:b])
        return hidden @ w["W_out"][a:b]


def read_parts(model: RaspModel) -> CompiledParts:
    """The sources and consumers of a model compiled in this process (its analysis is needed:
    it lists the values every feature can hold)."""
    config = model.config
    if (config.get("input") or {}).get("kind") == "numerical":
        raise ProgramOutsideConstruction(
            "the model reads real numbers (--input-range): what its heads write and its MLPs read "
            "ranges over a continuum, and a lookup table holds finitely many values",
            hint="compile it over a finite vocabulary of numbers instead (--vocab '[0, 0.5, 1]')")
    analysis = getattr(model, "analysis", None)
    if analysis is None:
        raise UserError("the lookup UT needs the compiler's analysis of the program (its value sets); "
                        "a model loaded from disk has none",
                        hint="compile the program in this process (rasp universal --program FILE)")
    mod = model.module
    d, n_layers = int(config["d_model"]), int(config["n_layers"])
    features = {e["feature"]: e for e in config["residual"]}
    parts = CompiledParts(
        model=model, d=d, layers=n_layers, heads=[], ops=[], mlp=[],
        unembed=mod.w("unembed.W_U").detach().double(), unembed_bias=mod.w("unembed.b_U").detach().double(),
        token_embed=mod.w("embed.token").detach().double(), pos_embed=mod.w("embed.pos").detach().double(),
        features=features, causal=bool(config.get("causal", False)), analysis=analysis)
    streams, patterns = _bos_trace(model)
    for layer, (lc, plan) in enumerate(zip(config["layers"], config["plan"], strict=True)):
        parts.heads.append(_heads(parts, layer, lc, plan, streams, patterns))
        w = None
        if lc["d_mlp"]:
            w = {name: mod.w(f"layers.{layer}.mlp.{name}").detach().double()
                 for name in ("W_in", "b_in", "W_out", "b_out")}
            if f"layers__{layer}__mlp__W_gate" in mod.params:
                raise ProgramOutsideConstruction(f"layer {layer}'s MLP is gated (a product of two stream "
                                                 "values), which the lookup construction does not carry")
        parts.mlp.append(w)
        parts.ops.append([])
        for index, op in enumerate((plan.get("mlp") or {}).get("ops", [])):
            part = OpPart(layer, index, op["writes"], list(op["inputs"]), tuple(op["units"]), "table",
                          bos_point=streams[2 * layer + 1])
            _choose_strategy(parts, part)
            parts.ops[-1].append(part)
    return parts


def _bos_trace(model: RaspModel) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """BOS's stream after the embedding and every sublayer, and each layer's attention pattern of
    BOS, from two different inputs; the compiler makes BOS attend only to itself, so they agree."""
    vocab = model.vocab
    fixed = model.config.get("fixed_length")  # a model of one input length refuses any other
    short, longest = (fixed, fixed) if fixed else (1, model.max_len)
    runs = []
    for tokens in ([vocab[0]] * short, [vocab[-1]] * longest):
        ids, lengths = model.encode([tokens])
        with torch.no_grad():
            _, residuals, patterns = model.module(ids, lengths, trace=True)
        runs.append(([r[0, 0].double() for r in residuals], [p[0, :, 0].double() for p in patterns]))
    (s1, p1), (s2, _) = runs
    for a, b in zip(s1, s2, strict=True):
        if float((a - b).abs().max()) > BOS_TOLERANCE:
            raise ProgramOutsideConstruction("the BOS position's stream depends on the input, so its "
                                             "MLP inputs and head outputs cannot be tabulated")
    return s1, p1


def _heads(parts: CompiledParts, layer: int, lc: dict, plan: dict, streams: list[torch.Tensor],
           patterns: list[torch.Tensor]) -> list[HeadPart]:
    if not lc["n_heads"]:
        return []
    mod = parts.model.module
    wq, wk, wv, wo = (mod.w(f"layers.{layer}.attn.{n}").detach().double()
                      for n in ("W_Q", "W_K", "W_V", "W_O"))
    scale = 1.0 / math.sqrt(lc["d_head"])
    out = []
    for h in range(lc["n_heads"]):
        used = (wq[h] != 0).any(dim=0) & (wk[h] != 0).any(dim=0)  # a column zero on one side adds 0
        value = wv[h] @ wo[h]
        features = [f.strip() for f in plan["heads"][h]["writes"].split(",")]
        written = set((value != 0).any(dim=0).nonzero().flatten().tolist())
        if not written <= {c for f in features for c in parts.columns(f)}:
            raise ProgramOutsideConstruction(f"head {h} of layer {layer} writes outside the columns of "
                                             f"its features {', '.join(features)}")
        # BOS's own output: its attention row (all of it on BOS) times the values of its stream
        bos_output = parts.snapped(patterns[layer][h][0] * (streams[2 * layer] @ value), features)
        out.append(HeadPart(layer, h, wq[h][:, used] * scale, wk[h][:, used], value, features, bos_output))
    return out


def _choose_strategy(parts: CompiledParts, op: OpPart) -> None:
    """Fold the op when every hidden unit keeps one sign over the box of its inputs' values (then
    the op is exactly linear there); otherwise leave it a table.  Categorical inputs range over
    [0, 1] in each column, numerical ones between their least and largest value."""
    w = parts.mlp[op.layer]
    a, b = op.units
    lo = torch.zeros(parts.d, dtype=F64)
    hi = torch.zeros(parts.d, dtype=F64)
    reads = []
    for f in op.inputs:
        cols = parts.columns(f)
        reads += cols
        if parts.features[f]["encoding"] == "categorical":
            hi[cols] = 1.0
        else:
            vals = [float(v) for v in parts.values(f)] + [float(op.bos_point[cols[0]])]
            lo[cols], hi[cols] = min(vals), max(vals)
    w_in = w["W_in"][:, a:b]
    others = [c for c in range(parts.d) if c not in set(reads)]
    if bool(w_in[others].any()):
        raise ProgramOutsideConstruction(f"MLP op {op.feature} of layer {op.layer} reads columns outside "
                                         "its input features")
    pos, neg = torch.clamp(w_in, min=0), torch.clamp(w_in, max=0)
    low = w["b_in"][a:b] + (pos * lo[:, None] + neg * hi[:, None]).sum(0)
    high = w["b_in"][a:b] + (pos * hi[:, None] + neg * lo[:, None]).sum(0)
    active, inactive = low >= 0, high <= 0
    if bool((active | inactive).all()):
        on = active.nonzero().flatten() + a
        op.strategy = "fold"
        op.linear = (w["W_in"][:, on] @ w["W_out"][on], w["b_in"][on] @ w["W_out"][on])
