"""Nodes that compute the same thing are compiled once (compiler.rewrites.shared_subexpressions).

The reference for the merged model is the same program written with each expression bound once
by hand: it must cost exactly as many heads, layers and parameters.  The interpreter, which reads
the unmerged program, is the reference for every output."""

from __future__ import annotations

import pytest
import torch

from rasp_compiler import pyapi as rasp
from rasp_compiler.compiler import compile_program
from rasp_compiler.compiler.checking import check_model, exhaustive_inputs
from rasp_compiler.compiler.rewrites import shared_subexpressions
from rasp_compiler.lang import program_from_source

torch.set_num_threads(1)

# A helper called twice builds its selector and its map of indices twice.
REPEATED = """
def prev(x) {
    s = select(indices, indices - 1, ==);
    return aggregate(s, x, "-");
}
a = prev(tokens);
b = prev(tokens);
d = length - indices;
e = length - indices;
res = (a + b) if d == e else "?";
res;
"""

BOUND_ONCE = """
s = select(indices, indices - 1, ==);
a = aggregate(s, tokens, "-");
d = length - indices;
res = (a + a) if d == d else "?";
res;
"""


def _size(source: str, max_len: int = 8) -> tuple:
    model = compile_program(program_from_source(source), list("abc"), max_len)
    return model.n_layers, model.heads_per_layer, model.residual_width, model.params


def test_a_repeated_helper_costs_what_binding_it_once_costs() -> None:
    assert _size(REPEATED) == _size(BOUND_ONCE)
    program = program_from_source(REPEATED)
    model = compile_program(program, list("abc"), 5)
    res = check_model(model, program, exhaustive_inputs(list("abc"), 5))
    assert res.inputs_checked == 363 and res.ok, res.failures


def test_nested_calls_share_one_selector() -> None:
    """The scale audit's case: each call builds select(indices, indices - 1, ==) again."""
    calls = "\n".join("x = shift(x);" for _ in range(12))
    repeated = ("def shift(x) { return aggregate(select(indices, indices - 1, ==), x, 0); }\n"
                f"x = indicator(tokens == \"a\");\n{calls}\nx;\n")
    bound = calls.replace("shift(x)", "aggregate(s, x, 0)")
    once = f"s = select(indices, indices - 1, ==);\nx = indicator(tokens == \"a\");\n{bound}\nx;\n"
    assert _size(repeated, 16) == _size(once, 16)
    program = program_from_source(repeated)
    model = compile_program(program, list("abc"), 6)
    res = check_model(model, program, exhaustive_inputs(list("abc"), 6))
    assert res.ok, res.failures


def test_names_of_merged_nodes_name_the_kept_node_and_the_output_keeps_its_id() -> None:
    program = program_from_source("s = select(indices, indices, ==);\nx = aggregate(s, tokens);\n"
                                  "t = select(indices, indices, ==);\ny = aggregate(t, tokens);\ny;\n")
    merged = shared_subexpressions(program)
    assert merged.output == "y" and "x" not in merged.graph
    assert merged.names["x"] == merged.names["y"] == "y"
    assert merged.names["s"] == merged.names["t"]
    assert merged.graph.number_of_nodes() == program.graph.number_of_nodes() - 2


@pytest.mark.parametrize("left, right", [
    ("1", "1.0"),          # an int and a float are different RASP values
    ("1", "True"),         # so are an int and a bool, though 1 == True in Python
    ("0.0", "-0.0"),       # and 0.0 and -0.0 (1 / x tells them apart)
    ('"a"', '"b"'),
])
def test_alike_but_different_constants_are_not_merged(left: str, right: str) -> None:
    source = f"a = indices + {left};\nb = indices + {right};\nc = a == b;\nc;\n"
    program = program_from_source(source)
    assert shared_subexpressions(program).graph.number_of_nodes() == program.graph.number_of_nodes()


def test_defaults_of_different_types_are_not_merged() -> None:
    source = ("s = select(indices, indices, <);\na = aggregate(s, indices, 0);\n"
              "b = aggregate(s, indices, False);\n")
    program = program_from_source(source + "c = a == 0 and b == False;\nc;\n")
    merged = shared_subexpressions(program)
    assert {"a", "b"} <= set(merged.graph)


