"""The four sparse {0,1} constructions: fixed R_Q, R_K, R_V layouts and the encoder E(target).
The readout is fixed too where the target's readout U_T folds into E (``encode_construction``).

Notation (rows are tokens): P_l = V_1 ... V_l (P_0 = I); Sel(j) is the m x d 0/1 matrix selecting
column block j of the embedding, so (X E) Sel(j) = X E_j.  Every construction keeps the invariant
"the UT's residual stream is a fixed linear image of the target's", which makes every attention
logit of the UT equal to the target's at every layer (proofs in docs/universal.md).

* sparse    one head, values, no residual:   E = [P_L U_T | P_0 W_1 | P_0 | ... | P_{L-1} W_L | P_{L-1}]
* looped    one shared layer applied L times: blocks (P_0 W_1, P_0, ..., P_{L-1}, P_L U_T), R_V shifts
            every block two places to the left, so layer l always reads blocks 0 and 1
* multihead H heads, no values:              E = [I | W_{1,1} | ... | W_{L,H}]
* paths     H heads with values: one key block per path of head choices, one query block per
            (path, head), one output block per full path (times U_T); R_V^{l,h} is a diagonal 0/1 mask keeping
            the blocks of paths whose l-th step is head h.  With a residual, 'skip' is one more
            step choice and Moebius inversion over skipped steps makes the blocks add up exactly.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from rasp_compiler.errors import UserError
from rasp_compiler.universal.classes import class_problem, fit_target, shown_width, width_formula
from rasp_compiler.universal.model import UniversalTransformer, UTConfig
from rasp_compiler.universal.target import Target

F64 = torch.float64
MAX_WIDTH = 20_000  # an m x m float64 is 3.2 GB here: beyond this memory, not maths, is the limit


def _sel(m: int, d: int, blocks: list[int]) -> torch.Tensor:
    """Sum of Sel(j) over ``blocks``: an m x d 0/1 matrix."""
    out = torch.zeros(m, d, dtype=F64)
    for j in blocks:
        out[j * d:(j + 1) * d] += torch.eye(d, dtype=F64)
    return out


# ----- path layout ----------------------------------------------------------------------------
@dataclass(frozen=True)
class PathLayout:
    """Block indices of the paths construction.  A node is a tuple of step choices, one per layer
    so far: 1..H is a head, 0 is 'skip' (only with a residual)."""

    layers: int
    heads: int
    residual: bool
    key: dict          # node (length l-1) -> block read as key at layer l
    query: dict        # (node, h) -> block read as query by head h at layer l = len(node) + 1
    out: dict          # node of length L -> output block
    node_of: tuple     # block -> node

    @property
    def blocks(self) -> int:
        return len(self.node_of)


def path_layout(layers: int, heads: int, residual: bool) -> PathLayout:
    alphabet = range(0 if residual else 1, heads + 1)
    key, query, out, node_of = {}, {}, {}, []
    for l in range(1, layers + 1):
        for node in itertools.product(alphabet, repeat=l - 1):
            key[node] = len(node_of)
            node_of.append(node)
            for h in range(1, heads + 1):
                query[(node, h)] = len(node_of)
                node_of.append(node)
    for node in itertools.product(alphabet, repeat=layers):
        out[node] = len(node_of)
        node_of.append(node)
    return PathLayout(layers, heads, residual, key, query, out, tuple(node_of))


def _extensions(node: tuple, heads: int):
    """Nodes that fill some skipped steps (0) of ``node`` with heads, with the Moebius sign."""
    zeros = [i for i, c in enumerate(node) if c == 0]
    for fill in itertools.product(range(heads + 1), repeat=len(zeros)):
        ext = list(node)
        for i, c in zip(zeros, fill, strict=True):
            ext[i] = c
        yield tuple(ext), (-1) ** sum(1 for c in fill if c != 0)


# ----- building --------------------------------------------------------------------------------
def build_construction(construction: str, layers: int, heads: int, dim: int, residual: bool = False,
                       causal: bool = False) -> UniversalTransformer:
    """The fixed {0,1} UT for a class.  Its weights depend only on (construction, L, H, d, residual)."""
    L, H, d = layers, heads, dim
    values = construction != "multihead"
    problem = class_problem(construction, H, residual, values)
    if problem:
        raise UserError(problem)
    m = width_formula(construction, L, H, d, residual, values)
    if m > MAX_WIDTH:
        raise UserError(f"the {construction} UT for L={L}, H={H}, d={d} has width m={shown_width(m)}, "
                        f"above the supported {MAX_WIDTH:,} (its weights are m x m or L x H x m x d)",
                        hint="use fewer layers, heads or a smaller --dim")
    kind, r_v, extra = "identity", None, {}
    if construction == "sparse":
        r_q = torch.stack([_sel(m, d, [2 * l - 1]) for l in range(1, L + 1)]).unsqueeze(1)
        r_k = torch.stack([_sel(m, d, [2 * l]) for l in range(1, L + 1)]).unsqueeze(1)
    elif construction == "looped":
        r_q, r_k = _sel(m, d, [0])[None, None], _sel(m, d, [1])[None, None]
        shift = torch.zeros(m, m, dtype=F64)
        shift[2 * d:, :m - 2 * d] = torch.eye(m - 2 * d, dtype=F64)  # block j+2 -> block j
        kind, r_v = "dense", shift[None, None]
    elif construction == "multihead":
        r_q = torch.stack([torch.stack([_sel(m, d, [1 + l * H + h]) for h in range(H)]) for l in range(L)])
        r_k = _sel(m, d, [0]).expand(L, H, m, d).clone()
    else:  # paths
        lay = path_layout(L, H, residual)
        r_q = torch.zeros(L, H, m, d, dtype=F64)
        r_k = torch.zeros(L, H, m, d, dtype=F64)
        for (node, h), b in lay.query.items():
            r_q[len(node), h - 1] += _sel(m, d, [b])
        for node, b in lay.key.items():
            r_k[len(node)] += _sel(m, d, [b])
        mask = torch.zeros(L, H, lay.blocks, dtype=F64)
        for b, node in enumerate(lay.node_of):
            for l, step in enumerate(node):
                if step > 0:
                    mask[l, step - 1, b] = 1.0
        kind, r_v = "diagonal", mask.repeat_interleave(d, dim=-1)
    config = UTConfig(construction=construction, layers=L, heads=H, dim=d, m=m, head_dim=d,
                      residual=residual, causal=causal, values=values, looped=construction == "looped",
                      value_kind=kind, extra=extra)
    return UniversalTransformer(config, r_q, r_k, r_v)


# ----- encoding --------------------------------------------------------------------------------
def encode_construction(ut: UniversalTransformer, target: Target) -> tuple[torch.Tensor, torch.Tensor]:
    """(E, U) such that ut(X, E, U) == target(X).  E has one row per input feature of the target.

    As in the paper, U is fixed: the target's readout U_T is folded into E's output blocks (each
    of them a d-wide copy of the stream that no layer reads as a query or key, and whose columns
    all move alike), so U only selects the first d_out columns of those blocks.  That needs
    d_out <= d; ``multihead``, whose output block is its key block, and a wider readout keep
    U = Sel(out)·U_T instead (see ``fixed_readout``)."""
    cfg = ut.config
    rows = target.dim
    t = fit_target(cfg, target)
    L, H, d = cfg.layers, cfg.heads, cfg.dim
    W, V, U_t = t.W, t.values_or_identity(), t.unembedding()
    fold = fixed_readout(cfg, U_t.shape[1])

    def out(block: torch.Tensor) -> torch.Tensor:  # an output block, with U_T folded in
        if not fold:
            return block
        folded = block @ U_t
        return torch.cat([folded, folded.new_zeros(d, d - folded.shape[1])], dim=1)

    if cfg.construction in ("sparse", "looped"):
        P = [torch.eye(d, dtype=F64)]
        for l in range(L):
            P.append(P[-1] @ V[l, 0])
        pairs = [blk for l in range(L) for blk in (P[l] @ W[l, 0], P[l])]
        blocks = [out(P[L])] + pairs if cfg.construction == "sparse" else pairs + [out(P[L])]
        out_blocks = [0]
    elif cfg.construction == "multihead":
        blocks = [torch.eye(d, dtype=F64)] + [W[l, h] for l in range(L) for h in range(H)]
        out_blocks = [0]
    else:
        blocks, out_blocks = _encode_paths(cfg, W, V, out)
    E = torch.cat(blocks, dim=1)
    sel = _sel(cfg.m, d, out_blocks)
    U = sel[:, :U_t.shape[1]].clone() if fold else sel @ U_t
    return E[:rows].contiguous(), U


def fixed_readout(cfg: UTConfig, d_out: int) -> bool:
    """Whether the UT's readout U is the same for every target of output width ``d_out``."""
    return cfg.construction in ("sparse", "looped", "paths") and d_out <= cfg.dim


