"""The one softmax-attention step shared by targets and universal transformers.

Targets and UTs must compute attention the same way (same masking, same softmax), otherwise the
comparison of attention matrices would measure our own inconsistency instead of the construction.
"""

from __future__ import annotations

from collections.abc import Generator

import torch


def attention_weights(queries: torch.Tensor, keys: torch.Tensor, causal: bool) -> torch.Tensor:
    """Row-wise softmax of ``queries @ keys.T`` (no 1/sqrt(k) scaling: the class has merged W).

    ``queries``, ``keys``: (..., n, k).  Returns (..., n, n).  With ``causal``, position i sees 0..i.
    """
    logits = queries @ keys.transpose(-1, -2)
    if causal:
        n = logits.shape[-1]
        future = torch.ones(n, n, dtype=torch.bool, device=logits.device).triu(1)
        logits = logits.masked_fill(future, float("-inf"))
    return torch.softmax(logits, dim=-1)


def run_steps(steps: Generator[torch.Tensor, None, torch.Tensor], layers: int, heads: int
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, attention (L, H, [batch,] n, n)) of a ``steps`` generator, which yields every
    head's attention matrix in order (layer by layer) and returns the output."""
    attn = []
    while True:
        try:
            attn.append(next(steps))
        except StopIteration as done:
            out = done.value
            break
    return out, torch.stack([torch.stack(attn[l * heads:(l + 1) * heads]) for l in range(layers)])
