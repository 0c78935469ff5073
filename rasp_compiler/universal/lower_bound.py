"""The width lower bound under attention matching, for d = 1.

With d = 1 a target is a list of scalars w_{l,h}, v_{l,h}, and X_L = sum over paths p of M_p x v_p,
where v_p is the product of the values along p (a skipped step, with a residual, contributes 1) and M_p
the product of the attention matrices along p.  A UT that reproduces every attention matrix has the
same M_p (generically linearly independent), so its stream must carry the whole vector (v_p)_p through
an embedding that depends on the target only through E: the width m is at least the dimension of the
span of the map target -> (v_p)_p.  This module computes that dimension as the rank of the matrix of
path products evaluated at random targets, exactly, over the integers modulo a large prime (a rank mod p
never exceeds the rank over Q, and random points reach the full rank with high probability), so the
answer does not depend on floating-point thresholds.  Expected: H^L, and (H+1)^L with a residual.
"""

from __future__ import annotations

import itertools

import numpy as np

PRIME = 2_147_483_647  # 2^31 - 1: products of two residues fit in int64
# The elimination is cubic in the number of paths: 1,024 paths (H = 4, L = 5) took 19 s on the
# 2-core development machine, 2,187 (H = 3, L = 7) ran past 120 s and 4,096 (H = 8, L = 4) past
# 10 minutes, without a word, under the 5,000 the command used to allow.
MAX_PATHS = 1024


def path_product_matrix(heads: int, layers: int, residual: bool, samples: int, seed: int = 0
                        ) -> np.ndarray:
    """Rows: random targets (values v_{l,h} in Z_p); columns: paths; entries: v_p mod p."""
    rng = np.random.default_rng(seed)
    v = rng.integers(1, PRIME, size=(samples, layers, heads + 1), dtype=np.int64)
    v[:, :, 0] = 1  # choice 0 = skip: the residual branch carries the stream unchanged
    alphabet = range(0 if residual else 1, heads + 1)
    cols = []
    for path in itertools.product(alphabet, repeat=layers):
        col = np.ones(samples, dtype=np.int64)
        for l, c in enumerate(path):
            col = (col * v[:, l, c]) % PRIME
        cols.append(col)
    return np.stack(cols, axis=1)


def rank_mod_p(M: np.ndarray, p: int = PRIME) -> int:
    """Rank of an integer matrix over Z_p by Gaussian elimination (vectorised over rows)."""
    M = M.copy() % p
    rows, cols = M.shape
    rank = 0
    for c in range(cols):
        if rank == rows:
            break
        nz = np.nonzero(M[rank:, c])[0]
        if nz.size == 0:
            continue
        piv = rank + int(nz[0])
        if piv != rank:
            M[[rank, piv]] = M[[piv, rank]]
        inv = pow(int(M[rank, c]), p - 2, p)
        M[rank] = (M[rank] * inv) % p
        below = M[rank + 1:, c].copy()
        M[rank + 1:] = (M[rank + 1:] - (below[:, None] * M[rank][None, :]) % p) % p
        rank += 1
    return rank


def path_span_rank(heads: int, layers: int, residual: bool = False, seed: int = 0) -> int:
    """Dimension of the span of the path products: the least m under attention matching (d = 1)."""
    paths = (heads + int(residual)) ** layers
    return rank_mod_p(path_product_matrix(heads, layers, residual, samples=paths + 8, seed=seed))


def lower_bound_table(heads=(1, 2, 3), layers=(1, 2, 3, 4, 5), residual: bool = False) -> list[dict]:
    return [{"heads": h, "layers": l, "rank": path_span_rank(h, l, residual)}
            for h in heads for l in layers]
