"""Every user mistake is one RaspError in words: FILE:LINE:COL, the line, a caret — never a
traceback and never Lark's list of expected tokens."""

import pytest

from rasp_compiler.errors import RaspError
from rasp_compiler.interpreter import run
from rasp_compiler.lang import parse_source, program_from_source


def error_of(src: str, inputs="hello", file="prog.rasp") -> RaspError:
    with pytest.raises(RaspError) as info:
        run(program_from_source(src, file), inputs)
    return info.value


@pytest.mark.parametrize("src, words, line, col", [
    ("x = tokens + 1\ny = 2;\n", "missing ';'", 1, 15),
    ("x = tokens + 1", "missing ';'", 1, 15),
    ("def f(a) { b = a }\n", "missing ';'", 1, 17),
    ("x = (tokens + 1;\n", "unclosed '('", 1, 16),
    ("x = [1, 2\n", "unclosed '['", 1, 5),
    ("x = 3);\n", "unmatched ')'", 1, 6),
    ("x = [1, 2);\n", "does not match the '['", 1, 10),
    ("x = select(indices, indices, +);\n",
     "select needs a comparison operator (==, !=, <, >, <=, >=, or TRUE / FALSE to select every key / "
     "none) as its 3rd argument", 1, 30),
    ('x = aggregate(select(indices, indices, ==), tokens, default="-");\n',
     "RASP has no keyword arguments (`default=`)", 1, 60),
    ('m = Map(lambda x: x == "a", tokens);\n', "RASP has no lambda: this looks like tracr-style Python",
     1, 9),
    ("x = select(indices, indices);\n", "select needs three arguments", 1, 28),
    ("x = selct(tokens, tokens, ==);\n", "a bare comparison operator is only select's 3rd argument, "
     "and this is a call of 'selct'", 1, 27),
    ('x = "abc;\n', "string is not closed", 1, 5),
    ("x = 1 $ 2;\n", "unexpected character '$'", 1, 7),
    ("x = a ! b;\n", "'!' on its own", 1, 7),
    ("x = a && b;\n", "'&&' is not a RASP operator", 1, 7),
    ("x = 'a';\n", "double quotes", 1, 5),
])
def test_syntax_errors_in_words(src, words, line, col):
    with pytest.raises(RaspError) as info:
        parse_source(src, "prog.rasp")
    err = info.value
    assert words in err.message
    assert (err.line, err.col) == (line, col)
    text = err.render()
    assert text.startswith(f"prog.rasp:{line}:{col}: error: ")
    assert "^" in text.splitlines()[2]
    assert "Expected one of" not in text and "$END" not in text


def test_generic_syntax_error_is_short():
    with pytest.raises(RaspError) as info:
        parse_source("x = + ;", "p.rasp")
    msg = info.value.message
    assert msg.startswith("unexpected ';'; expected an expression")
    assert len(msg) < 120


def test_a_typo_of_a_grammar_call_suggests_it():
    err = error_of("x = aggregat(select(indices, indices, ==), tokens);\nx;")
    assert err.message == "unknown name 'aggregat'" and err.hint == "did you mean 'aggregate'?"


def test_unknown_name_suggests_a_close_match():
    err = error_of("rev = aggregate(select(indices, indices, ==), tokns);\nrev;")
    assert err.message == "unknown name 'tokns'"
    assert err.hint == "did you mean 'tokens'?"
    assert (err.line, err.col) == (1, 47)
    assert err.render().splitlines()[2].strip() == "^~~~~"


def test_private_name_from_loaded_file(tmp_path):
    (tmp_path / "lib.rasp").write_text("_secret = indices; public = indices + 1;\n")
    main = tmp_path / "main.rasp"
    main.write_text('load "lib";\n_secret;\n')
    from rasp_compiler.lang import load_program
    with pytest.raises(RaspError, match="unknown name '_secret'") as info:
        load_program(main)
    assert info.value.line == 2


