"""Exactness of the four {0,1} constructions: UT(X, E) = T(X) and every attention matrix matches.

The default run samples the issue's grid (L in 1..4, H in 1..3, d in {1,2,4,8}, causal on/off,
residual on/off where the construction allows it); ``-m slow`` runs every cell on 50 targets at every
length 1..32.
"""

from __future__ import annotations

import pytest
import torch
from universal_helpers import (
    grid,
    max_errors,
    single_thread,  # noqa: F401  (autouse fixture)
)

from rasp_compiler.universal import Target, build_universal, encode

TOL = 1e-10
CONSTRUCTIONS = ("sparse", "looped", "multihead", "paths")


@pytest.mark.parametrize("construction", CONSTRUCTIONS)
def test_sampled_grid_is_exact(construction):
    for L, H, d, causal, residual in grid(construction, sample=10, seed=CONSTRUCTIONS.index(construction)):
        err, att, methods = max_errors(construction, L, H, d, causal, residual, trials=3,
                                       lengths=(1, 2, 5, 16, 32))
        assert methods == {"exact"}
        assert err <= TOL, (construction, L, H, d, causal, residual, err)
        assert att <= TOL, (construction, L, H, d, causal, residual, att)


@pytest.mark.slow
@pytest.mark.parametrize("construction", CONSTRUCTIONS)
def test_full_grid_fifty_targets_every_length(construction):
    worst = 0.0
    for L, H, d, causal, residual in grid(construction, sample=None):
        err, att, _ = max_errors(construction, L, H, d, causal, residual, trials=50,
                                 lengths=range(1, 33))
        assert err <= TOL and att <= TOL, (construction, L, H, d, causal, residual, err, att)
        worst = max(worst, err)
    print(f"{construction}: worst max|UT-T| = {worst:.2e}")


def test_long_sequence_and_unbatched_input():
    ut = build_universal("paths", 2, 2, 3, residual=True, causal=True)
    target = Target.random(2, 2, 3, seed=5, residual=True, causal=True)
    E, U = encode(ut, target)
    X = torch.randn(300, 3, dtype=torch.float64)
    (y_t, _), (y_u, a_u) = target(X), ut(X, E, U)
    assert y_u.shape == (300, 3) and a_u.shape == (2, 2, 300, 300)
    assert float((y_u - y_t).abs().max()) <= TOL


def test_error_measure_can_fail():
    """The check is not vacuous: a perturbed embedding gives a visible error."""
    ut = build_universal("sparse", 2, 1, 4)
    target = Target.random(2, 1, 4, seed=1)
    E, U = encode(ut, target)
    X = torch.randn(2, 7, 4, dtype=torch.float64)
    E_bad = E.clone()
    E_bad[0, 5] += 1e-3
    assert float((ut(X, E_bad, U)[0] - target(X)[0]).abs().max()) > 1e-7


def test_hand_worked_one_layer_sparse():
    """d = 1, L = 1: E = [v u, w, 1] and the fixed readout U = Sel(0); check against the formula
    softmax(x w x^T) x v u by hand."""
    ut = build_universal("sparse", 1, 1, 1)
    W, V, U_t = torch.tensor([[[[2.0]]]]), torch.tensor([[[[0.5]]]]), torch.tensor([[3.0]])
    target = Target(W=W, V=V, U=U_t)
    E, U = encode(ut, target)
    assert E.tolist() == [[1.5, 2.0, 1.0]] and U.tolist() == [[1.0], [0.0], [0.0]]
    x = torch.tensor([[1.0], [-1.0]], dtype=torch.float64)
    logits = 2.0 * x @ x.T
    expected = torch.softmax(logits, dim=-1) @ x * 0.5 * 3.0
    assert torch.allclose(ut(x, E, U)[0], expected, atol=1e-15, rtol=0)


