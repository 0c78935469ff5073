"""The RASP language, case by case, from the contract (docs: shared/design/rasp-language.md) and
the original REPL (tech-srl/RASP: RASP.g4, Evaluator.py, rasplib.rasp).

Each expected value is worked out by hand from the contract, never by running this
implementation; where the original's precedence differs from Python's, the case is chosen so
that the two give different answers.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from rasp_compiler import interpreter
from rasp_compiler.errors import RaspError
from rasp_compiler.lang import load_program, program_from_source


def ev(src, inp="hello", output="out"):
    """Run the source on one input and return the chosen s-op's values."""
    prog = program_from_source(src, file="<test>", output=output)
    return interpreter.run(prog, list(inp))


def const(src_atom_expr, inp="ab"):
    """An atom-valued expression, broadcast through `indices` so that `out` is an s-op."""
    got = ev(f"x = {src_atom_expr};\nx if indices >= 0 else x;", inp)
    assert len(set(map(repr, got))) == 1, got
    return got[0]


def raises(src, inp="hello", match=None):
    with pytest.raises(RaspError) as info:
        ev(src, inp)
    if match is not None:
        text = info.value.render().lower()
        assert match.lower() in text, text
    return info.value


H = list("hello")


# ------------------------------------------------------------------ precedence --------------

class TestPrecedence:
    def test_not_binds_tighter_than_equality(self):
        # (not tokens) == "h": a bool compared with a string, never true
        assert ev('not tokens == "h";') == [False] * 5
        assert ev('not (tokens == "h");') == [False, True, True, True, True]

    def test_and_or_share_one_level_left_assoc(self):
        # Python would read True or (False and False) == True
        assert const("1 if True or False and False else 0") == 0
        assert const("1 if False and False or True else 0") == 1
        # the same on s-ops: (t or False) and False
        assert ev("tokens_bool or False and False;", [True, False]) == [False, False]
        assert ev("tokens_bool and False or True;", [True, False]) == [True, True]

    def test_power_is_left_associative(self):
        assert const("2 ^ 3 ^ 2") == 64  # (2^3)^2, Python's 2**3**2 is 512
        assert ev("tokens_int ^ 3 ^ 2;", [2, 1]) == [64, 1]

    def test_unary_minus_binds_tighter_than_power(self):
        assert const("-2 ^ 2") == 4  # (-2)^2; Python's -2**2 is -4

    def test_power_binds_tighter_than_times(self):
        assert const("2 * 3 ^ 2") == 18

    def test_modulo_between_times_and_plus(self):
        assert const("7 % 4 * 2") == 7  # 7 % (4*2); Python: (7%4)*2 == 6
        assert const("2 * 7 % 4") == 2  # (2*7) % 4
        assert const("1 + 7 % 4") == 4  # 1 + (7%4)
        assert const("10 - 7 % 4") == 7
        assert ev("indices + 7 % 4 * 2;", "abc") == [7, 8, 9]

    def test_comparisons_do_not_chain(self):
        # left-associative: (3 > 2) > 1 is True > 1 is False; Python chains to True
        assert const("1 if 3 > 2 > 1 else 0") == 0

    def test_ternary_chains_group_left(self):
        # (1 if True else 2) if False else 3 == 3; Python groups right and gives 1
        assert const("1 if True else 2 if False else 3") == 3
        assert const("1 if False else 2 if True else 3") == 2

    def test_ternary_with_sop_condition_is_elementwise(self):
        assert ev('"a" if indices % 2 == 1 else tokens;', "hello there") == \
            ["h", "a", "l", "a", "o", "a", "t", "a", "e", "a", "e"]

    def test_ternary_with_atom_condition_is_lazy(self):
        # the untaken branch would fail (index out of range): it must not be evaluated
        assert ev("L = [1, 2]; x = L[0] if True else L[5]; indices + x;", "ab") == [1, 2]

    def test_in_is_loosest(self):
        # (2 == 2) in [True]; Python chains to (2 == 2) and (2 in [True]) == False
        assert const("1 if 2 == 2 in [True] else 0") == 1
        assert const('1 if "a" + "b" in ["ab"] else 0') == 1
        assert ev('tokens + "x" in ["hx", "lx"];') == [True, False, True, True, False]

    def test_not_before_select_and_calls(self):
        assert ev("selector_width(not select(indices, indices, <));") == [5, 4, 3, 2, 1]
        assert ev("x = not has_focus(select(indices, 0, ==)); indicator(x);") == [0] * 5


