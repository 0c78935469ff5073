"""tracr's RASP-language unit tests, run against this Python API.

The cases come from tracr's ``tracr/rasp/rasp_test.py`` and ``tracr/rasp/causal_eval_test.py``
(github.com/google-deepmind/tracr): the same calls on the same inputs, rewritten for pytest, with
``from rasp_compiler import pyapi as rasp`` in place of ``from tracr.rasp import rasp``.  Every
case of those files is here, plus a few checks of tracr's fields and functions that the cases use.

Differences by design (``docs/python-api.md``, "What differs from tracr"):

* tracr's ``None`` (an aggregate that selects nothing, ``default=None``) is RASP's 0 here, or
  ``False`` for an s-op built as a boolean.  tracr's three aggregate cases that expect ``None``
  are kept with 0 in its place.
* A map of a map is merged only when the inner map has no name, encoding or annotations; tracr
  merges it always.  ``a & b``, ``a | b`` and ``~a`` on selectors make one node each, as ``and``,
  ``or`` and ``not`` in ``.rasp`` text do; ``rasp.selector_and`` / ``selector_or`` /
  ``selector_not`` merge selects as tracr does.
* ``annotate``, ``.annotated`` and ``.named`` change the expression itself (tracr: a copy);
  ``numerical`` and ``categorical`` return a copy, as tracr's do.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any, Callable

import pytest

from rasp_compiler import pyapi as rasp
from rasp_compiler.pyapi import causal_eval

T, F = True, False


def eq_select() -> rasp.Select:
    return rasp.Select(rasp.tokens, rasp.indices, rasp.Comparison.EQ)


def leq_select() -> rasp.Select:
    return rasp.Select(rasp.indices, rasp.tokens, rasp.Comparison.LEQ)


# tracr's example expressions, built afresh for each test (several tests rename or annotate them)
SOP_EXAMPLES: dict[str, Callable[[], rasp.SOp]] = {
    "tokens": lambda: rasp.tokens,
    "length": lambda: rasp.length,
    "indices": lambda: rasp.indices,
    "map": lambda: rasp.Map(lambda x: x, rasp.tokens),
    "sequence_map": lambda: rasp.SequenceMap(lambda x, y: x + y, rasp.tokens, rasp.tokens),
    "linear_sequence_map": lambda: rasp.LinearSequenceMap(rasp.tokens, rasp.tokens, 0.1, 0.2),
    "aggregate": lambda: rasp.Aggregate(eq_select(), rasp.tokens),
    "selector_width": lambda: rasp.SelectorWidth(eq_select()),
}
SELECTOR_EXAMPLES: dict[str, Callable[[], rasp.Selector]] = {
    "select": eq_select,
    "selector_and": lambda: rasp.SelectorAnd(eq_select(), leq_select()),
    "selector_or": lambda: rasp.SelectorOr(eq_select(), leq_select()),
    "selector_not": lambda: rasp.SelectorNot(eq_select()),
}
ALL_EXAMPLES = {**SOP_EXAMPLES, **SELECTOR_EXAMPLES}


# ------------------------------------------------------------------ labels and names
def test_primitive_labels() -> None:
    assert (rasp.tokens.label, rasp.indices.label, rasp.length.label) == ("tokens", "indices", "length")


@pytest.mark.parametrize("kind", [k for k in ALL_EXAMPLES if k not in ("tokens", "indices", "length")])
def test_default_names(kind: str) -> None:
    expr = ALL_EXAMPLES[kind]()
    assert expr.name == kind
    assert expr.label == f"{kind}_{expr.unique_id}"
    assert expr.named("mine").label == f"mine_{expr.unique_id}"


@pytest.mark.parametrize("name", ["tokens", "length", "indices"])
def test_primitives_keep_their_names(name: str) -> None:
    assert SOP_EXAMPLES[name]().name == name


# ------------------------------------------------------------------ s-ops
INPUTS = ["hello", "h", list("hello"), ["h"], [1, 2], [0.1, 0.2]]


@pytest.mark.parametrize("xs", INPUTS)
def test_tokens_indices_length(xs: Any) -> None:
    assert rasp.tokens(xs) == list(xs)
    assert rasp.indices(xs) == list(range(len(xs)))
    assert rasp.length(xs) == [len(xs)] * len(xs)


def test_primitives_are_sops_and_expressions() -> None:
    for prim in (rasp.tokens, rasp.indices, rasp.length):
        assert isinstance(prim, rasp.SOp) and isinstance(prim, rasp.RASPExpr)


@pytest.mark.parametrize("f, xs, expected", [
    (lambda x: x + "a", "hello", ["ha", "ea", "la", "la", "oa"]),
    (lambda x: x + "t", "h", ["ht"]),
    (lambda x: x + 1, [1, 2], [2, 3]),
    (lambda x: x / 2, [0.1, 0.2], [0.05, 0.1]),
])
def test_map(f: Callable, xs: Any, expected: list) -> None:
    assert rasp.Map(f, rasp.tokens)(xs) == expected


def test_nested_elementwise_operators_make_one_map() -> None:
    halved = ((rasp.tokens * 2) + 2) / 2
    assert isinstance(halved, rasp.Map)
    assert halved.inner is rasp.tokens
    assert halved([1]) == [2]
    assert len(halved.program().graph) == 2  # tokens and one map


def test_nested_maps_stay_two_maps_without_simplify() -> None:
    doubled = rasp.tokens * 2
    plus_two = rasp.Map(lambda x: x + 2, doubled, simplify=False)
    assert plus_two.inner is doubled and plus_two.inner is not rasp.tokens
    assert plus_two([1]) == [4]
    merged = rasp.Map(lambda x: x + 2, rasp.tokens * 2)
    assert merged.inner is rasp.tokens and merged([1]) == [4]


def test_a_named_or_annotated_inner_map_is_kept() -> None:
    """By design: merging would drop a node the user named or annotated."""
    named = (rasp.tokens * 2).named("doubled")
    assert (named + 2).inner is named
    numeric = rasp.numerical(rasp.tokens * 2)
    assert (numeric + 2).inner is numeric


@pytest.mark.parametrize("f, xs, expected", [
    (lambda x, y: x + y, "hello", ["hh", "ee", "ll", "ll", "oo"]),
    (lambda x, y: x + y, "h", ["hh"]),
    (lambda x, y: x + y, [1, 2], [2, 4]),
    (lambda x, y: x * y, [1, 2], [1, 4]),
])
def test_sequence_map(f: Callable, xs: Any, expected: list) -> None:
    assert rasp.SequenceMap(f, rasp.tokens, rasp.tokens)(xs) == expected


def test_sequence_map_with_the_same_input_twice_logs_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        rasp.SequenceMap(lambda x, y: x + y, rasp.tokens, rasp.tokens)
    assert any(r.levelno == logging.WARNING and "Map instead" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        rasp.SequenceMap(lambda x, y: x + y, rasp.tokens, rasp.indices)
    assert not caplog.records


@pytest.mark.parametrize("fst_fac, snd_fac, xs, expected", [
    (1, 1, [1, 2], [2, 4]),
    (1, -1, [1, 2], [0, 0]),
    (1, -2, [1, 2], [-1, -2]),
])
def test_linear_sequence_map(fst_fac: float, snd_fac: float, xs: list, expected: list) -> None:
    linear = rasp.LinearSequenceMap(rasp.tokens, rasp.tokens, fst_fac, snd_fac)
    assert linear(xs) == expected
    assert isinstance(linear, rasp.SequenceMap) and (linear.fst_fac, linear.snd_fac) == (fst_fac, snd_fac)


@pytest.mark.parametrize("value, xs, expected", [
    ([5, 5, 5, 5, 5], "hello", [5, 5, 5, 5, 5]),
    (["e"], "h", ["e"]),
    ([1, 2, 3, 4, 5], list("hello"), [1, 2, 3, 4, 5]),
    ([2, 2], [1, 2], [2, 2]),
])
def test_constant(value: list, xs: Any, expected: list) -> None:
    assert rasp.ConstantSOp(value)(xs) == expected


def test_constant_complains_if_sizes_dont_match() -> None:
    with pytest.raises(ValueError, match=r"^.*Constant len .* doesn't match input len .*$"):
        rasp.ConstantSOp([1, 2, 3])("longer string")
    with pytest.raises(ValueError, match="Constant len 2 doesn't match input len 3"):
        rasp.ConstantSelector([[T, F], [F, T]])("abc")


def test_constant_complaints_can_be_turned_off() -> None:
    # tracr gives the constant as it is; here the positions past it hold 0 (tracr's None)
    assert rasp.ConstantSOp([1, 2, 3], check_length=False)("longer string") == [1, 2, 3] + [0] * 10
    assert rasp.ConstantSelector([[T, T], [F, T]], check_length=False)("abc") == [
        [T, T, F], [F, T, F], [F, F, F]]


def test_numeric_dunders() -> None:
    xs = [0, 1, 2]
    assert (rasp.tokens > 1)(xs) == [0, 0, 1]
    assert (1 < rasp.tokens)(xs) == [0, 0, 1]
    assert (rasp.tokens < 1)(xs) == [1, 0, 0]
    assert (1 > rasp.tokens)(xs) == [1, 0, 0]
    assert (rasp.tokens == 1)(xs) == [0, 1, 0]
    assert (rasp.tokens + 1)(xs) == [1, 2, 3]
    assert (1 + rasp.tokens)(xs) == [1, 2, 3]


def test_dunders_with_sops() -> None:
    xs = [0, 1, 2]
    assert (rasp.tokens + rasp.indices)(xs) == [0, 2, 4]
    assert (rasp.length - 1 - rasp.indices)(xs) == [2, 1, 0]
    assert (rasp.length * rasp.length)(xs) == [9, 9, 9]


@pytest.mark.parametrize("make, expected", [
    (lambda: rasp.tokens & True, [T, F]),
    (lambda: rasp.tokens & False, [F, F]),
    (lambda: rasp.tokens | True, [T, T]),
    (lambda: rasp.tokens | False, [T, F]),
    (lambda: True & rasp.tokens, [T, F]),
    (lambda: False & rasp.tokens, [F, F]),
    (lambda: True | rasp.tokens, [T, T]),
    (lambda: False | rasp.tokens, [T, F]),
    (lambda: ~rasp.tokens, [F, T]),
])
def test_logical_dunders(make: Callable[[], rasp.SOp], expected: list) -> None:
    assert make()([T, F]) == expected


def test_logical_dunders_of_constants() -> None:
    fst, snd = rasp.ConstantSOp([T, T, F, F]), rasp.ConstantSOp([T, F, T, F])
    assert (fst & snd)([1, 1, 1, 1]) == [T, F, F, F]
    assert (fst | snd)([1, 1, 1, 1]) == [T, T, T, F]


def test_sop_equality_as_a_truth_value_is_identity() -> None:
    """tracr's tests compare s-ops with assertEqual; `a == b` is still an elementwise s-op."""
    assert rasp.tokens == rasp.tokens
    assert rasp.tokens != rasp.indices
    assert not (rasp.tokens == rasp.indices)
    assert (rasp.tokens == rasp.indices)([0, 2]) == [True, False]
    with pytest.raises(TypeError, match="truth value"):
        bool(rasp.tokens == 1)


