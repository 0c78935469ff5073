"""Hand-written selector widths (``rewrites.bos_widths``): a width computed by a mean over a
hand-made BOS at position 0, as the RASP paper and the original RASP library write it, compiles
at the cost of ``selector_width`` and agrees with the interpreter on every input.

Each hand-written width (``bench/width_idioms.py``, shared with the bench) is written from scratch
in the style of the paper's listings and the original repository's ``rasplib.rasp``: the mean
over ``sel or <key 0>`` counts the keys other than 0 (a), the probe ``aggregate(sel and <key 0>,
1, 0)`` says whether key 0 is selected (z), and a + z is the width on every input, whatever the
selector does at key 0.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from rasp_compiler.compiler import compile_program, compile_weights
from rasp_compiler.compiler.checking import check_model, exhaustive_inputs
from rasp_compiler.compiler.rewrites import bos_counts, bos_widths, rewritten, shared_subexpressions
from rasp_compiler.graph.nodes import SelectorWidth
from rasp_compiler.lang import program_from_source

torch.set_num_threads(1)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from width_idioms import HAND_WIDTHS, PROGRAMS  # noqa: E402
from width_idioms import source as width_program  # noqa: E402


@pytest.mark.parametrize("program", sorted(PROGRAMS))
@pytest.mark.parametrize("hand", sorted(HAND_WIDTHS))
def test_a_hand_written_width_costs_what_selector_width_costs(hand: str, program: str) -> None:
    built = compile_weights(program_from_source(width_program(hand, program)), list("abcde"), 10)
    builtin = compile_weights(program_from_source(width_program("builtin", program)), list("abcde"), 10)
    assert (built.n_layers, built.residual_width) == (builtin.n_layers, builtin.residual_width)
    assert built.heads_per_layer == builtin.heads_per_layer


@pytest.mark.parametrize("program", sorted(PROGRAMS))
@pytest.mark.parametrize("hand", sorted(HAND_WIDTHS))
def test_a_hand_written_width_is_exact_on_every_input(hand: str, program: str) -> None:
    source = width_program(hand, program)
    parsed = program_from_source(source)
    for max_len in (1, 2, 5):
        model = compile_program(parsed, list("abc"), max_len)
        res = check_model(model, parsed, exhaustive_inputs(list("abc"), max_len))
        assert res.inputs_checked == sum(3 ** n for n in range(1, max_len + 1))
        assert res.ok, (max_len, res.failures[:1])
    # the hand-written width is the built-in's on every input: the test is of the idiom too
    builtin = program_from_source(width_program("builtin", program))
    model = compile_program(builtin, list("abc"), 5)
    assert check_model(model, parsed, exhaustive_inputs(list("abc"), 5)).ok


def test_the_rasplib_sort_reads_one_width_named_after_its_selector() -> None:
    program = rewritten(program_from_source(width_program("rasplib", "sort")), 10)
    (width,) = program.node("sort_by.place").inputs
    assert isinstance(program.node(width), SelectorWidth)
    assert program.node(width).inputs == ("sort_by.before",)


# Look like widths, are not: each must be left as it is (and compile exactly)
NOT_WIDTHS = {
    # the averaged value is not zero away from key 0
    "value_elsewhere": """sel = select(tokens, tokens, ==);
at0 = select(indices, 0, ==);
n = round(1 / aggregate(sel or at0, indicator(indices < 2)) - 1 + aggregate(sel and at0, 1, 0));
n;""",
    # key 1, not key 0
    "key_1": """sel = select(tokens, tokens, ==);
at1 = select(indices, 1, ==);
n = round(1 / aggregate(sel or at1, indicator(indices == 1)) - 1 + aggregate(sel and at1, 1, 0));
n;""",
    # a token as the BOS: key 0 only where the input says so
    "token_bos": """sel = select(tokens, tokens, <);
bos = select(tokens, "a", ==);
n = round(1 / aggregate(sel or bos, indicator(tokens == "a")) - 1 + aggregate(sel and bos, 1, 0));
n;""",
    # the probe's value at key 0 depends on the length
    "probe_of_length": """sel = select(tokens, tokens, ==);
at0 = select(indices, 0, ==);
n = round(1 / aggregate(sel or at0, indicator(indices == 0)) - 1 + aggregate(sel and at0, length, 0));
n;""",
    # an `or` where the probe needs an `and`
    "or_probe": """sel = select(tokens, tokens, ==);
at0 = select(indices, 0, ==);
n = round(1 / aggregate(sel or at0, indicator(indices == 0)) - 1 + aggregate(sel or at0, 1, 0));
n;""",
    # the parts of two different selectors
    "two_selectors": """sel = select(tokens, tokens, ==);