def _encode_paths(cfg: UTConfig, W: torch.Tensor, V: torch.Tensor, out) -> tuple[list, list]:
    lay = path_layout(cfg.layers, cfg.heads, cfg.residual)
    d, H = cfg.dim, cfg.heads
    eye = torch.eye(d, dtype=F64)
    products: dict[tuple, torch.Tensor] = {(): eye}

    def P(node: tuple) -> torch.Tensor:  # V along the node's head steps, in layer order; skip = I
        if node not in products:
            prev = P(node[:-1])
            products[node] = prev if node[-1] == 0 else prev @ V[len(node) - 1, node[-1] - 1]
        return products[node]

    def combined(node: tuple, f) -> torch.Tensor:
        # Without residual every stream block is a single path.  With it, the block of node q carries
        # the sum over all sub-paths of q; Moebius inversion over the skipped steps undoes that sum.
        if not cfg.residual:
            return f(node)
        return sum(sign * f(ext) for ext, sign in _extensions(node, H))

    blocks = [None] * lay.blocks
    for node, b in lay.key.items():
        blocks[b] = combined(node, P)
    for (node, h), b in lay.query.items():
        w = W[len(node), h - 1]
        blocks[b] = combined(node, lambda r, w=w: P(r) @ w)
    for node, b in lay.out.items():
        blocks[b] = out(combined(node, P))
    return blocks, sorted(lay.out.values())
