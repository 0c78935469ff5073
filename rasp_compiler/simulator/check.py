"""Check U against NumPy on random attention layers; read every intermediate from its residual."""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable

import numpy as np

from rasp_compiler.errors import UserError
from rasp_compiler.simulator.build import Simulator
from rasp_compiler.simulator.reference import attention_layer

STAGES = ("XT", "XA", "XAXT", "softmax", "XV", "output")


def random_layers(layout: Any, trials: int, seed: int, scale: float = 1.0,
                  bounds: tuple[float, float] | None = None) -> tuple[np.ndarray, ...]:
    """A, V [trials, H, d, d] and X [trials, n, d], entries uniform in ``bounds`` (default
    [-scale, scale]); (-1, 1) draws the very numbers scale 1 does."""
    lo, hi = bounds if bounds is not None else (-scale, scale)
    rng = np.random.default_rng(seed)
    H, d, n = layout.heads, layout.d, layout.n
    A = rng.uniform(lo, hi, (trials, H, d, d))
    V = rng.uniform(lo, hi, (trials, H, d, d))
    X = rng.uniform(lo, hi, (trials, n, d))
    return A, V, X


def _column(sim: Simulator, feature: str) -> int:
    for sub in sim.model.config["residual"]:
        if sub["feature"] == feature:
            return int(sub["start"])
    raise KeyError(feature)


def read_intermediates(sim: Simulator, residual: np.ndarray, patterns: list, scores: np.ndarray) -> dict:
    """Xᵀ, XA, XAXᵀ, softmax, XV of one input, read from U's final residual [1+L, d_model] and the
    softmax head's attention pattern and scores (BOS at row/column 0)."""
    lay = sim.layout
    n, d, H, W = lay.n, lay.d, lay.heads, lay.output_width
    r = residual[1:]
    rows = np.arange(n) * W
    xt = np.stack([r[rows, _column(sim, f"x_{m}")] for m in range(d)])  # [d, n]
    xa = np.stack([np.stack([r[rows + h * d, _column(sim, f"xa_{k}")] for k in range(d)], axis=1)
                   for h in range(H)])  # [H, n, d]
    xv = np.stack([np.stack([r[rows + h * d + c, _column(sim, "xv")] for c in range(d)], axis=1)
                   for h in range(H)])
    q = np.array([[(1 + i * W + h * d) for i in range(n)] for h in range(H)])  # [H, n] query rows
    att = patterns[-1][0, 0].double().numpy()
    soft = np.stack([att[np.ix_(q[h], q[h])] for h in range(H)])
    sc = np.stack([scores[np.ix_(q[h], q[h])] for h in range(H)])
    return {"XT": xt, "XA": xa, "XAXT": sc, "softmax": soft, "XV": xv}


def head_scores(sim: Simulator, residual_before: Any) -> np.ndarray:
    """The softmax head's pre-softmax scores [1+L, 1+L] as U computes them (q·k / sqrt(d_head))."""
    import torch

    cfg = sim.model.config
    li = cfg["n_layers"] - 1
    wq = sim.model.tensors[f"layers.{li}.attn.W_Q"][0]
    wk = sim.model.tensors[f"layers.{li}.attn.W_K"][0]
    with torch.no_grad():
        qv = residual_before @ wq
        kv = residual_before @ wk
        s = qv @ kv.T / math.sqrt(cfg["layers"][li]["d_head"])
    return s.double().numpy()


