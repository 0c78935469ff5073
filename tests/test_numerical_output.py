"""An output too large as a one-hot is compiled as one number (``rewrites.numerical_output``).

Maps are categorical unless annotated, as in tracr.  A sum of two prefix means at max_len 64 holds
thousands of values: as a one-hot it is past the size guard, as a number it is one dimension.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from rasp_compiler.compiler import compile_program
from rasp_compiler.compiler.checking import check_model, edge_inputs, random_inputs
from rasp_compiler.compiler.rewrites import numerical_output
from rasp_compiler.errors import CompileError
from rasp_compiler.lang import program_from_source

torch.set_num_threads(1)

MEANS = """
m = numerical(aggregate(select(indices, indices, <=), indicator(tokens == "a")));
n = numerical(aggregate(select(indices, indices, <=), indicator(tokens == "b")));
"""
VOCAB = list("abc")


def _checked(src: str, max_len: int, samples: int = 300):
    program = program_from_source(src)
    model = compile_program(program, VOCAB, max_len)
    res = check_model(model, program, random_inputs(VOCAB, max_len, samples, seed=7)
                      + edge_inputs(VOCAB, max_len))
    assert res.inputs_checked > samples // 2
    assert res.ok, res.failures
    return model, res


def test_a_difference_of_two_means_at_64_compiles_as_a_number() -> None:
    # `n * 2` is a map of its own: the output is read through it, as m - 2n of the two means
    model, res = _checked(MEANS + "m - n * 2;", 64)
    assert model.config["output"]["encoding"] == "numerical"
    assert model.n_layers == 1 and model.params < 100_000
    assert any("encoded numerical" in note and "past the size guard" in note
               for note in model.config["notes"])
    assert res.max_abs_error < 1e-4


def test_an_annotated_linear_output_reads_through_its_maps() -> None:
    model, _ = _checked(MEANS + "numerical(m * 3 - n * 2 + 1);", 64)
    assert model.params < 100_000
    # the user chose the encoding: no note says the compiler did
    assert not any("encoded numerical" in note for note in model.config["notes"])


def test_an_output_marked_categorical_is_still_refused() -> None:
    program = program_from_source(MEANS + "categorical(m - n);")
    with pytest.raises(CompileError, match="would need about"):
        compile_program(program, VOCAB, 64)


def test_a_small_output_keeps_its_one_hot() -> None:
    model, _ = _checked(MEANS + "m - n;", 6, samples=100)
    assert model.config["output"]["encoding"] == "categorical"
    assert not any("encoded numerical" in note for note in model.config["notes"])


def test_the_fallback_is_taken_only_past_the_guard(monkeypatch) -> None:
    assemble = importlib.import_module("rasp_compiler.compiler.assemble")
    monkeypatch.setattr(assemble, "MAX_PARAMS", 10_000)
    model, _ = _checked(MEANS + "m - n;", 6, samples=100)
    assert model.config["output"]["encoding"] == "numerical"


def test_a_too_large_output_of_strings_keeps_its_error(monkeypatch) -> None:
    # a number is no encoding for strings: the first plan's error is the one reported
    assemble = importlib.import_module("rasp_compiler.compiler.assemble")
    monkeypatch.setattr(assemble, "MAX_PARAMS", 500)
    program = program_from_source("aggregate(select(indices, length - indices - 1, ==), tokens) + tokens;")
    with pytest.raises(CompileError, match="would need about"):
        compile_program(program, VOCAB, 6)


def test_the_fallback_weights_are_deterministic() -> None:
    program = program_from_source(MEANS + "m + n;")
    first = compile_program(program, VOCAB, 64)
    again = compile_program(program, VOCAB, 64)
    assert first.config["weights_sha256"] == again.config["weights_sha256"]


def test_numerical_output_leaves_aggregates_and_categorical_outputs_alone() -> None:
    assert numerical_output(program_from_source(MEANS + "m;")) is None
    assert numerical_output(program_from_source(MEANS + "categorical(m + n);")) is None
    # marked numerical and reading the means themselves: nothing the first plan did not try
    assert numerical_output(program_from_source(MEANS + "numerical(m + n);")) is None
    through = numerical_output(program_from_source(MEANS + "m + n * 2;"))
    assert through is not None
    out = through.node(through.output)
    assert out.encoding == "numerical" and len(out.inputs) == 2
    assert all(through.node(i).kind == "aggregate" for i in out.inputs)


def test_a_large_number_read_by_an_aggregate_gets_a_hint_that_works() -> None:
    # the one-hot is not the output's own here: the error says which map to mark numerical ...
    src = MEANS + "d = m - n;\naggregate(select(indices, indices, ==), d);"
    with pytest.raises(CompileError, match=r"'d' \(m - n\) is a number computed from numerical "
                                           r"s-ops: written numerical\(\.\.\.\)"):
        compile_program(program_from_source(src), VOCAB, 64)
    # ... and so marked, it compiles and agrees
    model, _ = _checked(src.replace("d = m - n;", "d = numerical(m - n);"), 64)
    assert model.params < 100_000


def test_a_tracr_median_of_a_sort_compiles_as_a_number() -> None:
    """InterpBench's median (cases 81 and 126): the mean of the two middle elements of a sort that
    may tie, an opaque lambda over two means with 281 values each, was refused for size."""
    import random

    from rasp_compiler import pyapi as rasp
    from rasp_compiler.pyapi import lib

    unique = rasp.SequenceMap(lambda x, y: x + 0.0001 * y, rasp.tokens, rasp.indices)
    target = rasp.SelectorWidth(rasp.Select(unique, unique, rasp.Comparison.LT))
    ordered = rasp.Aggregate(rasp.Select(target, rasp.indices, rasp.Comparison.EQ), rasp.tokens)
    length = lib.make_length()
    middles = [rasp.Map(lambda n: (n - 1) // 2, length), rasp.Map(lambda n: n // 2, length)]
    low, high = (rasp.Aggregate(rasp.Select(rasp.indices, mid, rasp.Comparison.EQ), ordered)
                 for mid in middles)
    median = rasp.SequenceMap(lambda x, y: (x + y) / 2, low, high)
    model = rasp.compile_program(median, set(range(11)), 9)
    assert model.config["output"]["encoding"] == "numerical"
    rng = random.Random(5)
    inputs = [[rng.randrange(11) for _ in range(rng.randint(1, 9))] for _ in range(200)]
    for x, got in zip(inputs, model.run(inputs), strict=True):
        assert max(abs(g - w) for g, w in zip(got, median(x), strict=True)) < 1e-4, x
