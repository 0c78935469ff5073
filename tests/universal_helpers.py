"""Shared helpers of the universal-transformer tests (not a test module)."""

from __future__ import annotations

import itertools
import random

import pytest
import torch

from rasp_compiler.universal import Target, build_universal, encode
from rasp_compiler.universal.reference import batched_reference

GRID = [(L, H, d, causal) for L in (1, 2, 3, 4) for H in (1, 2, 3) for d in (1, 2, 4, 8)
        for causal in (False, True)]


def classes_for(construction: str):
    """(residual options, heads options) the construction supports."""
    if construction in ("sparse", "looped"):
        return (False,), (1,)
    return (False, True), (1, 2, 3)


def grid(construction: str, sample: int | None, seed: int = 0):
    """The issue's grid for a construction (L, H, d, causal, residual), optionally sampled."""
    residuals, heads = classes_for(construction)
    cells = [(L, H, d, c, r) for (L, H, d, c), r in itertools.product(GRID, residuals) if H in heads]
    if sample is not None and sample < len(cells):
        rng = random.Random(seed)
        # always include the corners: deepest/widest and smallest cells are where bugs show
        corners = [cells[0], cells[-1]]
        cells = corners + rng.sample(cells[1:-1], sample - 2)
    return cells


reference = batched_reference


def max_errors(construction: str, L: int, H: int, d: int, causal: bool, residual: bool, trials: int,
               lengths, seed: int = 0, **kw) -> tuple[float, float, set]:
    """Largest |UT - T| and attention difference over ``trials`` random targets and ``lengths``
    (one random input per target and length; all targets run as one batch)."""
    values = construction != "multihead" and kw.pop("values", True)
    ut = build_universal(construction, L, H, d, residual=residual, causal=causal, values=values, seed=seed,
                         **kw)
    targets = [Target.random(L, H, d, seed=1000 * seed + t, residual=residual, causal=causal, values=values)
               for t in range(trials)]
    encs = [encode(ut, t) for t in targets]
    E, U = torch.stack([e.E for e in encs]), torch.stack([e.U for e in encs])
    gen = torch.Generator().manual_seed(seed)
    err = att = 0.0
    for n in lengths:
        X = torch.randn(trials, n, d, generator=gen, dtype=torch.float64)
        y_t, a_t = reference(targets, X)
        y_u, a_u = ut(X, E, U)
        assert y_u.shape == y_t.shape and a_u.shape == a_t.shape
        err = max(err, float((y_u - y_t).abs().max()))
        att = max(att, float((a_u - a_t).abs().max()))
    # and the reference agrees with Target.forward (which the CLI's check uses)
    assert float((targets[-1](X[-1])[0] - y_t[-1]).abs().max()) <= 1e-12
    return err, att, {e.method for e in encs}


@pytest.fixture(autouse=True)
def single_thread():
    """These tests run many tiny matmuls; on a shared machine torch's thread pool only adds contention
    (measured: 27 s with the default pool, 3 s with one thread).  Restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