# ------------------------------------------------------------------ encodings
@pytest.mark.parametrize("name", list(SOP_EXAMPLES))
def test_sops_are_categorical_by_default(name: str) -> None:
    sop = SOP_EXAMPLES[name]()
    assert rasp.is_categorical(sop) and rasp.get_encoding(sop) is rasp.Encoding.CATEGORICAL


@pytest.mark.parametrize("name", list(SOP_EXAMPLES))
def test_is_numerical(name: str) -> None:
    sop = SOP_EXAMPLES[name]()
    assert rasp.is_numerical(rasp.numerical(sop))
    assert not rasp.is_numerical(rasp.categorical(sop))


@pytest.mark.parametrize("name", list(SOP_EXAMPLES))
def test_is_categorical(name: str) -> None:
    sop = SOP_EXAMPLES[name]()
    assert rasp.is_categorical(rasp.categorical(sop))
    assert not rasp.is_categorical(rasp.numerical(sop))


@pytest.mark.parametrize("name", list(SOP_EXAMPLES))
def test_a_second_encoding_annotates_a_copy(name: str) -> None:
    num_sop = rasp.numerical(SOP_EXAMPLES[name]())
    cat_num_sop = rasp.categorical(num_sop)
    assert rasp.is_numerical(num_sop)
    assert rasp.is_categorical(cat_num_sop)