def test_mean_of_non_numbers_points_at_the_aggregate():
    err = error_of("a = 1;\nx = aggregate(select(indices, indices, <=), tokens);\nx;")
    assert "mean of non-numbers" in err.message
    assert err.line == 2 and err.col == 5
    assert "aggregate(select" in err.render()


def test_mean_inside_library_call_points_at_the_call():
    err = error_of("x = 1;\ny = average(tokens);\ny;")
    assert err.file == "prog.rasp" and err.line == 2


def test_unpacking_wrong_count():
    err = error_of("a, b = 1, 2, 3;\na;")
    assert "2 names (a, b) but 3 values" in err.message
    err = error_of("def f() { return 1, 2, 3; }\na, b = f();\n")
    assert "2 names" in err.message and err.line == 2
    err = error_of("a, b = indices;\n")
    assert "cannot unpack one s-op" in err.message
    err = error_of('a, b = {"k": 1};\n')
    assert err.message == "unpacking: 2 names (a, b) but 1 value"


def test_unpacking_a_dict_gives_its_keys_and_a_string_its_characters():
    """As the original assigns (it zips the names with the value, and a dict iterates over its
    keys); `a, b = {...}` was refused here."""
    src = ('k1, k2 = {"x": 10, "y": 20};\nc1, c2 = "pq";\ndef two() { return {3: "a", 4: "b"}; }\n'
           'n1, n2 = two();\ntokens + k1 + k2 + c1 + c2;\n')
    assert run(program_from_source(src, "prog.rasp"), "ab") == ["axypq", "bxypq"]
    src = 'def two() { return {3: "a", 4: "b"}; }\nn1, n2 = two();\nindices + n1 * n2;\n'
    assert run(program_from_source(src, "prog.rasp"), "ab") == [12, 13]


def test_wrong_arity():
    err = error_of("def f(a, b) { return a; }\nf(1);")
    assert err.message == "f() takes 2 arguments (a, b), but 1 were given"
    assert err.line == 2
    err = error_of("selector_width(1, 2);")
    assert "usage: selector_width(selector)" in err.message


def test_recursion_without_end():
    err = error_of("def f(n) { return f(n + 1); }\nf(0);")
    assert "recursion too deep" in err.message
    assert "base case" in err.hint


def test_type_errors():
    assert "cannot apply '+' to a selector" in error_of("select(indices, indices, ==) + 1;").message
    assert "not a selector and a" in error_of("select(indices, indices, ==) and 1;").message
    assert "first argument must be a selector" in error_of("aggregate(indices, tokens);").message
    assert "default must be an atom" in error_of("aggregate(select(1,1,==), indices, indices);").message
    assert "cannot apply '+' to string 'h' and int 1" in error_of("tokens + 1;").message
    assert "is not a function" in error_of("x = 3; x(1);").message
    assert "needs a list or dict" in error_of("for i in indices { x = i; }").message
    assert "'out' is reserved" in error_of("out = tokens;").message
    assert "'return' outside a function" in error_of("return 1;").message
    assert "function 'f' has no 'return'" in error_of("def f() { x = 1; }\nf();").message
    assert "ended without 'return'" in error_of("def f(l) { for v in l { return v; } }\nf([]);").message
    assert "division by zero" in error_of("indices / 0;").message
    assert "index 5 is out of range" in error_of("x = [1, 2][5];").message


def test_a_last_statement_that_is_no_s_op_names_the_last_s_op() -> None:
    # a listing's s-op, then a constant after it: the hint said only that the last statement counts
    with pytest.raises(RaspError, match="'out' is an int, not an s-op or selector") as info:
        program_from_source("def f(x) { return x + 1; }\ny1 = f(tokens);\nn = 3;\n")
    assert (info.value.line, info.value.col) == (3, 5)
    assert info.value.hint.endswith("; to compile the s-op 'y1', give --output y1")
    assert program_from_source("def f(x) { return x + 1; }\ny1 = f(tokens);\nn = 3;\n", output="y1")


