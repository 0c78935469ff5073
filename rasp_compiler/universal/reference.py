"""Target transformers evaluated straight from the class definition, many targets in one batch.

An independent reference for checks of the universal transformers: it does not call
``Target.forward`` or the UT, only the recursion X_l = [X_{l-1} +] sum_h softmax_c(X W X^T) X V.
"""

from __future__ import annotations

import torch

from rasp_compiler.universal.target import Target


def batched_reference(targets: list[Target], X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """All targets at once (target i on X[i]), written out from the class definition in the issue:
    X_l = [X_{l-1} +] sum_h softmax_c(X W X^T) X V;  T(X) = X_L U.  Independent of Target.forward."""
    t0 = targets[0]
    W = torch.stack([t.W for t in targets])
    V = torch.stack([t.values_or_identity() for t in targets])
    U = torch.stack([t.unembedding() for t in targets])
    n = X.shape[1]
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    attn = []
    for l in range(t0.layers):
        out = X.clone() if t0.residual else torch.zeros_like(X)
        layer = []
        for h in range(t0.heads):
            logits = X @ W[:, l, h] @ X.transpose(1, 2)
            if t0.causal:
                logits = logits.masked_fill(future, float("-inf"))
            A = torch.softmax(logits, dim=-1)
            layer.append(A)
            out = out + A @ X @ V[:, l, h]
        attn.append(torch.stack(layer))
        X = out
    return X @ U, torch.stack(attn)
