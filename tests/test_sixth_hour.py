"""A sixth careful hour (8 Dec, hard6): what a transformer-theory researcher met in the universal
simulator, the fixed universal transformers, `rasp experiment` and the original REPL's semantics,
each test a reproducer of a defect that was fixed (docs/robustness.md, "A sixth careful hour")."""

from __future__ import annotations

from pathlib import Path

import pytest

from rasp_compiler.cli import main
from rasp_compiler.errors import InputError, UserError
from rasp_compiler.lang import program_from_source, run


def test_tokens_float_of_a_non_finite_token_is_refused_as_the_input(tmp_path: Path, capsys) -> None:
    """`tokens_float` of the token "nan" (also "inf", "1e400"): `rasp compile` crashed with a
    KeyError traceback, a vocabulary with "inf" compiled a model that printed inf where `rasp run`
    refused, and `rasp run` blamed the program's arithmetic for the input's own value."""
    prog = tmp_path / "f.rasp"
    prog.write_text("tokens_float;\n")
    for token in ("nan", "inf", "-1e999"):
        assert main(["compile", str(prog), "--vocab", f'["1", "{token}"]', "--max-len", "2",
                     "-o", str(tmp_path / "m")]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: vocabulary entry '{token}' reads as ") and "Traceback" not in err, err
        assert "(tokens_float): a compiled model carries finite numbers only" in err
        assert f"hint: drop '{token}' from the vocabulary" in err
        assert not (tmp_path / "m").exists()
        assert main(["run", str(prog), "--input-json", f'["1", "{token}"]']) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: tokens_float reads input position 1 ('{token}') as "), err
        assert "not a finite number" in err and "arithmetic" not in err
    with pytest.raises(InputError, match="not a finite number"):
        run(program_from_source("tokens_float * 2;"), ["1", "nan"])
    # a non-finite number given as a token (Python): [nan] was answered, where --input-json and a
    # compiled model's vocabulary refuse it
    from rasp_compiler import pyapi as rasp

    for bad in (float("nan"), float("inf")):
        said = f"input position 1 holds {bad}: a token that is a number is finite"
        with pytest.raises(InputError, match=said):
            rasp.evaluate(rasp.numerical(rasp.Map(lambda x: x * 2, rasp.tokens)), [1.0, bad])
        with pytest.raises(InputError, match="a token that is a number is finite"):
            run(program_from_source("tokens_float * 2;"), [1.0, bad])
    # finite number-like strings read as before, in both (the model and the interpreter agree)
    prog.write_text("tokens_float * 10;\n")
    assert main(["check", str(prog), "--vocab", '["1_0", "01", " 1", "1e1", "-0", "1.5"]',
                 "--max-len", "2", "--exhaustive"]) == 0
    assert "exhaustive: 42/42 inputs agree" in capsys.readouterr().out
    assert run(program_from_source("tokens_float * 10;"), ["1e1", "1.5"]) == [100.0, 15.0]



def test_a_finished_run_of_other_settings_in_out_is_refused_not_replaced(tmp_path: Path, capsys) -> None:
    """`rasp experiment dyck1 ... --out DIR`, DIR holding a finished run of other settings (here
    --steps): trained over it without a word, its weights and result lost (an unfinished run of
    other settings was already refused).  The same run still gives its saved result, and
    --no-resume still replaces."""
    out = tmp_path / "run"
    base = ["experiment", "dyck1", "--backbone", "random", "--settings", "base", "--width", "8",
            "--layers", "1", "--heads", "1", "--batch", "4", "--no-progress", "--json", "--out", str(out)]
    assert main(base + ["--steps", "6"]) == 0
    capsys.readouterr()
    weights = (out / "model.safetensors").read_bytes()
    assert main(base + ["--steps", "8"]) == 1
    err = capsys.readouterr().err
    assert f"error: --out {out} holds another finished run: it differs from " in err, err
    assert "in steps (6 there, 8 here); training would replace its weights and result" in err
    assert "hint: give this run another --out, or pass --no-resume to replace that run" in err
    assert (out / "model.safetensors").read_bytes() == weights
    assert main(base + ["--steps", "6", "--threads", "2"]) == 0      # threads do not bind a run
    assert "already finished" in capsys.readouterr().err
    assert main(base + ["--steps", "8", "--no-resume"]) == 0
    assert (out / "model.safetensors").read_bytes() != weights


def test_the_fixed_ut_python_api_names_a_wrong_argument() -> None:
    """`ut(X, E, U)` with a U of the wrong shape was torch's "mat1 and mat2 shapes cannot be
    multiplied", a 1-D X (of the UT or the target) an IndexError from inside the attention, and
    `encode(ut, "t")` an AttributeError; each is now one UserError saying what was expected."""
    import torch

    from rasp_compiler.universal import Target, build_universal, encode

    ut = build_universal("sparse", layers=2, heads=1, dim=3)
    target = Target.random(2, 1, 3, seed=0)
    E, U = encode(ut, target)
    X = torch.randn(4, 3, dtype=torch.float64)
    y, _ = ut(X, E, U)
    assert torch.allclose(y, target(X)[0], atol=1e-12)       # the right call still runs exactly
    assert torch.allclose(ut(X.unsqueeze(0), E, U)[0][0], y)  # a batch of inputs too
    with pytest.raises(UserError, match=r"readout U must have shape \(15, d_out\), got \(2, 3\)"):
        ut(X, E, U[:2])
    with pytest.raises(UserError, match=r"input X must have shape \(n, d\) or \(batch, n, d\), got \(3,\)"):
        ut(X[0], E, U)
    with pytest.raises(UserError, match=r"input X must have shape .* got \(3,\)"):
        target(X[0])
    with pytest.raises(UserError, match="encode takes a Target second, got str"):
        encode(ut, "t")
    with pytest.raises(UserError, match="encode takes a UniversalTransformer first, got Target"):
        encode(target, ut)


def test_u_given_to_probe_or_export_is_named_as_u(tmp_path: Path, capsys) -> None:
    """`rasp experiment probe U/` said "U is a compiled model (rasp compile)", and `rasp export U/`
    hinted "compile with a --vocab of tokens": U comes from `rasp simulate`, and neither applies."""
    u = tmp_path / "U"
    assert main(["simulate", "--n", "1", "--d", "1", "-o", str(u)]) == 0
    capsys.readouterr()
    assert main(["experiment", "probe", str(u)]) == 1
    err = capsys.readouterr().err
    assert f"error: {u} is the universal simulator U (rasp simulate -o), not an experiment checkpoint" in err
    assert "rasp simulate --model DIR --input-json" in err and "rasp compile" not in err
    assert main(["export", str(u), "-o", str(tmp_path / "u.pt")]) == 1
    err = capsys.readouterr().err
    assert "error: the model is the universal simulator U (rasp simulate), which reads real numbers" in err
    assert "--vocab" not in err and "rasp simulate --model DIR" in err
    assert not (tmp_path / "u.pt").exists()


def test_the_simulator_page_python_example_runs_as_written(capsys) -> None:
    """docs/simulator.md's Python block used A, V and X without making them (a NameError as
    written) and imported `attention_layer` without saying that it returns a dict of the output
    and every intermediate; it now runs and compares U with that reference."""
    import re

    page = (Path(__file__).resolve().parents[1] / "docs" / "simulator.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], "docs/simulator.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert float(out[0]) < 1e-12 and out[1].startswith("# U, the universal simulator of one attention layer")


def test_a_string_compared_with_a_number_is_noted_at_compile(tmp_path: Path, capsys) -> None:
    """`tokens == 1` over --vocab 123 compiled, and ran, to all-False without a word (the strings
    '1', '2', '3' equal no number, in the original REPL as in the interpreter here), where
    `tokens < 2` is an error with a hint.  The answer stays the interpreter's; the compile notes why."""
    prog = tmp_path / "eq.rasp"
    prog.write_text("x = tokens != 2;\ny = tokens == 1;\nx and y;\n")
    assert main(["check", str(prog), "--vocab", "123", "--max-len", "3", "--exhaustive"]) == 0
    out = capsys.readouterr().out
    assert "note: x: it compares strings with the number 2, so it is true at every position" in out, out
    assert ("note: y: it compares strings with the number 1, so it is false at every position (as in "
            "the interpreter); to compare numbers read the input with tokens_int or tokens_float, or "
            "compare with the string '1'") in out
    assert "exhaustive: 39/39 inputs agree" in out
    assert run(program_from_source('tokens == 1;'), ["1", "2"]) == [False, False]
    prog.write_text("x = tokens == indices;\nx;\n")        # two s-ops alike
    assert main(["check", str(prog), "--vocab", "012", "--max-len", "3", "--exhaustive"]) == 0
    out = capsys.readouterr().out
    assert ("note: x: it compares strings with numbers ('indices'), so it is false at every position "
            "(as in the interpreter); to compare numbers read the input with tokens_int or "
            "tokens_float, or map one side first") in out, out
    # a select alike: it selects no key (every key for !=), noted where an aggregate or a width reads it
    prog.write_text("w = selector_width(select(tokens, 1, ==));\nw + aggregate(not select(tokens, 2, !=), "
                    "tokens_int, 5);\n")
    assert main(["check", str(prog), "--vocab", "123", "--max-len", "3", "--exhaustive"]) == 0
    out = capsys.readouterr().out
    assert ("note: w: 'select_1' (select(tokens, 1, ==)) compares strings with numbers by ==, so it "
            "selects no key (as in the interpreter)") in out, out
    assert "(select(tokens, 2, !=)) compares strings with numbers by !=, so it selects every key" in out
    assert "exhaustive: 39/39 inputs agree" in out
    for fine in ('tokens == "1";', "tokens_int == 1;", "indices == 1;"):
        prog.write_text(fine + "\n")
        assert main(["compile", str(prog), "--vocab", "123", "--max-len", "3",
                     "-o", str(tmp_path / "m")]) == 0
        assert "compares strings" not in capsys.readouterr().out


def test_emit_rasp_replaces_rasp_text_only(tmp_path: Path, capsys) -> None:
    """`rasp simulate ... --emit-rasp notes.txt` (or a .py, a .md) replaced the user's text without
    --force, though --help says --force is needed "to replace a file that is not RASP text"."""
    sim = ["simulate", "--n", "1", "--d", "1", "--emit-rasp"]
    for name, text in (("notes.txt", "my notes\n"), ("prog.py", "import torch\n"), ("README.md", "# x\n")):
        path = tmp_path / name
        path.write_text(text)
        assert main(sim + [str(path)]) == 1
        err = capsys.readouterr().err
        assert f"--emit-rasp {path} exists and is not a text file of RASP source" in err
        assert "hint: give another file name, or --force to replace it" in err
        assert path.read_text() == text
    assert main(sim + [str(tmp_path / "notes.txt"), "--force"]) == 0
    # RASP text, U's own source under another name, an empty file: replaced as before
    (tmp_path / "mine.rasp").write_text("tokens;\n")
    (tmp_path / "empty.txt").write_text("")
    for name in ("mine.rasp", "notes.txt", "empty.txt"):
        assert main(sim + [str(tmp_path / name)]) == 0
        assert (tmp_path / name).read_text().startswith("# U, the universal simulator")


def test_show_never_draws_over_a_file_that_is_not_a_picture(tmp_path: Path, capsys) -> None:
    """`rasp show prog.rasp --vocab ab --max-len 3 -o prog.rasp` (a slip of the output name) wrote
    a PNG over the program, as any name that is not a picture's was drawn in PNG: notes.md, a .py."""
    prog = tmp_path / "prog.rasp"
    source = "aggregate(select(indices, length - indices - 1, ==), tokens);\n"
    prog.write_text(source)
    show = ["show", str(prog), "--vocab", "ab", "--max-len", "3", "-o"]
    for victim in (prog, tmp_path / "notes.md"):
        if victim != prog:
            victim.write_text("# my notes\n")
        before = victim.read_bytes()
        assert main(show + [str(victim)]) == 1
        err = capsys.readouterr().err
        assert f"error: cannot write {victim}: it exists and is not a picture" in err, err
        assert f"hint: give the picture a .png or .svg name, e.g. {victim.with_suffix('')}.png" in err
        assert victim.read_bytes() == before
    # a picture under any name is redrawn, as before; a new file of any name is drawn
    for name in ("plan", "plan.png", "plan"):
        assert main(show + [str(tmp_path / name)]) == 0
    assert (tmp_path / "plan").read_bytes().startswith(b"\x89PNG")
    (tmp_path / "old.png").write_text("not a png yet")   # a .png name is the user's ask: drawn
    assert main(show + [str(tmp_path / "old.png")]) == 0


def test_a_bos_typed_first_gets_the_hint_that_the_model_adds_it(tmp_path: Path, capsys) -> None:
    """`rasp eval M --input-json '["BOS", "a", "b"]'` (tracr's inputs begin with BOS; also
    `model.run([["BOS", "a"]])`) hinted "compile again with a --vocab that includes it"."""
    from rasp_compiler import pyapi as rasp
    from rasp_compiler.runtime import ModelInputError

    prog = tmp_path / "rev.rasp"
    prog.write_text("aggregate(select(indices, length - indices - 1, ==), tokens);\n")
    model = tmp_path / "m"
    assert main(["compile", str(prog), "--vocab", "ab", "--max-len", "3", "-o", str(model)]) == 0
    capsys.readouterr()
    for first in ("BOS", "<BOS>"):
        assert main(["eval", str(model), "--input-json", f'["{first}", "a", "b"]']) == 1
        err = capsys.readouterr().err
        assert f"error: token '{first}' at position 0 of input 0 is not in the vocabulary ('a', 'b')" in err
        assert ('hint: this model puts its own BOS first (tracr\'s inputs begin with it): give the '
                'tokens alone, ["a", "b"]') in err, err
    assert main(["eval", str(model), "--input-json", '["a", "b"]']) == 0
    assert capsys.readouterr().out == "[b, a] (strings)\n"
    compiled = rasp.compile_program(rasp.tokens, "ab", 3)
    with pytest.raises(ModelInputError, match="this model puts its own BOS first"):
        compiled.run([["BOS", "a"]])
    assert main(["eval", str(model), "--input-json", '["a", "BOS"]']) == 1    # elsewhere: as before
    assert "hint: compile again with a --vocab that includes it" in capsys.readouterr().err


def test_a_value_beginning_with_a_dash_gets_the_equals_hint(tmp_path: Path, capsys) -> None:
    """`rasp eval M --input -ab` (or `--vocab -ab`) said only "argument --input: expected one
    argument": argparse reads -ab as an option; `--input=-ab` passes it."""
    prog = tmp_path / "p.rasp"
    prog.write_text("tokens;\n")
    with pytest.raises(SystemExit) as stop:
        main(["compile", str(prog), "--vocab", "-ab", "--max-len", "2", "-o", str(tmp_path / "m")])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "error: argument --vocab: expected one argument\n  hint: a value that begins with '-' is " \
           "written after '=': --vocab=-ab" in err, err
    assert main(["compile", str(prog), "--vocab=-ab", "--max-len", "3", "-o", str(tmp_path / "m")]) == 0
    capsys.readouterr()
    assert main(["eval", str(tmp_path / "m"), "--input=-ab"]) == 0
    assert capsys.readouterr().out == "[-, a, b] (strings)\n"
    with pytest.raises(SystemExit):          # a value missing at the end: no such hint
        main(["eval", str(tmp_path / "m"), "--input"])
    assert "hint" not in capsys.readouterr().err


def test_tokens_bool_over_digit_strings_is_noted(tmp_path: Path, capsys) -> None:
    """`tokens_bool` over --vocab 01 reads both tokens as True (Python's bool of a non-empty string,
    as the original REPL's), and compiled to that without a word; the compile now notes it."""
    prog = tmp_path / "b.rasp"
    prog.write_text("x = tokens_bool;\nindicator(x);\n")
    assert run(program_from_source("tokens_bool;"), list("01")) == [True, True]   # unchanged
    assert main(["check", str(prog), "--vocab", "01", "--max-len", "2", "--exhaustive"]) == 0
    out = capsys.readouterr().out
    assert ("note: tokens_bool: every non-empty string reads as True (Python's bool, as in the "
            "original REPL): '0' reads as True; read 0/1 with tokens_int (tokens_int == 1)") in out, out
    assert "exhaustive: 6/6 inputs agree" in out
    assert main(["check", str(prog), "--vocab", "[true, false]", "--max-len", "2", "--exhaustive"]) == 0
    assert "reads as True" not in capsys.readouterr().out


def test_dry_run_refuses_the_options_it_would_ignore(tmp_path: Path, capsys) -> None:
    """`rasp experiment table --dry-run --time-budget 5` (also --jobs, --ray, --checkpoints,
    --checkpoint-every) listed the missing runs and ignored them without a word, where
    --report-only names the options it would ignore; --only and --seeds still filter the list."""
    table = ["experiment", "table", "--dry-run", "--results", str(tmp_path / "res")]
    for extra, flag in ((["--time-budget", "5"], "--time-budget"), (["--jobs", "2"], "--jobs"),
                        (["--checkpoints", str(tmp_path / "ck")], "--checkpoints"),
                        (["--checkpoint-every", "10"], "--checkpoint-every"), (["--ray"], "--ray")):
        assert main(table + extra) == 1
        err = capsys.readouterr().err
        assert f"error: --dry-run lists the missing runs and runs none, so {flag} would do nothing" in err
        assert f"hint: drop {flag}, or drop --dry-run" in err
    assert main(table + ["--only", "^khop2_", "--seeds", "0"]) == 0
    captured = capsys.readouterr()
    assert captured.out and all(line.startswith("khop2_") for line in captured.out.splitlines())
    assert not (tmp_path / "ck").exists() and not (tmp_path / "res").exists()


@pytest.mark.parametrize("sizes", [(0, 1, 4), (2, 0, 4), (2, 1, 0), (-1, 1, 4), (2.5, 1, 4), (True, 1, 4)])
def test_width_formula_refuses_a_class_without_layers_heads_or_width(sizes: tuple) -> None:
    """width_formula("sparse", 0, 1, 4) answered 4 (a UT of no layers), and negative sizes gave
    negative widths: each is one UserError naming the size."""
    from rasp_compiler.errors import UserError
    from rasp_compiler.universal import width_formula

    with pytest.raises(UserError, match="(layers|heads|dim) must be"):
        width_formula("sparse", *sizes)
    with pytest.raises(UserError, match="head_dim must be at least 1"):
        width_formula("random", 2, 1, 4, head_dim=0)
    assert width_formula("sparse", 2, 1, 4) == 20  # (2L + 1) d, the paper's sparse width


def test_a_saved_encoding_that_is_not_one_gets_a_hint(tmp_path: Path, capsys) -> None:
    """`rasp universal --with-mlps ... --encoding notes.json` said only that the file is not a
    readable safetensors file, with safetensors' own words; it now also says what to give."""
    notes = tmp_path / "notes.json"
    notes.write_text('{"a": 1}')
    program = Path(__file__).resolve().parents[1] / "programs" / "reverse.rasp"
    code = main(["universal", "--with-mlps", "--program", str(program),
                 "--vocab", "abc", "--max-len", "4", "--encoding", str(notes)])
    err = capsys.readouterr().err
    assert code != 0 and "is not a readable safetensors file" in err
    assert "hint: give the lookup UT program encoding file as rasp saved it" in err
