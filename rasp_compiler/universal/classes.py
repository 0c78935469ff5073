"""Which targets a construction can simulate, its width formula, and fitting a target to a UT's class.

A class is (L, H, d, residual, causal, values).  A target fits a UT when it is no deeper, no wider and
has no more heads, has value matrices only if the class does, and agrees on residual and causal mask.
Smaller targets are embedded exactly by zero padding (never truncation):
  * narrower (d' < d): pad W, V, U with zeros; the input's missing columns are zero, so only the
    first d' rows of E matter and those are what ``encode`` returns;
  * fewer heads (class with values): extra heads get W = 0, V = 0 and add nothing;
  * fewer layers (class with values and residual): extra layers have V = 0, i.e. are the identity.
"""

from __future__ import annotations

import torch

from rasp_compiler.errors import UserError
from rasp_compiler.universal.arguments import optional_whole, whole
from rasp_compiler.universal.model import UTConfig
from rasp_compiler.universal.target import Target

CONSTRUCTIONS = ("sparse", "looped", "multihead", "paths", "random")


def branches(heads: int, residual: bool) -> int:
    """Choices per layer along a path: one per head, plus 'skip' with a residual."""
    return heads + int(residual)


def width_formula(construction: str, layers: int, heads: int, dim: int, residual: bool = False,
                  values: bool = True, head_dim: int | None = None) -> int:
    """The embedding width m each construction needs (random: the least m for the linear solve)."""
    L, H, d = whole("layers", layers), whole("heads", heads), whole("dim", dim)
    head_dim = optional_whole("head_dim", head_dim)
    if construction in ("sparse", "looped"):
        return (2 * L + 1) * d
    if construction == "multihead":
        return (H * L + 1) * d
    if construction == "paths":
        if residual:  # per layer (H+1)^(l-1) nodes x (1 key + H query blocks), plus (H+1)^L outputs
            return d * (sum((H + 1) ** l for l in range(1, L + 1)) + (H + 1) ** L)
        return d * (1 + 2 * sum(H ** l for l in range(1, L + 1)))
    if construction == "random":
        k = d if head_dim is None else head_dim
        a = branches(H, residual) if values else 1
        return 2 * k * H * sum(a ** l for l in range(L))
    raise UserError(f"unknown construction {construction!r}; choose one of {', '.join(CONSTRUCTIONS)}")


def shown_width(m: int) -> str:
    """A width for a message: exact, or its order of magnitude when it has too many digits."""
    return f"{m:,}" if m < 10**12 else f"about 10^{len(str(m)) - 1}"


def class_problem(construction: str, heads: int, residual: bool, values: bool) -> str | None:
    """Why a construction cannot be built for this class, or None when it can."""
    if construction not in CONSTRUCTIONS:
        return f"unknown construction {construction!r}; choose one of {', '.join(CONSTRUCTIONS)}"
    if construction in ("sparse", "looped"):
        if heads != 1:
            return (f"the {construction} construction has one head, but {heads} heads were asked for "
                    "(use --construction multihead or paths)")
        if residual:
            return (f"the {construction} construction is exact only without a residual "
                    "(use --construction paths with --residual)")
    if construction == "multihead" and values:
        return "the multihead construction has no value matrices (use --construction paths)"
    return None


def fit_target(config: UTConfig, target: Target) -> Target:
    """The target padded to exactly the UT's class, or a UserError that names every mismatch."""
    problems = []
    if target.layers > config.layers:
        problems.append(f"too deep: target has {target.layers} layers, the UT simulates {config.layers}")
    elif target.layers < config.layers and not (config.residual and config.values):
        # name what the UT lacks: "without residual and values" read as if it lacked both
        lacks = " and no ".join(what for what, has in (("residual stream", config.residual),
                                                        ("value matrices", config.values)) if not has)
        problems.append(f"too shallow: target has {target.layers} layers, the UT simulates exactly "
                        f"{config.layers} (the UT has no {lacks}, so a padding layer cannot be the "
                        "identity)")
    if target.heads > config.heads:
        problems.append(f"too many heads: target has {target.heads}, the UT has {config.heads}")
    elif target.heads < config.heads and not config.values:
        problems.append(f"too few heads: target has {target.heads}, the UT has {config.heads} and "
                        "without value matrices an unused head cannot be switched off")
    if target.dim > config.dim:
        problems.append(f"too wide: target has width {target.dim}, the UT simulates width {config.dim}")
    if target.has_values and not config.values:
        problems.append(f"target has value matrices but the {config.construction} construction has none")
    if target.residual != config.residual:
        problems.append(f"residual mismatch: target residual {'on' if target.residual else 'off'}, "
                        f"UT residual {'on' if config.residual else 'off'}")
    if target.causal != config.causal:
        problems.append(f"causal mask mismatch: target {'causal' if target.causal else 'not causal'}, "
                        f"UT {'causal' if config.causal else 'not causal'}")
    if problems:
        on = {True: "on", False: "off"}
        raise UserError("target is outside the UT's class: " + "; ".join(problems),
                        hint=f"UT class: L={config.layers} H={config.heads} d={config.dim} "
                             f"values={'yes' if config.values else 'no'} residual={on[config.residual]} "
                             f"causal={on[config.causal]}; "
                             f"target: {target.describe()}")
    L, H, d = config.layers, config.heads, config.dim
    dt, ht, lt = target.dim, target.heads, target.layers
    if (lt, ht, dt) == (L, H, d):
        return target
    W = torch.zeros(L, H, d, d, dtype=torch.float64)
    W[:lt, :ht, :dt, :dt] = target.W
    V = None
    if config.values:
        V = torch.zeros(L, H, d, d, dtype=torch.float64)
        V[:lt, :ht, :dt, :dt] = target.values_or_identity()
    elif target.V is not None:  # identity values: keep them identity in the padded width
        V = torch.eye(d, dtype=torch.float64).expand(L, H, d, d).clone()
    U = torch.zeros(d, target.unembedding().shape[1], dtype=torch.float64)
    U[:dt] = target.unembedding()
    return Target(W=W, V=V, U=U, residual=target.residual, causal=target.causal)