def test_no_result():
    with pytest.raises(RaspError, match="no statement binds 'out'") as info:
        program_from_source("# only a comment\n")
    assert "end the file with the s-op to compute" in info.value.hint
    # a listing of functions never called (the simulator paper's files): name them, show a call
    defines = r"defines functions \(g\(a\), transpose\(x, r\)\) but computes no s-op"
    with pytest.raises(RaspError, match=defines) as info:
        program_from_source("def g(a) { return a; }\ndef transpose(x, r) { return x; }\n")
    assert "`transpose(tokens_int, r);`" in info.value.hint
    with pytest.raises(RaspError, match="no s-op or selector named 'revers'") as info:
        program_from_source("reverse = tokens;", output="revers")
    assert info.value.hint == "did you mean 'reverse'?"
    # no close name: the hint was empty, and the user had to read the file for the names
    with pytest.raises(RaspError, match="no s-op or selector named 'zzz'") as info:
        program_from_source("a = tokens; b = indices + 1; _p = a; select(a, a, ==);", output="zzz")
    assert info.value.hint == "this file defines a, b"


def test_load_errors(tmp_path):
    main = tmp_path / "a.rasp"
    main.write_text('load "b";\nindices;\n')
    (tmp_path / "b.rasp").write_text('load "a";\n')
    from rasp_compiler.lang import load_program
    with pytest.raises(RaspError, match="loads itself"):
        load_program(main)
    main.write_text('load "nowhere";\n')
    with pytest.raises(RaspError, match="cannot find 'nowhere.rasp'"):
        load_program(main)


def test_runaway_programs_stop_with_an_error(monkeypatch):
    from rasp_compiler.lang import elaborator

    monkeypatch.setattr(elaborator, "MAX_CALLS", 2000)  # the real budget takes seconds to reach
    err = error_of("def f(n) { return 0 if n == 0 else f(n - 1) + f(n - 1); }\nx = f(40);\nindices;")
    assert "too large to elaborate" in err.message and err.line == 1
    err = error_of("for i in range(100000000) { x = i; }\nindices;")
    assert "too long" in err.message


def test_a_non_ascii_name_says_what_names_may_hold():
    with pytest.raises(RaspError) as info:
        parse_source("café = 1;\n", "prog.rasp")
    err = info.value
    assert "unexpected character 'é'" in err.message and (err.line, err.col) == (1, 4)
    assert "ASCII" in err.hint


def test_a_statement_too_deep_to_elaborate_is_located():
    long_sum = " + ".join(["indices"] * 20000)
    err = error_of(f"x = indices;\ny = {long_sum};\ny;")
    assert "nests too deeply" in err.message and (err.line, err.col) == (2, 1)
    assert "split this statement" in err.hint


def test_applying_an_s_op_to_a_bad_input_points_at_the_call():
    err = error_of('x = indices("");\nindices;')
    assert "the input is empty" in err.message and (err.line, err.col) == (1, 5)
    err = error_of('y = 1;\nx = tokens_int("ab");\nindices;')
    assert "cannot read" in err.message and (err.line, err.col) == (2, 5)
    assert "--input-json" not in err.hint


def test_set_example_followed_by_a_statement_says_it_needs_a_value():
    import io

    from rasp_compiler.commands.repl import Repl

    out = io.StringIO()
    Repl().loop(io.StringIO("set example\nk = 3;\n"), out)
    text = out.getvalue()
    assert "expected one expression (a value), not a statement" in text
    assert "hint: set example needs a value" in text


def test_the_shown_line_is_the_parsers_line_even_after_a_form_feed() -> None:
    err = RaspError("unknown name 'tokns'", "f.rasp", 2, 5, "x = indices;\f y = 2;\nz = tokns;\n", width=5)
    assert "\n    z = tokns;\n        ^~~~~" in err.render()


