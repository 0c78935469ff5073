"""A user's hour with programs and sessions written for the original RASP REPL (7 Dec, repl2):
each test reproduces a defect that was fixed."""

from __future__ import annotations

import io

import pytest

from rasp_compiler.commands.repl import Repl
from rasp_compiler.errors import RaspError
from rasp_compiler.interpreter import run
from rasp_compiler.lang import program_from_source


def repl(session: str, example: str = "hello") -> str:
    out = io.StringIO()
    Repl(example=example).loop(io.StringIO(session), out)
    return out.getvalue()


def error_of(src: str, inputs="hello", file="prog.rasp") -> RaspError:
    with pytest.raises(RaspError) as info:
        run(program_from_source(src, file), inputs)
    return info.value


@pytest.mark.parametrize("src, line, col, hint", [
    ("def f(a) {\n   return a +;\n}\n", 2, 14, "'+' needs a value after it"),
    ("def f(a) {\n   b = a *;\n   return b;\n}\n", 2, 11, "'*' needs a value after it"),
    ("for i in [1] {\n  y = not;\n}\n", 2, 10, "'not' needs a value after it"),
    ("x = tokens +;\n", 1, 13, "'+' needs a value after it"),
    ("for x in [1]  # a comment\n{\n  y = x +;\n}\n", 3, 10, "'+' needs a value after it"),
])
def test_an_unfinished_expression_in_a_body_is_not_an_unclosed_brace(src, line, col, hint) -> None:
    # it said "unclosed '{' (opened at line 1, column 10) before ';'": the body's '{' is closed later
    err = error_of(src)
    assert "unexpected ';'; expected an expression" in err.message, err.message
    assert "unclosed" not in str(err)
    assert (err.line, err.col) == (line, col)
    assert hint in (err.hint or "")


@pytest.mark.parametrize("src, opened", [
    ('x = {"a": 1;\n', "line 1, column 5"),                       # a dict, not a body
    ('def f(a) {\n  return {"a": a;\n}\n', "line 2, column 10"),  # a dict inside a body
    ("def f(a) {\n  y = (a + 1;\n  return y;\n}\n", "line 2, column 7"),
    ('x = # a comment\n{"a": 1;\n', "line 2, column 1"),          # a dict after a comment
])
def test_a_bracket_left_open_before_a_semicolon_is_still_named(src, opened) -> None:
    err = error_of(src)
    assert "unclosed '" in err.message and opened in err.message, err.message


def test_an_unfinished_expression_in_a_repl_body_is_one_error() -> None:
    out = repl("def f(a) {\n   return a +;\n}\nx = 1;\n")
    assert out.count("error:") == 1, out
    assert "<repl:1>:2:14: error: unexpected ';'; expected an expression" in out
    assert "value: x =  1" in out


def test_a_def_without_return_is_an_error_where_it_is_written() -> None:
    # it was accepted, and "ended without 'return'" came at a call, or never if it was not called
    err = error_of("def f(x) {\n  y = x + 1;\n}\nz = tokens;\n")
    assert err.message == "function 'f' has no 'return'"
    assert (err.line, err.col) == (1, 5) and "return" in (err.hint or "")


def test_a_statement_after_return_is_an_error() -> None:
    # the original's grammar allows only comments after a body's return; here the statement was dropped
    err = error_of("def f(x) {\n  return 1;\n  return 2;\n}\nz = tokens;\n")
    assert "a statement after the 'return' of function 'f' is never run" in err.message
    assert (err.line, err.col) == (3, 3)
    out = repl("def f(x) {\n  return x; # fine\n  # also fine\n}\nf(3);\n")
    assert "error" not in out and "value: out =  3" in out, out


def test_a_return_inside_a_for_loop_of_a_def_still_counts() -> None:
    prog = program_from_source("def first(l) { for v in l { return v; } }\nx = tokens + first([\"!\"]);\n")
    assert run(prog, "ab") == ["a!", "b!"]
    err = error_of("def first(l) { for v in l { return v; } }\nx = first([]);\n")
    assert "ended without 'return'" in err.message and "for loop" in (err.hint or "")


