"""Numerical == queries (quadratic score blocks), additively separable maps, and widths of disjoint
disjunctions as sums of heads (docs/compiler.md, "Attention" and "MLPs").

Every compiled model is compared with the reference interpreter; the size bounds are computed
from N so that an N^2 construction (one hidden unit per (length, index) pair) fails them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rasp_compiler.compiler import compile_program
from rasp_compiler.compiler.checking import check_model, exhaustive_inputs, random_inputs
from rasp_compiler.compiler.tables import separable
from rasp_compiler.compiler.values import value_key
from rasp_compiler.lang import load_program, program_from_source

ROOT = Path(__file__).resolve().parents[1]
torch.set_num_threads(1)


def _agrees(model, program, inputs) -> None:
    res = check_model(model, program, inputs)
    assert res.inputs_checked == len(inputs)
    assert res.ok, f"{res.inputs_checked - res.inputs_agreeing} disagreements, e.g. {res.failures[:3]}"


def _inputs(vocab: list, n: int, count: int = 40) -> list:
    out = random_inputs(vocab, n, count, seed=11)
    return out + [[vocab[0]] * k for k in range(1, n + 1)] + [(vocab * n)[:n]]


# -- separable tables --------------------------------------------------------------------------
def test_separable_finds_parts_and_refuses_products() -> None:
    rows = [((i, 1.0 / (n + 1)), n - i - 1) for n in range(1, 20) for i in range(n)]
    got = separable(rows, 2)
    assert got is not None
    parts, const = got
    for (i, b), y in rows:
        total = const + sum(p[k][1] for p, x in zip(parts, (i, b), strict=True)
                            for k in p if p[k][0] == x)
        assert total == pytest.approx(y, abs=1e-9)
    assert separable([((i, n), i * n) for n in range(1, 9) for i in range(n)], 2) is None


def _sums(parts: list, const: float, args: tuple) -> float:
    return const + sum(p[value_key(x)][1] for p, x in zip(parts, args, strict=True))


def test_separable_solves_its_gauged_equations_directly(monkeypatch) -> None:
    """Two inputs whose values the rows connect, parts with fractions, rows missing at random: the
    parts come from the eliminated direct solve (least squares would cost the cube of the values:
    2.2 s for the 2,523 of tracr's shuffle-Dyck-2 over '()[]x' at max_len 64), each 0 at its
    smallest value, and equal to the generating parts up to that gauge."""
    rng = np.random.default_rng(5)
    g = [rng.integers(-9, 9, size=k) / 4 for k in (300, 7)]
    rows = [((a, b), float(g[0][a] + g[1][b] + 0.5)) for a in range(300) for b in range(7)
            if rng.random() < 0.6]

    def no_lstsq(*args, **kwargs):
        raise AssertionError("least squares ran")

    monkeypatch.setattr(np.linalg, "lstsq", no_lstsq)
    parts, const = separable(rows, 2)
    for args, y in rows:
        assert _sums(parts, const, args) == pytest.approx(y, abs=1e-9)
    for j, part in enumerate(parts):
        assert part[value_key(0)][1] == 0.0
        for v in (2, 5):
            assert part[value_key(v)][1] == pytest.approx(g[j][v] - g[j][0], abs=1e-9)


def test_separable_of_three_inputs_is_solved_by_least_squares() -> None:
    """With three inputs a gauge per part need not fix the parts (rows need not meet in
    rectangles), so the smallest solution least squares gives is kept."""
    rng = np.random.default_rng(6)
    g = [rng.integers(-9, 9, size=k) / 4 for k in (12, 5, 3)]
    rows = [((a, b, c), float(g[0][a] + g[1][b] + g[2][c])) for a in range(12) for b in range(5)
            for c in range(3) if rng.random() < 0.5]
    parts, const = separable(rows, 3)
    for args, y in rows:
        assert _sums(parts, const, args) == pytest.approx(y, abs=1e-9)


def test_separable_falls_back_to_least_squares_where_the_gauged_equations_are_singular(monkeypatch) -> None:
    """Two blocks of values that never meet in a row: one gauge per input leaves the second block
    free, the direct solve fails, and least squares still finds exact parts."""
    rows = [((a, b), 3 * a + b) for a in (0, 1) for b in (0, 1)]
    rows += [((a, b), 3 * a - 2 * b + 0.25) for a in (5, 6) for b in (7, 8)]
    lstsq, calls = np.linalg.lstsq, []
    monkeypatch.setattr(np.linalg, "lstsq", lambda *a, **k: calls.append(1) or lstsq(*a, **k))
    parts, const = separable(rows, 2)
    assert calls
    for args, y in rows:
        assert _sums(parts, const, args) == pytest.approx(y, abs=1e-9)


# -- reverse: length - indices - 1 as one number ----------------------------------------------
@pytest.mark.parametrize("file", ["programs/reverse.rasp", "programs/tracr/reverse.rasp"])
def test_reverse_is_linear_in_n(file: str) -> None:
    program = load_program(str(ROOT / file))
    n = 64
    model = compile_program(program, list("abcde"), n)
    d = model.residual_width
    assert model.n_layers == 2
    # the old one-hot table had N^2 = 4096 hidden units and 1.2M parameters
    assert max(model.mlp_sizes) <= 2 * n + 2, model.mlp_sizes
    assert d <= n + 20, d
    assert model.params <= 8 * n * d, model.params
    _agrees(model, program, _inputs(list("abcde"), n, 30))


@pytest.mark.parametrize("n", [1, 2, 3, 7, 20])
def test_reverse_agrees_at_every_length(n: int) -> None:
    program = load_program(str(ROOT / "programs/reverse.rasp"))
    model = compile_program(program, list("abc"), n)
    inputs = list(exhaustive_inputs(list("abc"), min(n, 4))) + _inputs(list("abc"), n, 20)
    _agrees(model, program, inputs)


NO_MATCH = {
    # length - indices: value n at index 0 matches no key; the default is used there
    "shifted": ("q = length - indices;\nres = aggregate(select(indices, q, ==), tokens, \"z\");\nres;",
                False),
    # indices + 2 as a number (an annotated numerical map): no key for the last two positions
    "numerical": ("q = numerical(indices + 2);\nres = aggregate(select(indices, q, ==), tokens, \"z\");\n"
                  "res;", False),
    # every query value is a key: the quadratic block, BOS scores low
    "matched": ("q = length - indices - 1;\nres = aggregate(select(indices, q, ==), tokens, \"z\");\n"
                "res;", True),
}


@pytest.mark.parametrize("name", sorted(NO_MATCH))
def test_numeric_query_equality_with_and_without_matches(name: str) -> None:
    source, quadratic = NO_MATCH[name]
    program = program_from_source(source, output="res")
    model = compile_program(program, list("ab"), 9)
    used = any(":num" in b["query"] for lp in model.plan for h in lp["heads"] for b in h["blocks"])
    assert used == quadratic
    _agrees(model, program, list(exhaustive_inputs(list("ab"), 5)) + _inputs(list("ab"), 9, 20))
    if not quadratic:  # the default really is produced somewhere
        assert "z" in model.run([["a"] * 9])[0]


def test_separable_map_with_categorical_inputs() -> None:
    """A nonlinear but separable numerical map of the token and the index: one unit per input."""
    program = program_from_source("x = numerical(tokens_int * tokens_int - (indices % 3));\nx;",
                                  output="x")
    model = compile_program(program, [1, 2, 5], 12)
    assert max(model.mlp_sizes) <= 2
    _agrees(model, program, _inputs([1, 2, 5], 12, 30))


# -- sort: width(A or B) = width(A) + width(B) -------------------------------------------------
@pytest.mark.parametrize("n", [16, 40])
def test_sort_is_two_layers_with_two_width_heads(n: int) -> None:
    program = load_program(str(ROOT / "programs/sort.rasp"))
    model = compile_program(program, list("abcde"), n)
    assert model.n_layers == 2
    assert model.heads_per_layer == [2, 1]
    _agrees(model, program, _inputs(list("abcde"), n, 40))


def test_sort_exhaustive_small() -> None:
    program = load_program(str(ROOT / "programs/sort.rasp"))
    model = compile_program(program, list("abc"), 5)
    assert model.n_layers == 2
    _agrees(model, program, list(exhaustive_inputs(list("abc"), 5)))


def test_overlapping_disjunction_is_not_split() -> None:
    """select(k,k,<=) or (...): the parts overlap, so their widths must not be added."""
    src = ("b = select(tokens, tokens, <=) or (select(tokens, tokens, ==) and select(indices, indices, <));\n"
           "w = selector_width(b);\nw;")
    program = program_from_source(src, output="w")
    model = compile_program(program, list("abc"), 6)
    assert max(model.heads_per_layer) == 1
    _agrees(model, program, list(exhaustive_inputs(list("abc"), 5)))