def test_a_very_long_line_is_shown_around_the_column() -> None:
    from rasp_compiler.errors import SHOWN_WIDTH

    line = "x = " + " + ".join(["indices"] * 3000) + " + tokns;"
    col = line.index("tokns") + 1
    text = RaspError("unknown name 'tokns'", "f.rasp", 1, col, line, width=5).render()
    shown, caret = text.splitlines()[1:3]
    assert len(shown) <= 4 + SHOWN_WIDTH + 2 and shown.startswith("    …")
    assert shown[caret.index("^"):caret.index("^") + 5] == "tokns"
    start = RaspError("bad", "f.rasp", 1, 1, line).render().splitlines()[1:3]
    assert start[0].startswith("    x = indices") and start[0].endswith("…") and start[1] == "    ^"


def test_an_error_in_a_loaded_file_names_the_load(tmp_path) -> None:
    from rasp_compiler.lang import load_program

    (tmp_path / "uses_secret.rasp").write_text("x = secret + 1;\n")
    (tmp_path / "main.rasp").write_text('y = 2;\nload "uses_secret";\nz = x;\n')
    with pytest.raises(RaspError) as err:
        load_program(tmp_path / "main.rasp")
    assert err.value.file.endswith("uses_secret.rasp") and err.value.line == 1
    assert f"loaded by {tmp_path / 'main.rasp'}:2" in err.value.hint


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/sys"), reason="needs Linux /proc/sys")
def test_a_repl_draw_that_cannot_be_written_is_reported_and_the_session_goes_on(monkeypatch) -> None:
    """The OSError of an unwritable directory left the REPL: the statements after it never ran."""
    import io

    from rasp_compiler.commands.repl import Repl

    monkeypatch.chdir("/proc/sys")  # nothing can be created there, even by root
    repl, out = Repl(), io.StringIO()
    repl.loop(io.StringIO("draw(tokens);\nx = tokens;\n"), out)
    shown = out.getvalue()
    assert "error: cannot write draw-1.png" in shown and "s-op: x" in shown
    assert repl.errors == 1


def test_a_tuple_of_s_ops_is_described_by_its_parts() -> None:
    """A selector comparing several s-ops at once reads their joint one-hot, whose internal id is
    "(a,b)"; an error about it names the s-ops and their source instead."""
    from rasp_compiler.compiler.analysis import Analysis

    program = program_from_source("a = tokens == \"x\";\nb = indices + 1;\n"
                                  "c = aggregate(select(a, b, ==), tokens);\nc;\n")
    an = Analysis(program, list("xy"), 4)
    assert an.describe("(a,b)") == "the tuple of 'a' (tokens == \"x\") and 'b' (indices + 1)"
    assert an.describe("a") == "'a' (tokens == \"x\")"


def test_select_takes_the_paper_s_true_and_false_but_no_other_name():
    from rasp_compiler.interpreter import run as run_program

    src = ("n = selector_width(select(tokens, tokens, TRUE));\n"
           "z = aggregate(select(indices, indices, FALSE), indices, -1);\nTRUE = 3;\nn + z + TRUE;\n")
    assert run_program(program_from_source(src), "abcd") == [6] * 4
    err = error_of("x = select(indices, indices, foo);\nx;")
    assert "select needs a comparison operator" in err.message and "not the name 'foo'" in err.message
    assert (err.line, err.col) == (1, 30)


@pytest.mark.parametrize("text, got, hint", [(None, "None", "load_program"), (b"x = 1;", "bytes", "decode"),
                                             (3, "int", "load_program")])
def test_source_that_is_not_a_str_is_refused_by_name(text, got, hint) -> None:
    """Audit: None raised AttributeError from inside the parser, bytes a TypeError."""
    from rasp_compiler.errors import UserError
    from rasp_compiler.lang import Session

    for call, name in ((parse_source, "parse_source"), (program_from_source, "program_from_source"),
                       (lambda t: Session().exec_source(t, "<string>"), "exec_source")):
        with pytest.raises(UserError, match=f"^{name}'s text must be a str of RASP source, got {got}") \
                as info:
            call(text)
        assert hint in info.value.hint


