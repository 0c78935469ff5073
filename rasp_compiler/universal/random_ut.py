"""Random Gaussian UTs: the backbone from a seed, and E by two linear solves (or a fit).

The UT's stream is H_l = sum over paths p of M_p X E Pi_p, where M_p is the product of the attention
matrices along p and Pi_p the product of the UT's value matrices (identity for skipped steps, or for
a class without values).  The target's is X_l = sum_p M_p X P_p.  Every attention logit matches if,
for every layer l, head h and path p of length l-1,

    E Pi_p R_K^{l,h} = P_p B           (B = [I_d | 0], d x k: a fixed generic key image)
    E Pi_p R_Q^{l,h} = P_p W_{l,h} B    (then E Pi_p R_Q (E Pi_q R_K)^T = P_p W P_q^T for all p, q)

Solve 1: these are linear in E: E C = RHS with C of size m x (2 k H #paths); a Gaussian C has full
column rank when m >= that many columns (so the formula is m = 2 k H sum_{l<L} a^l, a = branches per
layer with values, 1 without; 2Lk for one head).  Solve 2: U from E Pi_p U = P_p U_T for every full
path p (rank generically full since m >= a^L d).  Both are least-squares solves whose residual is
reported; with k < d or m below the formula there is no exact linear solution and E comes from a
gradient fit of the bilinear conditions themselves (LBFGS, float64), with its residual reported.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import torch

from rasp_compiler.errors import UserError
from rasp_compiler.memory import available_memory
from rasp_compiler.universal.classes import fit_target, shown_width, width_formula
from rasp_compiler.universal.model import UniversalTransformer, UTConfig
from rasp_compiler.universal.target import Target

F64 = torch.float64
MAX_RANDOM_WIDTH = 6000  # dense m x m value matrices: beyond this memory, not maths, is the limit


def build_random(layers: int, heads: int, dim: int, *, m: int | None = None, head_dim: int | None = None,
                 residual: bool = False, causal: bool = False, values: bool = True,
                 seed: int = 0) -> UniversalTransformer:
    """Gaussian R_Q, R_K (m x k) and R_V (m x m, or identity without values), entries N(0, 1/m)."""
    k = dim if head_dim is None else head_dim
    m = width_formula("random", layers, heads, dim, residual, values, k) if m is None else m
    if min(layers, heads, dim, k, m) < 1:
        raise UserError("layers, heads, dim, head dim and width must all be at least 1")
    if m > MAX_RANDOM_WIDTH:
        raise UserError(f"random UT width m={shown_width(m)} is above the supported {MAX_RANDOM_WIDTH:,} "
                        "(dense m x m value matrices)", hint="use fewer layers/heads or --no-values")
    _check_memory(layers, heads, dim, k, m, residual, values)
    gen = torch.Generator().manual_seed(seed)
    scale = 1.0 / math.sqrt(m)
    # scaled in place: a scaled copy of R_V doubled the peak (L=2, H=8 at m = 5,904: 8.9 GB)
    r_q = torch.randn(layers, heads, m, k, generator=gen, dtype=F64).mul_(scale)
    r_k = torch.randn(layers, heads, m, k, generator=gen, dtype=F64).mul_(scale)
    r_v = torch.randn(layers, heads, m, m, generator=gen, dtype=F64).mul_(scale) if values else None
    config = UTConfig(construction="random", layers=layers, heads=heads, dim=dim, m=m, head_dim=k,
                      residual=residual, causal=causal, values=values,
                      value_kind="dense" if values else "identity", seed=seed)
    return UniversalTransformer(config, r_q, r_k, r_v)


def memory_needed(layers: int, heads: int, dim: int, k: int, m: int, residual: bool, values: bool) -> int:
    """About the bytes a random UT and one encoding take (float64): R_V (L H m²), R_Q and R_K, and
    the least-squares solve of E C = RHS (C is m x the formula's columns; the SVD solver keeps a
    few copies).  L=2 H=8 d=41 (m = 5,904) peaked at 5.3 GiB (5.5 estimated here)."""
    cols = width_formula("random", layers, heads, dim, residual, values, k)
    return 8 * ((layers * heads * m * m if values else 0) + 2 * layers * heads * m * k + 5 * m * max(m, cols))


def _check_memory(layers: int, heads: int, dim: int, k: int, m: int, residual: bool, values: bool) -> None:
    """Refuse a random UT that cannot fit in the memory free now, before any weight is drawn (it
    ran for seconds and ended in "out of memory")."""
    free = available_memory()
    need = memory_needed(layers, heads, dim, k, m, residual, values)
    if free is not None and need > free:
        raise UserError(f"a random UT with L={layers}, H={heads}, width m={m:,} needs about "
                        f"{need / 2**30:,.1f} GiB (its dense m x m value matrices are "
                        f"{layers * heads * m * m * 8 / 2**30 if values else 0:,.1f} GiB), more than the "
                        f"{free / 2**30:,.1f} GiB free now",
                        hint="use fewer --layers or --heads, a smaller --dim, or --no-values")


def _alphabet(cfg: UTConfig) -> range:
    """Step choices along a path: heads 1..H, plus 0 = skip with a residual.  Without values every
    path has the same (identity) value product, so a single representative path suffices."""
    if not cfg.values:
        return range(0, 0)
    return range(0 if cfg.residual else 1, cfg.heads + 1)


def _nodes(cfg: UTConfig, length: int) -> list[tuple]:
    if not cfg.values:
        return [()]
    return list(itertools.product(_alphabet(cfg), repeat=length))


def _target_products(cfg: UTConfig, V: torch.Tensor, length: int) -> dict:
    """P_p (d x d) for every path p of ``length`` (and its prefixes)."""
    P = {(): torch.eye(cfg.dim, dtype=F64)}
    for l in range(1, length + 1 if cfg.values else 1):
        for node in _nodes(cfg, l):
            step = node[-1]
            P[node] = P[node[:-1]] if step == 0 else P[node[:-1]] @ V[l - 1, step - 1]
    return P


def _left(cfg: UTConfig, r_v: torch.Tensor | None, E: torch.Tensor, length: int) -> dict:
    """E Pi_p (d x m) for every path p up to ``length``: left products are cheap (d rows)."""
    out = {(): E}
    for l in range(1, length + 1 if cfg.values else 1):
        for node in _nodes(cfg, l):
            step, prev = node[-1], out[node[:-1]]
            out[node] = prev if step == 0 else prev @ r_v[l - 1, step - 1]
    return out


def _right(cfg: UTConfig, r_v: torch.Tensor | None, R: torch.Tensor, length: int) -> dict:
    """Pi_p R (m x k) for every path p of ``length``, built from the right so that no m x m product
    of value matrices is ever formed (m^2 k per path instead of m^3)."""
    out = {(): R}
    if not cfg.values:
        return out
    for j in range(length, 0, -1):  # prepend the step of layer j
        nxt = {}
        for suffix, M in out.items():
            for c in _alphabet(cfg):
                nxt[(c,) + suffix] = M if c == 0 else r_v[j - 1, c - 1] @ M
        out = nxt
    return out


def linear_system(ut: UniversalTransformer, target: Target) -> tuple[torch.Tensor, torch.Tensor]:
    """(C, RHS) with the attention-matching conditions written as E C = RHS."""
    cfg = ut.config
    d, k = cfg.dim, cfg.head_dim
    B = torch.zeros(d, k, dtype=F64)
    B[:, :min(d, k)] = torch.eye(d, dtype=F64)[:, :min(d, k)]
    P = _target_products(cfg, target.values_or_identity(), cfg.layers - 1)
    cols, rhs = [], []
    for l in range(cfg.layers):
        for h in range(cfg.heads):
            keys = _right(cfg, ut.r_v, ut.r_k[l, h], l)
            queries = _right(cfg, ut.r_v, ut.r_q[l, h], l)
            for node in _nodes(cfg, l):
                cols += [keys[node], queries[node]]
                rhs += [P[node] @ B, P[node] @ target.W[l, h] @ B]
    return torch.cat(cols, dim=1), torch.cat(rhs, dim=1)


def _lstsq(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Minimum-norm least squares X with A X ~ B (SVD based: fine for under-determined systems)."""
    return torch.linalg.lstsq(A, B, driver="gelsd").solution