def test_annotations_hold_name_and_encoding() -> None:
    sop = rasp.numerical(rasp.Map(lambda x: x, rasp.tokens)).named("same")
    assert sop.annotations == {"name": "same", "encoding": rasp.Encoding.NUMERICAL}
    with pytest.raises(TypeError):
        rasp.get_encoding(eq_select())


# ------------------------------------------------------------------ selectors
def test_select_eq() -> None:
    assert rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)("hey") == [
        [T, F, F], [F, T, F], [F, F, T]]


@pytest.mark.parametrize("comparison, expected", [
    (rasp.Comparison.LT, [[F, F], [T, F]]),
    (rasp.Comparison.LEQ, [[T, F], [T, T]]),
    (rasp.Comparison.GT, [[F, T], [F, F]]),
    (rasp.Comparison.GEQ, [[T, T], [F, T]]),
    (rasp.Comparison.NEQ, [[F, T], [T, F]]),
    (rasp.Comparison.TRUE, [[T, T], [T, T]]),
    (rasp.Comparison.FALSE, [[F, F], [F, F]]),
])
def test_select_comparisons(comparison: rasp.Comparison, expected: list) -> None:
    assert rasp.Select(rasp.tokens, rasp.tokens, comparison)([0, 1]) == expected


def test_comparisons_are_predicates_of_key_and_query() -> None:
    assert rasp.Comparison.LT(1, 2) and not rasp.Comparison.LT(2, 1)
    assert rasp.Comparison.TRUE("a", 3) and not rasp.Comparison.FALSE("a", 3)


