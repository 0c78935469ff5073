"""Lean transformers whose backbone can be frozen: only embeddings and the unembedding train.

Shape: token table (V x m) + position table (T x m) -> L layers -> unembedding (m x C).
Architectures (``arch``):

* ``attn``            X_l = sum_h A_h(X_{l-1}) X_{l-1} V_h O_h               (no residual, no LN)
* ``attn-res-ln``     X_l = X_{l-1} + Attn(LN(X_{l-1})); a final LN before the unembedding (pre-LN)
* ``attn-res-ln-mlp`` the same plus X_l += MLP(LN(X_l)) with a frozen random MLP (m -> 4m -> m, GELU)

Backbones (``backbone``):

* ``sparse``  the sparse 0/1 universal transformer.  ``attn`` uses construction A (one head, value
  = identity, no residual; the target width is d = m // (2L+1)); the residual architectures use
  construction C (H heads, residual, value = identity; d = m // (HL+1)).  ``construction="paths"``
  selects the paths construction instead (H heads, residual, per-head 0/1 value masks; one block
  per path of head choices, so d = m // (sum_l (H+1)^l + (H+1)^L) with a residual).  The
  query/key maps select (sums of) blocks of the embedding; softmax is unscaled, as in the
  constructions.
* ``random``  Gaussian query/key/value/output maps (H heads of width m/H, scale 1/sqrt(m/H)).
* ``trained`` the same shape as ``random``, every weight trained (the reference).

For ``sparse`` and ``random`` every attention, value, layer-norm and MLP weight is a parameter with
``requires_grad=False``: it is saved with the checkpoint but never handed to the optimiser.

The attention is hand-written on batched matmuls (``nn.MultiheadAttention`` is several times slower
for these small shapes); identity values are applied once per layer to the sum of the heads'
attention matrices.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from rasp_compiler.experiments.names import ARCHES, BACKBONES, SPARSE_CONSTRUCTIONS


@dataclass
class ModelConfig:
    vocab: int
    classes: int
    seq_len: int
    width: int = 64
    layers: int = 2
    heads: int = 4
    arch: str = "attn"
    backbone: str = "random"
    seed: int = 0
    emb_std: float = 0.5
    construction: str = "auto"      # sparse backbone: auto (A for attn, C otherwise), A, C or paths
    aux: int = 0                    # auxiliary unembeddings (k-hop: hop_1 .. hop_{k-1}; training only)

    def to_json(self) -> dict:
        return asdict(self)


def sparse_construction(arch: str, construction: str = "auto") -> str:
    """Which sparse construction a run uses: the one asked for, or by architecture (``auto``)."""
    if construction not in SPARSE_CONSTRUCTIONS:
        raise ValueError(f"unknown sparse construction {construction!r}; choose one of "
                         f"{', '.join(SPARSE_CONSTRUCTIONS)}")
    if construction != "auto":
        return construction
    return "A" if arch == "attn" else "C"


def _selector(m: int, start: int, d: int) -> torch.Tensor:
    s = torch.zeros(m, d)
    s[start:start + d] = torch.eye(d)
    return s


def local_sparse_backbone(construction: str, layers: int, heads: int, width: int) -> list[dict]:
    """The sparse 0/1 query/key selectors of constructions A and C, one dict per layer.

    Each dict: ``wq``, ``wk`` (H, m, d) 0/1 selectors; values are the identity (``wv`` absent).
    A: blocks [P_L | P_0W_1 | P_0 | ...]: layer l queries block 2l-1 and keys block 2l, one head.
    C: blocks [I | W_11 | ... | W_LH]: head (l,h) queries block (l-1)H+h and keys block 0.
    Columns beyond the last whole block are unused by the backbone.
    """
    m = width
    out = []
    if construction == "A":
        d = m // (2 * layers + 1)
        if d < 1:
            raise ValueError(f"width {m} is too small for construction A with {layers} layers")
        for layer in range(1, layers + 1):
            out.append({"wq": _selector(m, (2 * layer - 1) * d, d)[None],
                        "wk": _selector(m, 2 * layer * d, d)[None]})
    elif construction == "C":
        d = m // (heads * layers + 1)
        if d < 1:
            raise ValueError(f"width {m} is too small for construction C with {heads} heads x "
                             f"{layers} layers")
        for layer in range(1, layers + 1):
            wq = torch.stack([_selector(m, ((layer - 1) * heads + h + 1) * d, d) for h in range(heads)])
            wk = torch.stack([_selector(m, 0, d) for _ in range(heads)])
            out.append({"wq": wq, "wk": wk})
    else:
        raise ValueError(f"unknown sparse construction {construction!r}")
    return out


def sparse_blocks(arch: str, layers: int, heads: int, construction: str = "auto") -> int:
    """How many d-wide blocks the sparse backbone's embedding is made of."""
    from rasp_compiler.universal.classes import width_formula

    c = sparse_construction(arch, construction)
    if c == "A":
        return 2 * layers + 1
    if c == "C":
        return heads * layers + 1
    return width_formula("paths", layers, heads, 1, residual=arch != "attn")