# ------------------------------------------------------------------ literals and statements --

class TestLiteralsAndStatements:
    def test_floats(self):
        assert ev("indices * .5;", "abc") == [0.0, 0.5, 1.0]
        assert ev("indices + 1e-3;", "a") == [0.001]
        assert ev("indices + 2.5E+1;", "a") == [25.0]

    def test_string_escapes(self):
        assert ev('"a\\"b" if indices == 0 else "\\\\";', "ab") == ['a"b', "\\"]

    def test_several_statements_per_line(self):
        assert ev("a = 1; b = 2; indices + a + b;", "ab") == [3, 4]

    def test_select_with_space_before_paren(self):
        assert ev("selector_width(select (indices, 0, ==));", "ab") == [1, 1]

    def test_not_equal_elementwise(self):
        assert ev('tokens != "l";') == [True, True, False, False, True]

    def test_comments(self):
        assert ev("# a comment\nx = indices; # trailing\nx; # done", "ab") == [0, 1]

    def test_last_expression_statement_is_out(self):
        assert ev("indices; tokens;", "ab") == ["a", "b"]

    def test_an_assignment_binds_out_too(self):
        # the original's evaluator sets `out` on every expression it evaluates (Evaluator.py,
        # format_return), so a file ending in an assignment has that value as its result
        assert ev("x = indices + 1;", "ab") == [1, 2]
        assert ev("indices; y = tokens;", "ab") == ["a", "b"]
        assert ev("x = indices + 1; out * 2;", "ab") == [2, 4]
        assert ev("a, b = indices, tokens;", "ab") == ["a", "b"]   # the last right-hand side
        assert ev("tokens; def f(s) { y = s + 1; return y; }", "ab") == ["a", "b"]  # a def binds nothing
        assert ev("x = indices; for i in [1, 2] { x = x + i; }", "ab") == [3, 4]

    def test_tokens_asis_is_the_input_as_given(self):
        assert ev("tokens_asis;", [0, 1, 2]) == [0, 1, 2]
        assert ev("tokens_asis;", ["a", 1, True]) == ["a", 1, True]
        assert ev("tokens_asis;", "hi") == ["h", "i"]
        assert ev("tokens_str;", [0, 1]) == ["0", "1"]

    def test_output_picks_a_named_sop(self):
        assert ev("a = indices + 1; b = indices * 2; a;", "abc", output="b") == [0, 2, 4]

    def test_assigning_out_is_refused(self):
        raises("out = indices;")

    def test_tuple_assignment_and_swap(self):
        assert ev("a, b = 1, 2; a, b = b, a; indices * 10 + a * 100 + b;", "ab") == [201, 211]

    def test_unpacking_mismatch_is_an_error(self):
        err = raises("x = 1;\na, b = 1, 2, 3;\nindices;")
        assert err.line == 2

    def test_tokens_rebinding(self):
        assert ev("tokens = tokens_int; tokens + 1;", [1, 2, 3]) == [2, 3, 4]
        assert ev("tokens_float / 2;", [1, 3]) == [0.5, 1.5]
        assert ev("not tokens_bool;", [True, False]) == [False, True]

    def test_builtin_sops(self):
        assert ev("indices;") == [0, 1, 2, 3, 4]
        assert ev("length;") == [5] * 5
        assert ev("tokens;") == H


# ------------------------------------------------------------------ select and aggregate -----

def _ref_select(keys, queries, op):
    """sel[q][k] = keys[k] op queries[q]: the contract's orientation."""
    import operator
    f = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt,
         "<=": operator.le, ">=": operator.ge}[op]
    return np.array([[f(k, q) for k in keys] for q in queries])