@pytest.mark.parametrize("src, message, line, col, hint", [
    # def parameters and for names share a grammar rule: each said the other's word too
    ("def f(a b) { return a; }\n", "unexpected name 'b'; expected ',' or ')'", 1, 9, None),
    ("for i range(3) { y = i; }\n", "unexpected name 'range'; expected ',' or 'in'", 1, 7, None),
    ("for a b in [1] { x = 1; }\n", "unexpected name 'b'; expected ',' or 'in'", 1, 7, None),
    # it said "unexpected ')'; expected ',' or 'in'"
    ("x = aggregate(select(indices, indices, ==));\n",
     "aggregate needs a selector and an s-op: aggregate(selector, sop) or aggregate(selector, sop, default)",
     1, 43, None),
    # it said "unexpected '/'; expected an expression" at the second '/'
    ("x = 7 // 2;\n", "'//' is not a RASP operator", 1, 7, "(a - a % b) / b"),
    # it said "unexpected '*'; expected an expression" at the second '*' (the paper's e^x)
    ("e = 2.718 ** indices;\n", "'**' is not a RASP operator", 1, 11, "a ^ b"),
    # the same messages as before, with a hint
    ('x = tokens if tokens == "a";\n', "unexpected ';'; expected 'else' or 'in'", 1, 28,
     "a conditional needs both values"),
    ('x = if tokens == "a" then 1 else 0;\n', "unexpected 'if'; expected an expression", 1, 5,
     "`a if condition else b`"),
    ("x = [i for i in range(3) if i > 1];\n", "unexpected ']'; expected 'else' or 'in'", 1, 34,
     "a comprehension has no `if` filter"),
    ("if True { x = 1; }\n", "unexpected 'if'; expected a statement", 1, 1, "RASP has no if statement"),
    ("def f(x) {\n  if x { return 1; }\n}\n", "unexpected 'if'; expected a statement", 2, 3,
     "RASP has no if statement"),
    # it said "missing ';'" after `lambda`
    ("x = lambda a: a;\n", "RASP has no lambda: this looks like tracr-style Python", 1, 5, "pyapi"),
    ("x = lambda\ny = 2;\n", "missing ';' at the end of the statement", 1, 11, None),  # a name `lambda`
    # in a def body it said "unexpected name 'c'" with "a ',' missing before name 'c'?"
    ("def t(x) {\n    r = 3  # rows\n    c = length / r;\n    return x;\n}\n",
     "missing ';' at the end of the statement", 2, 10, "the next one starts with name 'c'"),
    ("def f(x) { y = x + 1 return y; }\n", "missing ';' at the end of the statement", 1, 21, "'return'"),
    ('d = {"a": 1 "b": 2};\n', "unexpected string \"b\"; expected an expression, an operator, ';', ',', "
     "')', ']', '}', ':', 'else' or 'for'", 1, 13, "a ',' missing"),  # a dict's '{' is no body
])
def test_syntax_errors_say_what_this_construct_takes(src, message, line, col, hint) -> None:
    err = error_of(src)
    assert err.message == message, err.message
    assert (err.line, err.col) == (line, col)
    if hint:
        assert hint in (err.hint or ""), err.hint


def test_an_error_inside_a_function_says_which_call() -> None:
    # the body's line was the only place named: with two calls, which one failed was not said
    src = "def g(x) {\n    y = 6 / x;\n    return y;\n}\na = g(indices + 1);\nb = g(indices);\n"
    err = error_of(src, "ab")
    assert err.message == "division by zero (6 / 0) (at position 0) (in g(indices))", err.message
    assert (err.line, err.col) == (2, 9)
    err = error_of("def g(x) {\n    return x / 0;\n}\na = g(3);\nb = tokens;\n")
    assert err.message == "division by zero (3 / 0) (in g(3))", err.message
    err = error_of("for i in [1, 0] {\n  y = 1 / i;\n}\n")
    assert err.message == "division by zero (1 / 0) (in i = 0)", err.message
    # a library function's error still points at the call in the file, without a context
    err = error_of("x = sort(tokens);\n")
    assert "(in " not in err.message


@pytest.mark.parametrize("src, word, col", [
    ("select;\n", "select", 1), ("x = [aggregate, 1];\n", "aggregate", 6), ("x = round;\n", "round", 5),
    ("f(indicator);\n", "indicator", 3)])
