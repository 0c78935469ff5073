"""tracr's compiler test suites, run against this project's tracr-compatible Python API.

Sources (github.com/google-deepmind/tracr, ``tracr/compiler/``), re-expressed in our own words:

* ``lib_test.py``: tracr's library programs give the expected outputs in the evaluator and in the
  causal evaluator.  Its ``TEST_CASES`` are already run by ``tests/test_tracr_cases.py``; here we add
  the causal evaluation of the ``CAUSAL_TEST_CASES`` (including ``selector_width``, which only that
  list has).
* ``rasp_to_transformer_integration_test.py``: the four small programs it compiles on the
  vocabulary ``{0, 1, 2}`` at max length 3, the padded-input cases (``reverse``, ``length``
  categorical and numerical at max length 5, input padded with tracr's pad token), and the causal
  compile of ``CAUSAL_TEST_CASES``.  We also take the categorical-annotated variants of the small
  programs from ``rasp_to_craft_integration_test.py``, its expected-failure program (an aggregate
  default that tracr's compiled model writes onto BOS, spoiling a later selector), and a few more
  one-operation shapes (numerical maps, categorical to numerical, ``LinearSequenceMap``, numerical
  means with ``default=0``, ``SelectorWidth``, ``Full``, a numerical MLP over a many-valued mean).
* ``basis_inference_test.py``: tracr's inferred value sets.  Ours come from
  ``rasp_compiler.compiler.analysis.Analysis``; we check that ours contain every value the
  interpreter can produce (exhaustively), and compare with tracr's set case by case.
* ``validating_test.py`` (with ``validating.py``): programs tracr's dynamic validator flags because
  tracr's compiled model would be silently wrong.  Here each one either compiles to a model that
  agrees with the interpreter, or is refused with one clear ``UserError`` naming the problem.

Beyond tracr's single input per case, every compiled model is checked against our interpreter on
every input up to the case's max length (``check_model``).

By-design differences (docs/python-api.md, "What differs from tracr's rasp module"): tracr's ``None``
(an aggregate's default, a shift's padding) is 0 here, or ``False`` for an s-op built as a boolean; a
mean of one selected value is that value (``True``, ``3``) where tracr's evaluator gives the float;
a categorical mean of several non-numbers is an interpreter error (tracr's evaluator raises too); a
value set may be smaller than tracr's where tracr over-approximates (it combines the two inputs of
``x + x`` independently).
"""

from __future__ import annotations

import math

import pytest
from test_tracr_cases import CASES, as_expected

from rasp_compiler import pyapi as rasp
from rasp_compiler.compiler.analysis import Analysis
from rasp_compiler.compiler.checking import (
    agree,
    check_model,
    count_inputs,
    edge_inputs,
    exhaustive_inputs,
    random_inputs,
)
from rasp_compiler.errors import CompileError, UserError
from rasp_compiler.pyapi import causal_eval, compiling, lib

BOS = "rasp_to_transformer_integration_test_BOS"
PAD = "rasp_to_transformer_integration_test_PAD"
T, I = rasp.tokens, rasp.indices
ABCD = {"a", "b", "c", "d"}


def _inputs(vocab, max_len: int) -> list[list]:
    """Every input up to ``max_len`` where that is at most 3,000; else edge and 600 random ones."""
    ordered = sorted(vocab, key=str)
    if count_inputs(len(ordered), max_len) <= 3_000:
        return list(exhaustive_inputs(ordered, max_len))
    return edge_inputs(ordered, max_len) + random_inputs(ordered, max_len, 600, seed=5)


def _agrees_everywhere(program, vocab, max_len: int, **options) -> int:
    """Compiles ``program`` and checks it against the interpreter; returns the inputs checked."""
    model = rasp.compile_program(program, vocab, max_len, **options)
    inputs = _inputs(vocab, max_len)
    result = check_model(model, program.program(), inputs)
    assert result.ok, result.failures
    assert result.inputs_checked + result.inputs_undefined == len(inputs)
    return result.inputs_checked


