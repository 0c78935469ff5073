"""Value sets that are exact where they can be, and the depth they buy.

* A mean of a positional s-op (a function of the index and the length) under a positional selector
  has one value per (index, length): ``length``'s ``1 / mean(indices == 0)`` holds the N values 1/n,
  not every fraction k/n (~3N²/π² of them: 19,948 at N=256, a 9.7 GB model).
* A categorical map is tabulated up to DOMAIN_CAP, so maps reading it can be fused: Dyck-2 over
  "(){}" keeps 5 layers at max_len 64 (7 when `bad` was rebased at REBASE_SIZE).
"""

from __future__ import annotations

import pytest

from rasp_compiler.compiler import compile_program
from rasp_compiler.compiler.checking import check_model, exhaustive_inputs, random_inputs
from rasp_compiler.interpreter import run
from rasp_compiler.lang import load_program, program_from_source


@pytest.mark.parametrize("n", [16, 64])
def test_length_mean_has_one_value_per_length(n: int) -> None:
    prog = load_program("programs/length.rasp")
    model = compile_program(prog, list("ab"), n)
    an = model.analysis
    agg = next(i for i in an.info.values() if i.kind == "aggregate")
    # exactly the interpreter's 1/n for each length (first position is index 0)
    assert sorted(agg.values) == sorted(1 / m for m in range(1, n + 1))
    assert all(len(vs) == 1 for vs in agg.cond.values())
    assert model.n_layers == 1 and model.residual_width < 3 * n + 10
    for x in (["a"] * m for m in (1, 2, 3, n // 2, n - 1, n)):
        assert model.run([x])[0] == run(prog, x) == [len(x)] * len(x)


def test_prefix_mean_of_a_positional_sop_is_exact() -> None:
    src = ("m = aggregate(select(indices, indices, <=),\n"
           "              indicator(indices % 3 == 0) + 2 * indicator(indices == 4));\n"
           "o = round(100 * m);\no;\n")
    prog = program_from_source(src)
    model = compile_program(prog, list("ab"), 7)
    an = model.analysis
    info = an.info["m"]
    assert info.base_kind == "cond" and all(len(vs) == 1 for vs in info.cond.values())
    for (i, n), (v,) in info.cond.items():  # each value is what the interpreter computes
        assert run(prog.with_output("m"), ["a"] * n)[i] == v
    res = check_model(model, prog, list(exhaustive_inputs(list("ab"), 7)))
    assert res.ok and res.inputs_checked == 254


def test_dyck2_depth_at_64() -> None:
    prog = load_program("programs/dyck2.rasp")
    model = compile_program(prog, list("(){}"), 64)
    assert model.n_layers <= 4, model.summary()
    # `bad` (over 40,000 rows here) stays opaque: tabulated it would save no layer
    assert "bad" in [sid for sid, _ in model.analysis.deferred]
    inputs = random_inputs(list("(){}"), 64, 24, seed=11) + [list("({})" * 16), list("(" * 32 + ")" * 32)]
    res = check_model(model, prog, inputs)
    assert res.ok, res.failures


def test_the_pair_table_hint_is_given_only_where_the_pairs_are_the_cause() -> None:
    """A scale audit: dyck2 at --max-len 384 was told that 73,920 (index, length) pairs were "more
    than the 120,000" and that its token-dependent `level` was a function of index and length."""
    from rasp_compiler.errors import CompileError

    positional = "y = (indices * length) % 7;\nz = aggregate(select(indices, y, ==), tokens);\nz;\n"
    with pytest.raises(CompileError) as err:
        compile_program(program_from_source(positional), list("abc"), 500)
    assert "is a function of the index and the length" in err.value.hint
    assert "125,250 (index, length) pairs, more than the 120,000" in err.value.hint
    with_tokens = positional.replace("(indices * length)", "(indices * length + tokens_int)")
    with pytest.raises(CompileError) as err:
        compile_program(program_from_source(with_tokens), [0, 1], 400)
    assert "(index, length) pairs" not in (err.value.hint or "")