def encode_random(ut: UniversalTransformer, target: Target, *, fit_steps: int = 300,
                  stage: Callable[[str], None] | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor, str, float]:
    """(E, U, method, residual): E by linear solve when it is exact, else by a gradient fit;
    ``stage`` hears the name of each step."""
    stage = stage or (lambda name: None)
    if ut.r_q.dtype != F64:  # a UT run in float32: its solves are in float64 (lstsq refused the mix)
        ut = UniversalTransformer(ut.config, ut.r_q.double(), ut.r_k.double(),
                                  None if ut.r_v is None else ut.r_v.double())
    cfg = ut.config
    rows = target.dim
    t = fit_target(cfg, target)
    stage("building the linear system for E")
    C, R = linear_system(ut, t)
    stage(f"solving for E (width m = {cfg.m:,})")
    E = _lstsq(C.T, R.T).T
    solvable = cfg.head_dim >= cfg.dim and C.shape[1] <= cfg.m
    method = "linear-solve"
    if not solvable:
        stage(f"fitting E by gradient ({fit_steps} steps)")
        E = _fit(ut, t, E, fit_steps)
        method = "gradient-fit"
    stage("solving for U and measuring the residual")
    left = _left(cfg, ut.r_v, E, cfg.layers)
    P = _target_products(cfg, t.values_or_identity(), cfg.layers)
    full = _nodes(cfg, cfg.layers)
    S = torch.cat([left[p] for p in full])
    T_out = torch.cat([P[p] @ t.unembedding() for p in full])
    U = _lstsq(S, T_out)
    residual = max(_bilinear_residual(ut, t, E), float((S @ U - T_out).abs().max()))
    return E[:rows].contiguous(), U, method, residual