# ------------------------------------------------------------ rasp_to_transformer_integration_test
def _ident(sop):
    return rasp.numerical(rasp.Map(lambda x: x, sop))


# tracr compiles each on vocab {0, 1, 2}, max length 3, and compares the single-token outputs
SMALL_PROGRAMS = {
    "map": lambda: rasp.Map(lambda x: x + 1, T),
    "sequence_map": lambda: rasp.SequenceMap(lambda x, y: x + y, T, I),
    # tracr's "with_same_input" case builds tokens + indices again; the craft test's reads tokens twice
    "sequence_map_with_same_input": lambda: rasp.SequenceMap(lambda x, y: x + y, T, I),
    "sequence_map_of_tokens_twice": lambda: rasp.categorical(rasp.SequenceMap(lambda x, y: x + y, T, T)),
    "select_aggregate": lambda: rasp.Aggregate(rasp.Select(T, T, rasp.Comparison.EQ),
                                               rasp.Map(lambda x: 1, T)),
    "categorical_map": lambda: rasp.categorical(rasp.Map(lambda x: x + 1, T)),
    "categorical_sequence_map": lambda: rasp.categorical(rasp.SequenceMap(lambda x, y: x + y, T, I)),
    # one-operation shapes of tracr's compiler (numerical and categorical MLPs, attention, Full)
    "numerical_map": lambda: rasp.numerical(rasp.Map(lambda x: 2 * x - 1, _ident(T))),
    "categorical_to_numerical_map": lambda: rasp.numerical(rasp.Map(lambda x: x * x + 0.5, T)),
    "numerical_to_categorical_map": lambda: rasp.categorical(rasp.Map(lambda x: x > 0, _ident(T))),
    "linear_sequence_map": lambda: rasp.numerical(rasp.LinearSequenceMap(_ident(T), _ident(I), 2, -3)),
    "numerical_mean_default_0": lambda: rasp.numerical(rasp.Aggregate(
        rasp.Select(I, I, rasp.Comparison.LEQ), rasp.numerical(T == 1), default=0)),
    "numerical_select_one_default_0": lambda: rasp.numerical(rasp.Aggregate(
        rasp.Select(T, I, rasp.Comparison.EQ), rasp.numerical(T == 2), default=0)),
    "selector_width": lambda: rasp.SelectorWidth(rasp.Select(T, T, rasp.Comparison.LT)),
    "full": lambda: rasp.Full(1),
    "full_keys": lambda: rasp.SelectorWidth(rasp.Select(rasp.Full(1), T, rasp.Comparison.EQ)),
    "numerical_mean_of_full": lambda: rasp.numerical(rasp.Aggregate(
        rasp.Select(I, T, rasp.Comparison.LEQ), rasp.numerical(rasp.Full(1)), default=0)),
}


@pytest.mark.parametrize("name", sorted(SMALL_PROGRAMS))
def test_small_program_model_and_interpreter_agree(name: str) -> None:
    program = SMALL_PROGRAMS[name]()
    vocab = {0, 1, 2}
    model = compiling.compile_rasp_to_model(program, vocab, 3, compiler_bos=BOS)
    for val in sorted(vocab):  # tracr's check: one token at a time
        got = model.apply([BOS, val]).decoded
        assert got[0] == BOS and math.isclose(got[1], program([val])[0], abs_tol=1e-6), (val, got)
    assert _agrees_everywhere(program, vocab, 3) == 39


def test_select_aggregate_of_a_constant_map() -> None:
    program = SMALL_PROGRAMS["select_aggregate"]()
    assert [program([v]) for v in (0, 1, 2)] == [[1], [1], [1]]
    assert program([0, 0, 2]) == [1, 1, 1]  # a mean of ones, two keys selected