def sparse_dim(arch: str, layers: int, heads: int, width: int, construction: str = "auto") -> int:
    """The target width d the sparse backbone of a given embedding width simulates."""
    return width // sparse_blocks(arch, layers, heads, construction)


def sparse_backbone(arch: str, layers: int, heads: int, width: int,
                    construction: str = "auto") -> list[dict]:
    """Sparse backbone weights from ``rasp_compiler.universal.fixed_backbone``.

    A -> ``fixed_backbone("sparse", heads=1, residual=False)``; C -> ``fixed_backbone("multihead",
    heads=H, residual=True)``; paths -> ``fixed_backbone("paths", heads=H, residual=arch != attn)``.
    Each layer's dict has ``wq``, ``wk`` (H, m, d) and, for paths, ``vmask`` (H, m): the 0/1
    diagonal of each head's value map.  The UT's width (blocks x d) may be below ``width``; the
    extra embedding columns get zero rows everywhere (the backbone ignores them).
    """
    from rasp_compiler.universal import fixed_backbone

    c = sparse_construction(arch, construction)
    d = sparse_dim(arch, layers, heads, width, construction)
    if d < 1:
        raise ValueError(f"width {width} is too small for sparse construction {c} with {layers} "
                         f"layers and {heads} heads (it needs {sparse_blocks(arch, layers, heads, c)} "
                         "blocks of at least one column)")
    if c == "A":
        ut = fixed_backbone("sparse", layers=layers, heads=1, dim=d, residual=False, causal=True)
    elif c == "C":
        ut = fixed_backbone("multihead", layers=layers, heads=heads, dim=d, residual=True, causal=True)
    else:
        ut = fixed_backbone("paths", layers=layers, heads=heads, dim=d, residual=arch != "attn",
                            causal=True)
    t = ut.backbone_tensors()
    if c != "paths" and "R_V" in t and not bool((t["R_V"] == 1).all()) or t["R_Q"].shape[2] > width:
        raise ValueError("unexpected sparse backbone layout (values must be the identity)")
    pad = width - t["R_Q"].shape[2]
    out = []
    for layer in range(layers):
        w = {}
        for name, key in (("wq", "R_Q"), ("wk", "R_K")):
            r = t[key][layer].float()                        # (H, m_ut, d)
            w[name] = torch.cat([r, torch.zeros(r.shape[0], pad, r.shape[2])], dim=1)
        if c == "paths":
            v = t["R_V"][layer].float()                      # (H, m_ut): diagonal value masks
            w["vmask"] = torch.cat([v, torch.zeros(v.shape[0], pad)], dim=1)
        out.append(w)
    return out


def random_backbone(layers: int, heads: int, width: int, generator: torch.Generator) -> list[dict]:
    """Gaussian maps: wq, wk, wv (H, m, m/H) with std 1/sqrt(m); wo (H, m/H, m) with std 1/sqrt(m)."""
    m = width
    if m % heads:
        raise ValueError(f"width {m} is not a multiple of heads {heads}")
    dk = m // heads
    out = []
    for _ in range(layers):
        w = {name: torch.randn(heads, m, dk, generator=generator) / math.sqrt(m)
             for name in ("wq", "wk", "wv")}
        w["wo"] = torch.randn(heads, dk, m, generator=generator) / math.sqrt(m)
        out.append(w)
    return out