def test_a_keyword_call_used_as_a_value_says_so(src, word, col) -> None:
    # it said "unexpected ';'; expected '('" at the token after the word
    err = error_of(src)
    assert err.message.startswith(f"'{word}' is a RASP keyword, not a value: it is only called, as {word}(")
    assert (err.line, err.col) == (1, col)


def test_a_numerical_built_in_is_reported_where_it_was_annotated() -> None:
    # it pointed at the first s-op reading tokens (`tokens == "a"`, line 1), not at numerical(tokens)
    from rasp_compiler.compiler import compile_program

    src = ('x = numerical(tokens == "a");\ny = numerical(aggregate(select(indices, indices, <=), x));\n'
           'w = numerical(tokens);\n')
    with pytest.raises(RaspError) as info:
        compile_program(program_from_source(src, "prog.rasp", output="y"), list("abc"), 3)
    err = info.value
    assert "'tokens' (numerical(tokens)) is marked numerical but holds non-numbers" in err.message
    assert (err.line, err.col) == (3, 5)


def test_output_naming_a_function_says_to_bind_a_call(tmp_path, capsys) -> None:
    # it said only "'frac_prevs' is a function, not an s-op or selector"
    from rasp_compiler.cli import main

    f = tmp_path / "p.rasp"
    f.write_text("def frac_prevs(seq, val) {\n  return aggregate(select(indices, indices, <=), "
                 "indicator(seq == val));\n}\nfp = frac_prevs(tokens, \"a\");\n")
    assert main(["run", str(f), "--input", "ab", "--output", "frac_prevs"]) != 0
    err = capsys.readouterr().err
    assert "'frac_prevs' is a function, not an s-op or selector" in err
    assert "r = frac_prevs(seq, val);" in err and "this file binds fp" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("src, message, hint", [
    ("x = tokens < 3;\n", "cannot apply '<' to string 'a' and int 3 (at position 0)",
     "tokens_int or tokens_float"),
    ("x = aggregate(select(tokens, 1, <), indices);\n", "cannot apply '<' to string 'a' and int 1",
     "tokens_int or tokens_float"),
    ('x = {"a": 1}[tokens];\n', "key 'b' is not in the dict (at position 1)", "a key for every value"),
    ("x = [1, 2][indices];\n", "index 2 is out of range for a table of length 2 (at position 2)",
     "an entry for every value"),
])
def test_run_time_errors_of_s_ops_have_a_hint(src, message, hint) -> None:
    # located, but with no hint
    err = error_of(src, "abc")
    assert err.message == message
    assert hint in (err.hint or ""), err.hint


def test_set_example_reads_on_while_a_bracket_is_open() -> None:
    # `set example [1, 2` then `]` was "unclosed '['" at once, then "unmatched ']'"
    out = repl('set example [1, 2\n]\nshow s-op example\nset example ("a"\n+ "b")\nshow s-op example\n')
    assert "error" not in out, out
    assert "\ts-op example: [1, 2]" in out and '\ts-op example: "ab"' in out


def test_an_error_in_set_example_shows_the_line_typed_and_its_column() -> None:
    # it showed `"ab;` at column 1: the value alone, with a ';' the user did not type
    out = repl('set example "ab\nset example  [1, 2] + x\n')
    assert '<repl:1>:1:13: error: string is not closed on this line' in out, out
    assert '    set example "ab' in out
    assert "<repl:2>:1:23: error: unknown name 'x'" in out
    assert "    set example  [1, 2] + x" in out