def test_numerical_mlp_over_a_many_valued_mean() -> None:
    """tracr's numerical MLPs discretise their input; here a map of ``frac_prevs`` at max length 10
    (its mean takes dozens of values) and a map of a mean of non-0/1 numbers stay exact."""
    frac = lib.make_frac_prevs(T == "a")
    step = rasp.numerical(rasp.Map(lambda x: 1 if x > 0.3 else 0, frac))
    wrap = rasp.numerical(rasp.Map(lambda x: (x * 7) % 1, frac))
    assert _agrees_everywhere(step, set("ab"), 10) >= 600
    assert _agrees_everywhere(wrap, set("ab"), 10) >= 600
    means = rasp.numerical(rasp.Aggregate(rasp.Select(I, I, rasp.Comparison.LEQ), _ident(T), default=0))
    assert _agrees_everywhere(rasp.categorical(rasp.Map(lambda x: round(x, 1), means)), {1, 2, 3}, 6) == 1092


PADDED = [  # tracr's padded-input cases: (program, input, expected), vocab abcd, max length 5
    ("reverse", "abcd", list("dcba")), ("reverse", "abc", list("cba")), ("reverse", "ad", list("da")),
    ("reverse", "c", ["c"]),
    ("length_categorical", "abc", [3, 3, 3]), ("length_categorical", "ad", [2, 2]),
    ("length_categorical", "c", [1]),
    ("length_numerical", "abc", [3, 3, 3]), ("length_numerical", "ad", [2, 2]),
    ("length_numerical", "c", [1]),
]
PADDED_PROGRAMS = {
    "reverse": lambda: lib.make_reverse(T),
    "length_categorical": lambda: rasp.categorical(lib.make_length()),
    "length_numerical": lambda: rasp.numerical(lib.make_length()),
}


@pytest.fixture(scope="module")
def padded_models() -> dict:
    return {name: compiling.compile_rasp_to_model(build(), ABCD, 5, compiler_bos=BOS, compiler_pad=PAD)
            for name, build in PADDED_PROGRAMS.items()}


@pytest.mark.parametrize(("name", "x", "expected"), PADDED, ids=[f"{n}-{x}" for n, x, _ in PADDED])
def test_padded_input_gives_tracr_output(padded_models: dict, name: str, x: str, expected: list) -> None:
    pad = 5 - len(x)
    out = padded_models[name].apply([BOS, *x] + [PAD] * pad).decoded
    assert out[0] == BOS and out[len(out) - pad:] == [PAD] * pad
    assert as_expected(out[1:len(out) - pad], expected)
    assert as_expected(rasp.run(PADDED_PROGRAMS[name](), list(x)), expected)


@pytest.mark.parametrize("name", sorted(PADDED_PROGRAMS))
def test_padded_program_agrees_everywhere(padded_models: dict, name: str) -> None:
    program = PADDED_PROGRAMS[name]()
    result = check_model(padded_models[name].model, program.program(), _inputs(ABCD, 5))
    assert result.inputs_checked == 1364 and result.ok, result.failures


def test_aggregate_default_that_tracr_writes_onto_bos() -> None:
    """tracr's expected failure (rasp_to_craft_integration_test): ``agg1``'s default True lands on
    tracr's BOS position and shifts the scores of the selector built on it, so tracr's model says
    [1, 1] where its evaluator says [1, 0.5].  Here the model agrees."""
    not_a = rasp.Map(lambda x: x != "a", T)
    sel1 = rasp.Select(T, T, lambda k, q: k == "a" and q == "a")
    agg1 = rasp.Aggregate(sel1, not_a, default=True)
    sel2 = rasp.Select(agg1, agg1, lambda k, q: k or q)
    program = rasp.numerical(rasp.Aggregate(sel2, rasp.numerical(not_a), default=1))
    assert as_expected(rasp.run(program, ["a", "b"]), [1, 0.5])  # [True, 0.5]: a mean of one value
    model = rasp.compile_program(program, {"a", "b"}, 2)
    assert as_expected(model.run([["a", "b"]])[0], [1, 0.5])
    # ["a", "a"] has no answer: agg1 averages two booleans (tracr's evaluator gives 0.0)
    assert _agrees_everywhere(program, {"a", "b"}, 2) == 5
    assert _agrees_everywhere(program, {"a", "b"}, 6) > 0


