"""Run a compiled RASP model with torch and safetensors alone.

This module is self-contained (it imports only torch, safetensors, json, math, operator, os,
warnings and hashlib, and rasp_compiler.errors where it is there), so a saved model directory plus
this one file is all a user needs::

    from rasp_compiler.runtime import RaspModel
    model = RaspModel.load("out/")
    model.run(["abca", "ab"])        # -> decoded outputs, one list per input
    logits = model.forward(["abca"])  # -> [batch, positions, outputs] logits (BOS excluded)
    trace = model.trace(["abca"])     # residual stream after every sublayer, attention patterns and scores

A model directory holds ``config.json`` (shapes, vocabulary, residual labels, the layer plan, the
output decoding) and ``model.safetensors`` (the weights).  The config stores the SHA-256 of the
weights and the weights file stores the SHA-256 of the config (in the safetensors metadata), so a
truncated or edited artifact is refused with an error instead of giving wrong answers.  Since both
hashes can be recomputed, ``load`` also checks the config against the schema the compiler writes and
every tensor against the config (``check_config``, ``check_tensors``, ``check_plan``), and decoding
refuses NaN or infinite outputs.

The network: position 0 holds a BOS token; token embedding + position embedding; per layer a
multi-head softmax attention (scores divided by sqrt(d_head), padded keys masked, optionally
causal) then a ReLU MLP, both added to the residual stream; a linear unembedding to logits.  On a
CPU, each product large enough to gain runs on the dimensions its weights touch: the residual
dimensions a sublayer reads and writes, and the head dimensions both factors of q.k or of v.W_O use
(the same sums without their zero terms); a product with one term an output is x's column times a
number (no sum at all).

Real-valued models (``rasp compile --input-range``): ``config["input"] = {"kind": "numerical",
"range": [lo, hi]}``; every token is the number token (id 0) and its value is added times
``embed.value`` [d_model] (a linear embedding); inputs outside the range or non-finite are refused.
Gated MLPs: when ``layers.{l}.mlp.W_gate`` [d_model, d_mlp] and ``b_gate`` [d_mlp] exist, the hidden
layer is relu(x W_in + b_in) * (x W_gate + b_gate) (exact products of two residual numbers); a saved
model has them exactly when its input is numerical (every MLP the numerical compiler writes is gated).
Wide MLPs: a layer whose config has ``"mlp_dtype": "float64"`` stores its MLP tensors in float64
inside a float32 model; the residual stream is widened for that MLP and rounded back after it.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import os
import warnings
from typing import Any, NoReturn

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

FORMAT = "rasp-compiler-model/1"
try:  # names the other artifacts (a UT, a backbone) given as a model; absent from a standalone copy
    from rasp_compiler.artifact_kinds import describe as _describe_artifact
except ImportError:
    def _describe_artifact(directory: str) -> str | None:  # type: ignore[misc]
        return None
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
# Peak-memory bound of a forward pass: see Transformer.forward.
CHUNK_ELEMENTS = 1 << 25

try:  # inside the rasp-compiler package the errors are the project's user errors (clean CLI exit)
    from rasp_compiler.errors import ArtifactError as _ArtifactBase
    from rasp_compiler.errors import InputError as _InputBase
except ImportError:  # standalone copy of this file
    class _ArtifactBase(Exception):  # type: ignore[no-redef]
        def __init__(self, message: str, hint: str | None = None) -> None:
            super().__init__(message)
            self.message, self.hint = message, hint

        def __str__(self) -> str:
            return self.message + (f"\n  hint: {self.hint}" if self.hint else "")

    class _InputBase(Exception):  # type: ignore[no-redef]
        def __init__(self, message: str, hint: str | None = None) -> None:
            super().__init__(message)
            self.message, self.hint = message, hint

        def __str__(self) -> str:
            return self.message + (f"\n  hint: {self.hint}" if self.hint else "")


class ModelArtifactError(_ArtifactBase):
    """The model directory is missing, truncated, corrupt or was edited."""


class ModelInputError(_InputBase):
    """An input the model cannot read: unknown token, too long, empty."""


class ExcludedInputError(ModelInputError):
    """An input in the set a model was compiled to exclude (``--min-denominator``: a denominator
    nearer 0 than the stated bound): the model flags it instead of answering."""


class ModelOutputError(_ArtifactBase):
    """The model's output is not a clean one-hot, so it cannot be decoded with confidence (a
    compiled model writes exactly one output value at ``logit_scale`` and the rest at 0)."""


# A categorical output whose best logit beats the runner-up by less than this share of the logit
# scale is refused instead of decoded: a wrong answer then fails loudly, never silently.
CLEAN_MARGIN = 0.5
# The compile note of a categorical aggregate that may select several keys (compiler/notes.py's
# SEVERAL_KEYS, written out here so that this file runs without the compiler): the interpreter
# raises ("mean of non-numbers") on an input where it does, and the model must not answer it.
SEVERAL_KEYS_NOTE = "the interpreter rejects such inputs"
# Such a head's query has read several keys where its largest attention weight is below this: one
# selected key takes ~1 of it (and BOS ~1 when none is), w >= 2 keys take 1/w <= 1/2 each.
SEVERAL_KEYS_BELOW = 0.75


def _number(text: str) -> int | float | None:
    """The finite number a token string spells (``"3"``, ``"-1.5"``), or None."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def config_digest(config: dict) -> str:
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def weights_digest(tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        if t.numel():
            h.update(t.view(torch.uint8).numpy())  # the bytes in place: no copy of a large model
    return h.hexdigest()


class Transformer(torch.nn.Module):
    """The compiled network; weights are parameters so gradients and hooks work as usual.

    ``paths`` says how its products run: ``"auto"`` (the default) chooses per weight from its
    measured density and the device (``explain`` lists the choices), ``"dense"`` runs every product
    on whole matrices.  Both give the same outputs (tests/test_sparse_paths.py checks it bit for
    bit in float64 on every shipped program)."""

    def __init__(self, config: dict, tensors: dict[str, torch.Tensor], paths: str = "auto") -> None:
        super().__init__()
        self.config = config
        self.causal = bool(config.get("causal", False))
        self.layers_cfg = config["layers"]
        # the most numbers one intermediate tensor of forward() may hold (32 Mi: 128 MiB at float32)
        self.chunk_elements = CHUNK_ELEMENTS
        self.params = torch.nn.ParameterDict(
            {name.replace(".", "__"): torch.nn.Parameter(t, requires_grad=False)
             for name, t in tensors.items()})
        self.paths = paths
        self._prepared: tuple[tuple, list[_Layer], _Product] | None = None

    def w(self, name: str) -> torch.Tensor:
        return self.params[name.replace(".", "__")]

    # ------------------------------------------------------------------ products, prepared once
    def _layers(self) -> tuple[list[_Layer], _Product]:
        """Each sublayer's products as this call runs them: built once per device, path setting
        and weight version and kept (the supports, gathered weights and CSR matrices a product
        needs cost more than a small model's whole forward), rebuilt where a weight was changed in
        place.  Where gradients must reach the weights the products are built on the parameters
        themselves, each call, and run dense."""
        params = list(self.params.values())
        if torch.is_grad_enabled() and any(p.requires_grad for p in params):
            return self._build("dense")
        mode = self.paths if params and params[0].device.type == "cpu" else "dense"
        key = (mode, params[0].device if params else None, tuple((id(p), p._version) for p in params))
        if self._prepared is None or self._prepared[0] != key:
            with torch.no_grad():
                layers, unembed = self._build(mode)
            self._prepared = (key, layers, unembed)
        return self._prepared[1], self._prepared[2]

    def _build(self, mode: str) -> tuple[list[_Layer], _Product]:
        if mode not in PATH_MODES:
            raise ValueError(f"paths must be one of {', '.join(PATH_MODES)}, not {mode!r}")
        layers = []
        one_hots = _one_hot_blocks(self.config)
        for li, lc in enumerate(self.layers_cfg):
            attn = mlp = None
            if lc["n_heads"]:
                attn = _Attention.build(li, *(self.w(f"layers.{li}.attn.{n}")
                                              for n in ("W_Q", "W_K", "W_V", "W_O")), mode,
                                        one_hots=one_hots)
            if lc["d_mlp"]:
                gated = f"layers__{li}__mlp__W_gate" in self.params
                mlp = _Mlp.build(li, self.w(f"layers.{li}.mlp.W_in"), self.w(f"layers.{li}.mlp.b_in"),
                                 self.w(f"layers.{li}.mlp.W_out"), self.w(f"layers.{li}.mlp.b_out"),
                                 self.w(f"layers.{li}.mlp.W_gate") if gated else None,
                                 self.w(f"layers.{li}.mlp.b_gate") if gated else None, mode)
            layers.append(_Layer(attn, mlp))
        unembed = _Product.build("unembed.W_U", self.w("unembed.W_U"), mode, bias=self.w("unembed.b_U"),
                                 all_columns=True)
        return layers, unembed

    def explain(self) -> list[dict[str, Any]]:
        """Which path each weight's product takes on this module's device, and why: one entry per
        product (``tensor``, ``shape``, ``nonzero``, ``path``, ``why``)."""
        layers, unembed = self._layers()
        out = []
        for layer in layers:
            for part in (layer.attn, layer.mlp):
                if part is not None:
                    out += [p.explained() for p in part.products()]
        return out + [unembed.explained()]

    # ------------------------------------------------------------------ the network
    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, trace: bool = False,
                values: torch.Tensor | None = None, attn_logits: list[torch.Tensor] | None = None,
                trace_layers: set[int] | None = None) -> Any:
        """``ids`` [batch, 1 + positions] (BOS first, PAD after each input's end); ``lengths`` the
        number of real tokens per row.  Returns logits [batch, 1 + positions, outputs], and with
        ``trace`` also the residual stream after the embedding and every sublayer and each layer's
        attention pattern [batch, heads, query, key].  With ``trace``, ``attn_logits`` (a list)
        receives each layer's scores [batch, heads, query, key] as the softmax reads them: divided
        by sqrt(d_head), masked keys set to the dtype's lowest number.  The list is an argument,
        not a fourth result, so that callers unpacking three results keep working.  With
        ``trace_layers``, only those layers' patterns (and scores) are kept; the others are empty
        [batch, 0, query, key] tensors, so that a trace of a model with many wide heads need not
        hold them all.

        Memory: a large batch runs in slices of whole inputs, and every MLP in slices of positions,
        so that no intermediate tensor holds much more than ``chunk_elements`` numbers (the MLP
        hidden activations [positions, d_mlp] of an O(N²) lookup table, the attention scores
        [batch, heads, N, N], computed a group of heads at a time).  Each input's numbers are
        computed by the same operations either way, so slicing does not change the result."""
        b, t = ids.shape
        layers, unembed = self._layers()
        if not trace and b > 1:
            step = max(1, self.chunk_elements // max(1, self._row_cost(t)))
            if step < b:
                parts = [self.forward(ids[s:s + step], lengths[s:s + step],
                                      values=None if values is None else values[s:s + step])
                         for s in range(0, b, step)]
                return torch.cat(parts, dim=0)
        # rows gathered by index_select: the same rows, several times faster than indexing with ``ids``
        x = self.w("embed.token").index_select(0, ids.reshape(-1)).view(b, t, -1) \
            + self.w("embed.pos")[:t].unsqueeze(0)
        if values is not None:  # numerical tokens: embedded linearly, value * embed.value
            x = x + values.to(x.dtype).unsqueeze(-1) * self.w("embed.value")
        pos = torch.arange(t, device=ids.device)
        # the keys a query may not read, broadcast over heads: padding [b, 1, 1, t], and with
        # ``causal`` the later positions [b, 1, t, t]
        masked = (pos.unsqueeze(0) > lengths.unsqueeze(1))[:, None, None, :]
        if self.causal:
            masked = masked | (pos.unsqueeze(0) > pos.unsqueeze(1))
        elif not bool(masked.any()):
            masked = None  # inputs of one length: no key to mask, so no masked_fill to pay for
        neg = torch.finfo(x.dtype).min
        # x is this call's own tensor: updated in place unless a trace keeps every step or
        # autograd may have saved it
        in_place = not trace and not torch.is_grad_enabled()
        residuals, patterns = [x], []
        hot: dict[int, tuple[int, torch.Tensor | None]] = {}  # one-hot blocks' indices (``_Lookup``)
        for li, (lc, layer) in enumerate(zip(self.layers_cfg, layers, strict=True)):
            keep = trace and (trace_layers is None or li in trace_layers)
            if layer.attn is not None:
                x, attns, logits_ = layer.attn.apply(x, masked, neg, math.sqrt(lc["d_head"]), keep, in_place,
                                                     hot)
                if trace and not attns:  # a layer left out of ``trace_layers``
                    patterns.append(torch.zeros(b, 0, t, t, dtype=x.dtype, device=x.device))
                    if attn_logits is not None:
                        attn_logits.append(patterns[-1])
                elif trace:
                    patterns.append(attns[0] if len(attns) == 1 else torch.cat(attns, dim=1))
                    if attn_logits is not None:
                        attn_logits.append(logits_[0] if len(logits_) == 1 else torch.cat(logits_, dim=1))
            elif trace:
                patterns.append(torch.zeros(b, 0, t, t, dtype=x.dtype, device=x.device))
                if attn_logits is not None:
                    attn_logits.append(patterns[-1])
            if trace:
                residuals.append(x)
            if layer.mlp is not None:
                step = _mlp_slice_rows(int(lc["d_mlp"]), x.device.type, self.chunk_elements)
                x = layer.mlp.apply(x, step, in_place)
                _forget(hot, layer.mlp.writes)
            if trace:
                residuals.append(x)
        logits = unembed.times(x)
        if trace:
            return logits, residuals, patterns
        return logits

    def _row_cost(self, t: int) -> int:
        """About how many numbers one input of t positions keeps alive at once (residual stream,
        attention scores and queries/keys/values; the MLPs slice themselves)."""
        d_model = int(self.config.get("d_model", 1))
        heads = max([int(lc.get("n_heads", 0)) for lc in self.layers_cfg] + [0])
        d_head = max([int(lc.get("d_head", 0)) for lc in self.layers_cfg] + [0])
        return t * (3 * d_model + heads * (3 * t + 4 * d_head))


# How a product runs.  Compiled weights are mostly zeros, and most sublayers read and write a few
# residual dimensions, so on a CPU a product may run on the dimensions its weight touches ("columns":
# the residual columns it reads gathered, a dense product with the weight's non-zero rows and
# columns, the result added into the columns it writes), and a large weight that is mostly zeros
# after that as a CSR matrix ("csr").  A GPU keeps the dense products: they are cheap there, and
# each gather is one more kernel launch.  Leaving exact zero terms out of a sum changes no bit of
# it where the remaining terms are added in the same order, and a matrix product adds the terms of
# each output in the order of the inner dimension, which a gather keeps: tests/test_sparse_paths.py
# checks that every path gives the dense path's logits bit for bit in float64 on every shipped
# program at 6, 16 and 64.  The choice depends on the weights and the device alone, never on the
# batch, so that an input gives the same logits, bit for bit, in any batch.  A small weight gathers
# too: a dense product with a narrow output costs far more than its arithmetic on a CPU BLAS, more
# than the gathers (the measurement: bench/small_weights.py, docs/compiler-results.md).
PATH_MODES = ("auto", "dense")
# A weight whose non-zero rows and columns hold more than this share of its entries runs dense: the
# gathers would cost more than the skipped terms save.
COLUMNS_MAX_SHARE = 3 / 4
# A gathered MLP weight of at least this many entries, with at most this share non-zero, runs as a
# CSR matrix (the hidden activations then kept transposed, [units, positions], so that no large
# tensor is transposed): a step MLP's W_out writes one or two outputs per unit.  Only where every
# output adds at most two non-zero terms (``_two_terms_at_most``): a CSR product adds an output's
# terms in unit order, the BLAS in blocks of its inner dimension, and the two differ in the last bit
# where a partial sum rounds (DEVELOPERS.md, "How the runtime chooses each product's path").
CSR_MIN_ELEMENTS = 1 << 14
CSR_MAX_DENSITY = 1 / 16
# A projection that reads only one-hot blocks of the residual stream (a categorical s-op's values,
# the constant columns) is a table lookup: each position's row is the sum of the weight's rows at
# its hot indices ("lookup", see _Lookup).  Where it reads at least this many rows: a product costs
# that many multiply-adds an output, a lookup a gathered row per table and a check of the one-hots,
# so narrow products stay products (the threshold's measurement: bench/lookups.py --min-rows,
# docs/compiler-results.md); up to this many rows, and entries, of a table.
LOOKUP_MIN_ROWS = 96
LOOKUP_MAX_ROWS = 1 << 16
LOOKUP_MAX_ELEMENTS = 1 << 22
# The most hidden activations one MLP slice holds on a CPU (see _Mlp.apply), unless that is
# fewer than MLP_SLICE_ROWS positions.
MLP_SLICE_ELEMENTS = 1 << 18
MLP_SLICE_ROWS = 64


def _mlp_slice_rows(d_mlp: int, device_type: str, chunk_elements: int) -> int:
    """How many positions one MLP slice takes."""
    budget = chunk_elements
    if device_type == "cpu":
        budget = min(budget, max(MLP_SLICE_ELEMENTS, MLP_SLICE_ROWS * d_mlp))
    return max(1, budget // max(1, d_mlp))


def _one_hot_blocks(config: dict) -> list[tuple[int, int]]:
    """(start, size) of the residual blocks that should hold a one-hot or nothing at every
    position (categorical s-ops, the constant columns), disjoint; ``_Lookup`` checks each x."""
    blocks, end = [], 0
    for b in sorted(config.get("residual") or [], key=lambda b: int(b.get("start", -1))):
        start, size = int(b.get("start", -1)), int(b.get("size", 0))
        if b.get("encoding") in ("categorical", "constant") and start >= end and size > 0 \
                and start + size <= int(config.get("d_model", 0)):
            blocks.append((start, size))
            end = start + size
    return blocks


def _nonzero_along(w: torch.Tensor, dim: int) -> torch.Tensor:
    """Whether each index along ``dim`` has a non-zero entry (a bool vector)."""
    return (w != 0).movedim(dim, 0).flatten(1).any(dim=1)


def _index(used: torch.Tensor) -> torch.Tensor:
    return used.nonzero().flatten()


def _sparse_wanted(w: torch.Tensor, mode: str) -> str | None:
    """Why ``w``'s product stays dense, or None where it may skip its zeros."""
    if mode == "dense":
        return "paths=dense" if w.device.type == "cpu" else f"on {w.device.type}"
    return None


def _one_long_sum(w: torch.Tensor, writes: torch.Tensor) -> bool:
    """Whether gathering ``w``'s columns would leave one, a sum of more than two terms, out of
    several: torch runs a product with one column as a matrix-vector product, which may add the
    terms in another order than the matrix product of the dense path (two terms add the same in
    any order).  Such a product keeps its columns."""
    if w.shape[1] < 2 or int(writes.sum()) != 1:
        return False
    return int(torch.count_nonzero(w[:, writes])) > 2


def _csr(w: torch.Tensor) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: "Sparse CSR tensor support is in beta state"
        return w.contiguous().to_sparse_csr()


class _Product:
    """x @ w (+ bias) for one 2-D weight [d_in, d_out]: on the "columns" path x's columns ``reads``
    times w's non-zero rows, giving the columns ``writes`` (None: all of them; ``all_rows`` /
    ``all_columns`` where x or the result is not the residual stream, e.g. W_O's heads, the logits)."""

    def __init__(self, name: str, w: torch.Tensor, path: str, why: str, reads: torch.Tensor | None,
                 writes: torch.Tensor | None, bias: torch.Tensor | None) -> None:
        self.name, self.path, self.why = name, path, why
        self.shape, self.nonzero = tuple(w.shape), int(torch.count_nonzero(w))
        self.reads = None if reads is None else _Cols(reads)
        self.writes = None if writes is None else _Cols(writes)
        self.w = w if reads is None else w.index_select(0, reads)
        if writes is not None:
            self.w = self.w.index_select(1, writes)
            bias = None if bias is None else bias.index_select(0, writes)
        self.bias = bias
        self.lookup: _Lookup | None = None
        self.terms: tuple[_Cols, torch.Tensor] | None = None
        if path == "columns":
            self.terms = _one_term_each(self.w, reads)
            if self.terms is not None:
                self.why += "; one term an output: x's column times a number"
        # the output columns the product gives, where its weight runs padded (GEMM_COLUMNS)
        self.out_columns: int | None = None
        if self.terms is None and _gemm_width(self.w) != self.w.shape[1]:
            self.out_columns = self.w.shape[1]
            self.w = _padded(self.w, _gemm_width(self.w))
            self.why += f"; its {self.out_columns} output columns run as {self.w.shape[1]}"

    @classmethod
    def build(cls, name: str, w: torch.Tensor, mode: str, bias: torch.Tensor | None = None,
              all_rows: bool = False, all_columns: bool = False,
              one_hots: list[tuple[int, int]] | None = None) -> "_Product":
        """The product's path; with ``one_hots`` (the residual blocks that hold one-hots, from the
        config), also a lookup table where every row it reads is in one of them (``_Lookup``)."""
        product = cls._path(name, w, mode, bias, all_rows, all_columns)
        if one_hots and bias is None and product.path != "dense" \
                and int(_nonzero_along(w, 0).sum()) >= LOOKUP_MIN_ROWS:
            product.lookup = _Lookup.build(
                w if product.writes is None else w.index_select(1, product.writes.index), one_hots)
        return product

    @classmethod
    def _path(cls, name: str, w: torch.Tensor, mode: str, bias: torch.Tensor | None,
              all_rows: bool, all_columns: bool) -> "_Product":
        why = _sparse_wanted(w, mode)
        if why is None and w.shape[1] == 1 and int(torch.count_nonzero(w)) > 2:
            # a matrix-vector product either way, which may add its terms in another order than
            # the same sum over fewer (gathered) rows
            why = "one column, a sum of more than two terms"
        if why is not None:
            return cls(name, w, "dense", why, None, None, bias)
        reads = torch.ones(w.shape[0], dtype=torch.bool) if all_rows else _nonzero_along(w, 0)
        writes = torch.ones(w.shape[1], dtype=torch.bool) if all_columns else _nonzero_along(w, 1)
        if bias is not None and not all_columns:
            writes |= bias != 0
        share = int(reads.sum()) * int(writes.sum()) / max(1, w.numel())
        if share > COLUMNS_MAX_SHARE:
            return cls(name, w, "dense", f"its used rows and columns hold {share:.0%} of it", None, None,
                       bias)
        if _one_long_sum(w, writes):
            writes[:] = True
        return cls(name, w, "columns", f"reads {int(reads.sum())} of {w.shape[0]} rows, writes "
                   f"{int(writes.sum())} of {w.shape[1]} columns", None if all_rows else _index(reads),
                   None if all_columns else _index(writes), bias)

    def explained(self) -> dict[str, Any]:
        path, why = self.path, self.why
        if self.lookup is not None:
            path, why = "lookup", f"{self.lookup.describe()}; {path} where they are not one-hots ({why})"
        return {"tensor": self.name, "shape": list(self.shape), "nonzero": self.nonzero,
                "path": path, "why": why}

    def times(self, x: torch.Tensor, hot: dict[int, tuple[int, torch.Tensor | None]] | None = None
              ) -> torch.Tensor:
        """x @ w (+ bias) on the columns ``writes``; ``hot`` holds the one-hot blocks' indices
        found so far for this x (``_Lookup.times``)."""
        if self.lookup is not None:
            out = self.lookup.times(x, {} if hot is None else hot)
            if out is not None:
                return out
        if self.terms is not None:
            out = _columns(x, self.terms[0]) * self.terms[1]
        else:
            out = _columns(x, self.reads) @ self.w
            if self.out_columns is not None:
                out = out[..., :self.out_columns]
        return out if self.bias is None else out + self.bias

    def add_to(self, x: torch.Tensor, delta: torch.Tensor, in_place: bool) -> torch.Tensor:
        return _add_columns(x, self.writes, delta, in_place=in_place)


def _one_term_each(w: torch.Tensor, reads: torch.Tensor | None) -> tuple["_Cols", torch.Tensor] | None:
    """Where every column of the gathered weight ``w`` has at most one non-zero, x @ w is, per
    output, x's column at that row times the weight (or 0 where the column is empty): one rounding
    of one product, the same bits as any sum that adds exact zeros to it, and as the dense path's.
    Returns (the residual columns to read, one per output; the weights), or None.  A product by a
    narrow weight costs a BLAS call several times its arithmetic, and compiled weights are often
    such: a value copied, a one-hot unembedded, a number spread over an MLP's units."""
    if w.shape[0] == 1:  # one row: x's column [..., 1] times the row, broadcast
        return _Cols(torch.zeros(1, dtype=torch.long) if reads is None else reads), w[0]
    nonzero = w != 0
    if w.numel() == 0 or int(nonzero.sum(0).max()) > 1:
        return None
    row = nonzero.to(torch.uint8).argmax(0)  # each column's non-zero row (0 where it has none)
    return _Cols(row if reads is None else reads[row]), w.gather(0, row.unsqueeze(0)).squeeze(0)


class _Lookup:
    """x @ w where every non-zero row of w lies in a block of the residual stream that holds, at
    each position, a one-hot or nothing (a categorical s-op's values, the constant columns): the
    product is then the sum of w's rows at the position's hot indices, one per block, so tables of
    those sums, each indexed by the joint code of a group of blocks, replace it.

    Bit for bit the product's: every term of x @ w is a weight times 0 or 1, exact, so an output is
    a sum of the weights at the hot rows.  Where a column has at most two such terms, every order
    gives the one rounded sum; where it has more, no partial sum may round (``_sums_exact``).
    Whether the blocks hold one-hots is checked on each x (``times``); where one does not (a
    categorical mean of several keys) the product runs on its other path."""

    def __init__(self, groups: list[tuple[list[tuple[int, int]], list[int], torch.Tensor]]) -> None:
        self.groups = groups  # (blocks, their strides in the code, the table)

    @classmethod
    def build(cls, w: torch.Tensor, one_hots: list[tuple[int, int]]) -> "_Lookup | None":
        """The lookup of ``w`` [d_in, d_out], or None where a row it reads is outside the one-hot
        blocks, a block alone would pass the table limits, or a sum could round in another order."""
        rows = _nonzero_along(w, 0)
        blocks = [(start, size) for start, size in one_hots if bool(rows[start:start + size].any())]
        inside = torch.zeros_like(rows)
        for start, size in blocks:
            inside[start:start + size] = True
        if not blocks or bool((rows & ~inside).any()) or not _sums_exact(w, blocks):
            return None
        most = min(LOOKUP_MAX_ROWS, LOOKUP_MAX_ELEMENTS // max(1, w.shape[1]))
        grouped: list[list[tuple[int, int]]] = [[]]
        for start, size in blocks:  # consecutive blocks share a table while it stays small
            if math.prod(n + 1 for _, n in grouped[-1]) * (size + 1) > most:
                grouped.append([])
            grouped[-1].append((start, size))
        if not grouped[0] or any(math.prod(n + 1 for _, n in g) > most for g in grouped):
            return None
        return cls([_table(w, g) for g in grouped])

    def describe(self) -> str:
        blocks = [b for g, _, _ in self.groups for b in g]
        rows = " + ".join(f"{t.shape[0]:,}" for _, _, t in self.groups)
        return (f"reads {len(blocks)} one-hot block{'s' if len(blocks) > 1 else ''} "
                f"({sum(size for _, size in blocks)} rows): table{'s' if len(self.groups) > 1 else ''} "
                f"of {rows} rows")

    def times(self, x: torch.Tensor, hot: dict[int, tuple[int, torch.Tensor | None]]
              ) -> torch.Tensor | None:
        """x @ w [..., d_out], or None where a block of x is not a one-hot (or empty) at some
        position.  ``hot`` keeps each block's indices for this x (``_hot_index``)."""
        out = None
        for blocks, strides, table in self.groups:
            code = None
            for (start, size), stride in zip(blocks, strides, strict=True):
                if start not in hot:
                    hot[start] = (size, _hot_index(x.narrow(-1, start, size)))
                idx = hot[start][1]
                if idx is None:
                    return None
                part = idx if stride == 1 else idx * stride
                code = part if code is None else code + part
            # index_select: the same rows as table[code], faster (as for the embedding)
            rows = table.index_select(0, code.reshape(-1)).view(*code.shape, table.shape[1])
            out = rows if out is None else out.add_(rows)
        return out


def _table(w: torch.Tensor, blocks: list[tuple[int, int]]
           ) -> tuple[list[tuple[int, int]], list[int], torch.Tensor]:
    """The lookup table of ``blocks``: its row sum_b i_b * stride_b is the sum of w's rows i_b of
    each block b (i_b = size_b where the block is empty), added block after block."""
    table = torch.zeros(1, w.shape[1], dtype=w.dtype, device=w.device)
    for start, size in blocks:
        rows_b = torch.cat([w[start:start + size], table.new_zeros(1, w.shape[1])])
        table = (table.unsqueeze(1) + rows_b.unsqueeze(0)).reshape(-1, w.shape[1])
    strides = [math.prod(size + 1 for _, size in blocks[b + 1:]) for b in range(len(blocks))]
    return blocks, strides, table


def _hot_index(v: torch.Tensor) -> torch.Tensor | None:
    """Per row of v [..., size]: the index of its one 1 (size where it is all zeros), or None
    where some row holds anything else."""
    nonzero = v != 0
    count = nonzero.sum(-1)
    if bool((count > 1).any()):
        return None
    idx = nonzero.view(torch.uint8).argmax(-1)
    one = count == 1
    if not bool((v.gather(-1, idx.unsqueeze(-1)).squeeze(-1)[one] == 1).all()):
        return None
    return torch.where(one, idx, v.shape[-1])


def _forget(hot: dict[int, tuple[int, torch.Tensor | None]], writes: "_Cols | None") -> None:
    """Drop the one-hot indices of the blocks a sublayer has written (every block where it
    writes every column)."""
    if not hot:
        return
    if writes is None:
        hot.clear()
        return
    written = writes.columns()
    for start in [st for st, (size, _) in hot.items() if not written.isdisjoint(range(st, st + size))]:
        del hot[start]


def _two_terms_at_most(w: torch.Tensor) -> bool:
    """Whether every column of w has at most two non-zeros: x @ w then adds at most two terms an
    output, and a + b is b + a bit for bit, whatever order or grouping a product takes."""
    return w.numel() == 0 or int((w != 0).sum(0).max()) <= 2


def _sums_exact(w: torch.Tensor, blocks: list[tuple[int, int]]) -> bool:
    """Whether every column of w adds alike in any order when one row of each block is taken:
    at most two blocks hold a non-zero in it, or every partial sum of such rows is a multiple of
    the least significant bit among its weights small enough for the dtype to hold exactly."""
    parts = [w[start:start + size].double() for start, size in blocks]
    count = sum((p != 0).any(0).long() for p in parts)
    many = count > 2
    if not bool(many.any()):
        return True
    bound = sum(p[:, many].abs().amax(0) for p in parts)
    terms = torch.cat([p[:, many] for p in parts])
    nonzero = terms != 0
    mantissa, exponent = torch.frexp(terms.abs().where(nonzero, torch.ones_like(terms)))
    whole = (mantissa * 2.0 ** 53).long()  # the 53-bit significand as an integer
    lowest = torch.ldexp((whole & -whole).double(), (exponent - 53).double())
    least = lowest.where(nonzero, torch.full_like(lowest, math.inf)).amin(0)
    digits = round(-math.log2(torch.finfo(w.dtype).eps))  # one bit below the precision: a margin
    return bool((bound <= least * 2.0 ** digits).all())


# torch's CPU softmax over a last dimension of float32 shorter than one vector register (16 keys
# with AVX-512) runs the row's tail through partial loads, several times slower than a full row
# (docs/compiler-results.md, tracr side by side).  Such scores are softmaxed padded with masked
# keys up to SOFTMAX_KEYS: a masked key's exp is exactly 0, so it adds nothing.  From a full
# vector on (16 keys or more with AVX-512, 8 with AVX2) the padded softmax
# gives the unpadded one's bits (the lanes' sums gain only +0 terms); below it the unpadded sum adds
# its few lanes in another order, so padding may move a probability's last bit: every input, alone
# or in any batch, then takes the padded softmax, as every batch under 16 positions does.  float64
# gains nothing from it (its exp dominates) and is left as it was.
SOFTMAX_KEYS = 16


def attention_softmax(scores: torch.Tensor, neg: float) -> torch.Tensor:
    """softmax(scores) over the last dimension (the keys), masked keys already at ``neg``: the
    attention pattern as forward computes it (see SOFTMAX_KEYS)."""
    keys = scores.shape[-1]
    if scores.dtype != torch.float32 or keys >= SOFTMAX_KEYS or scores.device.type != "cpu":
        return torch.softmax(scores, dim=-1)
    padded = torch.nn.functional.pad(scores, (0, SOFTMAX_KEYS - keys), value=neg)
    return torch.softmax(padded, dim=-1)[..., :keys]


# MKL's GEMM on a CPU runs a product whose output width is off its kernel's width (16 columns in
# float32, 12 in float64, with AVX-512) on a slow path that costs several times the arithmetic
# (docs/compiler-results.md, "Narrow products padded"), and small compiled models are made of such
# products.  So a CPU weight runs padded with zero columns up to ``_gemm_width`` (the result sliced
# back), and a head's value dimensions likewise.  Only at the widths where padding paid in every
# shape of ``bench/narrow_products.py --sweep``: a matrix-vector product, or one padded to twice
# its width, can lose.  A padded column's sum may round differently from the unpadded one, so every
# path pads alike, the dense one too, as the softmax does (SOFTMAX_KEYS); a GPU is left as it is.
GEMM_COLUMNS = {torch.float32: 16, torch.float64: 12}


def _gemm_width(w: torch.Tensor) -> int:
    """How many output columns (``w``'s last dimension) a product by ``w`` runs with."""
    n, q = w.shape[-1], GEMM_COLUMNS.get(w.dtype)
    if q is None or w.device.type != "cpu" or n < 2 or n % q == 0:
        return n
    padded = -(-n // q) * q
    if w.dtype == torch.float32:
        return padded if n < q or padded - n < q // 2 else n
    return padded if 4 * (padded - n) <= n and padded <= 48 else n


def _padded(w: torch.Tensor, to: int, dim: int = -1) -> torch.Tensor:
    """``w`` with zeros appended along ``dim`` up to ``to`` entries."""
    if w.shape[dim] == to:
        return w
    extra = list(w.shape)
    extra[dim] = to - w.shape[dim]
    return torch.cat([w, w.new_zeros(extra)], dim=dim)


class _Attention:
    """One layer's heads: W_Q, W_K, W_V [h, d, e] and W_O [h, e, d] as three projections of the
    residual stream and one output product.  On the sparse path each runs on the residual columns
    it reads, and q.k on the head dimensions both of its factors use."""

    def __init__(self, q: _Product, k: _Product, v: _Product, o: _Product, heads: int,
                 qk: int, ov: int) -> None:
        self.q, self.k, self.v, self.o = q, k, v, o
        self.heads, self.qk, self.ov = heads, qk, ov

    @classmethod
    def build(cls, li: int, wq: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor, wo: torch.Tensor,
              mode: str, one_hots: list[tuple[int, int]] | None = None) -> "_Attention":
        h, d, e = wq.shape
        name = f"layers.{li}.attn"
        if _sparse_wanted(wq, mode) is None and _sparse_wanted(wk, mode) is None:
            both = _nonzero_along(wq, 2) & _nonzero_along(wk, 2)
            if int(both.sum()) <= COLUMNS_MAX_SHARE * e:
                wq, wk = wq.index_select(2, _index(both)), wk.index_select(2, _index(both))
        # The value dimensions stay whole: attn @ v sums one term per key, and a BLAS may add a
        # column's terms in an order that depends on how many columns the product has, so fewer
        # columns than the dense path's would change the logits' last bits (DEVELOPERS.md).
        ev = wv.shape[2]
        # attn @ v with an output width off the kernel's: zero value dimensions (GEMM_COLUMNS)
        width = _gemm_width(wv)
        wv, wo = _padded(wv, width, 2), _padded(wo, width, 1)
        qk, ov = wq.shape[2], wv.shape[2]
        # [h, d, e] as one [d, h * e] product: every head's columns side by side
        def side_by_side(w: torch.Tensor) -> torch.Tensor:
            return w.permute(1, 0, 2).reshape(d, -1)

        v = _Product.build(f"{name}.W_V", side_by_side(wv), mode, all_columns=True, one_hots=one_hots)
        o = _Product.build(f"{name}.W_O", wo.reshape(h * ov, wo.shape[2]), mode, all_rows=True)
        if ov != ev:  # explain the weights as they are, and how they run
            v.shape, o.shape = (d, h * ev), (h * ev, wo.shape[2])
            padded, real = h * ov, h * ev
            v.why = v.why.replace(f"writes {padded} of {padded} columns", f"writes {real} of {real} columns")
            o.why = o.why.replace(f"reads {padded} of {padded} rows", f"reads {real} of {real} rows")
            for p in (v, o):
                p.why += f"; {ev} value dimensions a head run as {ov}"
        return cls(_Product.build(f"{name}.W_Q", side_by_side(wq), mode, all_columns=True, one_hots=one_hots),
                   _Product.build(f"{name}.W_K", side_by_side(wk), mode, all_columns=True, one_hots=one_hots),
                   v, o, h, qk, ov)

    def products(self) -> list[_Product]:
        return [self.q, self.k, self.v, self.o]

    def apply(self, x: torch.Tensor, masked: torch.Tensor | None, neg: float, scale: float, keep: bool,
              in_place: bool, hot: dict[int, tuple[int, torch.Tensor | None]]
              ) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """x + the heads' outputs; with ``keep`` also each head's pattern and scores [b, 1, t, t].
        ``hot``: the one-hot blocks' indices read from x so far (``_Lookup``), kept up to date."""
        q, k, v = self.q.times(x, hot), self.k.times(x, hot), self.v.times(x, hot)  # [b, t, heads * e]
        masked = None if masked is None else masked[:, 0]  # [b, 1 or t, t]; None: no key masked
        # one head at a time, on its columns of q, k and v (strided views: no copies): the scores
        # [b, t, t] of one head are the most one layer holds (U at n = 8, d = 32 has 65 heads of
        # 2,305² float64 scores, 2.8 GB a copy)
        mixed, attns, logits_ = [], [], []
        for hi in range(self.heads):
            qh, kh = (m.narrow(-1, hi * self.qk, self.qk) for m in (q, k))
            # one head dimension: each score is one product, so a broadcast multiply (a batched
            # matrix product of inner size 1 took 0.51 ms at [256, 21, 21], the multiply 0.07)
            scores = (qh * kh.transpose(-1, -2) if self.qk == 1 else qh @ kh.transpose(-1, -2)).div_(scale)
            if masked is not None:
                scores.masked_fill_(masked, neg)
            attn = attention_softmax(scores, neg)
            mixed.append(attn @ v.narrow(-1, hi * self.ov, self.ov))
            if keep:
                attns.append(attn.unsqueeze(1))
                logits_.append(scores.unsqueeze(1))
            del scores, attn
        # one sum over all heads and their dimensions
        out = mixed[0] if len(mixed) == 1 else torch.cat(mixed, dim=-1)
        x = self.o.add_to(x, self.o.times(out), in_place)
        _forget(hot, self.o.writes)
        return x, attns, logits_


class _Mlp:
    """One layer's MLP: x + relu(x W_in + b_in) W_out + b_out (gated: relu(...) * (x W_gate +
    b_gate)).  On the sparse path the hidden units whose W_out row is zero are left out (they add
    exact zeros), W_in and W_gate read only the residual columns they use, W_out writes only the
    columns it sets, and a large, mostly-zero gathered weight runs as a CSR matrix."""

    def __init__(self, li: int, w_in: torch.Tensor, b_in: torch.Tensor, w_out: torch.Tensor,
                 b_out: torch.Tensor, w_gate: torch.Tensor | None, b_gate: torch.Tensor | None,
                 mode: str) -> None:
        name = f"layers.{li}.mlp"
        self.records: list[dict[str, Any]] = []
        self.reads: _Cols | None = None
        self.writes: _Cols | None = None
        self.w_in, self.b_in, self.w_out, self.b_out = w_in, b_in, w_out, b_out
        self.w_gate, self.b_gate = w_gate, b_gate
        self.csr_in = self.csr_gate = self.csr_out = None
        self.in_terms: tuple[_Cols, torch.Tensor] | None = None  # W_in with one term a unit
        shapes = {n: (tuple(w.shape), int(torch.count_nonzero(w))) for n, w in
                  (("W_in", w_in), ("W_out", w_out)) + ((("W_gate", w_gate),) if w_gate is not None else ())}
        why = _sparse_wanted(w_in, mode) or _sparse_wanted(w_out, mode)
        path = {"W_in": "dense", "W_out": "dense", "W_gate": "dense"}
        reasons = dict.fromkeys(path, why or "")
        if why is None:
            reads = _nonzero_along(w_in, 0) | (_nonzero_along(w_gate, 0) if w_gate is not None else False)
            writes = _nonzero_along(w_out, 1) | (b_out != 0)
            units = _nonzero_along(w_out, 0)
            # the multiply-adds left on the gathered rows and columns, against the dense ones
            share = (int(reads.sum()) + int(writes.sum())) * int(units.sum()) / max(1, 2 * w_in.numel())
            if _one_long_sum(w_out, writes):
                writes[:] = True
            if share > COLUMNS_MAX_SHARE:
                reasons = dict.fromkeys(path, f"its used rows and columns hold {share:.0%} of it")
            else:
                reads_i, writes_i, units_i = _index(reads), _index(writes), _index(units)
                self.reads, self.writes = _Cols(reads_i), _Cols(writes_i)
                self.w_in = w_in.index_select(0, reads_i).index_select(1, units_i)
                self.b_in = b_in.index_select(0, units_i)
                if w_gate is not None:
                    self.w_gate = w_gate.index_select(0, reads_i).index_select(1, units_i)
                    self.b_gate = b_gate.index_select(0, units_i)  # type: ignore[union-attr]
                self.w_out = w_out.index_select(0, units_i).index_select(1, writes_i)
                self.b_out = b_out.index_select(0, writes_i)
                gathered = (f"reads {len(self.reads)} of {w_in.shape[0]} columns, {len(units_i)} of "
                            f"{w_in.shape[1]} units, writes {len(self.writes)} of {w_out.shape[1]} columns")
                for n, w in (("W_in", self.w_in), ("W_out", self.w_out), ("W_gate", self.w_gate)):
                    if w is None:
                        continue
                    density = int(torch.count_nonzero(w)) / max(1, w.numel())
                    if w.numel() >= CSR_MIN_ELEMENTS and density <= CSR_MAX_DENSITY \
                            and _two_terms_at_most(w):
                        path[n], reasons[n] = "csr", f"{gathered}; {density:.1%} of those non-zero"
                    else:
                        path[n], reasons[n] = "columns", gathered
        # the hidden activations run transposed, [units, positions], where a factor is a CSR matrix
        self.transposed = "csr" in path.values()
        # where x @ W_in and h @ W_out run padded (GEMM_COLUMNS): zero units (relu(0) times a zero
        # row of W_out adds exact zeros) and zero output columns, sliced off
        self.out_columns: int | None = None
        if not self.transposed:
            units = _gemm_width(self.w_in)
            if units != self.w_in.shape[1]:
                reasons["W_in"] += f"; its {self.w_in.shape[1]} units run as {units}"
                self.w_in, self.b_in = _padded(self.w_in, units), _padded(self.b_in, units)
                self.w_out = _padded(self.w_out, units, 0)
                if self.w_gate is not None:
                    self.w_gate, self.b_gate = _padded(self.w_gate, units), _padded(self.b_gate, units)
            if _gemm_width(self.w_out) != self.w_out.shape[1]:
                self.out_columns = self.w_out.shape[1]
                self.w_out = _padded(self.w_out, _gemm_width(self.w_out))
                reasons["W_out"] += f"; its {self.out_columns} output columns run as {self.w_out.shape[1]}"
        if path["W_in"] == "columns" and not self.transposed:
            self.in_terms = _one_term_each(self.w_in, reads_i)
            if self.in_terms is not None:
                reasons["W_in"] += "; one term a unit: x's column times a number"
        if self.transposed:
            self.w_in_t = self._left(self.w_in, path["W_in"])
            self.w_out_t = self._left(self.w_out, path["W_out"])
            self.w_gate_t = None if self.w_gate is None else self._left(self.w_gate, path["W_gate"])
            self.b_in_col, self.b_gate_col = self.b_in.unsqueeze(1), (None if self.b_gate is None
                                                                       else self.b_gate.unsqueeze(1))
        self.info = [{"tensor": f"{name}.{n}", "shape": list(shapes[n][0]), "nonzero": shapes[n][1],
                      "path": path[n], "why": reasons[n]} for n in shapes]

    @staticmethod
    def _left(w: torch.Tensor, path: str) -> torch.Tensor:
        """w.T as the left factor of w.T @ x.T: a CSR matrix or a contiguous dense one."""
        return _csr(w.t()) if path == "csr" else w.t().contiguous()

    @classmethod
    def build(cls, li: int, w_in: torch.Tensor, b_in: torch.Tensor, w_out: torch.Tensor, b_out: torch.Tensor,
              w_gate: torch.Tensor | None, b_gate: torch.Tensor | None, mode: str) -> "_Mlp":
        return cls(li, w_in, b_in, w_out, b_out, w_gate, b_gate, mode)

    def products(self) -> list["_Explained"]:
        return [_Explained(i) for i in self.info]

    def delta(self, xs: torch.Tensor) -> torch.Tensor:
        """MLP(xs) [positions, columns written] in the MLP's dtype."""
        if self.transposed:
            xt = _columns(xs, self.reads).to(self.w_in.dtype).t().contiguous()
            # products then biases, as in other implementations (TransformerLens): torch.addmm
            # may round its fused sum differently
            h = (_mm(self.w_in_t, xt) + self.b_in_col).relu_()
            if self.w_gate_t is not None:
                h = h * (_mm(self.w_gate_t, xt) + self.b_gate_col)
            return _mm(self.w_out_t, h).t() + self.b_out
        # Biases are added in place: the same sums, one fresh [positions, units] tensor fewer
        # (a float64 one of 5,376 x 40 costs more in fresh pages than its arithmetic).
        if self.in_terms is not None:  # no sum to take (_one_term_each)
            cols, w_in = self.in_terms
            h = torch.mul(_columns(xs, cols).to(w_in.dtype), w_in).add_(self.b_in).relu_()
        else:
            h = (_columns(xs, self.reads).to(self.w_in.dtype) @ self.w_in).add_(self.b_in).relu_()
        if self.w_gate is not None:  # a gated unit: relu(x W_in + b_in) * (x W_gate + b_gate)
            h = h * (_columns(xs, self.reads).to(self.w_in.dtype) @ self.w_gate + self.b_gate)
        out = h @ self.w_out
        if self.out_columns is not None:
            out = out[:, :self.out_columns]
        return out.add_(self.b_out)

    def apply(self, x: torch.Tensor, step: int, in_place: bool) -> torch.Tensor:
        """x + MLP(x), over slices of ``step`` positions; with ``in_place`` x itself is updated."""
        flat = x.reshape(-1, x.shape[-1])
        out = flat if in_place else flat.clone()
        wide = self.w_in.dtype != x.dtype  # a float64 MLP in a float32 model
        # Slices stay small enough that their hidden activations are reused memory: one huge
        # temporary costs more in fresh pages than its arithmetic ... but of at least
        # MLP_SLICE_ROWS positions: a slice of 6 positions of a 42,310-unit MLP read its whole
        # W_out (148 MB) for each 6 positions.  A GPU takes slices of chunk_elements: small slices
        # made histogram at max_len 64 ten times slower there.
        for s in range(0, flat.shape[0], step):
            o, xs = out[s:s + step], flat[s:s + step]
            if not wide:
                _add_columns(o, self.writes, self.delta(xs), in_place=True)
            else:  # the sum is taken wide and rounded once (delta + x is x + delta, bit for bit)
                _set_columns(o, self.writes, self.delta(xs).add_(_columns(xs, self.writes)))
        return out.reshape(x.shape)


class _Explained:
    """An MLP weight's entry of ``Transformer.explain``."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info

    def explained(self) -> dict[str, Any]:
        return dict(self.info)


class _Layer:
    def __init__(self, attn: _Attention | None, mlp: _Mlp | None) -> None:
        self.attn, self.mlp = attn, mlp


def _mm(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """w @ x for a dense or CSR left factor."""
    return torch.sparse.mm(w, x) if w.layout == torch.sparse_csr else w @ x


class _Cols:
    """Some columns of the residual stream: their indices, and (start, length) where they are
    consecutive (a residual subspace: read and written as a view, with no gather)."""

    def __init__(self, index: torch.Tensor) -> None:
        self.index, self.n = index, len(index)
        self._set: set[int] | None = None
        start = int(index[0]) if self.n else 0
        # consecutive and increasing (a read of one column per output may repeat or permute them)
        self.span = (start, self.n) if self.n and bool((index.diff() == 1).all()) else None

    def __len__(self) -> int:
        return self.n

    def columns(self) -> set[int]:
        if self._set is None:
            self._set = set(self.index.tolist())
        return self._set


def _columns(x: torch.Tensor, index: _Cols | None) -> torch.Tensor:
    """x[..., index] (all of x where index is None); a view where the columns are consecutive.
    A gather runs on x as a matrix: along the last dimension of a 3-D tensor it is ten times
    slower."""
    if index is None:
        return x
    if index.span is not None:
        return x.narrow(-1, *index.span)
    flat = x.reshape(-1, x.shape[-1]).index_select(1, index.index)
    return flat.view(*x.shape[:-1], index.n)


def _set_columns(x: torch.Tensor, index: _Cols | None, values: torch.Tensor) -> None:
    """x[..., index] = values rounded to x's dtype, in place (every column when index is None)."""
    if index is None:
        x.copy_(values)  # converts as it copies
    elif index.n == 0:
        return
    elif index.span is not None:
        x.narrow(-1, *index.span).copy_(values)
    else:
        x.index_copy_(x.dim() - 1, index.index, values.to(x.dtype))


def _add_columns(x: torch.Tensor, index: _Cols | None, delta: torch.Tensor,
                 in_place: bool = False) -> torch.Tensor:
    """x + delta, where delta holds only the columns ``index`` (all of them when None); with
    ``in_place`` into x itself."""
    if index is None:
        return x.add_(delta) if in_place else x + delta
    if not in_place:
        x = x.clone()
    if index.n == 0:  # a sublayer that writes nothing (an MLP whose W_out is all zeros)
        return x
    if index.span is not None:
        x.narrow(-1, *index.span).add_(delta)
    else:
        x.reshape(-1, x.shape[-1]).index_add_(1, index.index, delta.reshape(-1, index.n))
    return x


class RaspModel:
    """A loaded (or freshly compiled) model: encoding of inputs, the network, decoding of outputs."""

    def __init__(self, config: dict, tensors: dict[str, torch.Tensor], *, build_module: bool = True) -> None:
        self.config = config
        self.tensors = tensors
        # ``build_module=False`` (the compiler's own models) builds the network on first use of
        # ``module``, from these same config and tensors: a compile that only saves, inspects or
        # wraps the model skips it (a sixth of a small compile's time), and building it cannot
        # fail for weights the compiler just made.  A loaded model builds it here, where
        # ``load`` reports an inconsistent file.
        self._module: Transformer | None = None
        self._module_from = (config, dict(tensors))
        if build_module:
            self._module = Transformer(config, tensors)
        self.vocab = list(config["vocab"])
        self.max_len = int(config["max_len"])
        self._ids = {}
        for i, tok in enumerate(self.vocab):
            self._ids.setdefault(_token_key(tok), i)
        # str tokens never compare equal to other types, so a plain dict is exact for them
        self._str_ids = ({tok: i for i, tok in reversed(list(enumerate(self.vocab)))}
                         if all(type(t) is str for t in self.vocab) else None)
        self.bos_id = len(self.vocab)
        self.pad_id = len(self.vocab) + 1
        self.device = torch.device("cpu")
        self.several_keys_heads = several_keys_heads(config)
        self.output_head = output_mean_head(config)

    @property
    def module(self) -> Transformer:
        """The network: a ``Transformer`` (a torch module) over ``tensors``."""
        if self._module is None:
            self._module = Transformer(*self._module_from)
        return self._module

    @module.setter
    def module(self, module: Transformer) -> None:
        self._module = module

    def __repr__(self) -> str:
        # what the model is, not where it lives: a long vocabulary is cut after 8 tokens
        c = self.config
        given = c.get("input") or {}
        if given.get("kind") == "numerical":  # real-valued tokens: the vocabulary is a placeholder
            inputs = f"input_range={tuple(given.get('range', ()))!r}"
        else:
            inputs = "vocab=[" + ", ".join(repr(t) for t in self.vocab[:8]) + (
                f", … ({len(self.vocab)} tokens)" if len(self.vocab) > 8 else "") + "]"
        out = c.get("output", {})
        extra = f", fixed_length={c['fixed_length']}" if c.get("fixed_length") is not None else ""
        return (f"{type(self).__name__}(output={out.get('node')!r} ({out.get('encoding')}), {inputs}, "
                f"max_len={self.max_len}{extra}, causal={bool(c.get('causal'))}, layers={c.get('n_layers')}, "
                f"d_model={c.get('d_model')}, dtype={c.get('dtype')})")

    def to(self, device: str | torch.device) -> "RaspModel":
        """Run the network on ``device`` (e.g. ``"cuda"``); inputs are encoded on the CPU and
        moved there, logits come back to the CPU.  Returns the model itself.  ``self.tensors``
        (what ``save`` writes) stay on the CPU."""
        try:
            device = torch.device(device)
        except (RuntimeError, TypeError):
            raise ModelInputError(f"unknown device {device!r}", hint="use cpu or cuda") from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ModelInputError("no CUDA device is available", hint="use --device cpu")
        if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
            raise ModelInputError(f"there is no {device}: this machine has {torch.cuda.device_count()} CUDA "
                                  "device(s)", hint="use cuda (the first one) or cuda:N with a smaller N")
        if device.type not in ("cpu", "cuda"):
            raise ModelInputError(f"device {str(device)!r} is not supported", hint="use cpu or cuda")
        self.module.to(device)
        self.device = device
        return self

    # ------------------------------------------------------------------ files
    def save(self, directory: str, force: bool = False) -> None:
        """Write ``directory``/model.safetensors and config.json.  Inside the rasp-compiler
        package, by the protocol of ``rasp_compiler.atomic_dir``: the directory holds the old
        model or the new one, whole, at every instant, links are never written through, and a
        non-empty directory that holds no model of ours is refused unless ``force``.  A standalone
        copy of this file writes the two files in place."""
        directory = _directory(directory)
        config = dict(self.config)
        config["weights_sha256"] = weights_digest(self.tensors)
        digest = config_digest(config)
        tensors = {k: v.detach().contiguous() for k, v in sorted(self.tensors.items())}
        # the config as text before any file is written: a value JSON or UTF-8 cannot hold fails
        # here, not halfway through config.json
        text = json.dumps(config, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ModelArtifactError(f"cannot save the model: its config holds text that is not valid "
                                     f"UTF-8 ({err.object[err.start:err.end]!r})") from None
        # One metadata key only: safetensors keeps metadata in a Rust HashMap, so with two keys
        # their order in the header (and the file's bytes) changed from save to save.  The format
        # is recorded in config.json.
        def write_weights(path: str) -> None:
            save_file(tensors, path, metadata={"config_sha256": digest})

        try:
            from rasp_compiler.compiler.artifact import write_model_directory
        except ImportError:  # a standalone copy of this file
            write_model_directory = None
        if write_model_directory is not None:
            try:
                write_model_directory(directory, write_weights, text, force=force)
            except ModelArtifactError:
                raise
            except _ArtifactBase as err:  # the package's ArtifactError: this module's own kind
                raise ModelArtifactError(err.message, hint=err.hint) from None
            self.config = config
            return
        if os.path.exists(directory) and not os.path.isdir(directory):  # makedirs says "File exists"
            raise ModelArtifactError(f"{directory}: cannot write the model there: it is a file, not a "
                                     "directory", hint="give a directory to write the model to")
        try:
            os.makedirs(directory, exist_ok=True)
            write_weights(os.path.join(directory, WEIGHTS_FILE))
            with open(os.path.join(directory, CONFIG_FILE), "w", encoding="utf-8") as fh:
                fh.write(text)
        except (OSError, SafetensorError) as err:  # safetensors reports a failed write as its own error
            why = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
            # safetensors: 'Error while serializing: I/O error: Is a directory (os error 21) at ...'
            why = why.rsplit("error: ", 1)[-1].split(" (os error")[0]
            raise ModelArtifactError(f"{directory}: cannot write the model ({why})") from None
        self.config = config

    @classmethod
    def load(cls, directory: str) -> "RaspModel":
        directory = _directory(directory)
        cpath, wpath = os.path.join(directory, CONFIG_FILE), os.path.join(directory, WEIGHTS_FILE)
        if os.path.isfile(directory):  # a program or one of the model's files: "X/config.json does not exist"
            raise ModelArtifactError(f"{directory} is a file, not a model directory",
                                     hint="give the directory 'rasp compile' wrote (it holds config.json "
                                          "and model.safetensors)")
        for p in (cpath, wpath):
            if not os.path.isfile(p):
                what = "is not a file" if os.path.exists(p) else "does not exist"
                raise ModelArtifactError(f"{p} {what}", hint=_describe_artifact(directory)
                                         or "run 'rasp compile' to create the model")
        # Sizes first, from the files' lengths and the weights' header alone: nothing is read whole,
        # and nothing is allocated from a number in the config, before it is known to be plausible.
        size = os.path.getsize(cpath)
        if size > MAX_CONFIG_BYTES:
            raise ModelArtifactError(f"{cpath} is {size:,} bytes, more than a model's config may be "
                                     f"({MAX_CONFIG_BYTES:,}): it is not a config 'rasp compile' wrote",
                                     hint="compile the model again")
        metadata, specs = read_weights_header(wpath)
        try:
            with open(cpath, encoding="utf-8") as fh:
                config = json.load(fh)
        except (OSError, ValueError, RecursionError) as err:  # RecursionError: absurdly deep nesting
            raise ModelArtifactError(f"{cpath} is not valid JSON ({err})") from None
        if not isinstance(config, dict) or config.get("format") != FORMAT:
            hint = None
            if isinstance(config, dict) and str(config.get("format", "")).startswith("rasp-experiment"):
                # a trained run's directory (rasp experiment): its own files, not a compiled model
                hint = ("this is a `rasp experiment` run; `rasp experiment probe DIR` reads it, and "
                        "`rasp compile` writes the models that `rasp eval` and `rasp export` load")
            raise ModelArtifactError(f"{cpath} is not a rasp-compiler model config (format {FORMAT})",
                                     hint=hint)
        if metadata.get("config_sha256") != config_digest(config):
            raise ModelArtifactError(f"{cpath} does not match {wpath}: the config was edited or belongs to "
                                     "another model", hint="compile the model again")
        # The hashes only prove that the two files belong together; an artifact edited with both
        # hashes recomputed must still describe one consistent network before anything runs.  The
        # config is checked, and the tensors' names, shapes and dtypes against it, from the header.
        check_config(config, cpath)
        check_tensor_shapes(config, specs, cpath, wpath)
        try:
            with safe_open(wpath, framework="pt") as fh:
                tensors = {k: fh.get_tensor(k) for k in fh.keys()}
        except Exception as err:  # truncated or corrupt file: safetensors raises several kinds
            raise ModelArtifactError(f"{wpath} cannot be read: it is truncated or corrupt ({err})",
                                     hint="compile the model again") from None
        if config.get("weights_sha256") != weights_digest(tensors):
            raise ModelArtifactError(f"{wpath} does not match its config: the weights were changed",
                                     hint="compile the model again")
        check_tensors(config, tensors, cpath, wpath)
        check_plan(config, cpath)
        try:
            return cls(config, tensors)
        except (KeyError, TypeError, ValueError) as err:
            raise ModelArtifactError(f"{directory} holds an inconsistent model ({err})") from None

    # ------------------------------------------------------------------ inputs
    def batch_list(self, batch: Any) -> list[Any]:
        """A batch as a list of inputs, each a string or a list: an iterator is read once, and a
        NumPy array or tensor becomes nested lists.  A bare string or a non-iterable is refused (a
        string would otherwise be read as one input per character)."""
        if isinstance(batch, (str, bytes)):
            raise ModelInputError("a batch is a list of inputs; wrap a single input in a list",
                                  hint='e.g. run(["abc"]), not run("abc")')
        if hasattr(batch, "tolist") and not isinstance(batch, list):
            batch = batch.tolist()
        try:
            items = list(batch)
        except TypeError:
            raise ModelInputError(f"a batch is a list of inputs, not {type(batch).__name__}",
                                  hint='e.g. run(["abc", "ab"])') from None
        for b, item in enumerate(items):
            if hasattr(item, "tolist") and not isinstance(item, (str, list, tuple)):
                items[b] = item = item.tolist()  # one input as a NumPy array or tensor
            if not isinstance(item, (str, list, tuple)):
                what = ("a list of numbers" if (self.config.get("input") or {}).get("kind") == "numerical"
                        else "a string or a list of tokens")
                raise ModelInputError(f"input {b} is not {what} (got {type(item).__name__})")
        return items

    def encode(self, batch: list[Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids [batch, 1 + longest] (BOS, tokens, PAD) and the lengths."""
        seqs = []
        as_given = bool(self.config.get("tokens_as_given"))
        as_strings = bool(self.config.get("tokens_as_strings"))
        for b, item in enumerate(self.batch_list(batch)):
            toks = list(item)
            if not toks:
                raise ModelInputError(f"input {b} is empty: a RASP program runs on at least one token")
            if len(toks) > self.max_len:
                raise ModelInputError(f"input {b} has {len(toks)} tokens, more than the {self.max_len} "
                                      "this model was compiled for",
                                      hint="compile again with a larger --max-len")
            fixed = self.config.get("fixed_length")
            if fixed and len(toks) != fixed:
                raise ModelInputError(f"input {b} has {len(toks)} tokens; this model was compiled for "
                                      f"exactly {fixed} (--fixed-length)",
                                      hint="compile again without --fixed-length for other lengths")
            if self._str_ids is not None:     # the common case: a vocabulary of strings
                try:
                    seqs.append([self._str_ids[tok] for tok in toks])
                    continue
                except (KeyError, TypeError):
                    pass                           # the careful loop below names the bad token
            ids = []
            for p, tok in enumerate(toks):
                if hasattr(tok, "item") and not isinstance(tok, (str, bytes)):
                    try:
                        tok = tok.item()  # a NumPy or torch scalar: its Python value
                    except (TypeError, ValueError, RuntimeError):
                        pass
                try:
                    i = self._ids.get(_token_key(tok))
                except TypeError:  # unhashable: a list where a token should be
                    i = None
                if i is None and isinstance(tok, (int, float)) and not as_given:
                    try:
                        i = self._ids.get(_token_key(str(tok)))
                    except ValueError:  # an int too long for str()
                        i = None
                if i is None and isinstance(tok, float) and tok.is_integer() and not (as_given or as_strings):
                    i = self._ids.get(_token_key(int(tok)))  # 1.0 is the token 1, as `rasp run` reads it
                number = _number(tok) if isinstance(tok, str) else None
                if i is None and number is not None and not as_given:
                    # `rasp eval --input 123` on a vocabulary of numbers, as `rasp run` reads tokens_int
                    i = self._ids.get(_token_key(number))
                if i is None:
                    shown = ", ".join(repr(v) for v in self.vocab[:12])
                    shown += ", …" if len(self.vocab) > 12 else ""
                    hint = "compile again with a --vocab that includes it"
                    if as_given and isinstance(tok, (int, float)) and _token_key(str(tok)) in self._ids:
                        hint = (f"the program reads the input as given, and the vocabulary holds the "
                                f"string {str(tok)!r}: pass strings, or compile with a vocabulary of numbers")
                    elif as_given and number is not None and _token_key(number) in self._ids:
                        hint = (f"the program reads the input as given, and the vocabulary holds the "
                                f"number {number!r}: pass numbers (--input-json '[{number!r}]')")
                    elif (not as_given and isinstance(tok, float) and tok.is_integer()
                          and _token_key(str(int(tok))) in self._ids):
                        # --vocab 123 holds the string '1': 1 is read as it, 1.0 as '1.0'
                        hint = (f"the vocabulary holds the string {str(int(tok))!r}, which the number "
                                f"{int(tok)} is read as, but {tok!r} reads as {str(tok)!r}: pass {int(tok)}")
                    elif (as_strings and isinstance(tok, float) and tok.is_integer()
                          and _token_key(int(tok)) in self._ids):
                        hint = (f"the program reads tokens as strings, where {tok!r} is "
                                f"{str(tok)!r}, not the {str(int(tok))!r} of the token {int(tok)}: "
                                f"pass {int(tok)}")
                    elif (as_given and (isinstance(tok, bool)
                                        or (isinstance(tok, float) and tok.is_integer()))
                          and _token_key(int(tok)) in self._ids):
                        # Python's 2.0 == 2 (and True == 1): "compile again with it" misled here
                        hint = (f"the program reads the input as given, and {tok!r} is a "
                                f"{type(tok).__name__}, not the int {int(tok)} the vocabulary holds "
                                f"(a map may tell them apart): pass {int(tok)}")
                    elif p == 0 and isinstance(tok, str) and tok.strip("<>").upper() == "BOS":
                        # tracr's habit (apply(["BOS", ...])): the hint said to compile it in
                        try:
                            rest = json.dumps(toks[1:], ensure_ascii=False) if toks[1:] else ""
                        except (TypeError, ValueError):
                            rest = ""
                        hint = ("this model puts its own BOS first (tracr's inputs begin with it): "
                                "give the tokens alone" + (f", {rest}" if rest else ""))
                    raise ModelInputError(f"token {_show(tok, False)} at position {p} of input {b} is not "
                                          f"in the vocabulary ({shown})", hint=hint)
                ids.append(i)
            seqs.append(ids)
        lengths = [len(s) for s in seqs]
        width = max(lengths) if seqs else 0
        ids_t = torch.full((len(seqs), width + 1), self.pad_id, dtype=torch.long)
        ids_t[:, 0] = self.bos_id
        if seqs and min(lengths) == width:
            ids_t[:, 1:] = torch.tensor(seqs, dtype=torch.long)
        else:
            for r, s in enumerate(seqs):
                ids_t[r, 1:len(s) + 1] = torch.tensor(s, dtype=torch.long)
        return ids_t, torch.tensor(lengths, dtype=torch.long)

    # ------------------------------------------------------------------ running
    def encode_inputs(self, batch: list[Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Token ids, lengths and, for a model with numerical input (config ``input.kind ==
        "numerical"``), the token values [batch, 1 + longest] (0 at BOS and padding)."""
        spec = self.config.get("input") or {}
        if spec.get("kind") != "numerical":
            ids, lengths = self.encode(batch)
            return ids, lengths, None
        lo, hi = spec.get("range", [-math.inf, math.inf])
        fixed = self.config.get("fixed_length")
        rows = []
        for b, item in enumerate(self.batch_list(batch)):
            vals = list(item)
            if not vals:
                raise ModelInputError(f"input {b} is empty: a RASP program runs on at least one token")
            if len(vals) > self.max_len or (fixed and len(vals) != fixed):
                need = f"exactly {fixed}" if fixed else f"at most {self.max_len}"
                raise ModelInputError(f"input {b} has {len(vals)} values; this model takes {need}")
            row = []
            for p, v in enumerate(vals):
                if hasattr(v, "item") and not isinstance(v, (str, bytes)):
                    try:
                        v = v.item()  # a NumPy or torch scalar: its Python value
                    except (TypeError, ValueError, RuntimeError):
                        pass
                try:
                    fv = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan
                except OverflowError:  # an int past the float range
                    fv = math.inf
                if not math.isfinite(fv):
                    # a string here is the text of --input read one character a token
                    shown = ", ".join(map(str, vals)) if all(_number(x) is not None for x in vals
                                                              if isinstance(x, str)) else "1, -0.5"
                    hint = (f"give the numbers as JSON: --input-json '[{shown}]' on the command line, a "
                            "list of numbers in Python") if isinstance(v, str) else None
                    raise ModelInputError(f"input {b} position {p} holds {_show(v, False)}: this model reads "
                                          "finite real numbers", hint=hint)
                if not lo <= fv <= hi:
                    raise ModelInputError(f"input {b} position {p} holds {_show(v, False)}, outside the "
                                          f"input range [{lo}, {hi}] the model was compiled for (its "
                                          "exactness margins and error bounds hold only there)",
                                          hint="compile again with a wider --input-range")
                _check_on_grid(fv, spec, f"input {b} position {p} holds {_show(v, False)}")
                row.append(fv)
            rows.append(row)
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width + 1), self.pad_id, dtype=torch.long)
        values = torch.zeros((len(rows), width + 1), dtype=torch.float64)
        ids[:, 0] = self.bos_id
        for r, vals in enumerate(rows):
            ids[r, 1:len(vals) + 1] = 0  # the one "number" token
            values[r, 1:len(vals) + 1] = torch.tensor(vals, dtype=torch.float64)
        return ids, torch.tensor([len(r) for r in rows], dtype=torch.long), values

    def forward(self, batch: list[Any]) -> torch.Tensor:
        """Logits [batch, longest input, outputs] (BOS removed; rows past an input's end are padding)."""
        ids, lengths, values = self.inputs_on_device(*self.encode_inputs(batch))
        with torch.no_grad():
            return self.module(ids, lengths, values=values)[:, 1:].cpu()

    def inputs_on_device(self, ids: torch.Tensor, lengths: torch.Tensor, values: torch.Tensor | None
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``encode_inputs``'s tensors moved to the network's device (see ``to``)."""
        if self.device.type == "cpu":
            return ids, lengths, values
        return (ids.to(self.device), lengths.to(self.device),
                None if values is None else values.to(self.device))

    def unclean(self, logits: torch.Tensor, lengths: list[int]) -> list[list[int]]:
        """Per input, the positions whose output cannot be decoded with confidence: a NaN or
        infinite logit (either encoding), or a categorical output that is not a clean one-hot (best
        logit ahead of the runner-up by less than CLEAN_MARGIN x the logit scale; with one output
        value, its logit below that, as when the program wrote no value there)."""
        _, bad, _ = self._screen(logits, self._check_logits(logits, lengths))
        out: list[list[int]] = [[] for _ in lengths]
        for r, p in bad.nonzero().tolist():     # usually none: no per-position Python work
            out[r].append(p)
        return out

    def _screen(self, logits: torch.Tensor, lengths: list[int]
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """[batch, positions] masks of the valid positions holding a non-finite logit and of those
        that are unclean (see ``unclean``), and for a categorical output each position's best
        value index.  A few passes over the logits: with a hundred output values they outweigh the
        Python of decoding."""
        out_cfg = self.config["output"]
        valid = torch.arange(logits.shape[1], device=logits.device)[None, :] < \
            torch.tensor(lengths, device=logits.device)[:, None]
        # a row's sum is finite when all its logits are (NaN and inf propagate); only a sum that
        # overflowed from finite logits needs the exact test
        nonfinite = ~torch.isfinite(logits.sum(dim=-1, dtype=torch.float64))
        if nonfinite.any():
            nonfinite = ~torch.isfinite(logits).all(dim=-1)
        nonfinite &= valid
        bad = nonfinite.clone()
        best = None
        if out_cfg["encoding"] == "categorical":
            margin = CLEAN_MARGIN * float(out_cfg.get("logit_scale", 1.0))
            # written as "not clearly ahead" so that a NaN difference counts as unclean too
            if logits.shape[-1] >= 2:
                top = logits.topk(2, dim=-1)
                bad |= ~((top.values[..., 0] - top.values[..., 1]) >= margin) & valid
                best = top.indices[..., 0]
            else:  # the one value's runner-up is "no value", which a compiled model writes as 0
                bad |= ~(logits[..., 0] >= margin) & valid
                best = torch.zeros(logits.shape[:2], dtype=torch.long, device=logits.device)
        return nonfinite, bad, best

    def decode(self, logits: torch.Tensor, lengths: list[int], strict: bool = True) -> list[list[Any]]:
        """Output values per input.  With ``strict`` an output that is not a clean one-hot raises
        ModelOutputError instead of being decoded by argmax."""
        out_cfg = self.config["output"]
        lengths = self._check_logits(logits, lengths)
        result = []
        if strict:
            for r, why in enumerate(self.excluded(logits, lengths)):
                if why:
                    raise ExcludedInputError(f"input {r} is outside what the model was compiled for: {why}",
                                             hint="the program divides there by a number the compile "
                                                  "excluded (--min-denominator); no answer is given")
            undefined = out_cfg.get("undefined", {})
            for r, n in enumerate(lengths):
                if str(n) in undefined:
                    sid, i = undefined[str(n)]
                    raise ModelOutputError(f"input {r} has no answer: at length {n}, {sid} has no value "
                                           f"at position {i} on any input (the interpreter raises there)",
                                           hint="the program is undefined at this length; see the note "
                                                "in the compile summary")
            # one pass over the whole batch: a loop over rows costs more than the forward pass
            nonfinite, bad, best = self._screen(logits, lengths)
            for r in nonfinite.any(dim=1).nonzero().flatten().tolist()[:1]:
                odd = nonfinite[r].nonzero().flatten().tolist()
                if odd:
                    shown = ", ".join(map(str, odd[:8])) + (", …" if len(odd) > 8 else "")
                    kinds = sorted({"nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
                                    for v in logits[r, odd].flatten().tolist() if not math.isfinite(v)})
                    raise ModelOutputError(
                        f"the output at position{'s' if len(odd) > 1 else ''} {shown} of input {r} is not "
                        f"a finite number ({', '.join(kinds)}), so no answer is given",
                        hint="the weights are damaged or the input drives the network past the float "
                             "range: compile the model again; if a fresh model does this, please report "
                             "the program, the compile options and this input")
            for r, p in bad.nonzero().tolist()[:1]:
                top = logits[r, p].tolist()
                top = sorted(top if len(top) >= 2 else top + [0.0], reverse=True)[:2]
                # a program may leave inputs without an answer (a mean of several strings, a
                # missing dict key): the compile notes say so, and such an input is no
                # compiler bug
                undefined_by = [n for n in self.config.get("notes", [])
                                if SEVERAL_KEYS_NOTE in n or "have no answer" in n]
                seen = (f"its two best logits are {top[0]:.4g} and {top[1]:.4g}, where a compiled "
                        f"model gives {out_cfg.get('logit_scale')} and 0" if logits.shape[-1] >= 2 else
                        f"its one logit is {top[0]:.4g}, where a compiled model gives "
                        f"{out_cfg.get('logit_scale')}")
                raise ModelOutputError(
                    f"the output at position {p} of input {r} is ambiguous: {seen}; the model is "
                    "outside the exactness its compiler derived, so no answer is given",
                    hint=f"the program likely has no answer on this input ({undefined_by[0]})"
                    if undefined_by else "this is a compiler bug: please report the program, the "
                    "compile options and this input (`rasp check` reproduces it)")
        if out_cfg["encoding"] == "categorical":
            values = [_from_json(v) for v in out_cfg["values"]]
            idx = (best if strict else logits.argmax(dim=-1)).tolist()
            for r, n in enumerate(lengths):
                result.append([values[i] for i in idx[r][:n]])
        else:
            col = logits[..., 0].double().tolist()
            integer = out_cfg.get("integer", False)
            tol = float(out_cfg.get("integer_tolerance", 1e-3))
            excluded = self.excluded(logits, lengths)
            for r, n in enumerate(lengths):
                row = col[r][:n]
                if integer:
                    row = [int(round(v)) if abs(v - round(v)) < tol else v for v in row]
                result.append(None if excluded[r] else row)
        return result

    def excluded(self, logits: torch.Tensor, lengths: list[int]) -> list[str | None]:
        """Per input, why it is flagged (a guarded denominator below its bound at some position:
        ``--min-denominator``), or None.  ``run`` refuses a flagged input, or with ``strict=False``
        gives None in place of its output."""
        guards = self.config.get("guards") or []
        out: list[str | None] = [None] * len(lengths)
        for g in guards:
            col = logits[..., int(g["column"])].double()
            for r, n in enumerate(lengths):
                vals = col[r, :n]
                low = (~(vals.abs() >= float(g["min_abs"]))).nonzero().flatten().tolist()
                if low and out[r] is None:
                    where = f" ({g['source']}: {g['text']})" if g.get("source") else ""
                    out[r] = (f"the denominator {g.get('node')!r}{where} is {vals[low[0]].item():.3g} at "
                              f"position {low[0]}, inside the excluded |value| < {g.get('eps')}")
        return out

    def flags(self, batch: list[Any]) -> list[str | None]:
        """Per input, why the model flags it (see ``excluded`` and ``several_keys``), or None where
        it answers."""
        batch = self.batch_list(batch)
        lengths = [len(x) for x in batch]
        if not self.several_keys_heads:
            return self.excluded(self.forward(batch), lengths)
        logits, several, _ = self._forward_watching(batch)
        return [e or w for e, w in zip(self.excluded(logits, lengths), several, strict=True)]

    def several_keys(self, attention: list[torch.Tensor], lengths: list[int]) -> list[str | None]:
        """Per input, where a categorical aggregate that the compile noted may select several keys
        (``several_keys_heads``) did select several, or None.  The interpreter raises there (a
        mean of non-numbers: docs/known-bugs.md #22), so such an input has no answer; when the
        keys' values agree the output is a clean one-hot, so the logits alone cannot tell.
        ``attention`` is each layer's pattern [batch, heads, 1 + positions, 1 + positions], as
        ``trace`` and ``Transformer.forward(trace=True)`` give them."""
        out: list[str | None] = [None] * len(lengths)
        for li, heads in self.several_keys_heads.items():
            pattern = attention[li]
            if pattern.shape[1] == 0:  # a layer left out of the trace: nothing to tell from
                raise ModelInputError(f"the attention of layer {li} is needed to tell whether an input "
                                      "has an answer, and the trace left it out")
            for hi, entry in heads:
                several = pattern[:, hi, 1:, :].amax(dim=-1) < SEVERAL_KEYS_BELOW  # [batch, query]
                for r in several.any(dim=1).nonzero().flatten().tolist():
                    at = several[r, :lengths[r]].nonzero().flatten().tolist()
                    if at and out[r] is None:
                        where = f" ({entry['source']}: {entry['text']})" if entry.get("source") else ""
                        out[r] = (f"at position {at[0]}, {entry['node']!r}{where} averages the values of "
                                  "several keys, and they are not numbers (the interpreter raises: a mean "
                                  "of non-numbers)")
        return out

    def output_reads_several(self, attention: list[torch.Tensor]) -> torch.Tensor | None:
        """[batch, positions]: where the head of an ``integer_single_key`` output (``output_head``)
        read several keys, so that the output there is a mean (a float in the interpreter) and
        elsewhere one key's value or the default (an int); None for other models."""
        if self.output_head is None:
            return None
        li, hi = self.output_head
        if attention[li].shape[1] == 0:
            raise ModelInputError(f"the attention of layer {li} is needed to type the output, and the "
                                  "trace left it out")
        return attention[li][:, hi, 1:, :].amax(dim=-1) < SEVERAL_KEYS_BELOW

    def typed(self, outputs: list[Any], several: torch.Tensor | None) -> list[Any]:
        """``decode``'s numerical outputs typed as the interpreter types them (known-bugs #19):
        where the output head read at most one key, that key's value or the default, both ints;
        where it read several, their mean, a float (3.0 for a mean of 3s).  A value farther than
        ``integer_tolerance`` from an int stays as ``decode`` gave it."""
        if several is None:
            return outputs
        tol = float(self.config["output"].get("integer_tolerance", 1e-3))
        out = []
        for r, row in enumerate(outputs):
            if row is not None:
                mean_at = several[r, :len(row)].tolist()
                row = [float(v) if mean_at[p] else
                       int(round(v)) if isinstance(v, float) and abs(v - round(v)) < tol else v
                       for p, v in enumerate(row)]
            out.append(row)
        return out

    def _forward_watching(self, batch: list[Any]
                          ) -> tuple[torch.Tensor, list[str | None], torch.Tensor | None]:
        """``forward``'s logits, ``several_keys``'s reasons and ``output_reads_several``'s mask
        from one traced pass, in slices of inputs small enough that the trace (every residual,
        the watched layers' patterns) stays within the module's chunk budget."""
        ids, lengths, values = self.encode_inputs(batch)
        t = ids.shape[1]
        watched = set(self.several_keys_heads) | ({self.output_head[0]} if self.output_head else set())
        per_input = ((2 * len(self.module.layers_cfg) + 1) * t * int(self.config["d_model"])
                     + sum(int(self.module.layers_cfg[li]["n_heads"]) for li in watched) * t * t)
        step = max(1, self.module.chunk_elements // max(1, per_input))
        parts, reasons, masks = [], [], []
        for s in range(0, len(batch), step):
            sl = slice(s, s + step)
            i, n, v = self.inputs_on_device(ids[sl], lengths[sl], None if values is None else values[sl])
            with torch.no_grad():
                logits, _, patterns = self.module(i, n, trace=True, values=v, trace_layers=watched)
            parts.append(logits[:, 1:].cpu())
            reasons += self.several_keys(patterns, n.tolist())
            mask = self.output_reads_several(patterns)
            if mask is not None:
                masks.append(mask.cpu())
        return torch.cat(parts, dim=0), reasons, torch.cat(masks, dim=0) if masks else None

    def _check_logits(self, logits: Any, lengths: Any) -> list[int]:
        """Refuse logits and lengths that are not what ``forward`` gives for a batch (a clean
        error instead of an index error, or a silently shifted decode); the lengths as ints."""
        out_cfg = self.config["output"]
        width = (len(out_cfg["values"]) if out_cfg["encoding"] == "categorical"
                 else 1 + len(self.config.get("guards") or []))
        if not isinstance(logits, torch.Tensor) or logits.dim() != 3 or logits.shape[-1] != width:
            shape = tuple(logits.shape) if hasattr(logits, "shape") else type(logits).__name__
            raise ModelInputError(f"logits must be [batch, positions, {width}] as forward() gives "
                                  f"them (a torch tensor), not {shape}")
        try:
            ns = [int(n) for n in lengths]
            ok = all(n == m for n, m in zip(ns, lengths, strict=True)) and len(ns) == logits.shape[0]
        except (TypeError, ValueError):
            ok = False
        if not ok or any(not 0 < n <= logits.shape[1] for n in ns):
            raise ModelInputError(f"lengths must be one per input ({logits.shape[0]}), each from 1 to "
                                  f"the {logits.shape[1]} positions of the logits, not {lengths!r}")
        return ns

    def run(self, batch: list[Any], strict: bool = True) -> list[list[Any]]:
        """The decoded output of every input (a string is read as its characters).  With
        ``strict`` (the default) an ambiguous output raises ModelOutputError (see ``decode``), and
        so does an input without an answer that the model flags (``several_keys``); without it a
        flagged input's output is None."""
        batch = self.batch_list(batch)
        lengths = [len(x) for x in batch]
        if not self.several_keys_heads and self.output_head is None:
            return self.decode(self.forward(batch), lengths, strict=strict)
        logits, several, mean_at = self._forward_watching(batch)
        if strict:
            for r, why in enumerate(several):
                if why:
                    raise ModelOutputError(f"input {r} has no answer: {why}",
                                           hint="the program has no answer on this input (the interpreter "
                                                "raises); see the note in the compile summary")
        outputs = self.typed(self.decode(logits, lengths, strict=strict), mean_at)
        return [None if why else out for out, why in zip(outputs, several, strict=True)]

    def trace(self, batch: list[Any], positions: int | None = None) -> dict[str, Any]:
        """Logits, the residual stream after the embedding and after every sublayer
        ([batch, 1 + positions, d_model], BOS at position 0), each layer's attention pattern and
        ``attn_logits`` (the scores its softmax read, see ``Transformer.forward``), with the
        residual labels from the config, and ``valid`` [batch, 1 + positions]: True at BOS and
        each input's own positions (a shorter input's padded rows are not its values).
        ``positions`` (1 to ``max_len``) pads every input to at least that many positions, as a
        batch holding a longer input would; an input longer than that is never cut."""
        ids, lengths, values = self.encode_inputs(batch)
        if positions is not None:
            try:
                whole = not isinstance(positions, bool) and positions == operator.index(positions)
            except TypeError:  # a float or a string: operator.index takes integers only
                whole = False
            if not whole or not 1 <= positions <= self.max_len:
                raise ModelInputError(f"positions must be a whole number from 1 to the model's max_len "
                                      f"({self.max_len}), not {positions!r}")
        if positions is not None and positions + 1 > ids.shape[1]:
            extra = positions + 1 - ids.shape[1]
            ids = torch.cat([ids, ids.new_full((ids.shape[0], extra), self.pad_id)], dim=1)
            if values is not None:
                values = torch.cat([values, values.new_zeros((values.shape[0], extra))], dim=1)
        ids, lengths, values = self.inputs_on_device(ids, lengths, values)
        scores: list[torch.Tensor] = []
        with torch.no_grad():
            logits, residuals, patterns = self.module(ids, lengths, trace=True, values=values,
                                                      attn_logits=scores)
        residuals = [r.cpu() for r in residuals]
        patterns = [a.cpu() for a in patterns]
        # padded rows of a shorter input hold numbers too (its keys are masked, its queries are
        # not): ``valid`` says which positions are BOS or the input's own
        valid = torch.arange(ids.shape[1])[None, :] <= lengths.cpu()[:, None]
        return {"logits": logits[:, 1:].cpu(), "residuals": residuals, "attention": patterns,
                "attn_logits": [s.cpu() for s in scores], "labels": self.labels(),
                "lengths": lengths.tolist(), "valid": valid}

    def labels(self) -> list[str]:
        """The label of every residual dimension, in order."""
        out = [""] * int(self.config["d_model"])
        for sub in self.config["residual"]:
            for j, lab in enumerate(sub["labels"]):
                out[sub["start"] + j] = lab
        return out


def output_mean_head(config: dict) -> tuple[int, int] | None:
    """(layer, head) of the head computing an ``integer_single_key`` output (a numerical aggregate
    of ints: see ``RaspModel.typed``), or None."""
    out, plan = config.get("output"), config.get("plan")
    if not isinstance(out, dict) or out.get("integer_single_key") is not True or not isinstance(plan, list):
        return None
    for li, lp in enumerate(plan):
        for hi, h in enumerate(lp.get("heads") or [] if isinstance(lp, dict) else []):
            if isinstance(h, dict) and h.get("kind") == "aggregate" \
                    and out.get("node") in (h.get("nodes") or [h.get("node")]):
                return li, hi
    return None


def several_keys_heads(config: dict) -> dict[int, list[tuple[int, dict]]]:
    """{layer: [(head, its plan entry)]} of the heads computing a categorical aggregate that the
    compile noted may select several keys (``SEVERAL_KEYS_NOTE``: the note is ``NODE: ...``);
    empty for most models."""
    notes, plan = config.get("notes"), config.get("plan")
    out: dict[int, list[tuple[int, dict]]] = {}
    if not isinstance(notes, list) or not isinstance(plan, list):  # check_config names what is wrong
        return out
    noted = {n.split(": ", 1)[0] for n in notes if isinstance(n, str) and SEVERAL_KEYS_NOTE in n}
    if not noted:
        return out
    for li, lp in enumerate(plan):
        for hi, h in enumerate(lp.get("heads") or [] if isinstance(lp, dict) else []):
            nodes = h.get("nodes") or [h.get("node")] if isinstance(h, dict) else []
            if isinstance(h, dict) and h.get("kind") == "aggregate" and noted.intersection(map(str, nodes)):
                out.setdefault(li, []).append((hi, h))
    return out


def _check_on_grid(value: float, spec: dict, where: str) -> None:
    """Refuse a value off the input grid a model was compiled for (``input.grid``): its comparisons
    have margins only for values on the grid."""
    step = spec.get("grid")
    if step is None:
        return
    off = abs(value - round(value / step) * step)
    if not off <= float(spec.get("grid_slack", 0.0)) * max(abs(value), step):
        what = "an integer" if step == 1 else f"a multiple of {step:g}"
        raise ModelInputError(f"{where}, which is not {what}: the model was compiled for inputs on "
                              f"that grid (its comparisons are exact only there)",
                              hint="the program reads integer tokens (tokens_int)" if step == 1 else
                              "round the input to the grid, or compile again with a finer --input-grid")


def _directory(path: Any) -> str:
    """A model directory's path as a string (a str or a path object)."""
    if not isinstance(path, (str, os.PathLike)) or isinstance(os.fspath(path), bytes):
        raise ModelArtifactError(f"a model directory is a path, not {type(path).__name__}",
                                 hint='e.g. model.save("out/") or load("out/")')
    if not os.fspath(path):  # "" is the working directory to os, and the error then named no path
        raise ModelArtifactError("a model directory is a path, not the empty string",
                                 hint='e.g. model.save("out/") or load("out/")')
    return os.fspath(path)


def _token_key(tok: Any) -> tuple:
    return (type(tok).__name__ if not isinstance(tok, bool) else "bool", tok)


def _from_json(v: Any) -> Any:
    return tuple(_from_json(x) for x in v) if isinstance(v, list) else v


# The largest config.json ``load`` reads.  A compiled model's config is small (reverse at max
# length 2,048: see docs/robustness.md, "Artifacts and crashes"); the limit is checked on the
# file's size before it is parsed, so a huge file costs nothing.
MAX_CONFIG_BYTES = 16 << 20
# The largest safetensors header ``load`` reads (safetensors itself allows 100 MB).  Ours hold a
# few dozen tensor entries and one metadata key.
MAX_HEADER_BYTES = 16 << 20
_SAFETENSORS_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
                       "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
                       "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}


class TensorSpec:
    """A tensor as its header describes it (shape and dtype), before its data is read."""

    def __init__(self, shape: list[int], dtype: Any) -> None:
        self.shape = torch.Size(shape)
        self.dtype = dtype

    def numel(self) -> int:
        return math.prod(self.shape)


def read_weights_header(wpath: str) -> tuple[dict, dict[str, TensorSpec]]:
    """The metadata and each tensor's shape and dtype of the safetensors file ``wpath``, from its
    header alone (8 bytes of length, then the JSON header; safetensors checks that the offsets
    fit the file): no tensor is read."""
    def corrupt(why: str) -> NoReturn:
        raise ModelArtifactError(f"{wpath} cannot be read: it is truncated or corrupt ({why})",
                                 hint="compile the model again")

    try:
        with open(wpath, "rb") as fh:
            head = fh.read(8)
    except OSError as err:
        corrupt(err.strerror or str(err))
    if len(head) < 8:
        corrupt("shorter than a safetensors header")
    n = int.from_bytes(head, "little")
    if n > MAX_HEADER_BYTES:
        corrupt(f"its header claims {n:,} bytes, more than the {MAX_HEADER_BYTES:,} a model's may have")
    try:
        with safe_open(wpath, framework="pt") as fh:
            metadata = fh.metadata() or {}
            specs = {}
            for k in fh.keys():
                part = fh.get_slice(k)
                dtype = part.get_dtype()
                specs[k] = TensorSpec(list(part.get_shape()), _SAFETENSORS_DTYPES.get(dtype, dtype))
    except Exception as err:  # truncated or corrupt file: safetensors raises several kinds
        corrupt(str(err))
    return metadata, specs


# ---------------------------------------------------------------------- artifact validation
# ``load`` checks a model directory once, before it builds the network: config.json against the
# schema the compiler writes, then every tensor (the exact set of names, each shape computed from
# the config, the dtype, finite values).  Each failure is one ModelArtifactError naming the file
# and the field or tensor, so an edited artifact (even one whose hashes were recomputed) is refused
# instead of running into a traceback or a wrong answer.

_REHASH = "the files were edited or corrupted: compile the model again"
_DTYPES = {"float32": torch.float32, "float64": torch.float64}
# top-level keys: required ones, then the ones the compiler may write (informational or optional)
_REQUIRED_KEYS = ("format", "vocab", "bos", "pad", "max_len", "causal", "dtype", "d_model", "n_layers",
                  "layers", "residual", "output", "weights_sha256")
_OPTIONAL_KEYS = ("fixed_length", "input", "program", "attention_scale", "score_gap", "plan",
                  "critical_path", "notes", "numeric", "simulator", "tokens_as_given",
                  "tokens_as_strings", "guards")
_LAYER_KEYS = ("n_heads", "d_head", "d_mlp")
_OUTPUT_KEYS = {"categorical": {"encoding", "values", "logit_scale", "node", "feature", "undefined"},
                "numerical": {"encoding", "integer", "integer_single_key", "integer_tolerance", "node",
                              "feature", "undefined"}}
_GUARD_KEYS = ("column", "min_abs", "node", "feature", "source", "text", "eps")


def _show(v: Any, as_json: bool = True) -> str:
    """A short, always-printable form of a value for an error message (JSON or Python syntax)."""
    if type(v) is int and v.bit_length() > 64:
        return f"an integer of {v.bit_length()} bits"
    try:
        text = json.dumps(v, ensure_ascii=False) if as_json else repr(v)
    except (TypeError, ValueError):
        text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(v: Any) -> bool:
    return type(v) is int  # not bool, not float


def _is_number(v: Any) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


def _check_guards(guards: Any, encoding: str, fail: Any) -> None:
    """``guards``: per excluded denominator, its unembedding column (1, 2, ...) and the |value|
    below which an input is flagged."""
    if guards is None:
        return
    if not isinstance(guards, list) or encoding != "numerical":
        fail(f"guards must be a list, and only for a numerical output, not {_show(guards)}")
    for i, g in enumerate(guards):
        if not isinstance(g, dict) or set(g) - set(_GUARD_KEYS):
            fail(f"guards[{i}] must be an object with keys among {', '.join(_GUARD_KEYS)}, not {_show(g)}")
        if g.get("column") != i + 1:
            fail(f"guards[{i}].column must be {i + 1}, not {_show(g.get('column'))}")
        if not (_is_number(g.get("min_abs")) and g["min_abs"] >= 0):
            fail(f"guards[{i}].min_abs must be a finite number >= 0, not {_show(g.get('min_abs'))}")


def check_config(config: dict, cpath: str) -> None:
    """Refuse a config.json that is not the schema the compiler writes (ModelArtifactError naming
    the field).  Tensors are checked against it by ``check_tensors``."""

    def fail(message: str) -> NoReturn:
        raise ModelArtifactError(f"{cpath}: {message}", hint=_REHASH)

    def count(value: Any, field: str, lo: int = 0) -> int:
        if not _is_int(value) or value < lo:
            fail(f"{field} must be an integer >= {lo}, not {_show(value)}")
        return value

    def mapping(value: Any, field: str, allowed: set[str] | tuple[str, ...]) -> dict:
        if not isinstance(value, dict):
            fail(f"{field} must be a JSON object, not {_show(value)}")
        extra = sorted(set(value) - set(allowed))
        if extra:
            fail(f"{field} has an unknown key {extra[0]!r} (known: {', '.join(sorted(allowed))})")
        return value

    mapping(config, "the config", _REQUIRED_KEYS + _OPTIONAL_KEYS)
    for key in _REQUIRED_KEYS:
        if key not in config:
            fail(f"the key {key!r} is missing")
    if not isinstance(config["weights_sha256"], str):
        fail(f"weights_sha256 must be a string, not {_show(config['weights_sha256'])}")
    if config["bos"] != "<BOS>" or config["pad"] != "<PAD>":
        fail(f"bos and pad must be \"<BOS>\" and \"<PAD>\" (the rows after the vocabulary in "
             f"embed.token), not {_show(config['bos'])} and {_show(config['pad'])}")
    if type(config["causal"]) is not bool:
        fail(f"causal must be true or false, not {_show(config['causal'])}")
    if config["dtype"] not in _DTYPES:
        fail(f"dtype must be \"float32\" or \"float64\", not {_show(config['dtype'])}")
    for flag in ("tokens_as_given", "tokens_as_strings"):
        if type(config.get(flag, False)) is not bool:
            fail(f"{flag} must be true or false, not {_show(config[flag])}")
    if config.get("attention_scale", "1/sqrt(d_head)") != "1/sqrt(d_head)":
        fail(f"attention_scale must be \"1/sqrt(d_head)\" (the only one the runtime computes), not "
             f"{_show(config['attention_scale'])}")

    vocab = config["vocab"]
    if not isinstance(vocab, list) or not vocab:
        fail(f"vocab must be a non-empty list of tokens, not {_show(vocab)}")
    seen: set = set()
    for i, tok in enumerate(vocab):
        if type(tok) not in (str, int, float, bool) or type(tok) is float and not math.isfinite(tok):
            fail(f"vocab[{i}] is {_show(tok)}: tokens are strings, finite numbers or booleans")
        if _token_key(tok) in seen:
            fail(f"vocab[{i}] repeats the token {_show(tok)}")
        seen.add(_token_key(tok))

    max_len = count(config["max_len"], "max_len", 1)
    fixed = config.get("fixed_length")
    if fixed is not None and (not _is_int(fixed) or not 1 <= fixed <= max_len):
        fail(f"fixed_length must be null or an integer from 1 to max_len ({max_len}), not {_show(fixed)}")
    d_model = count(config["d_model"], "d_model", 1)

    layers = config["layers"]
    if not isinstance(layers, list):
        fail(f"layers must be a list, not {_show(layers)}")
    n_layers = count(config["n_layers"], "n_layers")
    if n_layers != len(layers):
        fail(f"n_layers is {n_layers} but layers lists {len(layers)}")
    for li, lc in enumerate(layers):
        mapping(lc, f"layers[{li}]", _LAYER_KEYS + ("mlp_dtype",))
        for key in _LAYER_KEYS:
            if key not in lc:
                fail(f"layers[{li}] has no {key!r}")
            count(lc[key], f"layers[{li}].{key}")
        if lc["n_heads"] and lc["d_head"] < 1:
            fail(f"layers[{li}].d_head is 0 but the layer has {lc['n_heads']} heads (scores are divided "
                 "by sqrt(d_head))")
        if lc.get("mlp_dtype", "float32") not in _DTYPES:
            fail(f"layers[{li}].mlp_dtype must be \"float32\" or \"float64\", not {_show(lc['mlp_dtype'])}")

    residual = config["residual"]
    if not isinstance(residual, list):
        fail(f"residual must be a list of subspaces, not {_show(residual)}")
    spans: list[tuple[int, int, int]] = []  # (start, end, ri): no list d_model long (a hostile d_model)
    for ri, sub in enumerate(residual):
        if not isinstance(sub, dict):
            fail(f"residual[{ri}] must be a JSON object, not {_show(sub)}")
        start = count(sub.get("start"), f"residual[{ri}].start")
        size = count(sub.get("size"), f"residual[{ri}].size")
        labels = sub.get("labels")
        if not isinstance(labels, list) or len(labels) != size or not all(isinstance(x, str) for x in labels):
            fail(f"residual[{ri}].labels must be a list of {size} strings (its size), not {_show(labels)}")
        if start + size > d_model:
            fail(f"residual[{ri}] spans dimensions {start}..{start + size - 1}, past d_model ({d_model})")
        spans.append((start, start + size, ri))
    reach, reacher = 0, -1  # the furthest end so far, and whose
    for s0, e0, r0 in sorted(x for x in spans if x[0] < x[1]):
        if s0 < reach:
            first, second = sorted((r0, reacher))
            fail(f"residual[{second}] overlaps residual[{first}] at dimension {s0}")
        reach, reacher = e0, r0

    spec = config.get("input")
    if spec is not None:
        mapping(spec, "input", ("kind", "range", "grid", "grid_slack"))
        if spec.get("kind") != "numerical":
            fail(f"input.kind must be \"numerical\" (a categorical model has no 'input'), not "
                 f"{_show(spec.get('kind'))}")
        rng = spec.get("range")
        if not (isinstance(rng, list) and len(rng) == 2 and all(_is_number(x) for x in rng)
                and rng[0] <= rng[1]):
            fail(f"input.range must be [lo, hi] with finite lo <= hi, not {_show(rng)}")
        if len(vocab) != 1:
            fail(f"a numerical-input model has the one token \"<number>\", but vocab has {len(vocab)}")
        if "grid" in spec and not (_is_number(spec["grid"]) and spec["grid"] > 0):
            fail(f"input.grid must be a finite number > 0, not {_show(spec['grid'])}")
        if "grid_slack" in spec and not (_is_number(spec["grid_slack"]) and spec["grid_slack"] >= 0):
            fail(f"input.grid_slack must be a finite number >= 0, not {_show(spec['grid_slack'])}")

    out = config["output"]
    enc = out.get("encoding") if isinstance(out, dict) else None
    if enc not in _OUTPUT_KEYS:
        if not isinstance(out, dict):
            fail(f"output must be a JSON object, not {_show(out)}")
        fail(f"output.encoding must be \"categorical\" or \"numerical\", not {_show(enc)}")
    for key in sorted(set(out) - _OUTPUT_KEYS[enc]):
        if any(key in keys for keys in _OUTPUT_KEYS.values()):
            fail(f"output.encoding is {enc!r} but output has {key!r}, which only the other encoding has")
    mapping(out, "output", _OUTPUT_KEYS[enc])
    for key in ("node", "feature"):
        if out.get(key) is not None and not isinstance(out[key], str):
            fail(f"output.{key} must be a string, not {_show(out[key])}")
    if enc == "categorical":
        values = out.get("values")
        if not isinstance(values, list) or not values:
            fail(f"output.values must be a non-empty list, not {_show(values)}")
        if len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
            fail("output.values repeats a value")
        scale = out.get("logit_scale")
        if not _is_number(scale) or scale <= 0:
            fail(f"output.logit_scale must be a finite number > 0, not {_show(scale)}")
        feature = next((sub for sub in residual if sub.get("feature") == out.get("feature")), None)
        if feature is not None and "values" in feature and feature["values"] != values:
            fail(f"output.values {_show(values)} differ from the values of the output feature "
                 f"{out.get('feature')!r} in residual ({_show(feature['values'])})")
    elif type(out.get("integer")) is not bool:
        fail(f"output.integer must be true or false, not {_show(out.get('integer'))}")
    elif "integer_tolerance" in out and not (_is_number(out["integer_tolerance"])
                                             and 0 < out["integer_tolerance"] < 0.5):
        fail(f"output.integer_tolerance must be a number in (0, 0.5), not {_show(out['integer_tolerance'])}")
    elif "integer_single_key" in out and out["integer_single_key"] is not True:
        fail(f"output.integer_single_key must be true where present, not {_show(out['integer_single_key'])}")
    _check_guards(config.get("guards"), enc, fail)
    undefined = out.get("undefined")
    if undefined is not None:
        if not isinstance(undefined, dict):
            fail(f"output.undefined must be an object of lengths, not {_show(undefined)}")
        for n, entry in undefined.items():
            if not (n.isdigit() and 1 <= int(n) <= max_len and isinstance(entry, list) and len(entry) == 2
                    and isinstance(entry[0], str) and _is_int(entry[1]) and entry[1] >= 0):
                fail(f"output.undefined[{n!r}] must map a length 1..{max_len} to [s-op, position], "
                     f"not {_show(entry)}")

    for key, kind in (("program", str), ("plan", list), ("critical_path", list), ("notes", list),
                      ("numeric", dict), ("simulator", dict)):
        if config.get(key) is not None and not isinstance(config[key], kind):
            fail(f"{key} must be a {'string' if kind is str else 'JSON ' + kind.__name__}, not "
                 f"{_show(config[key])}")
    if "score_gap" in config and not _is_number(config["score_gap"]):
        fail(f"score_gap must be a finite number, not {_show(config['score_gap'])}")


def check_plan(config: dict, cpath: str) -> None:
    """The plan (read by summaries, pictures and export, not by the network): one entry per layer
    listing that layer's heads.  Checked after the tensors, whose messages are the clearer ones."""

    def fail(message: str) -> NoReturn:
        raise ModelArtifactError(f"{cpath}: {message}", hint=_REHASH)

    layers, n_layers = config["layers"], config["n_layers"]
    plan = config.get("plan")
    if plan is not None:
        if len(plan) != n_layers:
            fail(f"plan has {len(plan)} layers but n_layers is {n_layers}")
        for li, lp in enumerate(plan):
            heads = lp.get("heads") if isinstance(lp, dict) else None
            if (not isinstance(heads, list) or len(heads) != layers[li]["n_heads"]
                    or not all(isinstance(h, dict) and isinstance(h.get("node"), str)
                               and isinstance(h.get("kind"), str) for h in heads)):
                fail(f"plan[{li}].heads must list the layer's {layers[li]['n_heads']} heads, each with a "
                     "node and a kind")
            if lp.get("mlp") is not None and not isinstance(lp["mlp"], dict):
                fail(f"plan[{li}].mlp must be null or a JSON object, not {_show(lp['mlp'])}")


def expected_tensors(config: dict) -> dict[str, tuple[torch.dtype, list[tuple[int, str]], str]]:
    """Every tensor a (checked) config calls for: name -> (dtype, [(size, what sets it)], why)."""
    d = config["d_model"]
    dt = _DTYPES[config["dtype"]]
    dm = (d, "d_model")
    numerical_input = config.get("input") is not None
    out: dict[str, tuple[torch.dtype, list[tuple[int, str]], str]] = {
        "embed.token": (dt, [(len(config["vocab"]) + 2, "len(vocab) + 2 (tokens, BOS, PAD)"), dm], "always"),
        "embed.pos": (dt, [(config["max_len"] + 1, "max_len + 1 (BOS, positions)"), dm], "always"),
    }
    if numerical_input:
        out["embed.value"] = (dt, [dm], "input.kind is numerical")
    for li, lc in enumerate(config["layers"]):
        h, dh, m = lc["n_heads"], lc["d_head"], lc["d_mlp"]
        if h:
            hs, ds = (h, f"layers[{li}].n_heads"), (dh, f"layers[{li}].d_head")
            why = f"layers[{li}].n_heads is {h}"
            for n in ("W_Q", "W_K", "W_V"):
                out[f"layers.{li}.attn.{n}"] = (dt, [hs, dm, ds], why)
            out[f"layers.{li}.attn.W_O"] = (dt, [hs, ds, dm], why)
        if m:
            mt = _DTYPES[lc.get("mlp_dtype", config["dtype"])]
            ms = (m, f"layers[{li}].d_mlp")
            why = f"layers[{li}].d_mlp is {m}"
            shapes = {"W_in": [dm, ms], "b_in": [ms], "W_out": [ms, dm], "b_out": [dm]}
            if numerical_input:  # the numerical compiler's MLPs are gated (see the module docstring)
                shapes.update({"W_gate": [dm, ms], "b_gate": [ms]})
            for n, shape in shapes.items():
                out[f"layers.{li}.mlp.{n}"] = (mt, shape, why)
    guards = len(config.get("guards") or [])
    k = ((len(config["output"]["values"]), "len(output.values)")
         if config["output"]["encoding"] == "categorical" else
         (1 + guards, f"a numerical output and {guards} guards ({1 + guards})" if guards
          else "a numerical output (1)"))
    out["unembed.W_U"] = (dt, [dm, k], "always")
    out["unembed.b_U"] = (dt, [k], "always")
    return out


def check_tensor_shapes(config: dict, tensors: dict[str, Any], cpath: str, wpath: str) -> None:
    """Refuse tensors (or ``TensorSpec``s read from the header) whose names, shapes or dtypes do
    not match a checked config: a missing or extra tensor, a shape or dtype other than the
    config's (ModelArtifactError naming the tensor)."""

    def fail(message: str) -> NoReturn:
        raise ModelArtifactError(message, hint=_REHASH)

    want = expected_tensors(config)
    for name, (_, _, why) in want.items():
        if name not in tensors:
            fail(f"{wpath} has no tensor {name}, which {cpath} calls for"
                 + ("" if why == "always" else f" ({why})"))
    for name in sorted(set(tensors) - set(want)):
        parts = name.split(".")
        layers = config["layers"]
        if len(parts) == 4 and parts[0] == "layers" and parts[1].isdigit():
            li = int(parts[1])
            if li >= len(layers):
                fail(f"{cpath}: n_layers is {len(layers)} but {wpath} holds {name}")
            key = {"attn": "n_heads", "mlp": "d_mlp"}.get(parts[2])
            if key and not layers[li][key]:
                fail(f"{cpath}: layers[{li}].{key} is 0 but {wpath} holds {name} "
                     f"{list(tensors[name].shape)}")
            if parts[3] in ("W_gate", "b_gate"):
                fail(f"{wpath} holds {name}, but only a numerical-input model (input.kind numerical "
                     f"in {cpath}) has gated MLPs")
        if name == "embed.value":
            fail(f"{wpath} holds embed.value, but {cpath} has no numerical input (input.kind)")
        fail(f"{wpath} holds a tensor {name} that {cpath} does not call for")
    for name, (dtype, dims, _) in want.items():
        t = tensors[name]
        shape = list(t.shape)
        if len(shape) != len(dims):
            fail(f"{wpath}: {name} has shape {shape}, but {cpath} calls for {len(dims)} dimensions "
                 f"({', '.join(what for _, what in dims)})")
        for i, ((size, what), got) in enumerate(zip(dims, shape, strict=True)):
            if size != got:
                fail(f"{cpath}: {what} is {size} but {name} in {wpath} has {got} along dimension {i} "
                     f"(shape {shape})")
        if t.dtype != dtype:
            field = "dtype" if ".mlp." not in name else f"layers[{name.split('.')[1]}].mlp_dtype / dtype"
            fail(f"{wpath}: {name} is {str(t.dtype).replace('torch.', '')} but {cpath} says "
                 f"{str(dtype).replace('torch.', '')} ({field})")


def check_tensors(config: dict, tensors: dict[str, torch.Tensor], cpath: str, wpath: str) -> None:
    """Refuse weights that do not match a checked config: a missing or extra tensor, a shape or
    dtype other than the config's, a NaN or infinity (ModelArtifactError naming the tensor)."""
    check_tensor_shapes(config, tensors, cpath, wpath)

    def fail(message: str) -> NoReturn:
        raise ModelArtifactError(message, hint=_REHASH)

    want = expected_tensors(config)
    for name in want:
        t = tensors[name]
        if t.numel() and not bool(torch.isfinite(t).all()):
            bad = int((~torch.isfinite(t)).sum())
            fail(f"{wpath}: {name} holds {bad} non-finite value{'s' if bad > 1 else ''} (NaN or "
                 "infinity): a compiled model's weights are all finite")
    tokens = next((sub for sub in config["residual"] if sub.get("feature") == "tokens"
                   and sub.get("encoding") == "categorical" and isinstance(sub.get("values"), list)), None)
    if tokens is not None:
        # the vocabulary's order is embed.token's row order: where the residual has the one-hot
        # `tokens` subspace, each token's row sets that token's own dimension there
        where = {_token_key(v): j for j, v in enumerate(tokens["values"][:tokens["size"]])
                 if type(v) in (str, int, float, bool)}
        rows = tensors["embed.token"]
        for i, tok in enumerate(config["vocab"]):
            j = where.get(_token_key(tok))
            if j is not None and float(rows[i, tokens["start"] + j]) != 1.0:
                fail(f"{cpath}: vocab[{i}] is {_show(tok)}, but row {i} of embed.token in {wpath} "
                     f"does not set its dimension {tokens['labels'][j]!r}: the vocabulary was edited")
    if config["output"]["encoding"] == "categorical":
        # a compiled unembedding writes logit_scale on the output value's dimension, 0 elsewhere;
        # CLEAN_MARGIN is a share of it, so a smaller logit_scale would let blurred outputs through
        scale = float(config["output"]["logit_scale"])
        top = float(tensors["unembed.W_U"].abs().max())
        if abs(top - scale) > 1e-6 * scale:
            fail(f"{cpath}: output.logit_scale is {scale:g} but the largest weight of unembed.W_U in "
                 f"{wpath} is {top:g}")
