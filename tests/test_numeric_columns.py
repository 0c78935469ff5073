"""Residual and score columns the numeric assembly saves: positional features that are integer
combinations of others (real/aliases.py) and the whole quadratic form of an == over many
integer keys (ScoreBlocks._quadratic_blocks).  References are the interpreter's outputs."""

from __future__ import annotations

import numpy as np

from rasp_compiler.compiler import compile_weights
from rasp_compiler.interpreter import run
from rasp_compiler.lang import program_from_source


def _check_exact(program, w, n: int, seed: int) -> None:
    xs = np.random.default_rng(seed).integers(-4, 5, (40, n)).astype(float)
    for x, got in zip(xs, w.model().run(xs.tolist()), strict=True):
        assert got == run(program, x.tolist()), x


def test_positional_features_that_are_integer_sums_of_others_get_no_column() -> None:
    """Four gathers whose score blocks embed the indicator of every position: over 8 positions
    at most 8 of them are independent, the rest are read as integer combinations."""
    src = ("x = tokens_float;\n"
           "a = numerical(aggregate(select(indices, indices % 2, ==), x, 0));\n"
           "b = numerical(aggregate(select(indices, 2 + indices % 2, ==), x, 0));\n"
           "c = numerical(aggregate(select(indices, 4 + indices % 2, ==), x, 0));\n"
           "e = numerical(aggregate(select(indices, 6 + indices % 2, ==), x, 0));\n"
           "y = a + b + c + e;\ny;")
    program = program_from_source(src)
    w = compile_weights(program, None, 8, fixed_length=8, input_range=(-4, 4))
    aliases = w.config["numeric"]["aliases"]
    assert aliases and all(all(float(c).is_integer() for c in combo.values()) for combo in aliases.values())
    positional = [r for r in w.config["residual"] if r["feature"].startswith("pos:")]
    assert len(positional) <= 8 - 1  # with `one`, at most as many as the positions
    assert not set(aliases) & {r["feature"] for r in w.config["residual"]}
    _check_exact(program, w, 8, 0)


def test_an_equality_over_many_keys_and_query_classes_takes_the_whole_quadratic() -> None:
    """select(indices, (indices + 3) % 12, ==) over 12 keys has 12 query classes: the whole
    -(k - q)^2 (3 columns, and BOS's one: d_head 4) instead of digits (6 columns: 16)."""
    src = "x = tokens_float;\ny = numerical(aggregate(select(indices, (indices + 3) % 12, ==), x, 0));\ny;"
    program = program_from_source(src)
    w = compile_weights(program, None, 12, fixed_length=12, input_range=(-4, 4))
    assert [layer["d_head"] for layer in w.config["layers"]] == [4]
    _check_exact(program, w, 12, 1)
