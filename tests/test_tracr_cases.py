"""tracr's own test cases, written in this Python API: its library programs (including the ones
with lambda predicates: ``shift_by``, ``detect_pattern``, ``make_count``, ``make_count_less_freq``)
on tracr's vocabularies (sets, integer tokens read by ``rasp.tokens``) and maximum lengths.

The programs are built here with ``rasp_compiler.pyapi.lib``.  The expected outputs are the ones
tracr's ``compiler/test_cases.py`` records, compared as tracr compares them (a ``None`` it expects
is not checked: tracr's shifts pad with ``None``, ours with RASP's default 0).  Beyond tracr's
single input per case, every compiled model is checked against the interpreter on every input up
to the maximum length (or on edge and random inputs where that is too many).
"""

from __future__ import annotations

import math
import random
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from rasp_compiler import pyapi as rasp
from rasp_compiler.compiler.checking import (
    check_model,
    count_inputs,
    edge_inputs,
    exhaustive_inputs,
    random_inputs,
)
from rasp_compiler.errors import CompileError, RaspError, UserError
from rasp_compiler.pyapi import lib

ROOT = Path(__file__).resolve().parents[1]

ABCD = {"a", "b", "c", "d"}
PARENS = {"a", "b", "c", "(", ")"}
INTS = {1, 2, 3, 4}


def _tracr_pair_balance() -> rasp.SOp:
    """tracr's make_pair_balance line for line: numerical booleans, no indicator."""
    bools_open = rasp.numerical(rasp.tokens == "(").named("bools_open")
    opens = rasp.numerical(lib.make_frac_prevs(bools_open)).named("opens")
    bools_close = rasp.numerical(rasp.tokens == ")").named("bools_close")
    closes = rasp.numerical(lib.make_frac_prevs(bools_close)).named("closes")
    return rasp.numerical(rasp.LinearSequenceMap(opens, closes, 1, -1)).named("pair_balance")