def test_a_missing_annotation_is_tracrs_key_error_and_a_user_error() -> None:
    # it was a bare KeyError('foo') from a plain dict
    from rasp_compiler.errors import UserError

    annotations = rasp.Map(lambda x: x, rasp.tokens).annotated(foo=1).annotations
    assert annotations["foo"] == 1 and annotations.get("bar") is None and "bar" not in annotations
    with pytest.raises(KeyError, match=r"No annotation exists for key 'bar'\. Available keys: "
                                       r"\['encoding', 'foo', 'name'\]") as err:
        annotations["bar"]
    assert isinstance(err.value, UserError) and isinstance(err.value, rasp.PyApiKeyError)


def test_comparison_members_values_and_errors_are_tracrs() -> None:
    # tracr's order and values: TRUE/FALSE were "true"/"false", NEQ came second
    assert [(c.name, c.value) for c in rasp.Comparison] == [
        ("EQ", "=="), ("LT", "<"), ("LEQ", "<="), ("GT", ">"), ("GEQ", ">="), ("NEQ", "!="),
        ("TRUE", "True"), ("FALSE", "False")]
    assert rasp.Comparison("True") is rasp.Comparison.TRUE and rasp.Comparison("<=") is rasp.Comparison.LEQ
    # a None key or query is tracr's ValueError; values that do not compare, its TypeError. Both
    # were a bare OperatorError (no UserError) before
    for key, query in ((None, 1), (1, None)):
        with pytest.raises(rasp.PyApiValueError, match="is None"):
            rasp.Comparison.LT(key, query)
    with pytest.raises(rasp.PyApiTypeError, match="cannot apply '<'"):
        rasp.Comparison.LT(1, "a")
    # TRUE/FALSE still select everything/nothing, through ~ and selector_not too
    every = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE)
    assert rasp.SelectorWidth(every)("abc") == [3, 3, 3]
    assert rasp.SelectorWidth(~every)("abc") == [0, 0, 0]
    assert rasp.SelectorWidth(rasp.selector_not(every))("abc") == [0, 0, 0]
    nothing = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.FALSE)
    assert rasp.compile_program(rasp.SelectorWidth(nothing), "ab", 3).run(["ab"]) == [[0, 0]]


