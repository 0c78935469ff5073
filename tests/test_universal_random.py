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


def test_a_random_ut_that_cannot_fit_is_refused_before_it_is_drawn(monkeypatch, capsys):
    """L=2, H=8, d=41 (m = 5,904, under the 6,000 cap) drew 4.5 GB of R_V, scaled a copy of it,
    and ended in "out of memory"; it is refused at once when memory is short."""
    from rasp_compiler.cli import main
    from rasp_compiler.errors import UserError
    from rasp_compiler.universal import random_ut

    need = random_ut.memory_needed(2, 8, 41, 41, 5904, False, True)
    assert need > 2 * 8 * 5904**2 * 8      # R_V alone is 4.5 GB
    monkeypatch.setattr(random_ut, "available_memory", lambda: need - 1)
    monkeypatch.setattr(torch, "randn", lambda *a, **k: pytest.fail("drew weights before refusing"))
    shown = r"L=2, H=8, width m=5,904 needs about 5\.5 GiB \(its dense m x m value matrices are 4\.2 GiB\)"
    with pytest.raises(UserError, match=shown):
        build_universal("random", 2, 8, 41)
    assert main(["universal", "--construction", "random", "--layers", "2", "--heads", "8", "--dim", "41",
                 "--check"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: a random UT with L=2, H=8") and "hint: use fewer --layers" in err
    assert "Traceback" not in err and err.count("error:") == 1
    monkeypatch.undo()
    monkeypatch.setattr(random_ut, "available_memory", lambda: None)  # unknown: built as before
    small = build_universal("random", 1, 1, 2)
    assert small.config.m == width_formula("random", 1, 1, 2, False, True, 2)


def test_a_random_ut_checks_in_float32(capsys):
    """`rasp universal --construction random ... --dtype float32 --check` ended in a traceback:
    torch.linalg.lstsq refused the float32 UT's matrices against the float64 target's.  The
    encoding is solved in float64 and the UT runs in float32."""
    from rasp_compiler.cli import main

    assert main(["universal", "--construction", "random", "--layers", "2", "--dim", "2", "--dtype",
                 "float32", "--check", "--trials", "2", "--lengths", "1,5"]) == 0
    out = capsys.readouterr().out
    assert "linear-solve x2" in out and "ok (tolerance 0.0001)" in out
    ut = build_universal("random", 2, 1, 2, seed=3)
    target = Target.random(2, 1, 2, seed=4)
    E64, U64 = encode(ut, target)
    ut.to(torch.float32)
    E32, U32 = encode(ut, target)
    assert E32.dtype == torch.float64 and ut.r_q.dtype == torch.float32
    assert float((E32 - E64).abs().max()) < 1e-5 * float(E64.abs().max())  # R rounded to float32