# name: (program builder, vocabulary, max_seq_len, tracr runs it causally too,
#        [(input, tracr's expected output), ...])
CASES = {
    # tracr's own form: a numerical mean of booleans, averaged as 0/1
    "frac_prevs": (lambda: lib.make_frac_prevs(rasp.tokens == "l"), set("helo"), 5, True,
                   [("hello", [0.0, 0.0, 1 / 3, 1 / 2, 2 / 5])]),
    "frac_prevs_open": (lambda: lib.make_frac_prevs(rasp.tokens == "("), PARENS, 10, True,
                        [("a()b(c))", [0.0, 1 / 2, 1 / 3, 1 / 4, 2 / 5, 2 / 6, 2 / 7, 2 / 8])]),
    "frac_prevs_close": (lambda: lib.make_frac_prevs(rasp.indicator(rasp.tokens == ")")), PARENS, 10, True,
                         [("a()b(c))", [0.0, 0.0, 1 / 3, 1 / 4, 1 / 5, 1 / 6, 2 / 7, 3 / 8])]),
    "shift_by_one": (lambda: lib.shift_by(1, rasp.tokens), ABCD, 5, True, [("abcd", [None, "a", "b", "c"])]),
    "shift_by_two": (lambda: lib.shift_by(2, rasp.tokens), ABCD, 5, True, [("abcd", [None, None, "a", "b"])]),
    "detect_pattern_a": (lambda: lib.detect_pattern(rasp.tokens, "a"), ABCD, 5, True,
                         [("bacd", [False, True, False, False])]),
    "detect_pattern_ab": (lambda: lib.detect_pattern(rasp.tokens, "ab"), {"a", "b"}, 5, True,
                          [("aaba", [None, False, True, False]), ("abaa", [None, True, False, False]),
                           ("aaaa", [None, False, False, False])]),
    "detect_pattern_abc": (lambda: lib.detect_pattern(rasp.tokens, "abc"), {"a", "b", "c"}, 6, True,
                           [("abcabc", [None, None, True, False, False, True])]),
    "reverse": (lambda: lib.make_reverse(rasp.tokens), ABCD, 5, False,
                [("abcd", list("dcba")), ("abc", list("cba")), ("ad", list("da")), ("c", ["c"])]),
    "length_categorical": (lambda: rasp.categorical(lib.make_length()), ABCD, 3, False,
                           [("abc", [3, 3, 3]), ("ad", [2, 2]), ("c", [1])]),
    "length_numerical": (lambda: rasp.numerical(lib.make_length()), ABCD, 3, False,
                         [("abc", [3, 3, 3]), ("ad", [2, 2]), ("c", [1])]),
    "pair_balance": (lambda: lib.make_pair_balance(rasp.tokens, "(", ")"), PARENS, 10, False,
                     [("a()b(c))", [0.0, 1 / 2, 0.0, 0.0, 1 / 5, 1 / 6, 0.0, -1 / 8])]),
    "pair_balance_as_tracr_writes_it": (lambda: _tracr_pair_balance(), PARENS, 10, False,
                                        [("a()b(c))", [0.0, 1 / 2, 0.0, 0.0, 1 / 5, 1 / 6, 0.0, -1 / 8])]),
    "shuffle_dyck2": (lambda: lib.make_shuffle_dyck(["()", "{}"]), {"(", ")", "{", "}"}, 5, False,
                      [("({)}", [1, 1, 1, 1]), ("(){)}", [0, 0, 0, 0, 0]), ("{}(", [0, 0, 0])]),
    "shuffle_dyck3": (lambda: lib.make_shuffle_dyck(["()", "{}", "[]"]), set("(){}[]"), 6, False,
                      [("({)[}]", [1] * 6), ("(){)}", [0] * 5), ("{}[(]", [0] * 5)]),
    "hist": (lambda: lib.make_hist(), ABCD, 5, False, [("abac", [2, 1, 2, 1])]),
    "sort_unique_tokens": (lambda: lib.make_sort_unique(rasp.tokens, rasp.tokens), INTS, 5, False,
                           [([2, 4, 3, 1], [1, 2, 3, 4])]),
    "sort_unique_indices": (lambda: lib.make_sort_unique(rasp.tokens, 1 - rasp.indices), ABCD, 5, False,
                            [("abcd", list("dcba"))]),
    "sort_tokens": (lambda: lib.make_sort(rasp.tokens, rasp.tokens, max_seq_len=5, min_key=1), INTS, 5,
                    False, [([2, 4, 3, 1], [1, 2, 3, 4]), ([2, 4, 1, 2], [1, 2, 2, 4])]),
    "sort_indices": (lambda: lib.make_sort(rasp.tokens, 1 - rasp.indices, max_seq_len=5, min_key=1), ABCD, 5,
                     False, [("abcd", list("dcba"))]),
    "sort_freq": (lambda: lib.make_sort_freq(max_seq_len=5), INTS, 5, False, [([2, 4, 2, 1], [2, 2, 4, 1])]),
    "count_less_freq_categorical": (lambda: lib.make_count_less_freq(2), ABCD, 6, False,
                                    [("aaabbc", [3] * 6), ("aacbbc", [6] * 6)]),
    "count_less_freq_numerical": (lambda: rasp.numerical(lib.make_count_less_freq(2)), ABCD, 6, False,
                                  [("aaabbc", [3] * 6), ("aacbbc", [6] * 6)]),
    "count": (lambda: lib.make_count(rasp.tokens, "a"), {"a", "b", "c"}, 8, False,
              [("aaabbc", [3] * 6), ("cabc", [1] * 4), ("bbc", [0] * 3)]),
    "nary_sequencemap_sum": (lambda: lib.make_nary_sequencemap(lambda x, y, z: x + y - z, rasp.tokens,
                                                               rasp.tokens, rasp.indices),
                             {1, 2, 3}, 5, False, [([1, 2, 3], [2, 3, 4])]),
    "nary_sequencemap_ratio": (lambda: lib.make_nary_sequencemap(lambda x, y, z: x * y / z, rasp.indices,
                                                                 rasp.indices, rasp.tokens),
                               {1, 2, 3}, 3, False, [([1, 2, 3], [0, 1 / 2, 4 / 3])]),
}

# Programs tracr refuses (its UNSUPPORTED_TEST_CASES): here they compile, and agree.
def _identity() -> rasp.SOp:
    return rasp.numerical(rasp.Map(lambda x: x, rasp.tokens))