def test_str_of_a_user_error_carries_its_place_and_hint() -> None:
    """A Python user who prints or logs the exception sees where and what to change, as the CLI says."""
    from rasp_compiler.errors import RaspError, UserError
    from rasp_compiler.lang import program_from_source

    with pytest.raises(RaspError) as err:
        program_from_source("x = selct(tokens, tokens, ==);", file="a.rasp")
    text = str(err.value)
    assert text.startswith("a.rasp:1:") and err.value.message in text
    assert text.endswith(f"\n  hint: {err.value.hint}") and "select" in err.value.hint
    assert str(UserError("plain")) == "plain"
    assert str(UserError("m", hint="h")) == "m\n  hint: h"


def test_an_error_about_no_place_in_a_program_is_not_put_in_a_file_called_input(capsys, tmp_path) -> None:
    """`rasp compile` of a program reading tokens_int with --vocab abc said "<input>: error:
    vocabulary entry 'a' cannot be read as int": no file is called <input>; the error is the
    option's, and starts with "error:" as every option error does."""
    from rasp_compiler.cli import main

    prog = tmp_path / "ints.rasp"
    prog.write_text("tokens = tokens_int;\nx = tokens * 2;\n")
    assert main(["compile", str(prog), "--vocab", "abc", "--max-len", "3", "-o", str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: vocabulary entry 'a' cannot be read as int"), err
    assert RaspError("m").render() == "error: m"
    assert RaspError("m", line=2, col=3).render().startswith("<input>:2:3: error: m")


@pytest.mark.parametrize("src, words, hint", [
    ("x = ~select(tokens, tokens, ==);\n", "'~' is not a RASP operator", "write 'not'"),
    ("x = select(tokens, tokens, Comparison.LT);\n", "unexpected character '.'",
     "tracr's Comparison.LT is select's bare <: select(keys, queries, <)"),
    ("x = rasp.tokens;\n", "unexpected character '.'", "RASP has no attributes"),
    ("x = select(tokens, tokens, LEQ);\n", "not the name 'LEQ'",
     "tracr's Comparison.LEQ is the bare operator <= here"),
    ("x = select(tokens, tokens, true);\n", "not the name 'true'",
     "written in capitals: select(keys, queries, TRUE)"),
    ("x = map(indices, indices);\n", "unknown name 'map'", "RASP has no map function"),
    ("x = zipmap(indices, indices);\n", "unknown name 'zipmap'", "RASP has no map function"),
    ("x = SequenceMap(indices, indices);\n", "unknown name 'SequenceMap'", "RASP has no map function"),
])
def test_tracr_and_paper_notation_gets_a_hint_in_rasp_words(src: str, words: str, hint: str) -> None:
    """What a tracr user or a reader of the paper types first: `~`, `Comparison.LT`, `map`/`zipmap`
    (whose nearest name was 'max', whose '.' had no hint at all)."""
    err = error_of(src)
    assert words in err.message and hint in (err.hint or ""), (err.message, err.hint)


def test_a_user_function_named_map_is_still_called() -> None:
    assert run(program_from_source("def map(x) { return x + 1; }\nmap(indices);\n"), "abc") == [1, 2, 3]


@pytest.mark.parametrize("word", ["round", "indicator", "select", "aggregate", "def", "return", "for", "load",
                                  "not"])
def test_assigning_a_keyword_says_it_is_a_keyword(word: str) -> None:
    """`round = 3;` said "assignment is a statement of its own", which it is."""
    err = error_of(f"x = 1;\n{word} = 3;\n")
    assert err.message == f"'{word}' is a RASP keyword, so it cannot be assigned"
    assert (err.line, err.col) == (2, 1)
    assert err.hint == f"choose another name, e.g. '{word}_'"