# ------------------------------------------------------------------------ causal (lib_test, integration)
CAUSAL = sorted(n for n, case in CASES.items() if case[3])


def _causal_selector_width():
    return rasp.SelectorWidth(rasp.Select(T, T, rasp.Comparison.TRUE))


@pytest.mark.parametrize("name", CAUSAL)
def test_causal_evaluator_gives_tracr_outputs(name: str) -> None:
    build, _vocab, _max_len, _causal, examples = CASES[name]
    for x, expected in examples:
        assert as_expected(causal_eval.evaluate(build(), list(x)), expected), x


def test_causal_selector_width() -> None:
    """tracr's only causal-only case: under a causal mask, ``select(…, TRUE)`` sees the prefix."""
    program = _causal_selector_width()
    assert causal_eval.evaluate(program, list("abcd")) == [1, 2, 3, 4]
    assert rasp.run(program, list("abcd")) == [4, 4, 4, 4]
    # the compiler's own causal mode keeps the program's meaning, so it refuses to look ahead
    with pytest.raises(CompileError, match="after its query position"):
        rasp.compile_program(program, ABCD, 5, causal=True)


@pytest.mark.parametrize("name", [*CAUSAL, "selector_width"])
def test_tracr_causal_compile_computes_causal_evaluation(name: str) -> None:
    """tracr's ``compile_rasp_to_model(..., causal=True)`` masks every selector: its model computes
    ``causal_eval``, for every input up to the max length."""
    if name == "selector_width":
        program, vocab, max_len, examples = _causal_selector_width(), ABCD, 5, [("abcd", [1, 2, 3, 4])]
    else:
        build, vocab, max_len, _causal, examples = CASES[name]
        program = build()
    model = compiling.compile_rasp_to_model(program, vocab, max_len, causal=True,
                                            compiler_bos=BOS, compiler_pad=PAD)
    for x, expected in examples:
        pad = int(len(x) < max_len)  # a pad past max_len has no position to run at, in tracr neither
        out = model.apply([BOS, *x] + [PAD] * pad).decoded
        assert out[0] == BOS and out[1 + len(x):] == [PAD] * pad, x
        assert as_expected(out[1:1 + len(x)], expected), x
    inputs = _inputs(vocab, max_len)
    numerical = model.model.config["output"]["encoding"] == "numerical"
    for x, got in zip(inputs, model.model.run(inputs), strict=True):
        assert agree(got, causal_eval.evaluate(program, x), numerical, 1e-4)[0], x


# tracr's library programs that look ahead: compile_rasp_to_model(..., causal=True) masks them, as
# tracr does, and the model must compute their causal evaluation
LOOK_AHEAD_LIBRARY = {
    "shuffle_dyck": (lambda: lib.make_shuffle_dyck(["()"]), {"(", ")", "a"}, 6),
    "shuffle_dyck2": (lambda: lib.make_shuffle_dyck2(), {"(", ")", "{", "}"}, 5),
    "reverse_bools": (lambda: lib.make_reverse(rasp.tokens == "a"), {"a", "b"}, 6),
}


@pytest.mark.parametrize("name", sorted(LOOK_AHEAD_LIBRARY))
def test_tracr_causal_compile_of_library_programs_that_look_ahead(name: str) -> None:
    """shuffle_dyck's last_zero aggregates booleans with tracr's default (None: False); written with
    RASP's 0, the masked program may mix 0 into a boolean output where the analysis cannot prove
    select_last non-empty (masked, `length - 1` is no longer the last index), and the causal
    compile was refused ("may be a boolean at one position and an equal number at another")."""
    build, vocab, max_len = LOOK_AHEAD_LIBRARY[name]
    program = build()
    model = compiling.compile_rasp_to_model(program, vocab, max_len, causal=True,
                                            compiler_bos=BOS, compiler_pad=PAD)
    inputs = _inputs(vocab, max_len)
    for x, got in zip(inputs, model.model.run(inputs), strict=True):
        want = causal_eval.evaluate(program, x)
        assert got == want and [type(g) for g in got] == [type(w) for w in want], x