UNSUPPORTED_BY_TRACR = {
    "numerical_categorical_aggregate": lambda: rasp.Aggregate(
        rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE), _identity()),
    "categorical_numerical_aggregate": lambda: rasp.numerical(rasp.Aggregate(
        rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE), rasp.tokens)),
    "numerical_numerical_aggregate": lambda: rasp.numerical(rasp.Aggregate(
        rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE),
        rasp.numerical(rasp.Map(lambda x: x, rasp.tokens)), default=0)),
    "aggregate_with_not_None_default": lambda: rasp.numerical(rasp.Aggregate(
        rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.EQ), rasp.tokens, default=1)),
    "numerical_selector": lambda: rasp.SelectorWidth(rasp.Select(
        _identity(), _identity(),
        rasp.Comparison.LT)),
    "numerical_SequenceMap": lambda: rasp.numerical(rasp.SequenceMap(
        lambda x, y: x + y, rasp.numerical(rasp.Map(lambda x: x, rasp.indices)),
        rasp.numerical(rasp.Map(lambda x: x, rasp.tokens)))),
    "categorical_LinearSequenceMap": lambda: rasp.categorical(rasp.LinearSequenceMap(
        rasp.categorical(rasp.indices), rasp.categorical(rasp.tokens), 1, 1)),
    "numerical_tokens": lambda: rasp.numerical(rasp.tokens),
    "numerical_indices": lambda: rasp.numerical(rasp.indices),
}


def as_expected(got: list, expected: list) -> bool:
    """tracr's comparison: numbers to a tolerance, and a ``None`` it expects is not checked."""
    if len(got) != len(expected):
        return False
    for g, e in zip(got, expected, strict=True):
        if e is None:
            continue
        if isinstance(e, float) or isinstance(g, float):
            if not math.isclose(float(g), float(e), rel_tol=0.005, abs_tol=1e-7):
                return False
        elif g != e:
            return False
    return True


def inputs_for(vocab: list, max_len: int) -> list[list]:
    if count_inputs(len(vocab), max_len) <= 3_000:
        return list(exhaustive_inputs(vocab, max_len))
    return edge_inputs(vocab, max_len) + random_inputs(vocab, max_len, 600, seed=11)


@pytest.mark.parametrize("name", sorted(CASES))
def test_interpreter_gives_tracr_outputs(name: str) -> None:
    build, _vocab, _max_len, _causal, examples = CASES[name]
    program = build()
    for x, expected in examples:
        assert as_expected(rasp.run(program, list(x)), expected), x


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_case_agrees_with_interpreter_everywhere(name: str) -> None:
    build, vocab, max_len, _causal, examples = CASES[name]
    program = build()
    model = rasp.compile_program(program, vocab, max_len)
    for (x, expected), got in zip(examples, model.run([list(x) for x, _ in examples]), strict=True):
        assert as_expected(got, expected), x
    inputs = inputs_for(sorted(vocab, key=str), max_len)
    result = check_model(model, program.program(), inputs)
    assert result.inputs_checked == len(inputs) - result.inputs_undefined > 0
    assert result.ok, result.failures


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c[3]))
def test_causal_compile_of_tracr_universal_cases(name: str) -> None:
    """tracr runs these cases in a causal model too: their selectors look only backwards."""
    build, vocab, max_len, _causal, examples = CASES[name]
    program = build()
    model = rasp.compile_program(program, vocab, max_len, causal=True)
    for (x, expected), got in zip(examples, model.run([list(x) for x, _ in examples]), strict=True):
        assert as_expected(got, expected), x
    inputs = inputs_for(sorted(vocab, key=str), max_len)
    assert check_model(model, program.program(), inputs).ok


@pytest.mark.parametrize("name", sorted(UNSUPPORTED_BY_TRACR))
def test_what_tracr_refuses_compiles_here(name: str) -> None:
    program = UNSUPPORTED_BY_TRACR[name]()
    vocab = [1, 2, 3]
    model = rasp.compile_program(program, set(vocab), 5)
    result = check_model(model, program.program(), list(exhaustive_inputs(vocab, 5)))
    assert result.inputs_checked == 363 and result.ok, result.failures