def test_float32_close():
    ut = build_universal("multihead", 3, 2, 4, residual=True).float()
    target = Target.random(3, 2, 4, seed=2, residual=True, values=False)
    E, U = encode(ut, target)
    X = torch.randn(2, 9, 4, dtype=torch.float64)
    y_u = ut(X.float(), E.float(), U.float())[0]
    assert y_u.dtype == torch.float32
    assert float((y_u.double() - target(X)[0]).abs().max()) < 1e-3


@pytest.mark.parametrize("construction, heads, residual", [
    ("sparse", 1, False), ("looped", 1, False), ("paths", 2, False), ("paths", 2, True)])
def test_the_readout_is_fixed_as_in_the_paper(construction, heads, residual):
    """Only E changes with the target: the target's readout U_T is folded into E's output blocks,
    so two targets of the class (output width at most d) share one U, which selects columns."""
    ut = build_universal(construction, 2, heads, 3, residual=residual)
    X = torch.randn(2, 5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    readouts = []
    for seed, d_out in ((1, 2), (2, 2)):
        target = Target.random(2, heads, 3, seed=seed, residual=residual, d_out=d_out)
        E, U = encode(ut, target)
        assert float((ut(X, E, U)[0] - target(X)[0]).abs().max()) < 1e-12
        readouts.append(U)
    assert torch.equal(readouts[0], readouts[1])
    assert set(readouts[0].unique().tolist()) <= {0.0, 1.0}
    # wider than d, the readout cannot fold into a d-wide block: U then depends on the target
    wide = Target.random(2, heads, 3, seed=3, residual=residual, d_out=4)
    E, U = encode(ut, wide)
    assert float((ut(X, E, U)[0] - wide(X)[0]).abs().max()) < 1e-12
    assert not set(U.unique().tolist()) <= {0.0, 1.0}


@pytest.mark.parametrize("construction", ["multihead", "paths"])
def test_check_holds_one_heads_attention_at_a_time(construction, monkeypatch):
    """compare runs the target and the UT in step, one head at a time: holding every head's
    n x n matrices (L x H of each model, then stacked copies) took 6.6 GB at L=3 H=2 and
    --lengths 4096, and ran out of memory a few heads more.  Same results as forward()."""
    import gc
    import weakref

    from rasp_compiler.universal import check, model, target

    ut = build_universal(construction, 3, 2, 2)
    tgt = Target.random(3, 2, 2, seed=4, values=ut.config.values)
    live: list[weakref.ref] = []  # every attention matrix made, and every stack of them
    most = [0]
    real, real_stack = model.attention_weights, torch.stack

    def track(out):
        live.append(weakref.ref(out))
        return out

    def counting(*args, **kwargs):
        gc.collect()
        alive = [r() for r in live]
        most[0] = max(most[0], sum(t.numel() for t in alive if t is not None))
        return track(real(*args, **kwargs))

    monkeypatch.setattr(model, "attention_weights", counting)
    monkeypatch.setattr(target, "attention_weights", counting)
    monkeypatch.setattr(torch, "stack", lambda *a, **k: track(real_stack(*a, **k)))
    err, att, _ = check.compare(ut, tgt, lengths=(9,), seed=1)
    monkeypatch.undo()
    # the previous head of each model (2 inputs x 9 x 9 numbers each), not all six of each
    assert most[0] <= 2 * 2 * 9 * 9, most[0]
    err2, att2, _ = check.compare(ut, tgt, lengths=(5, 9), seed=1)
    # the same figures as the whole forward passes give
    gen = torch.Generator().manual_seed(1)
    enc = encode(ut, tgt)
    want_err = want_att = 0.0
    for n in (5, 9):
        X = torch.randn(2, n, 2, generator=gen, dtype=torch.float64)
        y_t, a_t = tgt(X)
        y_u, a_u = ut(X, enc.E, enc.U)
        assert a_t.shape == a_u.shape == (3, 2, 2, n, n)
        want_err = max(want_err, float((y_u - y_t).abs().max()))
        want_att = max(want_att, float((a_u - a_t).abs().max()))
    assert (err2, att2) == (want_err, want_att)
    assert err <= TOL
