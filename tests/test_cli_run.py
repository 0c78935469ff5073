"""`rasp run` and `rasp repl` as a user runs them: exit codes, stdout, no tracebacks.

Most cases call the CLI's ``main`` in-process (a fresh interpreter per case would spend seconds
importing); two cases run a real subprocess to check the console entry and piped stdin."""

import contextlib
import io
import json
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from rasp_compiler.cli import main

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def rasp(*args, stdin=None):
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin or "")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exit_:  # argparse --help / usage errors
                code = exit_.code or 0
    finally:
        sys.stdin = old_stdin
    return Result(code, out.getvalue(), err.getvalue())


def rasp_subprocess(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "rasp_compiler.cli", *args], input=stdin,
                          capture_output=True, text=True, cwd=REPO, timeout=120)


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
    r = rasp("run", str(prog), "--input-json", "[1, 2.0, -3]", "--json", "--output", "y")
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
    r = rasp_subprocess("run", str(prog), "--input", "abc")
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


def test_tokens_int_refuses_a_fraction_and_the_model_reads_a_whole_float(tmp_path):
    """`rasp run` read 1.5 as int(1.5) == 1 (the answer for another input), while the compiled
    model refused it; and the model refused 1.0, which `rasp run` reads as 1."""
    prog = tmp_path / "ints.rasp"
    prog.write_text("tokens = tokens_int;\nx = tokens * 2;\n")
    r = rasp("run", str(prog), "--input-json", "[1.5, 2]")
    assert r.returncode == 1 and "(1.5) as int: it is not a whole number" in r.stderr
    assert "Traceback" not in r.stderr
    model = str(tmp_path / "m")
    assert rasp("compile", str(prog), "--vocab", "[1, 2, 3]", "--max-len", "5", "-o", model).returncode == 0
    ran = rasp("run", str(prog), "--input-json", "[1.0, 2]")
    evaluated = rasp("eval", model, "--input-json", "[1.0, 2]")
    assert ran.returncode == evaluated.returncode == 0, evaluated.stderr
    assert ran.stdout == evaluated.stdout == "[2, 4] (ints)\n"
    r = rasp("eval", model, "--input-json", "[1.5, 2]")
    assert r.returncode == 1 and "token 1.5 at position 0 of input 0 is not in the vocabulary" in r.stderr


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
    r = rasp_subprocess("repl", stdin=session)
    assert r.returncode == 1, r.stderr      # a piped session is a script: `nope;` failed
    out = r.stdout
    assert "s-op: x" in out and 'x("hello") = [h!, e!, l!, l!, o!] (strings)' in out
    assert "console function: f(a)" in out
    assert 'out("hello") = [1, 2, 3, 4, 5] (ints)' in out
    assert "out([1, 2]) = [10, 20] (ints)" in out
    assert "unknown name 'nope'" in out
    assert "value: y =  3" in out           # the original's spacing
    assert "selector: s" in out
    assert "never_reached" not in out
    assert "Traceback" not in out + r.stderr