# ------------------------------------------------------------------ lambda predicates
def test_predicate_of_the_query_only_and_of_the_key_only() -> None:
    evens = rasp.Select(rasp.tokens, rasp.indices, lambda k, q: q % 2 == 0)
    firsts = rasp.Select(rasp.indices, rasp.indices, lambda k, q: k < 2)
    program = rasp.SelectorWidth(evens) + rasp.SelectorWidth(firsts)
    assert rasp.run(program, "abcab") == [7, 2, 7, 2, 7]  # 5 keys at even queries, + keys 0 and 1
    model = rasp.compile_program(program, "abc", 7)
    assert check_model(model, program.program(), list(exhaustive_inputs(list("abc"), 6))).ok


def test_predicate_combined_with_comparisons() -> None:
    near = rasp.Select(rasp.indices, rasp.indices, lambda k, q: abs(k - q) <= 1)
    same = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)
    is_a = rasp.indicator(rasp.tokens == "a")
    program = rasp.numerical(rasp.Aggregate((near & same) | ~near, is_a, default=0))
    model = rasp.compile_program(program, "ab", 8)
    result = check_model(model, program.program(), list(exhaustive_inputs(list("ab"), 8)))
    assert result.inputs_checked == 510 and result.ok, result.failures


def test_predicate_over_a_mean() -> None:
    """The keys are a numerical mean: the compiler tabulates the predicate over its value set."""
    frac = lib.make_frac_prevs(rasp.indicator(rasp.tokens == "a"))
    above = rasp.Select(frac, frac, lambda k, q: k > q + 0.25)
    program = rasp.SelectorWidth(above)
    model = rasp.compile_program(program, "ab", 6)
    assert check_model(model, program.program(), list(exhaustive_inputs(list("ab"), 6))).ok


def test_predicate_that_raises_is_an_error_at_its_line() -> None:
    bad = rasp.Select(rasp.tokens, rasp.tokens, lambda k, q: {"a": 1}[k] == 1)
    with pytest.raises(RaspError) as err:
        rasp.run(rasp.SelectorWidth(bad), "ab")
    shown = err.value.render()
    assert "predicate failed on key 'b'" in shown
    assert f"test_tracr_cases.py:{bad.where[1]}:" in shown  # the line that built the select


def test_to_source_writes_a_predicate_as_selects_over_value_sets() -> None:
    from rasp_compiler.interpreter import run as interpret
    from rasp_compiler.lang import program_from_source

    program = lib.detect_pattern(rasp.tokens, "abc")
    text = rasp.to_source(program, vocab="abc", max_len=6)
    assert "<lambda>" not in text and "select(indices in [0], True, ==)" in text
    parsed = program_from_source(text)
    for x in exhaustive_inputs(list("abc"), 6):
        assert interpret(parsed, x) == rasp.run(program, x)
    ints = rasp.to_source(lib.make_sort_unique(rasp.tokens, rasp.tokens), vocab={1, 2, 3}, max_len=3)
    assert "tokens_int" in ints


