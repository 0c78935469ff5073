"""The `rasp` entry point: every command is reachable and start-up stays light."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rasp_compiler.cli import COMMANDS, build_parser


def test_every_command_is_registered() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == set(COMMANDS)


def test_building_the_parser_does_not_import_torch() -> None:
    # `rasp run` must not pay torch's multi-second import; commands import heavy modules in main().
    code = ("import sys; from rasp_compiler.cli import build_parser; build_parser(); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_no_command_prints_help_and_fails() -> None:
    out = subprocess.run([sys.executable, "-m", "rasp_compiler.cli"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "COMMAND" in out.stdout


def test_negative_numbers_in_exponent_form_are_values_not_options() -> None:
    parser = build_parser()
    args = parser.parse_args(["compile", "f.rasp", "--input-range", "-1e6", "1e6", "--max-len", "4",
                              "-o", "m"])
    assert args.input_range == [-1e6, 1e6]
    args = parser.parse_args(["simulate", "--n", "2", "--d", "2", "--input-range", "-1.5E+2", "-.5"])
    assert args.input_range == [-150.0, -0.5]


def test_negative_infinity_and_nan_are_values_that_reach_the_option_check(capsys) -> None:
    """`--input-range -inf 1` stopped at argparse with "expected 2 arguments", which is not what
    was wrong; now the range check says the range must be finite."""
    from rasp_compiler.cli import main

    args = build_parser().parse_args(["simulate", "--n", "2", "--d", "2", "--input-range", "-inf", "-NaN"])
    assert args.input_range[0] == float("-inf") and args.input_range[1] != args.input_range[1]
    assert main(["simulate", "--n", "2", "--d", "2", "-o", "U", "--input-range", "-inf", "1"]) == 1
    assert capsys.readouterr().err.startswith("error: --input-range needs finite LO <= HI, got -inf")


def test_an_unknown_option_is_refused_by_its_sub_command_with_the_option_meant(capsys) -> None:
    """`rasp compile F --maxlen 5` printed `rasp`'s own usage ("usage: rasp [-h] [--version]
    COMMAND ...") and no hint: argparse reports leftover arguments from the top-level parser.  Now
    the sub-command that was given them refuses them, with its usage and the near-miss option."""
    from rasp_compiler.cli import main

    with pytest.raises(SystemExit) as err:
        main(["compile", "f.rasp", "--vocab", "ab", "--maxlen", "5", "-o", "m"])
    text = capsys.readouterr().err
    assert err.value.code == 2
    assert text.startswith("usage: rasp compile ")
    assert "rasp compile: error: unrecognized arguments: --maxlen 5" in text
    assert "hint: did you mean --max-len (for --maxlen)?" in text
    with pytest.raises(SystemExit):                           # a nested sub-command: its own usage
        main(["experiment", "khop", "--k", "1", "--stesp", "3"])
    text = capsys.readouterr().err
    assert "rasp experiment khop: error: unrecognized arguments: --stesp 3" in text
    assert "did you mean --steps (for --stesp)?" in text
    with pytest.raises(SystemExit):                           # nothing close: no hint
        main(["run", "f.rasp", "--input", "ab", "--zzzzzz"])
    text = capsys.readouterr().err
    assert "rasp run: error: unrecognized arguments: --zzzzzz" in text and "hint" not in text


def test_words_left_over_say_which_option_or_input_they_belong_to(capsys) -> None:
    """`rasp check F --vocab a b c` said only "unrecognized arguments: b c", and `rasp run F hello`
    "unrecognized arguments: hello": the words belong to the option before them, or are an input
    the command takes with --input."""
    from rasp_compiler.cli import main

    with pytest.raises(SystemExit) as err:
        main(["check", "f.rasp", "--vocab", "a", "b", "c", "--max-len", "5"])
    text = capsys.readouterr().err
    assert err.value.code == 2 and "unrecognized arguments: b c" in text
    assert "hint: --vocab takes one value: the tokens as one string (--vocab abc)" in text
    with pytest.raises(SystemExit):
        main(["run", "f.rasp", "hello"])
    assert "hint: an input is given with --input: --input hello" in capsys.readouterr().err
    with pytest.raises(SystemExit):                           # a near-miss option's value: not an input
        main(["run", "f.rasp", "--maxlen", "5"])
    assert "--input 5" not in capsys.readouterr().err


def test_every_option_of_every_command_says_what_it_does() -> None:
    """`rasp compile --help` and `rasp check --help` listed --dtype with no words, and `rasp
    universal --help` --construction: a user could not tell what float64 or `looped` changes."""
    import argparse

    silent = []

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}")
            elif not action.help and action.dest != "help":
                silent.append(f"{name} {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "rasp")
    assert silent == []


@pytest.mark.parametrize("argv, name", [
    (["run", "", "--input", "a"], "FILE"),
    (["eval", "", "--input", "a"], "DIR"),
    (["verify", "m", " "], "PROGRAM"),
    (["show", "", "-o", "x.png"], "FILE.rasp|DIR"),
])
def test_an_empty_file_or_directory_argument_is_named_as_empty(capsys, tmp_path, monkeypatch, argv,
                                                             name) -> None:
    """`rasp run "$F"` with F unset said " is a directory, not a RASP program", and `rasp eval ''`
    looked for config.json in the current directory (and ran the model there, if it held one)."""
    from rasp_compiler.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(argv) == 1
    hint = f"  hint: give {name} a value (an unset shell variable?)"
    assert capsys.readouterr().err == f"error: {name} is empty\n{hint}\n"


def test_a_mistyped_command_is_named_with_the_command_meant(capsys) -> None:
    """`rasp comple` listed the eleven commands; it now says which one was meant."""
    from rasp_compiler.cli import main

    with pytest.raises(SystemExit) as err:
        main(["comple", "f.rasp"])
    assert err.value.code == 2
    text = capsys.readouterr().err
    assert "rasp: error: unknown command 'comple'\n" in text
    assert "  hint: did you mean 'compile'? (rasp compile --help)" in text
    with pytest.raises(SystemExit):                           # nothing close: argparse's own list
        main(["zzz"])
    assert "invalid choice: 'zzz' (choose from 'run'" in capsys.readouterr().err


def test_rasp_help_command_prints_that_commands_help(capsys) -> None:
    # `rasp help compile` (git's habit, and the REPL's `help`) said "invalid choice: 'help'"
    from rasp_compiler.cli import main

    with pytest.raises(SystemExit) as err:
        main(["help", "compile"])
    assert err.value.code == 0 and capsys.readouterr().out.startswith("usage: rasp compile")
    assert main(["help"]) == 0 and "Run 'rasp COMMAND --help'" in capsys.readouterr().out
    assert main(["help", "nope"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown command 'nope'\nusage: rasp")


def _shell(command: str) -> subprocess.CompletedProcess:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120, cwd=root)


def test_a_closed_stdin_reads_as_empty(tmp_path) -> None:
    """`rasp repl <&-` and `rasp eval DIR --inputs - <&-`: sys.stdin is None, and both tracebacked."""
    rasp = f"{sys.executable} -m rasp_compiler.cli"
    out = _shell(f"{rasp} repl <&-")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    model = tmp_path / "m"
    out = _shell(f"{rasp} compile programs/reverse.rasp --vocab ab --max-len 3 -o {model} && "
                 f"{rasp} eval {model} --inputs - <&-")
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("error: <stdin> holds no inputs")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_output_to_a_full_device_is_one_error() -> None:
    """stdout on a full disk raised OSError(ENOSPC) with no file name: a traceback."""
    out = _shell(f"{sys.executable} -m rasp_compiler.cli run programs/reverse.rasp --input abc >/dev/full")
    assert out.returncode == 1, out.stderr
    assert out.stderr == "error: cannot write the output: No space left on device\n"


def test_bytes_that_are_not_utf8_are_one_error_not_a_traceback(tmp_path) -> None:
    """Found by fuzzing: `--vocab $'a\\xff'` tracebacked in `compile` and left a truncated
    config.json; `--input $'a\\xff'` and a piped REPL line of such bytes tracebacked under a
    strict UTF-8 locale."""
    rasp = f"PYTHONIOENCODING=utf-8 {sys.executable} -m rasp_compiler.cli"
    out = _shell(f"{rasp} compile programs/reverse.rasp --vocab $'a\\xff' --max-len 3 -o {tmp_path / 'm'}")
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("error: the argument 'a\\xff' is not valid UTF-8 text")
    assert not (tmp_path / "m").exists()
    out = _shell(f"{rasp} run programs/reverse.rasp --input $'a\\xff'")
    assert out.returncode == 1 and out.stderr.startswith("error: the argument 'a\\xff'"), out.stderr
    out = _shell(f"printf 'x = tokens;\\n\\xff\\nx;\\n' | {rasp} repl")
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert "error: this line is not valid UTF-8 text, so it was skipped: \\xff" in out.stdout + out.stderr
    assert (out.stdout + out.stderr).count("s-op: x") == 2  # the session went on


def test_a_config_that_is_not_utf8_is_refused_before_anything_is_written(tmp_path) -> None:
    from rasp_compiler import pyapi as rasp
    from rasp_compiler.errors import ArtifactError

    model = rasp.compile_program(rasp.Map(lambda x: x, rasp.tokens), ["a", "b\udcff"], 3)
    with pytest.raises(ArtifactError, match="not valid UTF-8"):
        model.save(str(tmp_path / "m"))
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("argv, named, not_named", [
    (["universal", "--construction", "sparse", "--layers", "1", "--dim", "6666", "--check"],
     "--dim", "--max-len"),
    (["universal", "--program", "programs/reverse.rasp", "--vocab", "abc", "--with-mlps"],
     "--max-len", "--dim"),
    (["simulate", "--n", "2", "--d", "2", "--check"], "--d", "--max-len"),
    (["experiment", "dyck1", "--settings", "base", "--steps", "5"], "--width", "--max-len"),
    (["compile", "programs/reverse.rasp", "--vocab", "abc", "--max-len", "8", "-o", "out"], "--max-len",
     "--dim"),
])
def test_out_of_memory_names_the_options_of_the_command_that_ran_out(capsys, monkeypatch, argv, named,
                                                                      not_named) -> None:
    """The one hint named --max-len and vocabularies for every command: `rasp universal
    --construction sparse --layers 1 --dim 6666 --check` (under a 3 GB ulimit) was told to use a
    smaller --max-len, an option it does not have."""
    import argparse

    from rasp_compiler import cli

    def exhausted(args: argparse.Namespace) -> int:
        raise MemoryError

    real = cli.build_parser

    def parser() -> argparse.ArgumentParser:
        p = real()
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    sub.set_defaults(func=exhausted)
                    for inner in sub._actions:
                        if isinstance(inner, argparse._SubParsersAction):
                            for task in inner.choices.values():
                                task.set_defaults(func=exhausted)
        return p

    monkeypatch.setattr(cli, "build_parser", parser)
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: out of memory\n  hint: ") and err.count("\n") == 2, err
    assert named in err and not_named not in err, err