def test_selector_and_merges_selects_with_the_same_keys_and_queries() -> None:
    selector = rasp.selector_and(rasp.Select(rasp.tokens, rasp.indices, rasp.Comparison.GEQ),
                                 rasp.Select(rasp.tokens, rasp.indices, rasp.Comparison.LEQ))
    assert isinstance(selector, rasp.Select)
    assert selector.keys is rasp.tokens and selector.queries is rasp.indices
    assert selector([0, 1, 5]) == [[T, F, F], [F, T, F], [F, F, F]]


def test_selector_and_keeps_selects_with_other_keys_and_queries() -> None:
    selector = rasp.selector_and(rasp.Select(rasp.tokens, rasp.indices, rasp.Comparison.GEQ),
                                 rasp.Select(rasp.indices, rasp.tokens, rasp.Comparison.LEQ))
    assert isinstance(selector, rasp.SelectorAnd)


@pytest.mark.parametrize("full_in", ["keys", "queries"])
def test_selector_and_merges_across_a_full(full_in: str) -> None:
    if full_in == "keys":
        fst = rasp.Select(rasp.Full(1), rasp.indices, rasp.Comparison.GEQ)
        snd = rasp.Select(rasp.tokens, rasp.indices, rasp.Comparison.LEQ)
    else:
        fst = rasp.Select(rasp.tokens, rasp.indices, rasp.Comparison.GEQ)
        snd = rasp.Select(rasp.tokens, rasp.Full(1), rasp.Comparison.LEQ)
    selector = rasp.selector_and(fst, snd)
    assert isinstance(selector, rasp.Select)
    assert selector.keys is rasp.tokens and selector.queries is rasp.indices


SELECT_INPUTS = (rasp.tokens, rasp.indices, rasp.Full(1))


@pytest.mark.parametrize("fst_p, snd_p", list(itertools.product(rasp.Comparison, rasp.Comparison)))
def test_merged_selector_and_or_not_select_what_the_unmerged_ones_do(
        fst_p: rasp.Comparison, snd_p: rasp.Comparison) -> None:
    """tracr parametrises over keys, queries and predicates of both selects; here the predicates
    are parameters and the 81 key/query choices a loop.  `or` and `not` are checked alike."""
    xs = [0, 1, 2, 3]
    for fst_k, fst_q, snd_k, snd_q in itertools.product(SELECT_INPUTS, repeat=4):
        fst, snd = rasp.Select(fst_k, fst_q, fst_p), rasp.Select(snd_k, snd_q, snd_p)
        where = (fst_k, fst_q, snd_k, snd_q)
        assert rasp.selector_and(fst, snd)(xs) == rasp.selector_and(fst, snd, simplify=False)(xs), where
        assert rasp.selector_or(fst, snd)(xs) == rasp.selector_or(fst, snd, simplify=False)(xs), where
    assert rasp.selector_not(fst)(xs) == rasp.selector_not(fst, simplify=False)(xs)


def test_selector_not_and_or_merge_as_tracr_does() -> None:
    negated = rasp.selector_not(rasp.Select(rasp.tokens, rasp.indices, rasp.Comparison.LT))
    assert isinstance(negated, rasp.Select) and negated.predicate == ">="
    assert isinstance(rasp.selector_not(eq_select(), simplify=False), rasp.SelectorNot)
    assert isinstance(rasp.selector_or(eq_select(), eq_select()), rasp.Select)
    custom = rasp.selector_not(rasp.Select(rasp.tokens, rasp.tokens, lambda k, q: k == q + 1))
    assert custom([1, 2]) == [[T, F], [T, T]]


def test_selector_operators_make_one_node_each() -> None:
    """By design: `&`, `|`, `~` are the `.rasp` operators; the tracr functions merge."""
    assert isinstance(eq_select() & eq_select(), rasp.SelectorAnd)
    assert isinstance(eq_select() | eq_select(), rasp.SelectorOr)
    assert isinstance(~eq_select(), rasp.SelectorNot)