def test_vocabulary_sets_compile_to_the_same_bytes_in_every_process(tmp_path: Path) -> None:
    """A set of strings iterates in a different order under each hash seed."""
    script = ("import sys; from rasp_compiler import pyapi as rasp; from rasp_compiler.pyapi import lib; "
              "rasp.compile_program(lib.make_sort_freq(6), {'x', 'y', 'z', 'w'}, 6).save(sys.argv[1])")
    blobs = []
    for seed in ("1", "2"):
        out = tmp_path / seed
        subprocess.run([sys.executable, "-c", script, str(out)], check=True, cwd=ROOT,
                       env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"})
        blobs.append((out / "model.safetensors").read_bytes())
    assert blobs[0] == blobs[1]


def _random_predicate(salt: int, percent: int):
    """An arbitrary relation: a hash of the pair decides, the same in every process.  Equal values
    hash alike (0, 0.0 and False; 1/3 from any sum), as any function of the values would."""
    def text(v: object) -> str:
        return f"{float(v):.9g}" if isinstance(v, (bool, int, float)) else str(v)
    return lambda k, q: zlib.crc32(f"{salt}|{text(k)}|{text(q)}".encode()) % 100 < percent


def _random_predicate_program(seed: int):
    rng = random.Random(seed)
    hist = rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ))
    pool = [rasp.tokens, rasp.indices, rasp.tokens == "a", rasp.indices % 3, rasp.length - rasp.indices, hist,
            lib.make_frac_prevs(rasp.indicator(rasp.tokens == "b"))]

    def one_select() -> rasp.Selector:
        keys, queries = rng.choice(pool), rng.choice(pool)
        if rng.random() < 0.7:
            relation = _random_predicate(rng.randrange(10**6), rng.choice((20, 50, 80)))
            return rasp.Select(keys, queries, relation)
        return rasp.Select(keys, queries, rng.choice(list(rasp.Comparison)[:6]))

    sel = one_select()
    for _ in range(rng.choice((0, 1, 2))):
        kind = rng.random()
        sel = ~sel if kind < 0.25 else (sel & one_select()) if kind < 0.65 else (sel | one_select())
    kind = rng.random()
    if kind < 0.35:
        return rasp.SelectorWidth(sel)
    if kind < 0.7:
        return rasp.numerical(rasp.Aggregate(sel, rasp.indicator(rasp.tokens == "a"), default=0))
    # a categorical aggregate: pin one key so that at most one is selected
    pin = rasp.Select(rasp.indices, rng.choice(pool[1:2] + pool[3:5]), rasp.Comparison.EQ)
    return rasp.Aggregate(sel & pin,
                          rasp.tokens, default="-")


def test_random_python_predicates_agree_with_the_interpreter() -> None:
    """Selectors of random relations (and/or/not with comparisons), over tokens, indices, maps, a
    selector width and a mean: every compiled model agrees on every input up to length 5."""
    inputs = list(exhaustive_inputs(list("abc"), 5))
    refused, answerless, checked = [], 0, 0
    for seed in range(120):
        program = _random_predicate_program(seed)
        try:
            model = rasp.compile_program(program, "abc", 5)
        except CompileError as err:
            if "fails on every pair of values" in err.message:
                # a string ordered against a number: the refusal says no input has an answer
                for x in inputs:
                    with pytest.raises(UserError):
                        program(x)
                answerless += 1
                continue
            refused.append((seed, err.message))
            continue
        result = check_model(model, program.program(), inputs)
        assert result.ok, (seed, result.failures)
        checked += result.inputs_checked
    assert len(refused) <= 6, refused
    assert answerless <= 15 and checked >= 100 * 300


def test_tracr_compile_entry_point_and_calls() -> None:
    """Code written against tracr's ``compiling.compile_rasp_to_model`` / ``model.apply`` /
    ``program(xs)`` runs with only its imports changed."""
    from rasp_compiler.pyapi import compiling

    program = lib.make_reverse(rasp.tokens)
    assert program("abc") == list("cba") and rasp.evaluate(program, "ab") == list("ba")
    model = compiling.compile_rasp_to_model(program, set("abc"), 5, compiler_bos="BOS", compiler_pad="PAD")
    out = model.apply(["BOS", "a", "b", "c", "PAD", "PAD"])
    assert out.decoded == ["BOS", "c", "b", "a", "PAD", "PAD"]
    assert len(out.trace["residuals"]) == 1 + 2 * model.model.n_layers
    with pytest.raises(UserError, match="must start with the BOS"):
        model.apply(["a", "b"])
    # the empty input (BOS alone, or BOS and padding): nothing to decode
    assert model.apply(["BOS"]).decoded == ["BOS"]
    assert model.apply(["BOS", "PAD", "PAD"]).decoded == ["BOS", "PAD", "PAD"]
    frac = compiling.compile_rasp_to_model(CASES["frac_prevs"][0](), {"h", "e", "l", "o"}, 5)
    assert as_expected(frac.apply(["compiler_bos", *"hello"]).decoded[1:], CASES["frac_prevs"][4][0][1])


