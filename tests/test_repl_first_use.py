"""What a user of the original RASP REPL met on a first session here (7 Dec, trial 5): each test
is a reproducer of a defect that was fixed."""

from __future__ import annotations

import io
from pathlib import Path

from rasp_compiler.commands.repl import Repl


def repl(session: str, example: str = "hello") -> str:
    out = io.StringIO()
    Repl(example=example).loop(io.StringIO(session), out)
    return out.getvalue()


BAD_BODY = """def f(a) {
    b = a + 1;
    c = b +* 2;
    return c;
}
x = 1;
"""


def test_a_mistake_inside_a_def_body_is_one_error_at_its_line() -> None:
    out = repl(BAD_BODY)
    assert out.count("error:") == 1, out
    assert "<repl:1>:3:12: error: unexpected '*'" in out
    assert "outside a function" not in out and "unmatched '}'" not in out
    assert "value: x =  1" in out  # the session goes on after the body


def test_a_mistake_inside_a_for_body_in_a_loaded_file(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "lib.rasp").write_text("for v in [1, 2] {\n  w = v +* 1;\n  u = v;\n}\nok = 1;\n")
    monkeypatch.chdir(tmp_path)
    out = repl('load "lib";\n')
    assert out.count("error:") == 1, out
    assert "lib.rasp:2:10: error:" in out


def test_a_dict_left_open_is_still_reported_at_once() -> None:
    out = repl('d = {"a" 1;\nx = 1;\n')
    assert out.count("error:") == 1 and "value: x =  1" in out, out


def test_set_example_without_a_value_does_not_swallow_the_next_command() -> None:
    out = repl('set example\nshow example\nset example\n"abc"\nshow example\n')
    assert out.count("error: set example needs a value") == 1, out
    assert '\ts-op example: "hello"' in out  # the first `show example` ran
    assert '\ts-op example: "abc"' in out  # a value on the next line is still read
    assert "not a statement" not in out


def test_show_into_a_directory_is_refused_with_a_file_name_to_give(tmp_path: Path, capsys) -> None:
    from rasp_compiler.cli import main

    reverse = str(Path(__file__).parent.parent / "programs" / "reverse.rasp")
    code = main(["show", reverse, "--vocab", "abc", "--max-len", "5", "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1
    assert "it is a directory, not a picture file" in err, err
    assert f"e.g. {tmp_path / 'plan.png'}" in err


def test_load_of_a_directory_or_of_no_name_says_so(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "lib.rasp").mkdir()
    monkeypatch.chdir(tmp_path)
    out = repl('load "lib";\nload "";\n')
    assert f"cannot load 'lib': {tmp_path / 'lib.rasp'} is a directory, not a RASP file" in out, out
    assert "load needs a file name" in out
    assert "cannot find" not in out


def test_too_many_arguments_to_select_aggregate_round_indicator_says_so() -> None:
    out = repl("a = aggregate(select(indices, indices, ==), tokens, 0, 1);\n"
               "b = select(indices, indices, ==, 1);\nc = round(1, 2);\nd = indicator(1, 2);\n")
    assert "<repl:1>:1:54: error: too many arguments: aggregate takes 2 or 3 arguments" in out, out
    assert "<repl:2>:1:32: error: too many arguments: select takes 3 arguments" in out
    assert "round takes 1 argument: round(x)" in out and "indicator takes 1 argument" in out
    assert "expected ')'" not in out
