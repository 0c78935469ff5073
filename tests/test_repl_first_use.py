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


def _reparsed_chars(session: str, monkeypatch) -> int:
    """Characters the REPL hands the parser (whole parses and interactive ones) over ``session``."""
    from rasp_compiler.lang.parser import grammar

    g = grammar()
    seen = [0]
    parse, interactive = g.parse, g.parse_interactive

    def counted_parse(text, *a, **k):  # type: ignore[no-untyped-def]
        seen[0] += len(text or "")
        return parse(text, *a, **k)

    def counted_interactive(text=None, *a, **k):  # type: ignore[no-untyped-def]
        seen[0] += len(text or "")
        return interactive(text, *a, **k)

    monkeypatch.setattr(g, "parse", counted_parse)
    monkeypatch.setattr(g, "parse_interactive", counted_interactive)
    out = repl(session)
    monkeypatch.undo()
    assert "error" not in out, out
    return seen[0]


def test_a_long_statement_is_not_parsed_again_at_every_line(monkeypatch) -> None:
    # a def of 1,500 lines took 108 s at the prompt, a list of 3,000 lines more than 120 s: the
    # whole statement was parsed again at every line read
    lines = 400
    session = "x = [\n" + "".join(f"  {i},\n" for i in range(lines)) + "  0];\n"
    chars = _reparsed_chars(session, monkeypatch)
    assert chars < 5 * len(session), (chars, len(session))  # the old way: about lines / 2 times


def test_reading_line_by_line_agrees_with_parsing_the_whole_text() -> None:
    from lark.exceptions import UnexpectedCharacters, UnexpectedToken

    from rasp_compiler.lang.parser import grammar

    def whole(text: str) -> bool:
        try:
            grammar().parse(text)
        except UnexpectedToken as err:
            return err.token.type == "$END"
        except UnexpectedCharacters:
            return False
        return False

    programs = sorted((Path(__file__).parent.parent / "programs").glob("*.rasp"))[:8]
    for program in programs:
        r = Repl()
        text = ""
        for line in program.read_text().splitlines(keepends=True):
            text += line
            if "{" not in text:  # (a mistake in a body waits for its '}': tested above)
                assert r.incomplete(text) == whole(text), (program, text)


def test_tokens_the_font_cannot_draw_are_one_note(tmp_path: Path, capsys) -> None:
    import warnings

    from rasp_compiler.cli import main

    reverse = str(Path(__file__).parent.parent / "programs" / "reverse.rasp")
    assert main(["compile", reverse, "--vocab", "日本", "--max-len", "3", "-o", str(tmp_path / "m")]) == 0
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["show", str(tmp_path / "m"), "--input", "日本", "-o", str(tmp_path / "t.png")]) == 0
    err = capsys.readouterr().err
    assert not [w for w in caught if "Glyph" in str(w.message)], [str(w.message) for w in caught]
    assert err.count("the font has no glyph for '日', '本', drawn as empty boxes") == 1, err


def test_rasp_repl_with_a_file_says_how_to_load_it(capsys) -> None:
    import pytest

    from rasp_compiler.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["repl", "prog.rasp"])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert 'hint: the REPL takes no file: type load "prog.rasp"; at its prompt' in err, err
    assert "rasp repl < prog.rasp" in err


def test_an_example_of_the_wrong_kind_is_located_at_its_value() -> None:
    """`set example 5` said what was wrong but not where, unlike every other REPL error."""
    out = repl('set example 5\n  set s-op example   [[1]]\nshow example\n')
    assert "<repl:1>:1:13: error: an example is a non-empty string or list of atoms, got 5" in out, out
    assert "\n    set example 5\n                ^\n" in out
    assert "<repl:2>:1:22: error: an example is a non-empty string or list of atoms, got [[1]]" in out
    assert "\n                         ^~~~~\n" in out
    assert '\ts-op example: "hello"' in out  # neither was taken
