"""The attention layer U simulates, in NumPy (float64, stable softmax), with its intermediates."""

from __future__ import annotations

import numpy as np


def softmax_rows(s: np.ndarray, causal: bool = False) -> np.ndarray:
    """Row-wise softmax with the row maximum subtracted (no overflow); causal masks j > i."""
    s = np.array(s, dtype=np.float64)
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((s.shape[-2], n), dtype=bool)), s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention_layer(A: np.ndarray, V: np.ndarray, X: np.ndarray,
                    causal: bool = False) -> dict[str, np.ndarray]:
    """T(X) = concat_h softmax_row(X A_h X^T) X V_h, and every intermediate (per head, stacked)."""
    X = np.asarray(X, dtype=np.float64)
    A = np.asarray(A, dtype=np.float64)
    V = np.asarray(V, dtype=np.float64)
    xt = X.T
    xa = np.einsum("id,hde->hie", X, A)
    scores = np.einsum("hie,je->hij", xa, X)
    probs = softmax_rows(scores, causal)
    xv = np.einsum("id,hde->hie", X, V)
    heads = np.einsum("hij,hje->hie", probs, xv)
    out = np.concatenate(list(heads), axis=1)
    return {"XT": xt, "XA": xa, "XAXT": scores, "softmax": probs, "XV": xv, "output": out}