class Layer(nn.Module):
    def __init__(self, cfg: ModelConfig, weights: dict, scale: float, trainable: bool,
                 generator: torch.Generator) -> None:
        super().__init__()
        m = cfg.width
        self.heads = weights["wq"].shape[0]
        self.dk = weights["wq"].shape[2]
        self.scale = scale
        self.residual = cfg.arch != "attn"

        def par(t: torch.Tensor) -> nn.Parameter:
            return nn.Parameter(t.clone().float().contiguous(), requires_grad=trainable)

        # stored concatenated over heads: (m, H*dk)
        self.wq = par(weights["wq"].permute(1, 0, 2).reshape(m, -1))
        self.wk = par(weights["wk"].permute(1, 0, 2).reshape(m, -1))
        self.has_values = "wv" in weights and weights["wv"] is not None
        self.vmask = par(weights["vmask"]) if "vmask" in weights else None
        if self.has_values:
            self.dv = weights["wv"].shape[2]
            self.wv = par(weights["wv"].permute(1, 0, 2).reshape(m, -1))
            self.wo = par(weights["wo"].reshape(-1, m))
        if self.residual:
            self.ln1 = nn.LayerNorm(m)
            self.ln1.requires_grad_(trainable)
        self.mlp = cfg.arch == "attn-res-ln-mlp"
        if self.mlp:
            self.ln2 = nn.LayerNorm(m)
            self.w1 = par(torch.randn(m, 4 * m, generator=generator) * math.sqrt(2.0 / m))
            self.w2 = par(torch.randn(4 * m, m, generator=generator) / math.sqrt(4 * m))
            self.ln2.requires_grad_(trainable)

    def pattern(self, x: torch.Tensor, mask: torch.Tensor,
                rows: torch.Tensor | None = None) -> torch.Tensor:
        """The attention weights (B, H, T_q, T) of the heads on input ``x`` (already layer-normed
        where the architecture has LN); T_q is T, or 1 with ``rows``."""
        b, t, _ = x.shape
        h, dk = self.heads, self.dk
        xq = x if rows is None else x[torch.arange(b, device=x.device), rows].unsqueeze(1)
        tq = xq.shape[1]
        q = (xq @ self.wq).view(b, tq, h, dk).transpose(1, 2)
        k = (x @ self.wk).view(b, t, h, dk).transpose(1, 2)
        s = torch.matmul(q, k.transpose(-1, -2))
        if self.scale != 1.0:
            s = s * self.scale
        m = mask[:t, :t] if rows is None else mask[rows, :t].view(b, 1, 1, t)
        return torch.softmax(s + m, dim=-1)

    def attention(self, x: torch.Tensor, mask: torch.Tensor,
                  rows: torch.Tensor | None = None) -> torch.Tensor:
        """Causal attention of every position (``rows`` None: (B, T, m)) or of one query position
        per sequence (``rows`` (B,): (B, 1, m)); keys and values always cover every position."""
        b, t, _ = x.shape
        h = self.heads
        a = self.pattern(x, mask, rows)
        tq = a.shape[2]
        if self.vmask is not None:       # 0/1 diagonal values: sum_h (A_h X) * mask_h
            return torch.einsum("bhqt,btm,hm->bqm", a, x, self.vmask)
        if self.has_values:
            v = (x @ self.wv).view(b, t, h, self.dv).transpose(1, 2)
            o = torch.matmul(a, v).transpose(1, 2).reshape(b, tq, h * self.dv)
            return o @ self.wo
        a = a.sum(dim=1) if h > 1 else a[:, 0]
        return torch.matmul(a, x)        # identity values: (sum_h A_h) X

    def attention_input(self, x: torch.Tensor) -> torch.Tensor:
        """What the heads read: the stream itself, or its layer norm (pre-LN architectures)."""
        return self.ln1(x) if self.residual else x

    def forward(self, x: torch.Tensor, mask: torch.Tensor,
                rows: torch.Tensor | None = None) -> torch.Tensor:
        if not self.residual:
            return self.attention(x, mask, rows)
        xr = x if rows is None else x[torch.arange(x.shape[0], device=x.device), rows].unsqueeze(1)
        x = xr + self.attention(self.attention_input(x), mask, rows)
        if self.mlp:
            x = x + F.gelu(self.ln2(x) @ self.w1) @ self.w2
        return x