def test_repl_draw_writes_the_plan_on_the_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    session = ("reverse = aggregate(select(indices, length - indices - 1, ==), tokens);\n"
               "draw(reverse);\n"
               'draw(reverse, "abcd");\n'
               "draw(1);\n")
    r = rasp("repl", stdin=session)
    assert r.returncode == 1                # draw(1) failed
    assert r.stdout.count("wrote draw-") == 2 and "2 layers, heads per layer [1, 1]" in r.stdout
    assert "draw takes an s-op" in r.stdout
    for name in ("draw-1.png", "draw-2.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_piped_repl_session_fails_only_if_a_statement_failed():
    assert rasp("repl", stdin="x = tokens;\nx;\n").returncode == 0
    r = rasp("repl", stdin="x = tokens;\ny = nothing;\nx;\n")
    assert r.returncode == 1 and "unknown name 'nothing'" in r.stdout and "s-op: x" in r.stdout


def test_repl_reports_an_unfinished_statement_at_end_of_input():
    r = rasp("repl", stdin="x = (tokens\n")
    assert r.returncode == 1
    assert "unclosed '('" in r.stdout


def test_repl_on_the_originals_error_session():
    # .github/workflows/tests/in/some_errors.txt + whitespace_okay.txt: every line either prints a
    # value or one error in words, and the session carries on to the end.
    session = ('dgsdfsdf;\n1/tokens;\n1("hi");\nselector_width(tokens,tokens,==);\n'
               'aggregate(full_s,tokens);\n1+"a";\nfor in;\nin 4;\nrange(7)+6;\n'
               'if tokens else;\ntokens;;\n;\n{};\nif;\n\n'
               "indices+\n\n4;\n\n\n\ntokens==tokens\n;\n\nselect(\n\nindices,\n\n\t\tindices,<);\n")
    r = rasp("repl", stdin=session)
    assert r.returncode == 1
    out = r.stdout
    for words in ["unknown name 'dgsdfsdf'", "cannot apply '/' to int 1 and string 'h'",
                  "an int is not a function",
                  "a bare comparison operator is only select's 3rd argument, and this is a call of "
                  "'selector_width'", "build the selector first: selector_width(select(keys, queries, ==))",
                  "mean of non-numbers", "cannot apply '+' to int 1 and string 'a'",
                  "unexpected 'in'; expected a name", "unexpected 'in'; expected a statement",
                  "cannot apply '+' to list", "unexpected 'if'; expected a statement",
                  "stray ';'", "dict: out = {}",
                  'out("hello") = [4, 5, 6, 7, 8] (ints)', 'out("hello") = [T]*5 (bools)',
                  "selector: out"]:
        assert words in out, words
    assert out.count("error:") == 13
    assert "Traceback" not in out


def test_run_help_examples_are_true(monkeypatch):
    # every `rasp run …` line in the --help epilog prints what the line under it says
    from rasp_compiler.commands.run import EPILOG

    monkeypatch.chdir(REPO)
    lines = EPILOG.splitlines()
    checked = 0
    for cmd, shown in zip(lines, lines[1:], strict=False):
        if not cmd.startswith("  rasp run programs/"):
            continue
        r = rasp(*shlex.split(cmd.strip())[1:])
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == shown.split("  (")[0].strip()
        checked += 1
    assert checked >= 3


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _fake_clock(monkeypatch, step: float) -> None:
    """The check's progress clock advances ``step`` seconds at each reading (real time is unused)."""
    from rasp_compiler.commands.check import CheckProgress

    now = [0.0]

    def clock() -> float:
        now[0] += step
        return now[0]
    monkeypatch.setattr(CheckProgress, "clock", staticmethod(clock))


def test_check_shows_progress_on_a_terminal_only(tmp_path, monkeypatch):
    prog = tmp_path / "p.rasp"
    prog.write_text("aggregate(select(indices, indices, <=), indicator(tokens == \"a\"));\n")
    args = ["check", str(prog), "--vocab", "ab", "--max-len", "11", "--exhaustive"]   # 4,094 inputs
    _fake_clock(monkeypatch, 1.0)        # a slow check: its first batch alone takes a second
    err = _Terminal()
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(err):
        assert main(args) == 0
    assert "checking (exhaustive)" in err.getvalue() and "/4094" in err.getvalue()
    assert "exhaustive: 4094/4094 inputs agree" in out.getvalue()
    assert "checking" not in rasp(*args).stderr      # not a terminal: no progress bar


def test_check_progress_follows_the_time_taken_not_the_input_count(tmp_path, monkeypatch):
    """The bar showed only above 2,000 inputs (assumed ~1 ms each); at max_len 512 an input takes
    ~0.13 s, and a check of 1,837 inputs ran 8 minutes without a word on stderr."""
    prog = tmp_path / "p.rasp"
    prog.write_text("aggregate(select(indices, indices, <=), indicator(tokens == \"a\"));\n")
    args = ["check", str(prog), "--vocab", "ab", "--max-len", "5", "--samples", "40"]
    _fake_clock(monkeypatch, 1.0)        # 16 inputs in a second: the check's 50 take over 2 s
    err = _Terminal()
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(err):
        assert main(args) == 0
    assert "checking (random)" in err.getvalue()
    assert "(40 random + 11 edge inputs" in out.getvalue()
    _fake_clock(monkeypatch, 1e-4)       # a fast check of many inputs: no bar
    err = _Terminal()
    big = ["check", str(prog), "--vocab", "ab", "--max-len", "11", "--exhaustive"]   # 4,094 inputs
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert main(big) == 0
    assert "checking" not in err.getvalue()
    # the real-valued check too
    _fake_clock(monkeypatch, 1.0)
    err = _Terminal()
    real = ["check", str(REPO / "programs/maxmin.rasp"), "--input-range", "-1", "1", "--samples", "30"]
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(err):
        assert main(real) == 0
    assert "checking (random)" in err.getvalue()
    assert "(30 random + 3 corner inputs)" in out.getvalue()


def test_check_help_says_which_inputs_are_checked():
    r = rasp("check", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "K random inputs of all lengths, plus the edge inputs: |vocab| x max-len all-equal" in text
    assert "checks 300 + 1,539 edge inputs" in text and "3 corner inputs a length" in text


def test_compile_status_names_the_stage_on_a_terminal_only(monkeypatch):
    import time as _time

    from rasp_compiler.commands.compile import CompileStatus

    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    status = CompileStatus(delay=0.0)
    for _ in range(100):                      # the timer thread shows the line
        if status.shown:
            break
        _time.sleep(0.01)
    status("weights")
    status.close()
    assert "compiling: starting" in term.getvalue() and "compiling: weights" in term.getvalue()
    assert term.getvalue().endswith("\r\033[K")   # the line is cleared for the summary
    plain = io.StringIO()
    monkeypatch.setattr(sys, "stderr", plain)
    quiet = CompileStatus(delay=0.0)
    quiet("weights")
    quiet.close()
    assert plain.getvalue() == ""


def test_compile_status_counts_the_seconds_within_a_long_stage(monkeypatch):
    """The counter only moved when a stage began, so a long stage showed the same seconds throughout."""
    import time as _time

    from rasp_compiler.commands.compile import CompileStatus

    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    status = CompileStatus(delay=0.0, every=0.05)
    status("weights")
    _time.sleep(0.5)                          # one stage, no calls: the thread redraws it
    status.close()
    redraws = term.getvalue().count("compiling: weights")
    assert redraws >= 3, term.getvalue()
    assert term.getvalue().endswith("\r\033[K")
    after = term.getvalue()
    _time.sleep(0.2)
    assert term.getvalue() == after           # nothing is written after close


@pytest.mark.parametrize("args, words", [
    # refused at once: before the limit, reverse at max_len 100,000 ran out of memory
    (["compile", "{file}", "--vocab", "abc", "--max-len", "100000", "-o", "{tmp}/m"],
     "--max-len 100,000 is more than the compiler takes"),
    # it said "cannot write the model (Not a directory)", not which path is the file
    (["compile", "{file}", "--vocab", "abc", "--max-len", "4", "-o", "{tmp}/file/m"],
     "file/m: cannot write the model there: "),
    (["compile", "{file}", "--vocab", "abc", "--max-len", "4", "-o", "{tmp}/file/m/n"],
     "/file is a file, not a directory"),
    (["check", "{file}", "--vocab", "abc", "--max-len", "4", "--samples", "0"],
     "--samples must be at least 1"),
    # True == 1 in Python: one of them was dropped without a word, and eval refused the other
    (["compile", "{file}", "--vocab", "[true, false, 1]", "--max-len", "4", "-o", "{tmp}/m"],
     "holds both True and 1"),
    (["compile", "{file}", "--vocab", "[" + "9" * 5000 + "]", "--max-len", "4", "-o", "{tmp}/m"],
     "more than 4,300 digits"),
    (["run", "{file}", "--input-json", "[" * 50000 + "]" * 50000], "nests too deeply"),
    # a directory where the weights file goes: safetensors' own error was a traceback
    (["compile", "{file}", "--vocab", "abc", "--max-len", "4", "-o", "{tmp}/blocked"],
     "cannot write the model"),
])
def test_option_mistakes_are_one_message(reverse_file, tmp_path, args, words):
    (tmp_path / "file").write_text("a file where a directory is wanted")
    (tmp_path / "blocked" / "model.safetensors").mkdir(parents=True)
    r = rasp(*(a.format(file=reverse_file, tmp=tmp_path) for a in args))
    assert r.returncode == 1 and words in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) <= 2


def test_a_reader_that_goes_away_is_not_an_error(reverse_file):
    """`rasp run ... | head -0`: the broken pipe ends the command quietly, with no traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "rasp_compiler.cli", "run", str(reverse_file), "--input",
                             "hello" * 50], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and b"Traceback" not in err, err


@pytest.fixture(scope="module")
def reverse_model(tmp_path_factory):
    out = tmp_path_factory.mktemp("rev")
    assert main(["compile", str(REPO / "programs/reverse.rasp"), "--vocab", "abc", "--max-len", "5",
                 "-o", str(out)]) == 0
    return str(out)


def test_eval_a_file_of_inputs_gives_one_output_per_line_in_order(reverse_model, tmp_path):
    words = ["abc", "ba", "c", "cab", "a"] * 120       # 600 inputs: more than one batch
    path = tmp_path / "words.txt"
    path.write_text("\n".join(words) + "\n")
    r = rasp("eval", reverse_model, "--inputs", str(path))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(words)
    assert lines[:3] == ["[c, b, a] (strings)", "[a, b] (strings)", "[c] (strings)"]
    r = rasp("eval", reverse_model, "--inputs-json", "-", "--json", stdin='["a", "b"]\n"cab"\n')
    assert [json.loads(x) for x in r.stdout.splitlines()] == [
        {"input": ["a", "b"], "output": ["b", "a"]}, {"input": ["c", "a", "b"], "output": ["b", "a", "c"]}]


@pytest.mark.parametrize("flag, text, words, printed", [
    ("--inputs", "abc\nbxa\nab\n", "<stdin>:2: token 'x' at position 1 of the input",
     ["[c, b, a] (strings)"]),
    ("--inputs", "abc\n\nab\n", "<stdin>:2: the input is empty", ["[c, b, a] (strings)"]),
    ("--inputs", "abcabc\n", "<stdin>:1: the input has 6 tokens, more than the 5", []),
    ("--inputs", "", "<stdin> holds no inputs", []),
    ("--inputs-json", '["a"]\n[1,\n', "<stdin>:2: the line is not valid JSON", ["[a] (strings)"]),
    ("--inputs-json", '["a", null]\n', "<stdin>:1: position 1 is null", []),
])
def test_eval_a_file_of_inputs_names_the_line_of_a_bad_input(reverse_model, flag, text, words, printed):
    """The outputs of the lines before the bad one are printed, then the error; nothing after it runs."""
    r = rasp("eval", reverse_model, flag, "-", stdin=text)
    assert r.returncode == 1 and r.stdout.splitlines() == printed
    assert r.stderr.startswith("error: ") and words in r.stderr and "Traceback" not in r.stderr


def test_eval_a_bad_line_past_the_first_batch_keeps_every_output_before_it(reverse_model):
    words = ["abc", "ba"] * 300 + ["abx", "a"]        # the bad line is in the second batch of 512
    r = rasp("eval", reverse_model, "--inputs", "-", stdin="\n".join(words) + "\n")
    assert r.returncode == 1 and "<stdin>:601: token 'x'" in r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 600 and lines[-2:] == ["[c, b, a] (strings)", "[a, b] (strings)"]


def test_a_one_target_universal_check_shows_its_steps_on_a_terminal(monkeypatch):
    """One target (--trials 1 or --target): no bar can move while E is solved for (about 30 s for
    a random UT of width 3,968), so its steps are shown on one ticking line; the report is the
    first target's of a many-target check."""
    from rasp_compiler.commands import compile as compile_cmd

    real = compile_cmd.CompileStatus
    monkeypatch.setattr(compile_cmd, "CompileStatus", lambda **kw: real(delay=0.0, every=0.001, **kw))
    seen: list[str] = []
    original = real.__call__

    def record(self, stage: str) -> None:
        seen.append(stage)
        original(self, stage)
    monkeypatch.setattr(real, "__call__", record)
    args = ["universal", "--construction", "random", "--layers", "2", "--dim", "3", "--check",
            "--lengths", "2,5", "--json"]
    err = _Terminal()
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(err):
        assert main(args + ["--trials", "1"]) == 0
    one = json.loads(out.getvalue())
    assert seen[0] == "encoding the target into E" and "solving for E (width m = 12)" in seen
    assert seen[-2:] == ["length 2 (1 of 2)", "length 5 (2 of 2)"]
    assert err.getvalue().endswith("\r\033[K")  # the line is cleared at the end
    from rasp_compiler.universal.check import check_class

    many = check_class("random", 2, 1, 3, trials=1, lengths=(2, 5))
    assert (one["max_abs_error"], one["attention_max_diff"]) == (many.max_abs_error, many.attention_max_diff)


def test_eval_inputs_and_universal_check_show_progress_on_a_terminal(tmp_path, monkeypatch):
    """rasp eval --inputs (many lines) and rasp universal --check ran for minutes without a word
    on stderr; they show the check's bar (CheckProgress) on a terminal, never in --json output."""
    model = tmp_path / "m"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["compile", str(REPO / "programs/reverse.rasp"), "--vocab", "ab", "--max-len", "4",
                     "-o", str(model)]) == 0
    lines = tmp_path / "in.txt"
    lines.write_text("ab\nba\n" * 600)    # 1,200 inputs: 3 batches of 512 or fewer
    _fake_clock(monkeypatch, 1.0)         # every batch takes a second
    err = _Terminal()
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(err):
        assert main(["eval", str(model), "--inputs", str(lines), "--json"]) == 0
    assert "evaluating" in err.getvalue() and "/1200" in err.getvalue()
    shown = out.getvalue().splitlines()
    assert len(shown) == 1200 and json.loads(shown[1]) == {"input": ["b", "a"], "output": ["a", "b"]}
    assert "evaluating" not in rasp("eval", str(model), "--inputs", str(lines)).stderr  # not a terminal

    ut = ["universal", "--construction", "sparse", "--layers", "1", "--dim", "2", "--check",
          "--trials", "4", "--lengths", "2,3", "--json"]
    err = _Terminal()
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(err):
        assert main(ut) == 0
    assert "checking" in err.getvalue() and "/4" in err.getvalue() and "target" in err.getvalue()
    assert json.loads(out.getvalue())["construction"] == "sparse"
    _fake_clock(monkeypatch, 1e-4)        # a quick check: no bar
    err = _Terminal()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert main(ut) == 0
    assert err.getvalue() == ""