class TestSelectAggregate:
    def test_select_atom_key_query(self):
        assert ev("aggregate(select(indices, 0, ==), tokens);") == ["h"] * 5
        assert ev("aggregate(select(indices, 4, ==), tokens);") == ["o"] * 5

    def test_select_is_key_op_query(self):
        # keys j < query i: row i selects i earlier positions
        assert ev("selector_width(select(indices, indices, <));") == [0, 1, 2, 3, 4]
        # an atom key broadcasts: every key position holds 0, and 0 < i selects them all
        assert ev("selector_width(select(0, indices, <));") == [0, 5, 5, 5, 5]
        # key j < 2 whatever the query
        assert ev("selector_width(select(indices, 2, <));") == [2] * 5

    @pytest.mark.parametrize("op", ["==", "!=", "<", ">", "<=", ">="])
    def test_select_every_comparison_against_numpy(self, op):
        rng = random.Random(op)
        for _ in range(15):
            n = rng.randint(1, 8)
            keys = [rng.randint(0, 3) for _ in range(n)]
            queries = [rng.randint(0, 3) for _ in range(n)]
            # keys come from the input, queries from a lookup on indices
            src = f"q = {queries}[indices];\nselector_width(select(tokens_int, q, {op}));"
            want = _ref_select(keys, queries, op).sum(axis=1).tolist()
            assert ev(src, keys) == want, (keys, queries, op)

    def test_aggregate_default_when_nothing_selected(self):
        assert ev('aggregate(select(indices, -1, ==), tokens, "z");', "ab") == ["z", "z"]
        assert ev("aggregate(select(indices, -1, ==), tokens_int);", [3, 4]) == [0, 0]

    def test_aggregate_single_keeps_value_and_type(self):
        got = ev("aggregate(select(indices, length - indices - 1, ==), tokens_int);", [1, 2, 3])
        assert got == [3, 2, 1] and all(type(v) is int for v in got)
        assert ev("aggregate(select(indices, 1, ==), tokens_bool);", [False, True]) == [True, True]

    def test_aggregate_mean(self):
        assert ev("aggregate(select(indices, indices, <=), tokens_int);", [1, 2, 3, 4]) == \
            [1, 1.5, 2, 2.5]
        assert ev("aggregate(select(indices, indices, <), tokens_int, -7);", [1, 2, 3]) == [-7, 1, 1.5]

    def test_aggregate_of_an_atom(self):
        assert ev("aggregate(select(indices, indices, <), 1, 0);", "abc") == [0, 1, 1]

    def test_mean_of_strings_is_an_error_naming_the_line(self):
        err = raises("x = 1;\ny = aggregate(select(indices, indices, <=), tokens);\ny;", "ab")
        assert err.line == 2

    def test_mean_of_bools_is_an_error(self):
        # the original refuses to average non-numbers, bools included
        raises("aggregate(select(indices, indices, <=), tokens == \"a\");", "ab")

    def test_mean_of_one_string_is_fine(self):
        assert ev("aggregate(select(indices, indices, <=), tokens);", "a") == ["a"]

    def test_selector_width_every_width(self):
        # widths 0..n on one input, including row 0 selecting nothing and everything
        for n in range(1, 9):
            inp = list(range(n))
            assert ev("selector_width(select(indices, indices, <));", inp) == list(range(n))
            assert ev("selector_width(select(indices, indices, >=));", inp) == list(range(n, 0, -1))
            assert ev("selector_width(select(indices, -1, ==));", inp) == [0] * n

    def test_selector_and_or_not(self):
        assert ev("selector_width(select(indices, indices, <) and select(indices, 1, >));") == \
            [0, 0, 0, 1, 2]
        assert ev("selector_width(select(indices, indices, ==) or select(indices, 0, ==));") == \
            [1, 2, 2, 2, 2]
        assert ev("selector_width(not select(indices, indices, <));") == [5, 4, 3, 2, 1]

    def test_selector_combinations_against_numpy(self):
        rng = random.Random(7)
        ops = ["==", "!=", "<", ">", "<=", ">="]
        for _ in range(25):
            n = rng.randint(1, 7)
            x = [rng.randint(0, 3) for _ in range(n)]
            o1, o2 = rng.choice(ops), rng.choice(ops)
            s1 = _ref_select(x, x, o1)
            s2 = _ref_select(list(range(n)), list(range(n)), o2)
            for comb, want in (("and", s1 & s2), ("or", s1 | s2)):
                src = (f"selector_width(select(tokens_int, tokens_int, {o1}) {comb} "
                       f"select(indices, indices, {o2}));")
                assert ev(src, x) == want.sum(axis=1).tolist(), (src, x)
            src = f"selector_width(not select(tokens_int, tokens_int, {o1}));"
            assert ev(src, x) == (~s1).sum(axis=1).tolist(), (src, x)

    def test_and_or_on_sops_give_bools(self):
        assert ev('tokens == "l" or tokens == "o";') == [False, False, True, True, True]
        assert ev('indices > 0 and indices < 3;') == [False, True, True, False, False]

    def test_mixing_selector_and_sop_is_an_error(self):
        raises("select(indices, 0, ==) and indices;")


