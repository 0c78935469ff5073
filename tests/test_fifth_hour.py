"""A fifth careful hour (7 Dec, hard5): what a user coming from tracr and the original RASP REPL
met, each test a reproducer of a defect that was fixed (docs/robustness.md, "A fifth careful
hour")."""

from __future__ import annotations

import io
from pathlib import Path

from rasp_compiler.commands.repl import Repl


def repl(session: str, example: str = "hello") -> str:
    out = io.StringIO()
    Repl(example=example).loop(io.StringIO(session), out)
    return out.getvalue()


def test_a_draw_example_of_the_wrong_kind_is_located(tmp_path: Path, monkeypatch) -> None:
    """`draw(tokens, 5);` said what was wrong but named no line, at the prompt or in a loaded file."""
    monkeypatch.chdir(tmp_path)
    out = repl('draw(tokens, 5);\ndraw(tokens,\n  "");\ndraw(tokens, [[1]]);\n')
    what = "error: the example to draw on is a non-empty string or list of atoms, got"
    assert f"<repl:1>:1:14: {what} 5" in out and "\n    draw(tokens, 5);\n                 ^\n" in out, out
    assert f'<repl:2>:2:3: {what} ""' in out, out
    assert f"<repl:3>:1:14: {what} a list holding a list" in out, out
    (tmp_path / "lib.rasp").write_text("a = tokens;\n\ndraw(a, 5);\nb = a;\n")
    out = repl('load "lib";\nb;\n')
    assert f"{tmp_path / 'lib.rasp'}:3:9: error: the example to draw on" in out, out
    assert out.count("error:") == 1 and "Example: b(\"hello\") = [h, e, l, l, o]" in out  # the file went on
    assert not list(tmp_path.glob("draw-*.png"))
    out = repl("draw(tokens_int + 1);\n")  # an example the s-op cannot read, at the s-op too
    assert "<repl:1>:1:6: error: tokens_int cannot read input position 0 ('h') as int" in out, out
    assert "hint: this s-op reads numbers: draw(x, [1, 2, 3])" in out
    out = repl('draw(tokens, "ab");\n')  # a good example still draws
    assert "wrote draw-1.png" in out and (tmp_path / "draw-1.png").exists(), out


