"""Item 5 of issue 5: RASP-compiled models run through a fixed UT.

Attention-only compiled models (no MLP) are targets of the residual class with values; the UT's
decoded outputs must equal the compiled model's and the reference interpreter's on every input.
Models with MLPs are refused by name; their attention sublayers run through a UT one at a time.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from universal_helpers import single_thread  # noqa: F401  (autouse fixture)

from rasp_compiler.compiler import compile_program
from rasp_compiler.errors import UserError
from rasp_compiler.lang import load_program
from rasp_compiler.universal import build_universal
from rasp_compiler.universal.compiled import attention_target, run_sublayer_through_ut, run_through_ut

ROOT = Path(__file__).resolve().parent.parent


def _all_inputs(vocab, max_len):
    return [list(t) for n in range(1, max_len + 1) for t in itertools.product(vocab, repeat=n)]


@pytest.mark.parametrize("path, vocab, layers", [
    ("programs/frac_prevs.rasp", "helo", 1),
    ("docs/examples/shift_twice.rasp", "abc", 2),
])
def test_attention_only_program_through_paths_ut(path, vocab, layers):
    program = load_program(str(ROOT / path))
    model = compile_program(program, list(vocab), 5, dtype="float64")
    target = attention_target(model)
    assert target.layers == layers and target.residual
    ut = build_universal("paths", target.layers, target.heads, target.dim, residual=True,
                         causal=target.causal)
    inputs = _all_inputs(vocab, 4)
    res = run_through_ut(model, ut, inputs, program)
    assert res.max_logit_error <= 1e-10 and res.attention_max_diff <= 1e-10
    assert res.decoded_agree == res.interpreter_agree == len(inputs)


def test_model_with_mlp_is_refused_by_name_and_its_attention_layer_runs():
    model = compile_program(load_program(str(ROOT / "programs/histogram.rasp")), list("abc"), 5,
                            dtype="float64")
    with pytest.raises(UserError, match="has MLPs"):
        attention_target(model)
    target = attention_target(model, [0], with_unembedding=False)
    ut = build_universal("paths", 1, target.heads, target.dim, residual=True)
    res = run_sublayer_through_ut(model, 0, ut, _all_inputs("abc", 4))
    assert res.max_logit_error <= 1e-10 and res.attention_max_diff <= 1e-10


def test_cli_program_output_picks_one_program_of_a_file(capsys) -> None:
    """`rasp universal --program FILE --output NAME`: a file of several programs (the original
    repository's paper_examples.rasp) runs the named one through the UT."""
    import json

    from rasp_compiler.cli import main

    paper = str(ROOT / "tests" / "data" / "paper_examples.rasp")
    code = main(["universal", "--program", paper, "--output", "hist_nobos", "--vocab", "abc",
                 "--max-len", "3", "--attention-layer", "0", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["max_abs_error"] == 0.0, report


def test_program_through_a_too_narrow_ut_fails_with_an_error_line(capsys):
    """A random UT far below its width formula decodes wrongly: exit 1 and one ``error:`` line."""
    from rasp_compiler.cli import main

    assert main(["universal", "--program", str(ROOT / "programs/frac_prevs.rasp"), "--vocab", "helo",
                 "--max-len", "3", "--construction", "random", "--width", "4"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: the UT's decoded outputs are wrong on ")


def test_a_model_without_layers_is_refused_by_the_attention_ut_and_run_by_the_lookup_ut(tmp_path, capsys):
    """`x = tokens == "a"` compiles to no layer: `rasp universal --program` ended in "max() arg is
    an empty sequence" (a traceback), --attention-layer 0 said "layers 0..-1", and the lookup UT
    divided its depth by 0 layers (ZeroDivisionError) after running every input exactly."""
    import json

    from rasp_compiler.cli import main

    src = tmp_path / "is_a.rasp"
    src.write_text('x = tokens == "a";\nx;\n')
    model = compile_program(load_program(str(src)), list("abc"), 4, dtype="float64")
    assert model.n_layers == 0
    with pytest.raises(UserError, match="the compiled model has no layers"):
        attention_target(model)
    base = ["universal", "--program", str(src), "--vocab", "abc", "--max-len", "4"]
    for extra in ([], ["--attention-layer", "0"]):
        assert main(base + extra) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: the compiled model has no layers") and err.count("error:") == 1
    assert main(base + ["--with-mlps", "--check"]) == 0
    assert "0 layer(s)" in capsys.readouterr().out
    assert main(base + ["--with-mlps", "--check", "--json"]) == 0
    line = json.loads(capsys.readouterr().out.splitlines()[0])
    assert line["inputs_agreeing"] == line["inputs_checked"] == 120 and line["depth_ratio"] is None
