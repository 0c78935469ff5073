"""Numerical check of a UT: random targets, random inputs of several lengths, UT vs target.

Reports the largest |UT(X, E) - T(X)| and the largest difference between matching attention matrices
(the target's layer l head h against the UT's), with the UT's width next to its formula.  The target
always runs in float64; the UT in the dtype asked for, so float32 shows the cost of lower precision.
A UT output or attention matrix that is not finite (NaN or inf) makes the error ``inf`` (NaN would
be dropped by ``max``) and is counted in ``CheckReport.non_finite``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from rasp_compiler.errors import UserError
from rasp_compiler.universal.api import build_universal, encode
from rasp_compiler.universal.classes import width_formula
from rasp_compiler.universal.model import UniversalTransformer
from rasp_compiler.universal.target import Target

DEFAULT_LENGTHS = (1, 2, 3, 5, 8, 13, 21, 32)


@dataclass
class CheckReport:
    construction: str
    layers: int
    heads: int
    dim: int
    m: int
    m_formula: int
    max_abs_error: float
    attention_max_diff: float
    trials: int = 0
    methods: dict = field(default_factory=dict)   # encoding method -> count (random: solve vs fit)
    max_fit_residual: float = 0.0
    non_finite: int = 0   # targets on which the UT's output or attention was NaN or inf

    def as_json(self) -> dict:
        """Exactly the fields the issue specifies for ``--json`` (a non-finite error as null: JSON has
        no NaN or Infinity)."""
        out = {k: getattr(self, k) for k in ("construction", "layers", "heads", "dim", "m", "m_formula",
                                             "max_abs_error", "attention_max_diff")}
        return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in out.items()}


def compare(ut: UniversalTransformer, target: Target, lengths=DEFAULT_LENGTHS, batch: int = 2,
            seed: int = 0, stage: Callable[[str], None] | None = None) -> tuple[float, float, object]:
    """(max output error, max attention difference, encoding) of one target over all lengths;
    ``stage`` hears the name of each step (the encoding's, then each length).

    The target and the UT run in step, one head at a time (``steps``): only one head's n x n
    attention matrices are alive at once (every head's, at --lengths 4096, ran out of memory)."""
    stage = stage or (lambda name: None)
    stage("encoding the target into E")
    enc = encode(ut, target, stage=stage)
    gen = torch.Generator().manual_seed(seed)
    err = att = 0.0
    dtype = ut.r_q.dtype
    for k, n in enumerate(lengths):
        stage(f"length {n} ({k + 1} of {len(lengths)})")
        X = torch.randn(batch, n, target.dim, generator=gen, dtype=torch.float64)
        with torch.no_grad():
            t_steps = target.steps(X)
            u_steps = ut.steps(X.to(dtype), enc.E.to(dtype), enc.U.to(dtype))
            while True:
                try:
                    a_t = next(t_steps)
                except StopIteration as done:
                    y_t = done.value
                    break
                a_u = next(u_steps)
                if not bool(torch.isfinite(a_t).all()):
                    _target_not_finite(n)
                att = max(att, worst_abs(a_u.double() - a_t))
                del a_t, a_u
            y_u = _returned(u_steps)
        if not bool(torch.isfinite(y_t).all()):
            _target_not_finite(n)
        err = max(err, worst_abs(y_u.double() - y_t))
    return err, att, enc


def _returned(steps) -> torch.Tensor:
    """What a ``steps`` generator returns once every head has been yielded."""
    try:
        next(steps)
    except StopIteration as done:
        return done.value
    raise AssertionError("the UT has more heads than its target")


def _target_not_finite(n: int) -> None:
    raise UserError("the target's own output is not finite (NaN or inf) on random inputs of "
                    f"length {n}", hint="check its weights (W, V, U) for NaN, inf or huge values")


def worst_abs(diff: torch.Tensor) -> float:
    """The largest |entry|, or ``inf`` if any entry is NaN or inf (a plain max would drop NaN)."""
    worst = float(diff.abs().max()) if diff.numel() else 0.0
    return worst if math.isfinite(worst) else math.inf


def trial_target(ut: UniversalTransformer, seed: int, trial: int) -> tuple[Target, int]:
    """The random target of ``check_class``'s trial ``trial`` for ``ut``'s class, and the seed of
    its random inputs."""
    cfg = ut.config
    target = Target.random(cfg.layers, cfg.heads, cfg.dim, seed=seed * 1_000_003 + trial,
                           residual=cfg.residual, causal=cfg.causal, values=cfg.values)
    return target, seed * 7919 + trial


def check_class(construction: str, layers: int, heads: int, dim: int, *, residual: bool = False,
                causal: bool = False, trials: int = 10, seed: int = 0, lengths=DEFAULT_LENGTHS,
                dtype: torch.dtype = torch.float64, values: bool | None = None, m: int | None = None,
                head_dim: int | None = None, ut: UniversalTransformer | None = None,
                progress: Callable[[int], None] | None = None) -> CheckReport:
    """Build (or take) the UT for a class and check it on ``trials`` random targets of that class;
    ``progress`` hears 1 after each target."""
    if values is None:
        values = construction != "multihead"
    if ut is None:
        ut = build_universal(construction, layers, heads, dim, residual=residual, causal=causal,
                             values=values, m=m, head_dim=head_dim, seed=seed)
    ut = ut.to(dtype)
    cfg = ut.config
    report = CheckReport(construction, layers, heads, dim, cfg.m,
                         width_formula(construction, layers, heads, dim, residual, cfg.values, cfg.head_dim),
                         0.0, 0.0, trials)
    for trial in range(trials):
        target, inputs_seed = trial_target(ut, seed, trial)
        err, att, enc = compare(ut, target, lengths, seed=inputs_seed)
        report.non_finite += int(not (math.isfinite(err) and math.isfinite(att)))
        report.max_abs_error = max(report.max_abs_error, err)
        report.attention_max_diff = max(report.attention_max_diff, att)
        report.methods[enc.method] = report.methods.get(enc.method, 0) + 1
        report.max_fit_residual = max(report.max_fit_residual, enc.residual)
        if progress is not None:
            progress(1)
    return report