def test_a_program_named_as_load_names_it_gets_the_file_as_hint(tmp_path: Path, monkeypatch, capsys) -> None:
    """`rasp run reverse` (as the REPL's `load "reverse";` names it) said only "no such file"."""
    from rasp_compiler.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.rasp").write_text("x = tokens;\n")
    assert main(["run", "mine", "--input", "ab"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no such file: mine\n  hint: did you mean mine.rasp?"), err
    assert main(["compile", "sort_by_frequency", "--vocab", "ab", "--max-len", "3", "-o", "m"]) == 1
    err = capsys.readouterr().err
    assert "hint: did you mean " in err and "programs/sort_by_frequency.rasp?" in err, err
    assert main(["run", "-", "--input", "ab"]) == 1
    assert "for one on standard input give /dev/stdin" in capsys.readouterr().err
    assert main(["run", "nothing", "--input", "ab"]) == 1
    assert capsys.readouterr().err == "error: no such file: nothing\n"
    assert main(["show", "mine", "--vocab", "ab", "--max-len", "3", "-o", "p.png"]) == 1
    err = capsys.readouterr().err
    assert "error: mine: no such file or directory\n  hint: did you mean mine.rasp?" in err, err


def test_an_expression_failing_on_every_token_gets_the_operators_hint(tmp_path: Path, capsys) -> None:
    """`tokens + 1` compiled over `--vocab 123` (tokens are strings) fails on every value; the hint
    spoke of a Python map function's arity ("a map's function takes one value ... and returns one")
    instead of the interpreter's "read numbers with tokens_int"."""
    from rasp_compiler import pyapi as rasp
    from rasp_compiler.cli import main
    from rasp_compiler.errors import CompileError

    prog = tmp_path / "inc.rasp"
    prog.write_text("w = tokens + 1;\n")
    assert main(["compile", str(prog), "--vocab", "123", "--max-len", "4", "-o", str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err
    assert "fails on every value it may receive" in err and err.count("error:") == 1, err
    assert "hint: a string meets a number: `tokens` holds the input as strings; read numbers with" in err
    assert "a map's function takes one value" not in err
    # a Python function keeps the hint that is about it
    try:
        rasp.compile_program(rasp.Map(lambda x: x + 1, rasp.tokens), vocab="12", max_len=3)
    except CompileError as e:
        assert "a map's function takes one value" in str(e.hint)
    else:
        raise AssertionError("compiled a map that fails on every value")


def test_an_integer_float_over_a_vocabulary_of_digit_strings_is_told_to_pass_the_int(tmp_path: Path,
                                                                                     capsys) -> None:
    """`--vocab 123` holds the strings '1', '2', '3'; `--input-json '[1, 2]'` reads 1 as '1', but
    1.0 as '1.0' (as `rasp run` does: `tokens + "!"` gives `1.0!`), so it is refused. The hint said
    "compile again with a --vocab that includes it", and the vocabulary does."""
    from rasp_compiler.cli import main

    prog = tmp_path / "bang.rasp"
    prog.write_text('v = tokens + "!";\n')
    out = tmp_path / "m"
    assert main(["compile", str(prog), "--vocab", "123", "--max-len", "3", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["eval", str(out), "--input-json", "[1, 2]", "--json"]) == 0
    assert capsys.readouterr().out.strip() == '{"output": ["1!", "2!"]}'
    assert main(["eval", str(out), "--input-json", "[1.0, 2]"]) == 1
    err = capsys.readouterr().err
    assert "token 1.0 at position 0 of input 0 is not in the vocabulary ('1', '2', '3')" in err, err
    assert "hint: the vocabulary holds the string '1', which the number 1 is read as, but 1.0 reads as " \
           "'1.0': pass 1" in err, err
    assert main(["run", str(prog), "--input-json", "[1.0, 2]", "--json"]) == 0  # what the model refuses
    assert capsys.readouterr().out.strip() == '{"output": ["1.0!", "2!"]}'


def test_load_paper_examples_as_the_original_readme_does_names_the_copy(tmp_path: Path, monkeypatch) -> None:
    """The original README opens with `load "paper_examples";`; here it said "cannot find" and that
    load looks in programs/, though a checkout holds a copy in tests/data/."""
    monkeypatch.chdir(tmp_path)
    out = repl('load "paper_examples";\n')
    assert "<repl:1>:1:6: error: cannot find 'paper_examples.rasp' to load" in out, out
    copy = Path(__file__).parent / "data" / "paper_examples"
    assert f'this checkout holds a copy: load "{copy}";' in out, out
    out = repl(f'load "{copy}";\nreverse("abc");\n')  # the hint's statement loads it
    assert "error" not in out and "=  [c, b, a] (strings)" in out, out
    out = repl('load "nothing_here";\n')
    assert "hint: load looks next to the loading file, then in the current directory" in out, out


def test_verify_a_copy_of_a_program_that_loads_a_helper(tmp_path: Path, monkeypatch, capsys) -> None:
    """A program that `load`s a helper records the helper's absolute path in the plan's source
    locations; `rasp verify` of its model against a copy of both files elsewhere (a colleague's
    checkout) said "config.json's 'plan' differs ... compiled from another program", every tensor
    matching."""
    from rasp_compiler.cli import main

    helper = "def f(x) { return aggregate(select(indices, length - indices - 1, ==), x); }\n"
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "helper.rasp").write_text(helper)
        (tmp_path / d / "prog.rasp").write_text('load "helper";\ny = f(tokens);\n')
    monkeypatch.chdir(tmp_path / "a")
    assert main(["compile", "prog.rasp", "--vocab", "abc", "--max-len", "4", "-o", "m"]) == 0
    assert str(tmp_path / "a" / "helper.rasp") in (tmp_path / "a" / "m" / "config.json").read_text()
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)
    assert main(["verify", "a/m", "b/prog.rasp"]) == 0, capsys.readouterr().err
    assert "a/m matches b/prog.rasp: 16 tensors" in capsys.readouterr().out
    # another helper is still another program
    (tmp_path / "b" / "helper.rasp").write_text(helper.replace("length - indices - 1", "indices"))
    assert main(["verify", "a/m", "b/prog.rasp"]) == 1
    assert "is not what b/prog.rasp compiles to" in capsys.readouterr().err


def test_a_python_script_given_as_the_program_is_named_so(tmp_path: Path, capsys) -> None:
    """`rasp compile prog.py ...` (a tracr-style script) was parsed as RASP: "missing ';'" at its
    first `from ... import ...`."""
    from rasp_compiler.cli import main

    script = tmp_path / "prog.py"
    script.write_text("from rasp_compiler import pyapi as rasp\nsop = rasp.tokens\n")
    for argv in (["run", str(script), "--input", "ab"],
                 ["compile", str(script), "--vocab", "ab", "--max-len", "3", "-o", str(tmp_path / "m")],
                 ["check", str(script), "--vocab", "ab", "--max-len", "3"]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: {script} is a Python file, not a RASP program\n"), err
        assert "rasp.compile_program(sop, vocab, max_len)" in err and "missing ';'" not in err
    assert not (tmp_path / "m").exists()
    out = repl(f'load "{script}";\n')  # the REPL's load: it looked for prog.py.rasp, with no word of why
    assert "prog.py.rasp' to load" in out and "hint: load reads RASP files" in out, out


def test_an_s_op_where_only_an_atom_goes_is_told_so() -> None:
    """`rasp.Full(rasp.tokens)` said "Full's value must be an s-op or an atom ..., got SOp": it
    takes no s-op (nor does an aggregate's default or a ConstantSOp's value), and SOp is the class
    the user never named."""
    import pytest

    from rasp_compiler import pyapi as rasp

    tokens = rasp.tokens
    sel = rasp.Select(tokens, tokens, rasp.Comparison.EQ)
    atom = "an atom (str, int, float, bool), got"
    cases = [(lambda: rasp.Full(tokens), f"Full's value must be {atom} an s-op (tokens)"),
             (lambda: rasp.Aggregate(sel, tokens, default=tokens),
              f"aggregate's default must be {atom} an s-op (tokens)"),
             (lambda: rasp.ConstantSOp([1, tokens]), "each of ConstantSOp's values must be an atom"),
             (lambda: tokens + [1], f"an operand must be an s-op or {atom} list")]
    for build, words in cases:
        with pytest.raises(rasp.PyApiTypeError) as err:
            build()
        assert str(err.value).startswith(words), err.value
        assert "got SOp" not in str(err.value)


def test_an_error_inside_tracrs_library_names_the_users_call() -> None:
    """`lib.make_sort_unique(tokens, tokens)` run on repeated string keys fails in the aggregate
    lib.py builds; the error named lib.py's line alone, not the user's call of the library. The
    compiled config is unchanged (the call is not recorded there)."""
    import inspect

    import pytest

    from rasp_compiler import pyapi as rasp
    from rasp_compiler.errors import CompileError, RaspError
    from rasp_compiler.pyapi import lib

    here = inspect.currentframe().f_lineno + 1
    sort = lib.make_sort_unique(rasp.tokens, rasp.tokens)
    with pytest.raises(RaspError) as err:
        rasp.evaluate(sort, ["b", "b", "a"])
    assert "mean of non-numbers" in err.value.message and err.value.file.endswith("lib.py"), err.value
    assert err.value.message.endswith(f"(in lib.make_sort_unique, called at {__file__}:{here})"), err.value
    # through another library function: the one the user called
    here = inspect.currentframe().f_lineno + 1
    keyed = lib.make_sort(rasp.tokens, rasp.tokens, max_seq_len=4, min_key=1)
    with pytest.raises(CompileError) as err:  # string keys: `x + min_key * i / max_seq_len` fails
        rasp.compile_program(keyed, vocab="ab", max_len=4)
    assert err.value.message.endswith(f"(in lib.make_sort, called at {__file__}:{here})"), err.value
    # the user's own code keeps its line alone
    mine = rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ), rasp.tokens)
    with pytest.raises(RaspError) as err:
        rasp.evaluate(mine, ["a", "b"])
    assert "(in lib." not in err.value.message and err.value.file == __file__


def test_a_python_import_in_rasp_text_is_named_as_python(tmp_path: Path, capsys) -> None:
    """`from tracr.rasp import rasp` (or `import foo;`) at the head of a statement said "missing ';'
    at the end of the statement", as `lambda` and `rasp.tokens` no longer do."""
    from rasp_compiler.cli import main

    prog = tmp_path / "p.rasp"
    prog.write_text("# a tracr program\n\nfrom tracr.rasp import rasp\nx = 1;\n")
    assert main(["run", str(prog), "--input", "ab"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{prog}:3:1: error: RASP has no from statement: this looks like Python"), err
    assert 'hint: load "name"; runs a RASP file' in err and "missing ';'" not in err
    out = repl("x = 1; import y;\nimport = 3;\ny = x import;\n")
    assert "<repl:1>:1:8: error: RASP has no import statement" in out, out
    assert "value: import =  3" in out  # a name like any other where it is not a statement's head
    assert "<repl:3>:1:6: error: missing ';'" in out
    out = repl("x = tokens;\nprint(x);\n")  # Python's print: "unknown name 'print'" and no hint
    assert "<repl:2>:1:1: error: unknown name 'print'\n" in out and "hint: RASP has no print: at the " \
           "prompt a statement shows its value (`x;`" in out, out


def test_python_and_c_habits_get_rasp_words() -> None:
    """`x += 1;` was told "to compare, write '=='", `while` "missing ';'", `c ? a : b` "unexpected
    character '?'" with no hint, and `x is 1` "did you mean 'in'?"."""
    out = repl("x = 1;\nx += 1;\nwhile x < 3 { x = x + 1; }\nz = x == 1 ? 2 : 3;\nr = x is 1;\n")
    assert "<repl:2>:1:3: error: RASP has no '+=': write the assignment out\n" in out, out
    assert "hint: x = x + ...;" in out and "to compare, write '=='" not in out
    assert "<repl:3>:1:1: error: RASP has no while loop\n" in out and "for i in range(n)" in out, out
    assert "<repl:4>:1:12: error: unexpected character '?'" in out
    assert "hint: RASP's conditional is `a if condition else b`" in out
    assert "<repl:5>:1:7: error: 'is' is not a RASP keyword" in out and "write '=='" in out, out
    assert "did you mean 'in'" not in out
