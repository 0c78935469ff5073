"""Widths equal the formulas; the lower-bound rank reproduces H^L ((H+1)^L with a residual)."""

from __future__ import annotations

import numpy as np
import pytest
from universal_helpers import single_thread  # noqa: F401  (autouse fixture)

from rasp_compiler.universal import Target, build_universal, encode, width_formula
from rasp_compiler.universal.lower_bound import path_product_matrix, path_span_rank, rank_mod_p


def closed_form(construction, L, H, d, residual):
    """Independent closed forms (geometric sums written out), not the library's code."""
    if construction in ("sparse", "looped"):
        return (2 * L + 1) * d
    if construction == "multihead":
        return (H * L + 1) * d
    if construction == "paths" and not residual:
        return d * (2 * L + 1) if H == 1 else d * (2 * (H ** (L + 1) - H) // (H - 1) + 1)
    a = H + 1  # paths with residual: sum_{l=1..L} a^l + a^L
    return d * ((a ** (L + 1) - a) // (a - 1) + a ** L)


@pytest.mark.parametrize("construction", ["sparse", "looped", "multihead", "paths"])
def test_measured_width_equals_formula(construction):
    for L in (1, 2, 3, 4):
        for H in ((1,) if construction in ("sparse", "looped") else (1, 2, 3)):
            for d in (1, 2, 4, 8):
                for residual in ((False,) if construction in ("sparse", "looped") else (False, True)):
                    if construction == "paths" and d == 8 and L == 4 and H == 3:
                        continue  # covered by the smaller d: width is linear in d
                    ut = build_universal(construction, L, H, d, residual=residual)
                    values = construction != "multihead"
                    E, _ = encode(ut, Target.random(L, H, d, residual=residual, values=values, seed=0))
                    m = closed_form(construction, L, H, d, residual)
                    assert ut.config.m == E.shape[1] == m == width_formula(construction, L, H, d, residual,
                                                                           values)


def test_random_width():
    for L, H, d, k in ((1, 1, 2, 2), (4, 1, 8, 8), (3, 2, 2, 3)):
        assert build_universal("random", L, H, d, head_dim=k).config.m == 2 * k * H * sum(H ** l
                                                                                          for l in range(L))
        assert build_universal("random", L, H, d, head_dim=k, values=False).config.m == 2 * k * H * L


def test_paths_with_one_head_is_as_wide_as_sparse():
    assert width_formula("paths", 4, 1, 3) == width_formula("sparse", 4, 1, 3)


@pytest.mark.parametrize("H", [2, 3])
@pytest.mark.parametrize("L", [1, 2, 3, 4])
def test_lower_bound_reproduces_h_to_the_l(H, L):
    assert path_span_rank(H, L) == H ** L
    assert path_span_rank(H, L, residual=True) == (H + 1) ** L


def test_lower_bound_one_head():
    assert [path_span_rank(1, L) for L in (1, 2, 3)] == [1, 1, 1]
    assert [path_span_rank(1, L, residual=True) for L in (1, 2, 3)] == [2, 4, 8]


def test_rank_mod_p_against_numpy_on_small_integer_matrices():
    rng = np.random.default_rng(0)
    for _ in range(20):
        r, c, k = rng.integers(1, 8, size=3)
        M = rng.integers(-3, 4, size=(r, k)) @ rng.integers(-3, 4, size=(k, c))
        assert rank_mod_p(M) == np.linalg.matrix_rank(M.astype(float))


def test_rank_detects_dependent_paths():
    """Tie every head's value together: the span collapses to L+1 monomials of one variable per layer
    ... here simply check that duplicating columns does not raise the rank."""
    M = path_product_matrix(2, 2, False, samples=10)
    assert rank_mod_p(np.concatenate([M, M[:, :1]], axis=1)) == 4


def test_lower_bound_is_below_every_construction_width():
    for H in (1, 2, 3):
        for L in (1, 2, 3, 4):
            assert path_span_rank(H, L) <= width_formula("paths", L, H, 1)
            assert path_span_rank(H, L, residual=True) <= width_formula("paths", L, H, 1, residual=True)