def test_library_aggregates_keep_tracr_defaults() -> None:
    """tracr's lib writes these Aggregates without a default (None): for booleans that is False."""
    assert lib.make_reverse(rasp.tokens == "a").default is False
    last_zero = next(e for e in _exprs(lib.make_shuffle_dyck2()) if e.name == "last_zero")
    assert last_zero.default is False
    assert lib.make_sort_unique(rasp.tokens == "a", rasp.indices).default is False
    assert lib.make_sort_unique(rasp.tokens, rasp.indices).default == 0


def _exprs(root) -> list:
    seen, todo = {}, [root]
    while todo:
        e = todo.pop()
        if e.unique_id not in seen:
            seen[e.unique_id] = e
            todo.extend(e.children)
    return list(seen.values())

# ------------------------------------------------------------------------------ basis_inference_test
def _values(program, vocab, max_len: int, node: str | None = None) -> set:
    graph = program.program()
    info = Analysis(graph, sorted(vocab, key=str), max_len).info[node or graph.output]
    return set(info.values)


def _reachable(program, vocab, max_len: int) -> set:
    """Every value the interpreter gives, on every input up to ``max_len``."""
    out = set()
    for x in exhaustive_inputs(sorted(vocab, key=str), max_len):
        try:
            out.update(rasp.run(program, x))
        except UserError:
            pass
    return out


def _close_subset(small: set, big: set) -> bool:
    return all(any(math.isclose(a, b, abs_tol=1e-9) if not isinstance(a, str) and not isinstance(b, str)
                   else a == b for b in big) for a in small)


@pytest.mark.parametrize(("vocab", "expected"), [({1, 2, 3}, {2, 3, 4}), ({0, 5}, {1, 6})])
def test_value_set_of_one_map(vocab: set, expected: set) -> None:
    program = rasp.categorical(rasp.Map(lambda x: x + 1, T))
    assert _values(program, vocab, 1) == expected == _reachable(program, vocab, 1)


def test_value_sets_close_to_the_tip() -> None:
    inner = rasp.categorical(T + 1)
    inner = rasp.categorical(inner + inner).named("intermediate")
    program = rasp.categorical(inner + I)
    assert _values(program, {0, 1}, 2) == {2, 3, 4, 5} == _reachable(program, {0, 1}, 2)
    # tracr infers {2, 3, 4}: it combines the two inputs of ``inner + inner`` as if they were
    # independent.  Both are the same s-op (1 or 2), so 3 cannot occur; ours is exact
    ours = _values(program, {0, 1}, 2, "intermediate")
    assert ours == {2, 4} == _reachable(inner, {0, 1}, 2) and ours < {2, 3, 4}


BASIS_CASES = {  # tracr's named cases: (program, vocab, max length, tracr's value set)
    "numerical_aggregate": (lambda: rasp.numerical(rasp.Aggregate(
        rasp.Select(T, I, rasp.Comparison.EQ), T, default=0)), {0, 1}, 2, {0, 1, 1 / 2}),
    "selector_width": (lambda: rasp.SelectorWidth(rasp.Select(T, I, rasp.Comparison.EQ)), {0, 1}, 3,
                       {0, 1, 2, 3}),
    "annotated_tokens": (lambda: rasp.categorical(T), {"a", "b"}, 2, {"a", "b"}),
    "annotated_indices": (lambda: rasp.categorical(I), {"a", "b"}, 2, {0, 1}),
    # tracr's program is categorical(...); that one is refused here (below).  Unannotated, the
    # value set holds tracr's {0, 1, 2} and the means of several selected indices as well
    "categorical_aggregate_unannotated": (lambda: rasp.Aggregate(rasp.Select(T, I, rasp.Comparison.EQ), I),
                                          {0, 1}, 3, {0, 1, 2}),
}