class _EndlessInputs:
    """stdin of a million lines, served one readline at a time; read() (the whole file at once, as
    rasp eval --inputs did) fails the test."""

    def __init__(self, bad_line: int) -> None:
        self.bad_line, self.served = bad_line, 0

    def readline(self, limit: int = -1) -> str:
        self.served += 1
        if self.served > 1_000_000:
            return ""
        return "abx\n" if self.served == self.bad_line else "ab\n"

    def read(self, *args) -> str:
        raise AssertionError("the whole input was read into memory")


def test_eval_inputs_are_read_as_they_run(reverse_model, monkeypatch, capsys):
    # rasp eval --inputs FILE read the whole file (and made a list of every line) before running any
    endless = _EndlessInputs(bad_line=700)
    monkeypatch.setattr(sys, "stdin", endless)
    assert main(["eval", reverse_model, "--inputs", "-"]) == 1
    captured = capsys.readouterr()
    assert "<stdin>:700: token 'x'" in captured.err
    assert captured.out.splitlines() == ["[b, a] (strings)"] * 699
    assert endless.served <= 2 * 512   # the batch of the bad line, no further


def test_eval_a_line_too_long_for_any_model_is_refused_by_its_number(reverse_model, tmp_path, monkeypatch,
                                                                       capsys):
    from rasp_compiler.commands import eval as eval_cmd

    monkeypatch.setattr(eval_cmd, "MAX_LINE", 10)
    path = tmp_path / "in.txt"
    path.write_text("ab\n" + "b" * 11 + "\nab\n")
    assert main(["eval", reverse_model, "--inputs", str(path)]) == 1
    captured = capsys.readouterr()
    assert f"{path}:2: the line is longer than 10 bytes" in captured.err
    assert captured.out.splitlines() == ["[b, a] (strings)"]
    path.write_text('"ab"\n"' + "b" * 9 + '"\n')     # 11 characters of JSON for 9 tokens
    assert main(["eval", reverse_model, "--inputs-json", str(path)]) == 1
    captured = capsys.readouterr()
    assert f"{path}:2: the line is longer than 10 bytes" in captured.err
    assert "Traceback" not in captured.err