other = select(tokens, tokens, <);
at0 = select(indices, 0, ==);
n = round(1 / aggregate(sel or at0, indicator(indices == 0)) - 1 + aggregate(other and at0, 1, 0));
n;""",
}


@pytest.mark.parametrize("name", sorted(NOT_WIDTHS))
def test_what_only_looks_like_a_width_is_not_rewritten_and_stays_exact(name: str) -> None:
    program = shared_subexpressions(program_from_source(NOT_WIDTHS[name]))
    counted = bos_counts(program, 6)
    assert bos_widths(counted, 6) is counted
    model = compile_program(program, list("abc"), 5)
    res = check_model(model, program, exhaustive_inputs(list("abc"), 5))
    assert res.inputs_checked > 0 and res.ok, res.failures[:1]


@pytest.mark.parametrize("combination", [
    "except0 + 2 * valat0",  # a + 2z
    "except0 * valat0",  # a · z
    "valat0 * 3",  # z alone
])
def test_a_function_of_both_parts_is_left_as_written_and_stays_exact(combination: str) -> None:
    source = f"""sel = select(tokens, tokens, <=);
at0 = select(indices, 0, ==);
except0 = round(1 / aggregate(sel or at0, indicator(indices == 0))) - 1;
valat0 = aggregate(sel and at0, 1, 0);
n = {combination};
n;"""
    parsed = program_from_source(source)
    counted = bos_counts(shared_subexpressions(parsed), 5)
    assert bos_widths(counted, 5) is counted
    model = compile_program(parsed, list("abc"), 5)
    res = check_model(model, parsed, exhaustive_inputs(list("abc"), 5))
    assert res.inputs_checked == sum(3 ** n for n in range(1, 6)) and res.ok, res.failures[:1]


def test_a_map_that_reads_the_probe_but_not_its_value_reads_the_others_alone() -> None:
    source = """sel = select(tokens, tokens, <=);
at0 = select(indices, 0, ==);
except0 = round(1 / aggregate(sel or at0, indicator(indices == 0))) - 1;
valat0 = aggregate(sel and at0, 1, 0);
n = except0 + 0 * valat0;
n;"""
    parsed = program_from_source(source)
    program = rewritten(parsed, 5)
    (others,) = program.node(program.output).inputs
    assert isinstance(program.node(others), SelectorWidth)
    assert program.node(others).inputs != ("sel",)  # sel and not <key 0>
    model = compile_program(parsed, list("abc"), 5)
    assert check_model(model, parsed, exhaustive_inputs(list("abc"), 5)).ok


def test_the_unrounded_form_past_48_is_not_a_width_and_stays_exact() -> None:
    """1 / (1 / 49) is 49.00000000000001: unrounded, the idiom gives 48.00000000000001 where 49
    keys are selected, so it is not the width at max_len 49 (and is left as written)."""
    parsed = program_from_source(width_program("unrounded", "histogram"))
    counted = bos_counts(shared_subexpressions(parsed), 48)
    assert bos_widths(counted, 48) is not counted
    counted = bos_counts(shared_subexpressions(parsed), 49)
    assert bos_widths(counted, 49) is counted
    model = compile_program(parsed, list("ab"), 49)
    inputs = [["a"] * 49, ["a"] * 48 + ["b"], ["b"] + ["a"] * 48, ["a", "b"] * 24 + ["a"]]
    res = check_model(model, parsed, inputs)
    assert res.inputs_checked == 4 and res.ok, res.failures[:1]


def test_a_long_chain_that_reads_each_map_twice_is_not_inlined_whole() -> None:
    """Each step reads the last twice, so the chain inlined as one expression would double 30
    times; the rewrite stops at MAX_INLINED_MAPS maps and the program stays exact."""
    chain = "".join(f"x{i + 1} = x{i} + x{i} - x{i};\n" for i in range(30))
    source = ("sel = select(tokens, tokens, ==);\nat0 = select(indices, 0, ==);\n"
              "x0 = round(1 / aggregate(sel or at0, indicator(indices == 0)) - 1"
              " + aggregate(sel and at0, 1, 0));\n" + chain + "x30;\n")
    parsed = program_from_source(source)
    program = rewritten(parsed, 4)
    assert any(isinstance(program.node(i), SelectorWidth) and program.node(i).inputs == ("sel",)
               for i in program.node("x1").inputs)  # the first steps read the width
    assert not any(isinstance(program.node(i), SelectorWidth) for i in program.node("x30").inputs)
    model = compile_program(parsed, list("abc"), 4)
    assert check_model(model, parsed, exhaustive_inputs(list("abc"), 4)).ok