@pytest.mark.parametrize("name", sorted(BASIS_CASES))
def test_value_set_holds_tracrs_and_every_reachable_value(name: str) -> None:
    build, vocab, max_len, tracr_set = BASIS_CASES[name]
    program = build()
    ours = _values(program, vocab, max_len)
    assert _close_subset(tracr_set, ours)
    assert _close_subset(_reachable(program, vocab, max_len), ours)
    if name != "categorical_aggregate_unannotated":
        assert len(ours) == len(tracr_set)  # the same set


def test_categorical_aggregate_of_several_indices_is_refused() -> None:
    """tracr's ``categorical_aggregate`` case: ``select(tokens, indices, ==)`` picks every key whose
    token equals the query's index, so on ``[0, 0]`` query 0 averages indices 0 and 1 (0.5), a value
    tracr's set {0, 1, 2} lacks and its compiled model cannot hold.  Here: one clear error."""
    program = rasp.categorical(rasp.Aggregate(rasp.Select(T, I, rasp.Comparison.EQ), I))
    assert rasp.run(program, [0, 0]) == [0.5, 0]
    with pytest.raises(CompileError, match="may pick several keys") as err:
        Analysis(program.program(), [0, 1], 3)
    assert "categorical" in err.value.message
    with pytest.raises(CompileError, match="may pick several keys"):
        rasp.compile_program(program, {0, 1}, 3)


def test_map_that_raises_on_a_value_is_noted() -> None:
    """tracr logs a warning when ``1 / x`` fails on the token 0.  Here the value set leaves it out,
    the compile notes it, the interpreter raises on inputs holding 0, and the model agrees elsewhere."""
    program = rasp.numerical(rasp.Map(lambda x: 1 / x, T))
    assert _values(program, {0, 1, 2}, 1) == {0.5, 1.0}
    with pytest.raises(UserError, match="ZeroDivisionError"):
        rasp.run(program, [0])
    model = rasp.compile_program(program, {0, 1, 2}, 1)
    assert any("ZeroDivisionError" in note for note in model.config["notes"])
    result = check_model(model, program.program(), [[0], [1], [2]])
    assert (result.inputs_checked, result.inputs_undefined, result.ok) == (2, 1, True)


# ----------------------------------------------------------------------------------- validating_test
# tracr's supported TEST_CASES and its UNSUPPORTED_TEST_CASES are compiled and checked on every
# input by tests/test_tracr_cases.py (the unsupported ones compile here).  These are the dynamic
# cases, and the other things tracr's validator checks for.
def _mean_of_tokens(comparison):
    return rasp.Aggregate(rasp.Select(T, T, comparison), T)


@pytest.mark.parametrize(("comparison", "expected"), [(rasp.Comparison.TRUE, [2.5] * 4),
                                                      (rasp.Comparison.LEQ, [1, 1.5, 2, 2.5])],
                         ids=["mean", "prev_mean"])
def test_categorical_mean_that_tracr_flags_compiles_correctly(comparison, expected) -> None:
    """tracr's dynamic failures: a categorical aggregate averaging several tokens.  tracr's model
    would move one token; here the mean is held as a number, and agrees everywhere."""
    program = _mean_of_tokens(comparison)
    assert as_expected(rasp.run(program, [1, 2, 3, 4]), expected)
    model = rasp.compile_program(program, {1, 2, 3, 4}, 5)
    assert as_expected(model.run([[1, 2, 3, 4]])[0], expected)
    assert _agrees_everywhere(program, {1, 2, 3, 4}, 5) == 1364


@pytest.mark.parametrize("comparison", [rasp.Comparison.TRUE, rasp.Comparison.LEQ], ids=["mean", "prev_mean"])
def test_categorical_mean_marked_categorical_is_refused(comparison) -> None:
    program = rasp.categorical(_mean_of_tokens(comparison))
    with pytest.raises(CompileError, match="may pick several keys.*no categorical encoding"):
        rasp.compile_program(program, {1, 2, 3, 4}, 5)