class EmbeddingProgrammedTransformer(nn.Module):
    def __init__(self, cfg: ModelConfig, backbone_weights: list[dict] | None = None) -> None:
        super().__init__()
        if cfg.arch not in ARCHES:
            raise ValueError(f"unknown arch {cfg.arch!r}")
        if cfg.backbone not in BACKBONES:
            raise ValueError(f"unknown backbone {cfg.backbone!r}")
        self.cfg = cfg
        g = torch.Generator().manual_seed(int(cfg.seed) * 7919 + 17)
        m = cfg.width
        if backbone_weights is None:
            if cfg.backbone == "sparse":
                backbone_weights = sparse_backbone(cfg.arch, cfg.layers, cfg.heads, m,
                                                   cfg.construction)
            else:
                backbone_weights = random_backbone(cfg.layers, cfg.heads, m, g)
        if len(backbone_weights) != cfg.layers:
            raise ValueError("backbone weights must have one entry per layer")
        trainable = cfg.backbone == "trained"
        self.tok = nn.Parameter(torch.randn(cfg.vocab, m, generator=g) * cfg.emb_std)
        self.pos = nn.Parameter(torch.randn(cfg.seq_len, m, generator=g) * cfg.emb_std)
        layers = []
        for w in backbone_weights:
            scale = 1.0 if cfg.backbone == "sparse" else 1.0 / math.sqrt(w["wq"].shape[2])
            layers.append(Layer(cfg, w, scale, trainable, g))
        self.layers = nn.ModuleList(layers)
        self.final_ln = None
        if cfg.arch != "attn":
            self.final_ln = nn.LayerNorm(m)
            self.final_ln.requires_grad_(trainable)
        self.unembed = nn.Linear(m, cfg.classes)
        with torch.no_grad():
            self.unembed.weight.copy_(torch.randn(cfg.classes, m, generator=g) / math.sqrt(m))
            self.unembed.bias.zero_()
        # training aids (train.py): unembeddings read by auxiliary losses only, never by forward()
        self.aux_unembed = nn.ModuleList(nn.Linear(m, cfg.classes) for _ in range(cfg.aux))
        with torch.no_grad():
            for head in self.aux_unembed:
                head.weight.copy_(torch.randn(cfg.classes, m, generator=g) / math.sqrt(m))
                head.bias.zero_()
        self.register_buffer("mask", torch.triu(torch.full((cfg.seq_len, cfg.seq_len),
                                                           float("-inf")), diagonal=1),
                             persistent=False)

    def forward(self, tokens: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (B, T, C) at every position, or (B, C) at one position per sequence (``rows``).

        With ``rows`` the last layer is computed for those positions only (Dyck-1 reads one label per
        string); the result equals the full forward at those positions.
        """
        out = self.unembed(self.hidden(tokens, rows))
        return out if rows is None else out[:, 0]

    def hidden(self, tokens: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """The stream the unembeddings read: after the last layer (and the final LN, if any)."""
        t = tokens.shape[1]
        x = self.tok[tokens] + self.pos[:t]
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x = layer(x, self.mask, rows if i == last else None)
        return x if self.final_ln is None else self.final_ln(x)

    @torch.no_grad()
    def attention_maps(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """Every layer's attention weights on ``tokens``: a list of L tensors (B, H, T, T)."""
        t = tokens.shape[1]
        x = self.tok[tokens] + self.pos[:t]
        maps = []
        for layer in self.layers:
            maps.append(layer.pattern(layer.attention_input(x), self.mask))
            x = layer(x, self.mask)
        return maps

    def param_counts(self) -> tuple[int, int]:
        trainable = sum(p.numel() for p in self.parameters() if p.requires_grad)
        frozen = sum(p.numel() for p in self.parameters() if not p.requires_grad)
        return trainable, frozen