def _bilinear_terms(ut: UniversalTransformer, target: Target, E: torch.Tensor):
    """Yield (UT logit form, target logit form) for every layer, head and pair of paths."""
    cfg = ut.config
    left = _left(cfg, ut.r_v, E, cfg.layers - 1)
    P = _target_products(cfg, target.values_or_identity(), cfg.layers - 1)
    for l in range(cfg.layers):
        for h in range(cfg.heads):
            nodes = _nodes(cfg, l)
            q = {p: left[p] @ ut.r_q[l, h] for p in nodes}
            kk = {p: left[p] @ ut.r_k[l, h] for p in nodes}
            for p in nodes:
                for r in nodes:
                    yield q[p] @ kk[r].T, P[p] @ target.W[l, h] @ P[r].T


def _bilinear_residual(ut: UniversalTransformer, target: Target, E: torch.Tensor) -> float:
    with torch.no_grad():
        return max(float((a - b).abs().max()) for a, b in _bilinear_terms(ut, target, E))


def _fit(ut: UniversalTransformer, target: Target, E0: torch.Tensor, steps: int) -> torch.Tensor:
    """Gradient fit of E to the bilinear attention-matching conditions (sum of squared residuals),
    LBFGS in float64 from the least-squares solution of the linear system.  Not exact in general:
    the caller reports the residual it reached."""
    E = E0.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([E], lr=1.0, max_iter=steps, tolerance_grad=1e-14, tolerance_change=1e-16,
                            history_size=50, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = sum(((a - b) ** 2).sum() for a, b in _bilinear_terms(ut, target, E))
        loss.backward()
        return loss

    opt.step(closure)
    return E.detach()