def test_categorical_mean_of_strings_has_no_answer() -> None:
    """Several strings selected: the interpreter raises (as tracr's evaluator does), the compile notes
    it, and the model refuses the input rather than pick one token."""
    program = _mean_of_tokens(rasp.Comparison.TRUE)
    with pytest.raises(UserError, match="mean of non-numbers"):
        rasp.run(program, list("ab"))
    model = rasp.compile_program(program, set("abc"), 3)
    assert any("several keys may be selected" in note for note in model.config["notes"])
    for x in (list("ab"), list("abb"), list("abc")):
        with pytest.raises(UserError, match="no answer.*mean of non-numbers"):
            model.run([x])
    assert model.run([["c"]]) == [["c"]]
    assert _agrees_everywhere(program, set("abc"), 3) == 3  # one-token inputs; the rest have no answer


def test_categorical_mean_of_equal_values() -> None:
    """tracr's validator accepts several selected keys holding one value (nothing is averaged) and
    compiles it.  So does this compiler, as a mean (unannotated) or, marked categorical, as a one-hot:
    the selector compares the tokens with ==, and the value is a function of the token, so every
    key it picks for a query holds the same value (``Analysis.selected_values_agree``)."""
    doubled = rasp.Aggregate(rasp.Select(T, T, rasp.Comparison.EQ), rasp.Map(lambda x: 2 * x, T))
    assert rasp.run(doubled, [1, 1, 3]) == [2, 2, 6]
    assert _agrees_everywhere(doubled, {1, 2, 3}, 5) == 363
    marked = rasp.categorical(doubled)
    model = rasp.compile_program(marked, {1, 2, 3}, 5)
    assert model.config["output"]["encoding"] == "categorical"
    assert not any("several keys" in note for note in model.config["notes"])
    assert _agrees_everywhere(marked, {1, 2, 3}, 5) == 363
    # a value that is not a function of the compared key is still refused
    with pytest.raises(CompileError, match="may pick several keys"):
        rasp.compile_program(rasp.categorical(rasp.Aggregate(rasp.Select(T, T, rasp.Comparison.EQ), I)),
                             {1, 2, 3}, 5)


NUMERICAL_MEANS = {  # tracr flags a numerical aggregate of values other than 0 and 1
    "prefix_mean_of_tokens": (lambda: rasp.numerical(rasp.Aggregate(
        rasp.Select(I, I, rasp.Comparison.LEQ), _ident(T), default=0)), {1, 2, 3}, 5),
    "mean_of_fractions": (lambda: rasp.numerical(rasp.Aggregate(
        rasp.Select(T, T, rasp.Comparison.GEQ), rasp.numerical(rasp.Map(lambda x: x / 3, T)), default=0)),
        {1, 2, 3}, 5),
    "map_of_a_prefix_mean": (lambda: rasp.numerical(rasp.Map(lambda x: x * x - 1, rasp.numerical(
        rasp.Aggregate(rasp.Select(I, I, rasp.Comparison.LEQ), _ident(T), default=0)))), {1, 2, 3}, 6),
    # tracr's static checks: a categorical aggregate's default must be None, a numerical one's 0
    "categorical_default": (lambda: rasp.Aggregate(
        rasp.Select(I, I, lambda k, q: k == q - 1), T, default="z"), {"a", "b"}, 5),
    "numerical_default_1": (lambda: rasp.numerical(rasp.Aggregate(
        rasp.Select(I, I, rasp.Comparison.LT), rasp.numerical(T == "a"), default=1)), {"a", "b", "c"}, 5),
}


@pytest.mark.parametrize("name", sorted(NUMERICAL_MEANS))
def test_what_tracrs_validator_flags_compiles_correctly(name: str) -> None:
    build, vocab, max_len = NUMERICAL_MEANS[name]
    assert _agrees_everywhere(build(), vocab, max_len) > 0


def test_prefix_mean_of_tokens_values() -> None:
    program = NUMERICAL_MEANS["prefix_mean_of_tokens"][0]()
    assert rasp.run(program, [1, 2, 3, 4][:3]) == [1, 1.5, 2]
    assert rasp.run(NUMERICAL_MEANS["categorical_default"][0](), list("ab")) == ["z", "a"]