def test_a_files_example_over_lines_is_noted_on_one_line(tmp_path, capsys) -> None:
    # the note printed the example's newline as it stood in the file
    from rasp_compiler.cli import main

    f = tmp_path / "se.rasp"
    f.write_text("set example [1,\n  2]\nx = tokens_int + 1;\n")
    assert main(["run", str(f)]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == "[2, 3] (ints)"
    assert "(input: the file's example [1, 2])" in out.err


@pytest.mark.parametrize("src, hint", [
    ("def f(a b) { return a; }\n", "a ',' missing before name 'b'?"),
    ("x = [1 2];\n", "a ',' missing before number 2?"),
    ("x = f(a b);\n", "a ',' missing before name 'b'?"),
    ('x = {"a" 1};\n', "a ':' missing between the key and its value, before number 1?"),
    ('x = {"a": 1, "b" 2};\n', "a ':' missing between the key and its value, before number 2?"),
    ('x = {"a": 1 "b": 2};\n', "a ',' missing before string \"b\"?"),
])
def test_two_values_side_by_side_in_brackets_suggest_the_missing_separator(src, hint) -> None:
    # no hint; after the conditional hints came in, Lark's loose expected set (it holds 'else' after
    # any value) would have said "a conditional needs both values" here
    err = error_of(src)
    assert err.hint == hint, err.hint


def test_a_file_of_a_model_directory_given_as_a_program_says_so(tmp_path, capsys) -> None:
    # `rasp run out/config.json` said "missing ';'" at the JSON's last line; `rasp compile
    # out/model.safetensors` "cannot read: 'utf-8' codec can't decode"; `rasp show
    # out/model.safetensors --input ab` hinted to compile the safetensors file as a program
    from pathlib import Path

    from rasp_compiler.cli import main

    reverse = str(Path(__file__).resolve().parents[1] / "programs" / "reverse.rasp")
    out = tmp_path / "out"
    assert main(["compile", reverse, "--vocab", "ab", "--max-len", "3", "-o", str(out)]) == 0
    capsys.readouterr()
    for argv in (["run", str(out / "config.json"), "--input", "ab"],
                 ["compile", str(out / "model.safetensors"), "--vocab", "ab", "--max-len", "3",
                  "-o", str(tmp_path / "m2")],
                 ["verify", str(out), str(out / "config.json")]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert f"is a file of an artifact, not a RASP program\n  hint: {out} holds a compiled model" in err
    assert main(["show", str(out / "model.safetensors"), "--input", "ab", "-o", str(tmp_path / "t.png")]) == 1
    err = capsys.readouterr().err
    assert f"is a file of the model directory {out}, not a program" in err and "rasp compile" not in err


def test_a_whole_float_is_not_the_int_token_where_the_program_reads_strings(tmp_path, capsys) -> None:
    # `tokens + "!"` over --vocab '[1,3]' read the input 3.0 as the token 3 and printed "3!", where
    # `rasp run` reads "3.0" and prints "3.0!": a silent wrong answer.  tokens_int reads 3.0 as 3.
    from rasp_compiler.cli import main

    cases = (("s", 'res = tokens + "!";\n', None), ("i", "res = tokens_int + 1;\n", "[4, 2]"))
    for name, src, vocab_out in cases:
        prog = tmp_path / f"{name}.rasp"
        prog.write_text(src)
        model = tmp_path / name
        assert main(["compile", str(prog), "--vocab", "[1, 3]", "--max-len", "4", "-o", str(model)]) == 0
        capsys.readouterr()
        code = main(["eval", str(model), "--input-json", "[3.0, 1]"])
        out, err = capsys.readouterr()
        if vocab_out is None:
            assert code == 1 and "token 3.0 at position 0 of input 0 is not in the vocabulary" in err, err
            assert "reads tokens as strings, where 3.0 is '3.0'" in err and "Traceback" not in err
            assert main(["eval", str(model), "--input-json", "[3, 1]"]) == 0
            assert "[3!, 1!]" in capsys.readouterr().out
        else:
            assert code == 0 and vocab_out in out, (out, err)


def test_text_given_to_a_real_valued_model_is_hinted_to_json(tmp_path, capsys) -> None:
    # `rasp eval M --input 1234` on an --input-range model said only "holds '1': this model reads
    # finite real numbers", without the way to give numbers
    from pathlib import Path

    from rasp_compiler.cli import main

    maxmin = str(Path(__file__).resolve().parents[1] / "programs" / "maxmin.rasp")
    model = tmp_path / "mm"
    assert main(["compile", maxmin, "--input-range", "-3", "3", "--max-len", "4", "--fixed-length", "4",
                 "-o", str(model)]) == 0
    capsys.readouterr()
    assert main(["eval", str(model), "--input", "1234"]) == 1
    err = capsys.readouterr().err
    assert "this model reads finite real numbers" in err and "--input-json '[1, 2, 3, 4]'" in err, err
    assert main(["eval", str(model), "--input-json", "[1, 2, 3, 0.5]"]) == 0
    assert "[2.0, 1.0, 3.0, 0.5]" in capsys.readouterr().out