def test_eval_a_line_not_utf8_is_named_by_its_line(reverse_model, tmp_path, capsys):
    # the file was decoded whole: "cannot read (... position 3 ...)" named no line, and no input ran
    path = tmp_path / "in.txt"
    path.write_bytes(b"\xef\xbb\xbfab\r\n\xff\nab\n")   # a BOM and CRLF are fine
    assert main(["eval", reverse_model, "--inputs", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["[b, a] (strings)"]
    assert f"{path}:2: cannot read: byte 0xff at byte 0 of the line is not UTF-8" in captured.err


def test_eval_of_a_model_over_words_given_characters_says_how_to_give_words(tmp_path, capsys):
    # --input thecat on a vocabulary of words was "6 tokens, more than the 4 ...: compile again with a
    # larger --max-len"; the text is split into characters, and the words go in as JSON
    model = tmp_path / "m"
    assert main(["compile", str(REPO / "programs/reverse.rasp"), "--vocab", '["the", "cat", "sat"]',
                 "--max-len", "4", "-o", str(model)]) == 0
    capsys.readouterr()
    words = "reads its text as one token per character, and this model's tokens include words ('the'"
    assert main(["eval", str(model), "--input", "thecat"]) == 1
    err = capsys.readouterr().err
    assert f"--input {words}" in err and "--input-json '[\"the\", \"cat\"]'" in err and "max-len" not in err
    lines = tmp_path / "in.txt"
    lines.write_text('["the", "cat"]\n')
    assert main(["eval", str(model), "--inputs", str(lines)]) == 1
    assert f"{lines}:1: --inputs {words}" in capsys.readouterr().err
    assert main(["eval", str(model), "--inputs-json", str(lines)]) == 0
    assert capsys.readouterr().out == "[cat, the] (strings)\n"
    assert main(["show", str(model), "--input", "thecat", "-o", str(tmp_path / "t.png")]) == 1
    assert f"--input {words}" in capsys.readouterr().err
    assert main(["eval", str(model), "--input-json", '["sat"]']) == 0   # JSON is untouched
    mixed = tmp_path / "mixed"   # only a refused input is explained: "1" still reads as the number 1
    assert main(["compile", str(REPO / "programs/reverse.rasp"), "--vocab", '["ab", 1, 2]',
                 "--max-len", "4", "-o", str(mixed)]) == 0
    capsys.readouterr()
    assert main(["eval", str(mixed), "--input", "12"]) == 0
    assert capsys.readouterr().out.startswith("[2, 1]")