# ------------------------------------------------------------------ functions and loops ------

class TestFunctionsAndLoops:
    def test_function_and_closure(self):
        src = """
        k = 1;
        def add_k(x) { return x + k; }
        k = 2;
        add_k(indices);
        """
        # the closure reads k when called (the same environment), as the original does
        assert ev(src, "abc") == [2, 3, 4]

    def test_nested_def_returns_a_closure(self):
        src = """
        def make_adder(n) {
            def add(x) { return x + n; }
            return add;
        }
        plus3 = make_adder(3);
        plus3(indices);
        """
        assert ev(src, "ab") == [3, 4]

    def test_function_locals_do_not_leak(self):
        raises("def f(x) { y = x + 1; return y; }\nz = f(indices);\ny;")

    def test_function_does_not_rebind_globals(self):
        assert ev("a = 5; def f(x) { a = 1; return x + a; } b = f(indices); indices + a;", "ab") == [5, 6]

    def test_multiple_returns(self):
        src = "def f(x) { return x + 1, x * 2; }\na, b = f(indices);\na * 100 + b;"
        assert ev(src, "abc") == [100, 202, 304]

    def test_loop_in_function_and_function_in_loop(self):
        src = """
        def total(xs) {
            acc = 0;
            for v in xs { acc = acc + v; }
            return acc;
        }
        out_ = indices;
        for m in [1, 2] { out_ = out_ + total([m, m]); }
        out_;
        """
        assert ev(src, "ab") == [6, 7]

    def test_wrong_arity_is_an_error(self):
        err = raises("def f(a) { return a; }\n\nf(indices, 1);")
        assert err.line == 3

    def test_unbounded_recursion_is_an_error(self):
        raises("def f(x) { return f(x); }\nf(indices);")

    def test_recursion_with_an_end(self):
        src = "def p(x, n) { return x if n == 0 else p(x * 2, n - 1); }\np(indices, 3);"
        assert ev(src, "abc") == [0, 8, 16]

    def test_for_over_list(self):
        assert ev("t = 0; for v in [1, 2, 3] { t = t + v; } indices + t;", "ab") == [6, 7]

    def test_for_over_range_builds_sops(self):
        src = "acc = indices; for i in range(3) { acc = acc + i; } acc;"
        assert ev(src, "ab") == [3, 4]

    def test_for_over_dict_keys(self):
        src = 't = ""; for k in {"a": 1, "b": 2} { t = t + k; } tokens + t;'
        assert ev(src, "x") == ["xab"]

    def test_for_key_value_over_dict(self):
        src = 't = 0; for k, v in {"a": 1, "b": 2} { t = t + v; } indices + t;'
        assert ev(src, "x") == [3]

    def test_for_unpacks_pairs(self):
        src = "t = 0; for a, b in zip([1, 2], [10, 20]) { t = t + a * b; } indices + t;"
        assert ev(src, "x") == [50]

    def test_applying_an_sop_to_a_concrete_input(self):
        # `f(args)` on an s-op evaluates it on that input, giving a plain list
        src = 'r = aggregate(select(indices, length - indices - 1, ==), tokens); L = r("abc"); L[indices];'
        assert ev(src, "xyz") == ["c", "b", "a"]
        assert ev("r = tokens_int + 1; L = r([1, 2]); L[indices];", "xy") == [2, 3]

    def test_unpacking_an_atom_is_an_error(self):
        raises("x = 1; a, b = x; indices;")

    def test_unknown_name_suggests(self):
        err = raises("tokns;", match="tokens")
        assert err.line == 1


# ------------------------------------------------------------------ lists, dicts, indexing ---