def test_tracr_style_make_length_twice_is_one_head() -> None:
    """tracr's library calls make_length() in each function that needs it."""
    def make_length():
        return rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE))

    opp = rasp.SequenceMap(lambda x, y: x - y, make_length(), rasp.indices)
    opp = rasp.SequenceMap(lambda x, y: x - y - 1, opp, make_length() - make_length() + 1)
    flip = rasp.Select(rasp.indices, opp, rasp.Comparison.EQ)
    reverse = rasp.Aggregate(flip, rasp.tokens)
    model = rasp.compile_program(reverse, {"a", "b", "c"}, 6)
    assert sum(model.heads_per_layer) == 2  # one length head, one reverse head
    program = reverse.program()
    res = check_model(model, program, exhaustive_inputs(["a", "b", "c"], 6))
    assert res.ok, res.failures


def test_python_predicates_merge_only_when_they_are_the_same_function() -> None:
    def before(k, q):
        return k < q

    same = [rasp.Select(rasp.indices, rasp.indices, before) for _ in range(2)]
    other = rasp.Select(rasp.indices, rasp.indices, lambda k, q: k < q)
    out = rasp.numerical(rasp.Aggregate(same[0], rasp.numerical(rasp.indices), default=0)) \
        + rasp.numerical(rasp.Aggregate(same[1], rasp.numerical(rasp.indices), default=0)) \
        + rasp.numerical(rasp.Aggregate(other, rasp.numerical(rasp.indices), default=0))
    program = out.program()
    merged = shared_subexpressions(program)
    selects = [n for n in merged.graph if merged.node(n).kind == "select"]
    assert len(selects) == 2


def _shape(program) -> tuple:
    """A program's graph as data: every node (the dataclass, inputs included), every edge with
    its argument position, the output and the names."""
    return (sorted((nid, repr(data["node"])) for nid, data in program.graph.nodes(data=True)),
            sorted((a, b, d["arg"]) for a, b, d in program.graph.edges(data=True)),
            program.output, sorted(program.names.items()))


def _programs() -> list:
    import sys
    from pathlib import Path

    from rasp_compiler.lang import load_program
    from rasp_compiler.testing.random_source import generate

    bench = Path(__file__).resolve().parents[1] / "bench"
    sys.path.insert(0, str(bench))
    try:
        from shipped import PROGRAMS
        from tracr_cells import PROGRAMS as CELLS
    finally:
        sys.path.remove(str(bench))
    from rasp_compiler.pyapi import lib

    out = [(s.name, load_program(str(s.file))) for s in PROGRAMS]
    out += [(f"pyapi/{name}", rasp.as_program(cell.build(rasp, lib, 8))) for name, cell in CELLS.items()]
    # repeated statements and hand-written widths: the merges and the width rewrites both occur
    out += [(f"random/{seed}", program_from_source(generate(seed, repeats=0.4, hand_widths=0.5).source,
                                                   "random.rasp"))
            for seed in range(12_700_000, 12_700_060)]
    return out


def test_one_merge_pass_finds_every_repeat_so_rewritten_skips_the_second_on_an_unchanged_graph() -> None:
    """``rewritten`` merges shared subexpressions a second time only where ``bos_counts`` or
    ``bos_widths`` changed the graph: a second pass over a merged graph must give it back
    unchanged, and the rewritten program must be the one the old order (always twice) gave."""
    from rasp_compiler.compiler.rewrites import bos_counts, bos_widths, nonzero_widths, rewritten

    checked = 0
    for name, program in _programs():
        merged = shared_subexpressions(program)
        assert shared_subexpressions(merged) is merged, name
        for n in (5, 12):
            always_twice = nonzero_widths(shared_subexpressions(
                bos_widths(bos_counts(shared_subexpressions(program), n), n)), n)
            assert _shape(rewritten(program, n)) == _shape(always_twice), (name, n)
            checked += 1
    assert checked > 100


def test_merged_program_keeps_the_nodes_whose_inputs_stay_and_copies_the_others():
    """Each node of the merged program equals the kept node with its inputs mapped to the kept
    ones: the very node where no input was merged away, a copy with the new inputs elsewhere."""
    import dataclasses

    program = program_from_source(REPEATED, "<repeated>")
    merged = shared_subexpressions(program)
    assert set(merged.graph) < set(program.graph)
    kept_inputs = copied = 0
    for nid in merged.graph:
        old, new = program.node(nid), merged.node(nid)
        assert new.inputs == tuple(i if i in merged.graph else new.inputs[k]
                                   for k, i in enumerate(old.inputs))
        assert new == dataclasses.replace(old, inputs=new.inputs)
        if new.inputs == old.inputs:
            assert new is old
            kept_inputs += 1
        else:
            copied += 1
    assert kept_inputs and copied
