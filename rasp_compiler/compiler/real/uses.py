"""Where each residual feature is read, and with which weights (``feature_uses``): assembly gives
no column to a positional feature nothing reads (a narrow alternative of a head not taken).

With integer combinations of positional columns (an experiment, reverted: see the git history
of ``real/aliases.py``), the weights would tell which combinations compute exactly.
"""

from __future__ import annotations

import math

from rasp_compiler.compiler.real.specs import HeadSpec, MLPSpec


def feature_uses(heads: list[HeadSpec], mlps: list[MLPSpec], d_head_max: int,
                 positional: set[str]) -> dict[str, list[float]]:
    """Every weight a feature is multiplied by where it is read (the largest d_head's sqrt folded
    into query weights, as assembly does).  A head's column reads one feature (or only positional
    ones: the BOS column); an MLP unit's input may add real-valued features to it, whose rounding
    would then depend on the order of the terms: such a use is NaN."""
    uses: dict[str, list[float]] = {}
    root = math.sqrt(d_head_max)
    for h in heads:
        for qf, kf, w in h.blocks:
            uses.setdefault(qf, []).append(h.scale * float(w[0, 0]) * root)
            uses.setdefault(kf, []).append(1.0)
        for qf, kf in h.data:
            uses.setdefault(qf, []).append(root)
            uses.setdefault(kf, []).append(1.0)
        for f, w in h.bos_query:  # read x1, or x(-1/2) where BOS has one column (assembly)
            uses.setdefault(f, []).extend([h.scale * w * root, -0.5 * h.scale * w * root])
        for v in h.values:
            uses.setdefault(v, []).append(1.0)
    for m in mlps:
        for u in m.units:
            for form in (u.w_in, u.w_gate):
                mixed = any(f != "one" and f not in positional for f in form)
                for fid, w in form.items():
                    uses.setdefault(fid, []).append(math.nan if mixed else w)
    return uses