def test_tracr_apply_output_has_the_runs_internals() -> None:
    """tracr code reads `model.residual_labels` and the output's residuals and layer outputs."""
    import numpy as np

    from rasp_compiler.pyapi import compiling

    model = compiling.compile_rasp_to_model(lib.make_reverse(rasp.tokens), {"a", "b", "c"}, 5,
                                            compiler_bos="BOS")
    out = model.apply(["BOS", "a", "b", "c", "compiler_pad"])
    d = len(model.residual_labels)
    assert d == model.model.residual_width and any(lab.startswith("tokens") for lab in model.residual_labels)
    assert len(out.residuals) == len(out.layer_outputs) == 2 * model.model.n_layers
    # the padded position is computed too, as in tracr
    assert out.input_embeddings.shape == out.transformer_output.shape == (1, 5, d)
    assert np.allclose(out.input_embeddings + sum(out.layer_outputs), out.transformer_output)
    assert np.array_equal(out.residuals[-1], out.transformer_output)
    with pytest.raises(UserError, match="empty input"):
        _ = model.apply(["BOS"]).residuals


def _tracr_forward(params: dict, layers: list[dict], ids: list[int], pad_id: int, causal: bool) -> tuple:
    """tracr's model.py forward pass in NumPy (float64), from ``params`` alone: residuals after
    every sublayer, attention logits (masked keys at -1e30, as tracr) and the unembedding."""
    import numpy as np

    t = len(ids)
    x = params["token_embed"]["embeddings"][ids] + params["pos_embed"]["embeddings"][:t]
    mask = np.repeat((np.array(ids) != pad_id)[None, :], t, axis=0)
    if causal:
        mask = mask & np.tril(np.ones((t, t), dtype=bool))
    residuals, logits = [], []
    for li, lc in enumerate(layers):
        h, dh = lc["n_heads"], lc["d_head"]

        def linear(name: str, inp: np.ndarray, li: int = li) -> np.ndarray:
            p = params[f"transformer/layer_{li}/{name}"]
            return inp @ p["w"].astype(np.float64) + p["b"]

        q, k, v = (linear(f"attn/{n}", x).reshape(t, h, dh) for n in ("query", "key", "value"))
        scores = np.where(mask[None], np.einsum("thd,Thd->htT", q, k) / math.sqrt(dh), -1e30)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights = weights / weights.sum(axis=-1, keepdims=True)
        x = x + linear("attn/linear", np.einsum("htT,Thd->thd", weights, v).reshape(t, h * dh))
        residuals.append(x)
        logits.append(scores)
        x = x + linear("mlp/linear_2", np.maximum(linear("mlp/linear_1", x), 0))
        residuals.append(x)
    return residuals, logits, x @ params["unembed"]["w"] + params["unembed"]["b"]