def check_simulator(sim: Simulator, trials: int = 100, seed: int = 0, trace: bool = False,
                    batch: int | None = None, scale: float = 1.0,
                    bounds: tuple[float, float] | None = None,
                    progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Max abs / rel error of U against NumPy over ``trials`` random layers (and per stage), entries
    uniform in ``bounds`` (default [-scale, scale]); ``progress`` hears "trial k of N" per batch.

    A non-finite output (NaN or inf anywhere in U's output sequence) makes that trial's error
    ``inf`` and is counted in ``non_finite_trials``: it is never dropped by ``max``."""
    lay = sim.layout
    for name, value, least in (("trials", trials, 1), ("seed", seed, 0)):
        # trials="3" was a TypeError from range(), trials=0 a check of nothing that passed
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
            raise UserError(f"check_simulator's {name} must be a whole number of at least {least}, "
                            f"got {value!r}")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, numbers.Integral)
                              or batch < 1):
        raise UserError(f"check_simulator's batch must be a whole number of at least 1, got {batch!r}")
    if batch is None:  # attention patterns are [batch, heads, L, L]: keep a batch near 100 MB
        batch = max(1, min(64, 600_000 // (lay.length + 1) ** 2))
    A, V, X = random_layers(lay, trials, seed, scale, bounds)
    max_abs = max_rel = 0.0
    non_finite = 0
    stages = {s: 0.0 for s in STAGES}
    for start in range(0, trials, batch):
        sl = slice(start, min(trials, start + batch))
        if progress is not None:  # a 100-trial check at n = 16 runs for a minute
            progress(f"trial {sl.start + 1} of {trials}")
        seqs = np.stack([lay.build(a, v, x) for a, v, x in zip(A[sl], V[sl], X[sl], strict=False)])
        if trace:
            out, residuals, patterns = sim.trace_sequences(seqs)
        else:
            out = sim.run_sequences(seqs)
        for b, t in enumerate(range(sl.start, sl.stop)):
            ref = attention_layer(A[t], V[t], X[t], sim.causal)
            got = lay.read_output(out[b])
            if not np.all(np.isfinite(out[b])):  # NaN compares false: max() would drop it
                non_finite += 1
                err = math.inf
            else:
                err = float(np.max(np.abs(got - ref["output"])))
            max_abs = max(max_abs, err)
            scale = float(np.max(np.abs(ref["output"])))  # no floor: one of 1e-300 divided a
            # subnormal T's error by 1e-300, not by |T|, and passed a 5e-4 error as 4.9e-24
            max_rel = max(max_rel, err / scale if scale > 0 else (0.0 if err == 0 else math.inf))
            if np.any(out[b, lay.n * lay.output_width:] != 0):
                max_abs = max(max_abs, float(np.max(np.abs(out[b, lay.n * lay.output_width:]))))
            if trace:
                scores = head_scores(sim, residuals[-3][b])
                inter = read_intermediates(sim, residuals[-1][b].double().numpy(),
                                           [p[b:b + 1] for p in patterns], scores)
                # stages against NumPy on the very numbers U received (rounded to its dtype), so
                # that Xᵀ shows whether the transpose is bit-exact; the headline error above is
                # against the unrounded float64 inputs
                rdt = np.float32 if sim.dtype == "float32" else np.float64
                exact = attention_layer(*(np.asarray(m_, dtype=rdt).astype(np.float64)
                                          for m_ in (A[t], V[t], X[t])), sim.causal)
                for key, val in inter.items():
                    diff = np.abs(val - exact[key])
                    if key == "XAXT" and sim.causal:  # masked scores (j > i) are not logits
                        diff = np.where(np.tril(np.ones(diff.shape[-2:], dtype=bool)), diff, 0.0)
                    worst = float(np.max(diff))
                    stages[key] = max(stages[key], worst if math.isfinite(worst) else math.inf)
                stages["output"] = max(stages["output"], err)
    report: dict[str, Any] = {"n": lay.n, "d": lay.d, "heads": lay.heads, "causal": sim.causal,
                              "dtype": sim.dtype, "trials": trials, "seed": seed,
                              "entries": list(bounds) if bounds is not None else [-scale, scale],
                              "max_abs_error": max_abs, "max_rel_error": max_rel,
                              "non_finite_trials": non_finite, **sim.size()}
    if trace:
        report["stages"] = stages
    return report
