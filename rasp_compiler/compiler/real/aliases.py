"""Positional features that cost no residual column: integer combinations of others.

Every embedded positional feature is a vector over the n positions, so at most n of them (with the
constant ``one``) are independent; a program whose heads embed many one-hot and digit columns
(the published matmul listings: 28 columns over 14 positions) holds many that are sums of others.
Such a feature is read only through linear maps (W_Q, W_K, W_V, W_in, W_gate, W_U), so each use
can read the combination of the columns it is a sum of instead of a column of its own.

Exactness: an alias is taken only where it computes the same numbers bit for bit.  Its values
and its basis columns' values are integers, the coefficients are integers, and every weight it is
read with (``uses``), times each coefficient times each basis value, is an integer; so every
product and partial sum of a use is an integer below 2^22 (float32; 2^50 in float64), computed
exactly in any order, as the feature's own column was.  BOS holds 0 in every positional column
and in ``one``, so the combination is 0 there too.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rasp_compiler.compiler.real.specs import Feat, HeadSpec, MLPSpec

EXACT_INT = {"float32": 2.0 ** 22, "float64": 2.0 ** 50}


def feature_uses(heads: list[HeadSpec], mlps: list[MLPSpec], d_head_max: int,
                 positional: set[str]) -> dict[str, list[float]]:
    """Every weight a feature is multiplied by where it is read (the largest d_head's sqrt folded
    into query weights, as assembly does).  A head's column reads one feature (or only positional
    ones: the BOS column); an MLP unit's input may add real-valued features to it, whose rounding
    would then depend on the order of the terms: such a use is NaN, which no alias passes."""
    uses: dict[str, list[float]] = {}
    root = math.sqrt(d_head_max)
    for h in heads:
        for qf, kf, w in h.blocks:
            uses.setdefault(qf, []).append(h.scale * float(w[0, 0]) * root)
            uses.setdefault(kf, []).append(1.0)
        for qf, kf in h.data:
            uses.setdefault(qf, []).append(root)
            uses.setdefault(kf, []).append(1.0)
        for f, w in h.bos_query:  # read x1, or x(-1/2) where BOS has one column (assembly)
            uses.setdefault(f, []).extend([h.scale * w * root, -0.5 * h.scale * w * root])
        for v in h.values:
            uses.setdefault(v, []).append(1.0)
    for m in mlps:
        for u in m.units:
            for form in (u.w_in, u.w_gate):
                mixed = any(f != "one" and f not in positional for f in form)
                for fid, w in form.items():
                    uses.setdefault(fid, []).append(math.nan if mixed else w)
    return uses


def choose_aliases(feats: list[Feat], uses: dict[str, list[float]], n: int,
                   dtype: str) -> dict[str, dict[str, int]]:
    """{feature: {basis feature or "one": coefficient}} for the positional features (in ``feats``
    order) that are exact integer combinations of earlier ones kept as columns."""
    limit = EXACT_INT[dtype]
    basis: list[str] = ["one"]
    cols: list[np.ndarray] = [np.ones(n)]
    out: dict[str, dict[str, int]] = {}
    for f in feats:
        if f.kind != "positional" or f.pos_values is None or f.size != 1 or f.id not in uses:
            continue
        v = np.asarray(f.pos_values[:, 0], dtype=np.float64)
        if len(v) != n or not np.all(np.isfinite(v)) or not np.all(v == np.round(v)):
            continue
        combo = _integer_combination(np.stack(cols, axis=1), v)
        if combo is not None and _exact(combo, cols, uses[f.id], limit):
            out[f.id] = {basis[i]: int(c) for i, c in enumerate(combo) if c != 0}
            continue
        # a column of its own; it joins the basis only if independent of it, so that a
        # combination stays unique (one with non-integer coefficients keeps its column)
        if np.linalg.matrix_rank(np.stack(cols + [v], axis=1)) == len(cols) + 1:
            basis.append(f.id)
            cols.append(v)
    return out


def _integer_combination(b: np.ndarray, v: np.ndarray) -> np.ndarray | None:
    """Integer c with b @ c == v exactly (b's columns are independent, so c is unique), or None."""
    c, *_ = np.linalg.lstsq(b, v, rcond=None)
    c = np.round(c)
    if np.any(np.abs(c) > 2 ** 20):
        return None
    bi, vi, ci = b.astype(np.int64), v.astype(np.int64), c.astype(np.int64)
    return c if np.array_equal(bi @ ci, vi) else None


def _exact(combo: np.ndarray, cols: list[np.ndarray], weights: list[float], limit: float) -> bool:
    """Whether every use reads the combination with integer products and sums below ``limit``."""
    mags = [float(np.max(np.abs(c))) if len(c) else 0.0 for c, k in zip(cols, combo, strict=False) if k]
    coefs = [float(k) for k in combo if k]
    for w in weights:
        total = 0.0
        for k, mag in zip(coefs, mags, strict=False):
            if not math.isfinite(w) or not float(w * k).is_integer():
                return False
            total += abs(w * k) * mag
        if total > limit:
            return False
    return True


def columns_of(fid: str, aliases: dict[str, dict[str, int]], dim: Any) -> list[tuple[int, float]]:
    """The residual columns a feature is read from, each with its coefficient."""
    if fid in aliases:
        return [(dim(b), float(c)) for b, c in aliases[fid].items()]
    return [(dim(fid), 1.0)]