def test_select_is_a_selector_and_an_expression() -> None:
    selector = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)
    assert isinstance(selector, rasp.Selector) and isinstance(selector, rasp.RASPExpr)
    assert not isinstance(selector, rasp.SOp)


def test_constant_selector() -> None:
    assert rasp.ConstantSelector([[T, T], [F, F]])([1, 2]) == [[T, T], [F, F]]


# ------------------------------------------------------------------ copies
@pytest.mark.parametrize("name", list(ALL_EXAMPLES))
def test_copy_preserves_name(name: str) -> None:
    expr = ALL_EXAMPLES[name]().named("foo")
    assert expr.copy().name == expr.name == "foo"


@pytest.mark.parametrize("name", list(ALL_EXAMPLES))
def test_renaming_a_copy_does_not_rename_the_original(name: str) -> None:
    expr = ALL_EXAMPLES[name]().named("foo")
    assert expr.copy().named("bar").name == "bar"
    assert expr.name == "foo"


@pytest.mark.parametrize("name", list(ALL_EXAMPLES))
def test_renaming_the_original_does_not_rename_a_copy(name: str) -> None:
    expr = ALL_EXAMPLES[name]().named("foo")
    copy = expr.copy()
    expr.named("bar")
    assert copy.name == "foo"


@pytest.mark.parametrize("name", list(ALL_EXAMPLES))
def test_copy_changes_the_id_and_keeps_the_children(name: str) -> None:
    expr = ALL_EXAMPLES[name]()
    copy = expr.copy()
    assert copy.unique_id != expr.unique_id
    assert [c.unique_id for c in copy.children] == [c.unique_id for c in expr.children]


def test_naming_a_primitive_names_a_copy() -> None:
    named = rasp.tokens.named("foo")
    assert named.name == "foo" and rasp.tokens.name == "tokens"
    assert named.label == "tokens" and named.program().output == "tokens"  # still the input node
    assert named("ab") == ["a", "b"]


# ------------------------------------------------------------------ aggregate
CS, CO = rasp.ConstantSelector, rasp.ConstantSOp


@pytest.mark.parametrize("selector, sop, default, expected", [
    (CS([[T, F], [F, T]]), CO(["h", "e"]), None, ["h", "e"]),
    (CS([[F, T], [F, F]]), CO(["h", "e"]), None, ["e", 0]),     # tracr: ["e", None]
    (CS([[T, F], [F, F]]), CO(["h", "e"]), None, ["h", 0]),     # tracr: ["h", None]
    (CS([[T, T], [F, T]]), CO([0, 1]), 0, [0.5, 1]),
    (CS([[F, F], [T, T]]), CO([0, 1]), 0, [0, 0.5]),
    (CS([[F, F], [T, T]]), CO([0, 1]), None, [0, 0.5]),         # tracr: [None, 0.5]
])
def test_aggregate_on_size_2_inputs(selector: rasp.Selector, sop: rasp.SOp, default: Any,
                                    expected: list) -> None:
    # the input [0, 0] is ignored: the constants give the values
    assert rasp.Aggregate(selector, sop, default)([0, 0]) == expected


def test_aggregate_none_default_of_a_boolean_is_false() -> None:
    shifted = rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, lambda k, q: k == q - 1),
                             rasp.tokens == "a")
    assert shifted.default is False and shifted("ab") == [False, True]


def test_has_prev() -> None:
    def has_prev(seq: rasp.SOp) -> rasp.SOp:
        prev_copy = rasp.SelectorAnd(rasp.Select(seq, seq, rasp.Comparison.EQ),
                                     rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT))
        return rasp.Aggregate(prev_copy, rasp.Full(1), default=0) > 0

    assert has_prev(rasp.tokens)("hello") == [0, 0, 0, 1, 0]
    assert has_prev(rasp.tokens)("helllo") == [0, 0, 0, 1, 1, 0]
    assert has_prev(rasp.tokens)([0, 2, 3, 2, 1, 0, 2]) == [0, 0, 0, 1, 0, 1, 1]


