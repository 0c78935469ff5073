"""Step MLPs whose steps are shared across the positions (``numeric.SharedSteps``): a function of
one number and a categorical context, such as round((indices + 1) * mean), needs a step pair per
output change, not one per (position, change)."""

from __future__ import annotations

import pytest
import torch

from rasp_compiler.compiler import compile_program
from rasp_compiler.compiler.checking import check_model, edge_inputs, exhaustive_inputs, random_inputs
from rasp_compiler.lang import load_program, program_from_source

torch.set_num_threads(1)

# The count of "a"s so far, from a prefix mean: its steps sit at k/(i+1), different at every
# position i.  `% 3` makes the output go round (the same change occurs several times in one
# position's steps), and the token decides which of two tables applies (a gate coordinate).
COUNT = """frac = numerical(aggregate(select(indices, indices, <=), numerical(indicator(tokens == "a")), 0));
count = round((indices + 1) * frac);
shown = (count % 3) if tokens == "b" else count;
shown;
"""


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_shared_steps_agree_with_the_interpreter(dtype: str) -> None:
    program = program_from_source(COUNT)
    small = compile_program(program, list("ab"), 6, dtype=dtype)
    res = check_model(small, program, exhaustive_inputs(list("ab"), 6))
    assert res.inputs_checked == 2 ** 7 - 2 and res.ok, res.failures
    model = compile_program(program, list("abc"), 24, dtype=dtype)
    inputs = random_inputs(list("abc"), 24, 400, seed=1) + edge_inputs(list("abc"), 24)
    res = check_model(model, program, inputs)
    assert res.inputs_checked == len(inputs) and res.ok, res.failures


def test_shared_steps_grow_with_the_outputs_not_with_positions_times_outputs() -> None:
    program = program_from_source(COUNT)
    sizes = {n: compile_program(program, list("abc"), n).mlp_sizes[0] for n in (16, 32)}
    # one step pair per change of the count (about n of them per token class) plus a constant
    # per (position, token): linear in n; per-position steps would be about n^2 / 2 pairs
    assert sizes[32] < 2.5 * sizes[16], sizes
    assert sizes[32] < 32 * 32, sizes


def test_dyck2_first_mlp_is_linear_in_max_len() -> None:
    program = load_program("programs/dyck2.rasp")
    model = compile_program(program, list("(){}a"), 64)
    assert model.n_layers == 4
    assert model.mlp_sizes[0] < 4 * 64 * 8, model.mlp_sizes   # was 16,960 = about 4 * 64^2
