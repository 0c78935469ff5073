"""Random Gaussian UTs: E by two linear solves is exact to 1e-8 in float64; otherwise a reported fit."""

from __future__ import annotations

import pytest
import torch
from universal_helpers import (
    GRID,
    max_errors,
    single_thread,  # noqa: F401  (autouse fixture)
)

from rasp_compiler.universal import Target, build_universal, encode, width_formula

TOL = 1e-8
MAX_M = 700  # dense m x m value matrices: keep the default run small


def random_cells(sample_every: int):
    """Grid cells of the random UT: one head with values (the paper's case), H heads without values
    (residual on and off), and H heads with values where the width stays moderate."""
    cells = []
    for i, (L, H, d, causal) in enumerate(GRID):
        for residual, values in ((False, True), (True, False), (False, False), (True, True)):
            m = width_formula("random", L, H, d, residual, values)
            if m <= MAX_M and (i + residual + 2 * values) % sample_every == 0:
                cells.append((L, H, d, causal, residual, values))
    return cells


def test_sampled_grid_linear_solve_is_exact():
    cells = random_cells(sample_every=11)
    assert len(cells) >= 10
    for L, H, d, causal, residual, values in cells:
        err, att, methods = max_errors("random", L, H, d, causal, residual, trials=2,
                                       lengths=(1, 3, 17, 32), values=values, seed=L + H + d)
        assert methods == {"linear-solve"}
        assert err <= TOL and att <= TOL, (L, H, d, causal, residual, values, err, att)


@pytest.mark.slow
def test_full_grid_fifty_targets():
    for L, H, d, causal, residual, values in random_cells(sample_every=1):
        err, att, methods = max_errors("random", L, H, d, causal, residual, trials=50,
                                       lengths=range(1, 33), values=values)
        assert methods == {"linear-solve"}
        assert err <= TOL and att <= TOL, (L, H, d, causal, residual, values, err, att)


def test_width_formula_is_the_solve_threshold():
    """At the formula width the key/query system is square; one column fewer and no exact solve."""
    L, H, d = 2, 1, 3
    m = width_formula("random", L, H, d)
    assert m == 2 * L * d
    ut = build_universal("random", L, H, d, seed=3)
    assert ut.config.m == m
    narrow = build_universal("random", L, H, d, m=m - 1, seed=3)
    enc = encode(narrow, Target.random(L, H, d, seed=4))
    assert enc.method == "gradient-fit"


def test_gradient_fit_reports_its_error():
    """Wide heads (k = m): no linear solve; the fit runs and its residual is reported honestly."""
    L, H, d = 1, 1, 2
    ut = build_universal("random", L, H, d, m=6, head_dim=6, seed=1)
    target = Target.random(L, H, d, seed=2)
    enc = encode(ut, target)
    assert enc.method == "gradient-fit"
    X = torch.randn(2, 6, d, dtype=torch.float64)
    err = float((ut(X, enc.E, enc.U)[0] - target(X)[0]).abs().max())
    assert enc.residual >= 0.0 and err < 1e-3  # one layer with wide heads: the fit does converge


def test_same_seed_same_backbone_bytes():
    a = build_universal("random", 2, 2, 3, residual=True, seed=9)
    b = build_universal("random", 2, 2, 3, residual=True, seed=9)
    c = build_universal("random", 2, 2, 3, residual=True, seed=10)
    for name, t in a.backbone_tensors().items():
        assert t.numpy().tobytes() == b.backbone_tensors()[name].numpy().tobytes()
    assert not torch.equal(a.r_q, c.r_q)
