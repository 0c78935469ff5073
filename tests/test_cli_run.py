"""`rasp run` and `rasp repl` as a user runs them (subprocesses: exit codes, stdout, no tracebacks)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def rasp(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "rasp_compiler.cli", *args], input=stdin, capture_output=True,
                          text=True, cwd=REPO, timeout=60)


@pytest.fixture
def reverse_file(tmp_path):
    path = tmp_path / "reverse.rasp"
    path.write_text("# reverse the input\nflip = select(indices, length - indices - 1, ==);\n"
                    "reverse = aggregate(flip, tokens);\nhist = selector_width(select(tokens, tokens, ==));\n"
                    "reverse;\n")
    return path


def test_run_plain_output_looks_like_the_original(reverse_file):
    r = rasp("run", str(reverse_file), "--input", "hello")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[o, l, l, e, h] (strings)\n"
    r = rasp("run", str(reverse_file), "--input", "aaa", "--output", "hist")
    assert r.stdout == "[3]*3 (ints)\n"


def test_run_json(reverse_file, tmp_path):
    r = rasp("run", str(reverse_file), "--input", "abc", "--json")
    assert json.loads(r.stdout) == {"output": ["c", "b", "a"]}
    prog = tmp_path / "num.rasp"
    prog.write_text("x = tokens_float * 2; y = tokens_int > 0; z = aggregate(select(indices, indices, <=), "
                    "tokens_float); x;\n")
    r = rasp("run", str(prog), "--input-json", "[1, 2.5, -3]", "--json")
    assert json.loads(r.stdout) == {"output": [2.0, 5.0, -6.0]}
    r = rasp("run", str(prog), "--input-json", "[1, 2.5, -3]", "--json", "--output", "y")
    assert json.loads(r.stdout) == {"output": [True, True, False]}
    r = rasp("run", str(prog), "--input-json", "[1, 2, 3]", "--json", "--output", "z")
    assert json.loads(r.stdout) == {"output": [1.0, 1.5, 2.0]}
    r = rasp("run", str(prog), "--input-json", "[1, 2, 3]", "--output", "z")
    assert r.stdout == "[1.0, 1.5, 2.0] (floats)\n"


def test_run_selector_output(tmp_path):
    prog = tmp_path / "sel.rasp"
    prog.write_text("s = select(indices, indices, <=); s;\n")
    r = rasp("run", str(prog), "--input", "ab", "--json")
    assert json.loads(r.stdout) == {"output": [[True, False], [True, True]]}


@pytest.mark.parametrize("args, words", [
    (["--input-json", "[1, "], "not valid JSON"),
    (["--input-json", "{\"a\": 1}"], "must be a JSON list"),
    (["--input-json", "[[1]]"], "tokens must be strings, numbers or booleans"),
    (["--input", ""], "the input is empty"),
    (["--input", "abc", "--output", "nothing"], "no s-op or selector named 'nothing'"),
])
def test_run_user_errors_exit_nonzero_without_traceback(reverse_file, args, words):
    r = rasp("run", str(reverse_file), *args)
    assert r.returncode != 0
    assert words in r.stderr
    assert "Traceback" not in r.stderr


def test_run_program_error_is_located(tmp_path):
    prog = tmp_path / "bad.rasp"
    prog.write_text("x = tokens + 1\ny = 2;\n")
    r = rasp("run", str(prog), "--input", "abc")
    assert r.returncode == 1
    assert r.stderr.startswith(f"{prog}:1:15: error: missing ';'")
    assert "Traceback" not in r.stderr
    r = rasp("run", str(tmp_path / "missing.rasp"), "--input", "abc")
    assert r.returncode == 1 and "no such file" in r.stderr


def test_run_input_conversion_error(tmp_path):
    prog = tmp_path / "ints.rasp"
    prog.write_text("tokens_int + 1;\n")
    r = rasp("run", str(prog), "--input", "12x")
    assert r.returncode == 1
    assert "tokens_int cannot read input position 2 ('x') as int" in r.stderr


def test_run_help_has_an_example():
    r = rasp("run", "--help")
    assert r.returncode == 0
    assert "rasp run programs/reverse.rasp --input hello" in r.stdout
    assert "--input-json" in r.stdout and "--output" in r.stdout


def test_load_relative_to_the_file(tmp_path):
    (tmp_path / "lib.rasp").write_text("def double(x) { return x * 2; }\n_hidden = 1;\n")
    main = tmp_path / "main.rasp"
    main.write_text('load "lib";\ndouble(indices);\n')
    r = rasp("run", str(main), "--input", "abc", "--json")
    assert json.loads(r.stdout) == {"output": [0, 2, 4]}


def test_repl_multiline_examples_and_errors():
    session = (
        "x = tokens\n"
        "   + \"!\";\n"             # continues until the ';'
        "def f(a) {\n"
        "  return a + 1;\n"
        "}\n"
        "f(indices);\n"
        "set example [1, 2]\n"
        "tokens_int * 10;\n"
        "nope;\n"                   # an error, then the session goes on
        "y = 3; y;\n"               # two statements on one line
        "s = select(indices, indices, <=);\n"
        "exit\n"
        "never_reached;\n"
    )
    r = rasp("repl", stdin=session)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "s-op: x" in out and 'x("hello") = [h!, e!, l!, l!, o!] (strings)' in out
    assert "function f(a)" in out
    assert 'out("hello") = [1, 2, 3, 4, 5] (ints)' in out
    assert "out([1, 2]) = [10, 20] (ints)" in out
    assert "unknown name 'nope'" in out
    assert "value: y = 3" in out
    assert "selector: s" in out
    assert "never_reached" not in out
    assert "Traceback" not in out + r.stderr


def test_repl_reports_an_unfinished_statement_at_end_of_input():
    r = rasp("repl", stdin="x = (tokens\n")
    assert r.returncode == 0
    assert "unclosed '('" in r.stdout