# ------------------------------------------------------------------ tracr's fields and evaluators
def test_expressions_have_tracr_classes_and_fields() -> None:
    sel = rasp.Select(rasp.tokens, rasp.indices, rasp.Comparison.EQ)
    agg = rasp.Aggregate(sel, rasp.tokens, default="x")
    assert isinstance(agg, rasp.Aggregate) and (agg.selector, agg.sop, agg.default) == (sel, rasp.tokens, "x")
    assert agg.children == (sel, rasp.tokens)
    assert (sel.keys, sel.queries, sel.predicate) == (rasp.tokens, rasp.indices, rasp.Comparison.EQ)
    width = rasp.SelectorWidth(sel)
    assert isinstance(width, rasp.SelectorWidth) and width.selector is sel
    both = rasp.SelectorAnd(sel, sel)
    assert (both.fst, both.snd) == (sel, sel) and rasp.SelectorNot(sel).inner is sel
    pair = rasp.SequenceMap(lambda x, y: x - y, rasp.length, rasp.tokens)
    assert (pair.fst, pair.snd) == (rasp.length, rasp.tokens) and pair.f(3, 1) == 2
    assert pair([1, 2, 3]) == [2, 1, 0]
    one = rasp.Map(lambda x: x + 1, rasp.tokens)
    assert one.f(1) == 2 and one([1, 2, 3]) == [2, 3, 4]
    assert rasp.Full(3).fill == 3 and rasp.Full(3)("ab") == [3, 3]
    assert rasp.ConstantSOp([1, 2]).value == [1, 2]


def test_bad_arguments_are_type_errors() -> None:
    with pytest.raises(TypeError, match="function first"):
        rasp.Map(rasp.tokens, lambda x: x)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rasp.SelectorWidth(rasp.tokens)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rasp.Aggregate(rasp.tokens, rasp.tokens)  # type: ignore[arg-type]


def test_evaluate_and_the_default_evaluator() -> None:
    program = rasp.Map(lambda x: x * 2, rasp.tokens)
    assert rasp.evaluate(program, [1, 2]) == [2, 4]
    assert rasp.DefaultRASPEvaluator().evaluate(program, [1, 2]) == [2, 4]
    assert rasp.evaluate(eq_select(), [1, 0]) == [[F, T], [T, F]]  # sel[query][key]


@pytest.mark.parametrize("matrix, expected", [
    ([[T, T, T], [T, T, T], [T, T, T]], [[T, F, F], [T, T, F], [T, T, T]]),
    ([[T, T, T], [F, T, T], [T, F, T]], [[T, F, F], [F, T, F], [T, F, T]]),
])
def test_causal_evaluation(matrix: list, expected: list) -> None:
    assert causal_eval.evaluate(rasp.ConstantSelector(matrix), [T, T, T]) == expected


def test_causal_evaluation_masks_every_selector_of_an_sop() -> None:
    everything = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE)
    assert causal_eval.evaluate(rasp.SelectorWidth(everything), "abc") == [1, 2, 3]
    assert rasp.SelectorWidth(everything)("abc") == [3, 3, 3]
    differ = ~rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)
    assert differ("ab") == [[F, T], [T, F]]
    assert causal_eval.CausalEvaluator().evaluate(differ, "ab") == [[F, F], [T, F]]


def test_merged_maps_and_selects_compile_to_what_the_interpreter_gives() -> None:
    halved = ((rasp.tokens * 2) + 2) / 2
    between = rasp.selector_and(rasp.Select(rasp.tokens, rasp.indices, rasp.Comparison.GEQ),
                                rasp.Select(rasp.tokens, rasp.indices, rasp.Comparison.LEQ))
    program = rasp.SequenceMap(lambda h, w: h + w, halved, rasp.SelectorWidth(between))
    model = rasp.compile_program(program, {0, 1, 2, 3}, 4)
    inputs = [list(x) for n in range(1, 5) for x in itertools.product(range(4), repeat=n)]
    assert model.run(inputs) == [program(x) for x in inputs]
    assert halved.name == "map" and halved.inner is rasp.tokens  # one map of the tokens
