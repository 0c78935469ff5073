"""One entry point per job: build a UT for a class, get a fixed backbone, encode a target."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from rasp_compiler.errors import UserError
from rasp_compiler.universal import arguments
from rasp_compiler.universal.classes import CONSTRUCTIONS, class_problem
from rasp_compiler.universal.constructions import build_construction, encode_construction
from rasp_compiler.universal.model import UniversalTransformer
from rasp_compiler.universal.random_ut import build_random, encode_random
from rasp_compiler.universal.target import Target


def build_universal(construction: str, layers: int, heads: int, dim: int, *, residual: bool = False,
                    causal: bool = False, values: bool = True, m: int | None = None,
                    head_dim: int | None = None, seed: int = 0) -> UniversalTransformer:
    """The UT that simulates every target of class (L, H, d, residual, causal[, values]).

    ``values``, ``m``, ``head_dim`` and ``seed`` only matter for ``random`` (the {0,1} constructions
    fix them: sparse/looped/paths have values, multihead has none).
    """
    if not isinstance(construction, str) or construction not in CONSTRUCTIONS:
        raise UserError(f"unknown construction {construction!r}; choose one of {', '.join(CONSTRUCTIONS)}")
    layers, heads, dim = (arguments.whole(n, v) for n, v in
                          (("layers", layers), ("heads", heads), ("dim", dim)))
    residual, causal, values = (arguments.flag(n, v) for n, v in
                                (("residual", residual), ("causal", causal), ("values", values)))
    m, head_dim = arguments.optional_whole("m", m), arguments.optional_whole("head_dim", head_dim)
    seed = arguments.seed(seed)
    if construction == "random":
        return build_random(layers, heads, dim, m=m, head_dim=head_dim, residual=residual, causal=causal,
                            values=values, seed=seed)
    if m is not None or head_dim is not None:
        raise UserError(f"the {construction} construction fixes its width; --width/--head-dim are for random")
    return build_construction(construction, layers, heads, dim, residual, causal)


def fixed_backbone(construction: str, layers: int, heads: int, dim: int, *, residual: bool = False,
                   causal: bool = False, m: int | None = None, head_dim: int | None = None,
                   values: bool = True, seed: int = 0) -> UniversalTransformer:
    """Frozen backbone weights for training only E/U (issue 6).

    Unlike ``build_universal`` this does not insist that the construction is *exact* for the class:
    the sparse backbone with ``residual=True`` is the same {0,1} weights run with a residual (the
    weights never depend on the residual flag), which is what embedding-only training uses.
    ``encode`` still refuses targets the backbone cannot simulate exactly.
    """
    layers, heads, dim = (arguments.whole(n, v) for n, v in
                          (("layers", layers), ("heads", heads), ("dim", dim)))
    residual, causal = arguments.flag("residual", residual), arguments.flag("causal", causal)
    if construction in ("sparse", "looped") and residual:
        if heads != 1:
            raise UserError(f"the {construction} backbone has one head, not {heads}")
        ut = build_construction(construction, layers, 1, dim, residual=False, causal=causal)
        ut.config.residual = True
        ut.config.extra["exact"] = False  # encode() refuses: the construction is exact without residual
        return ut
    return build_universal(construction, layers, heads, dim, residual=residual, causal=causal,
                           values=values, m=m, head_dim=head_dim, seed=seed)


@dataclass
class Encoding:
    """A target encoded for a UT: ``ut(X, E, U)`` reproduces ``target(X)``.  Unpacks as (E, U)."""

    E: torch.Tensor
    U: torch.Tensor
    method: str            # "exact" ({0,1} construction), "linear-solve" or "gradient-fit" (random)
    residual: float        # largest violation of the encoding conditions (0 for constructions)

    def __iter__(self):
        return iter((self.E, self.U))


def encode(ut: UniversalTransformer, target: Target,
           stage: Callable[[str], None] | None = None) -> Encoding:
    """E (and U) encoding ``target`` for ``ut``; a UserError names any mismatch of class.
    ``stage`` hears the name of each step of a random backbone's solves (tens of seconds near
    its width cap)."""
    if not isinstance(ut, UniversalTransformer):   # an AttributeError ('str' has no 'config')
        raise UserError(f"encode takes a UniversalTransformer first, got {type(ut).__name__}",
                        hint="ut = build_universal(...) or UniversalTransformer.load(DIR)")
    if not isinstance(target, Target):
        raise UserError(f"encode takes a Target second, got {type(target).__name__}",
                        hint="Target(W=..., V=..., U=...), Target.random(L, H, d) or Target.load(FILE)")
    cfg = ut.config
    if cfg.extra.get("exact") is False or (cfg.construction != "random" and
                                           class_problem(cfg.construction, cfg.heads, cfg.residual,
                                                         cfg.values)):
        raise UserError(f"this {cfg.construction} backbone (residual {'on' if cfg.residual else 'off'}) "
                        "is a training backbone, not an exact simulator; targets cannot be encoded into it")
    if cfg.construction == "random":
        E, U, method, res = encode_random(ut, target, stage=stage)
        return Encoding(E, U, method, res)
    E, U = encode_construction(ut, target)
    return Encoding(E, U, "exact", 0.0)