class TestCollections:
    def test_list_comprehension_indexed_by_sop(self):
        assert ev("L = [x * x for x in range(10)]; L[indices];") == [0, 1, 4, 9, 16]

    def test_dict_comprehension_indexed_by_sop(self):
        src = 'D = {c: i for c, i in zip(["h", "e", "l", "o"], [1, 2, 3, 4])}; D[tokens];'
        assert ev(src) == [1, 2, 3, 3, 4]

    def test_dict_literal_lookup(self):
        assert ev('d = {"1": 1, "2": 2, "3": 3, "4": 5, "5": 4}; d[tokens];', "12345") == [1, 2, 3, 5, 4]

    def test_string_indexed_by_sop(self):
        a = '"qwertyuioplkjhgfdsazxcvbnm"'
        assert ev(f"a = {a}; a[indices];", "12345") == list("qwert")
        assert ev(f"a = {a}; a[indices * 3];", "12345") == list("qrupj")

    def test_list_indexed_by_atom_and_negative(self):
        assert const("[5, 8, 2, 9][1]") == 8
        assert const("[5, 8, 2, 9][-1]") == 9
        assert const('"hey"[0]') == "h"

    def test_sop_indexed_by_int_broadcasts(self):
        assert ev("tokens[0];") == ["h"] * 5
        assert ev("tokens[1];") == ["e"] * 5
        assert ev("tokens[-1];") == ["o"] * 5
        assert ev("tokens_int[-2];", [4, 7, 10]) == [7, 7, 7]

    def test_range_zip_len(self):
        assert const("len(range(2, 8, 3))") == 2
        assert ev("L = range(2, 8, 3); L[indices];", "ab") == [2, 5]
        assert ev("Z = zip([1, 2], [3, 4]); indices + Z[1][0] * 10 + Z[0][1];", "ab") == [23, 24]
        assert const("len([1, 2, 3])") == 3

    def test_list_and_string_concatenation(self):
        assert const("len([1, 2] + [3])") == 3
        assert const('"ab" + "c"') == "abc"

    def test_in_both_ways(self):
        assert ev('tokens in ["h", "l"];') == [True, False, True, True, False]
        assert ev('"l" in tokens;') == [True] * 5
        assert ev('"z" in tokens;') == [False] * 5
        assert const('1 if "b" in ["a", "b"] else 0') == 1

    def test_indicator_and_round(self):
        assert ev('indicator(tokens == "l");') == [0, 0, 1, 1, 0]
        # Python's round: halves to even
        assert ev("round(indices / 2);") == [0, 0, 1, 2, 2]
        assert all(type(v) is int for v in ev("round(indices / 3);"))


# ------------------------------------------------------------------ the library ---------------

class TestLibrary:
    def test_full_s_and_length(self):
        assert ev("selector_width(full_s);") == [5] * 5
        assert ev("length;", "a") == [1]

    def test_has_focus(self):
        assert ev("has_focus(select(indices, 2, <));", "abc") == [True] * 3
        assert ev("has_focus(select(indices, indices, <));", "abc") == [False, True, True]

    def test_count_contains(self):
        assert ev('count(tokens, "l");') == [2] * 5
        assert ev('count(tokens, "z");') == [0] * 5
        assert ev('contains(tokens, "o");') == [True] * 5
        assert ev('contains(tokens, "z");') == [False] * 5

    def test_max_min_average(self):
        assert ev("max(tokens_int, 2);", [1, 2, 3]) == [2, 2, 3]
        assert ev("min(tokens_int, indices);", [5, 0, 1]) == [0, 0, 1]
        assert ev("average(tokens_int);", [1, 2, 6]) == [3, 3, 3]

    def test_load_from_location_and_shift(self):
        assert ev("load_from_location(tokens, 1);") == ["e"] * 5
        assert ev("load_from_location(tokens, length - indices - 1);") == list("olleh")
        assert ev('shift(tokens, 2, "_");') == list("__hel")
        assert ev('shift(tokens, -1, "_");') == list("ello_")

    def test_mark_instances(self):
        assert ev('mark_last_instance(tokens, "l");') == [False, False, False, True, False]
        assert ev('mark_first_instance(tokens, "l");') == [False, False, True, False, False]

    def test_select_from_first_last(self):
        assert ev('aggregate(select_from_last(tokens, "l"), indices);') == [3] * 5
        assert ev('aggregate(select_from_first(tokens, "l"), indices);') == [2] * 5

    def test_sort_ties_by_position(self):
        assert ev("sort(tokens, tokens);") == list("ehllo")
        # key ties keep input order: values sorted by key 0/1
        assert ev('sort(tokens, indicator(tokens == "l"));') == list("heoll")
        assert ev("sort(indices, -tokens_int);", [1, 3, 3, 2]) == [1, 2, 3, 0]

    def test_select_next_identical(self):
        # each position selects the next occurrence of its own token
        assert ev("aggregate(select_next_identical(tokens), indices, -1);", "abab") == [2, 3, -1, -1]

    def test_shadowing_library_names(self):
        assert ev("def max(a, b) { return a + b; } max(indices, 1);", "ab") == [1, 2]
        assert ev("length = 3; indices + length;", "ab") == [3, 4]
        assert ev("def count(x) { return x * 0; } count(indices);", "ab") == [0, 0]

    def test_shadowing_does_not_break_library_internals(self):
        # the library's count and sort use `length` and `selector_width` from the library
        assert ev('length = 100; count(tokens, "l");') == [2] * 5
        assert ev("def selector_width(s) { return 0; } sort(tokens, tokens);") == list("ehllo")


