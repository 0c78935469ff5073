"""Fixed universal transformers: one frozen backbone runs any target of a class through its embedding.

    from rasp_compiler.universal import Target, build_universal, encode
    ut = build_universal("sparse", layers=3, heads=1, dim=4)
    target = Target.random(3, 1, 4, seed=0)
    E, U = encode(ut, target)
    y, attn = ut(X, E, U)          # == target(X)

``fixed_backbone`` returns the frozen weights for embedding-only training (issue 6).
"""

from rasp_compiler.universal.api import Encoding, build_universal, encode, fixed_backbone
from rasp_compiler.universal.classes import CONSTRUCTIONS, width_formula
from rasp_compiler.universal.model import UniversalTransformer, UTConfig
from rasp_compiler.universal.target import Target

__all__ = ["CONSTRUCTIONS", "Encoding", "Target", "UTConfig", "UniversalTransformer", "build_universal",
           "encode", "fixed_backbone", "width_formula"]