@pytest.mark.parametrize(("build", "vocab", "tokens", "causal"), [
    (lambda: lib.make_reverse(rasp.tokens), {"a", "b", "c"}, ["a", "b", "c", "PAD"], False),
    # two heads in a layer, then a layer without attention
    (lambda: lib.make_sort(rasp.tokens, rasp.tokens, max_seq_len=5, min_key=1), {1, 2, 3}, [3, 1, 2, "PAD"],
     False),
    (lambda: lib.make_shuffle_dyck(["()", "{}"]), set("(){}"), [*"({)}", "PAD"], False),
    (lambda: lib.make_frac_prevs(rasp.tokens == "x"), {"x", "y"}, ["y", "x", "x", "PAD"], True),
], ids=["reverse", "sort", "shuffle_dyck", "frac_prevs_causal"])
def test_tracr_apply_attn_logits_unembedded_and_params(build: Callable[[], rasp.SOp], vocab: set,
                                                       tokens: list, causal: bool) -> None:
    """What tracr code reads from a run: ``attn_logits`` (the softmax's input, masked), the
    ``unembedded`` ids the output encoder decodes, padded positions, and ``params`` that rebuild
    the whole run in tracr's architecture."""
    import numpy as np
    import torch

    from rasp_compiler.pyapi import compiling

    model = compiling.compile_rasp_to_model(build(), vocab, 5, causal=causal, compiler_bos="BOS",
                                            compiler_pad="PAD")
    out = model.apply(["BOS", *tokens])
    t, n = 1 + len(tokens), 1 + sum(tok != "PAD" for tok in tokens)
    layers = model.model.config["layers"]
    assert [a.shape for a in out.attn_logits] == [(1, lc["n_heads"], t, t) for lc in layers]
    for logits, pattern in zip(out.attn_logits, out.trace["attention"], strict=True):
        assert torch.allclose(torch.softmax(torch.from_numpy(logits), dim=-1), pattern, atol=1e-6, rtol=0)
        assert (logits[..., n:] < -1e30).all()  # padded keys are masked, as tracr's -1e30
        if causal:
            assert (logits[..., np.triu_indices(t, 1)[0], np.triu_indices(t, 1)[1]] < -1e30).all()

    assert out.unembedded.shape == (1, t)
    if isinstance(model.output_encoder, compiling.NumericalEncoder):
        assert np.allclose(out.unembedded[0, 1:n], out.decoded[1:n], atol=1e-6)
    else:
        assert out.unembedded.dtype.kind == "i"
        assert model.output_encoder.decode(out.unembedded[0, 1:n].tolist()) == out.decoded[1:n]
    assert out.decoded[n:] == ["PAD"] * (t - n)

    ids = model.input_encoder.encode(["BOS", *tokens])
    residuals, logits, unembed = _tracr_forward(model.params, layers, ids, model.input_encoder.pad_encoding,
                                                causal)
    assert len(residuals) == len(out.residuals)
    for ours, ref in zip(out.residuals, residuals, strict=True):
        assert np.allclose(ours[0], ref, rtol=1e-5, atol=1e-4)
    for ours, ref in zip(out.attn_logits, logits, strict=True):
        kept = ref > -1e29
        assert np.allclose(ours[0][kept], ref[kept], rtol=1e-5, atol=1e-3)
    assert np.allclose(out.trace["logits"][0].numpy(), unembed[1:], rtol=1e-5, atol=1e-4)
    names = {f"transformer/layer_{i}/{m}" for i in range(len(layers))
             for m in ("attn/query", "attn/key", "attn/value", "attn/linear", "mlp/linear_1", "mlp/linear_2")}
    assert set(model.params) == names | {"token_embed", "pos_embed", "unembed"}
    assert all(set(model.params[name]) == {"w", "b"} for name in names)


def test_tracr_encoders() -> None:
    """``input_encoder`` / ``output_encoder`` as tracr's: token <-> id maps over the model's own ids."""
    from rasp_compiler.pyapi import compiling

    model = compiling.compile_rasp_to_model(lib.make_reverse(rasp.tokens), {"a", "b", "c"}, 4,
                                            compiler_bos="BOS", compiler_pad="PAD")
    enc, vocab = model.input_encoder, model.model.config["vocab"]
    assert enc.encoding_map == {**{tok: i for i, tok in enumerate(vocab)}, "BOS": 3, "PAD": 4}
    assert (enc.bos_token, enc.pad_token, enc.bos_encoding, enc.pad_encoding) == ("BOS", "PAD", 3, 4)
    assert enc.vocab_size == 5
    x = ["BOS", "c", "a", "PAD"]
    ids = enc.encode(x)
    assert enc.decode(ids) == x and ids[:3] == model.model.encode([["c", "a"]])[0][0].tolist()
    for bad, match in ((["a", "b"], "BOS"), (["BOS", "z"], "not in the encoding"),
                       (["BOS", *"abcab"], "longer than")):
        with pytest.raises(ValueError, match=match):
            enc.encode(bad)
    with pytest.raises(ValueError, match="not in the decoding map"):
        enc.decode([5])
    out_enc = model.output_encoder
    values = model.model.config["output"]["values"]
    assert out_enc.encoding_map == {v: i for i, v in enumerate(values)}
    assert out_enc.decoding_map == dict(enumerate(values)) and out_enc.bos_token is None
    assert out_enc.decode(out_enc.encode(values)) == values
    with pytest.raises(UserError, match="more than the 4"):
        model.apply(["BOS", "a", "b", "PAD", "PAD", "PAD"])
    frac = compiling.compile_rasp_to_model(lib.make_frac_prevs(rasp.tokens == "x"), {"x", "y"}, 4)
    assert isinstance(frac.output_encoder, compiling.NumericalEncoder)
    assert frac.output_encoder.decode([0.5, 1.0]) == [0.5, 1.0]
    assert frac.input_encoder.bos_token == "compiler_bos"