# ------------------------------------------------------------------ load ---------------------

class TestLoad:
    def test_load_defines_public_names(self, tmp_path, monkeypatch):
        (tmp_path / "helper.rasp").write_text(
            "def twice(x) { return 2 * x; }\nshared = 5;\n_private = 7;\n", encoding="utf-8")
        main = tmp_path / "main.rasp"
        main.write_text('load "helper";\ntwice(indices) + shared;\n', encoding="utf-8")
        monkeypatch.chdir(tmp_path)
        prog = load_program(str(main))
        assert interpreter.run(prog, list("abc")) == [5, 7, 9]

    def test_load_keeps_underscore_names_private(self, tmp_path, monkeypatch):
        (tmp_path / "helper.rasp").write_text("_private = 7;\n", encoding="utf-8")
        main = tmp_path / "main.rasp"
        main.write_text('load "helper";\nindices + _private;\n', encoding="utf-8")
        monkeypatch.chdir(tmp_path)
        with pytest.raises(RaspError):
            interpreter.run(load_program(str(main)), list("abc"))

    def test_load_missing_file_is_an_error(self, tmp_path, monkeypatch):
        main = tmp_path / "main.rasp"
        main.write_text('load "nope";\nindices;\n', encoding="utf-8")
        monkeypatch.chdir(tmp_path)
        with pytest.raises(RaspError):
            load_program(str(main))


# ------------------------------------------------------------------ errors --------------------

class TestErrors:
    @pytest.mark.parametrize("src, line", [
        ("x = indices\ny = 2;", 1),                      # missing ';'
        ("x = (indices + 1;\n", 1),                      # unclosed bracket
        ("select(indices, indices, +);", 1),            # bad select operator
        ("x = 1;\ny = aggregate(;", 2),
    ])
    def test_syntax_errors_are_located(self, src, line):
        err = raises(src)
        assert err.line is not None and err.col is not None
        assert abs(err.line - line) <= 1
        text = err.render()
        assert text.startswith("<test>:"), text

    @pytest.mark.parametrize("src", ["def f(x) { return x; }\nf;", "x = 1;\nTrue;", "x = 1;\n[1, 2];"])
    def test_non_sop_result_is_located(self, src):
        # the last expression statement is not an s-op: the error points at it
        err = raises(src)
        assert err.line == 2 and err.col is not None, err.render()

    def test_missing_semicolon_in_words(self):
        raises("x = indices\ny = 2;", match=";")

    def test_bad_select_operator_in_words(self):
        raises("select(indices, indices, +);", match="select")


def test_random_expressions_match_python_arithmetic():
    """Integer arithmetic on s-ops is Python's, position by position (no float drift)."""
    for a, b in itertools.product(range(-3, 4), range(1, 4)):
        got = ev(f"tokens_int * {b} + tokens_int % {b} - {a};", [a, a + 1])
        assert got == [a * b + a % b - a, (a + 1) * b + (a + 1) % b - a]
