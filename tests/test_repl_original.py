"""`rasp repl` against the original REPL (tech-srl/RASP, RASP_support/REPL.py): its commands, its
layouts (print_named_val, print_seq, print_select, print_example) and `draw` as a statement.

Each case pipes a session into the REPL (no prompts are printed then) and compares what it prints
with what the original prints for the same session (README.md and tests/tgt/*.txt there)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from rasp_compiler.cli import main
from rasp_compiler.commands.repl import Repl
from rasp_compiler.lang.elaborator import program_from_source
from rasp_compiler.lang.format import format_sequence
from rasp_compiler.lang.repl_commands import blank_repl_commands, file_example


def repl(session: str, example: str = "hello") -> str:
    out = io.StringIO()
    Repl(example=example).loop(io.StringIO(session), out)
    return out.getvalue()


def lines(session: str, example: str = "hello") -> list[str]:
    return repl(session, example).splitlines()


def rasp(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue()


# -- 1. example subsets -----------------------------------------------------------------------------

def test_show_example_prints_both_examples_like_print_example() -> None:
    assert lines("show example\n") == ['\ts-op example: "hello"', '\tselector example: "hello"']
    assert lines("set example [1, 2]\nshow example\n") == ["\ts-op example: [1, 2]",
                                                          "\tselector example: [1, 2]"]


def test_set_and_show_one_subset() -> None:
    out = lines('set s-op example "abc"\nset selector example "xy"\nshow s-op example\n'
                "show selector example\nshow example\n")
    assert out == ['\ts-op example: "abc"', '\tselector example: "xy"',
                   '\ts-op example: "abc"', '\tselector example: "xy"']


def test_selectors_are_shown_on_the_selector_example_and_s_ops_on_the_s_op_example() -> None:
    out = lines('set s-op example "abc"\nset selector example "xy"\n'
                "x = indices;\ns = select(indices, indices, ==);\n")
    assert out == ["     s-op: x", ' \t Example: x("abc") = [0, 1, 2] (ints)',
                   "     selector: s", " \t Example:",
                   " \t\t\t     x y", " \t\t\t x | 1  ", " \t\t\t y |   1"]


def test_examples_switch_one_kind_or_both() -> None:
    s = "x = indices;\ns = select(indices, indices, ==);\n"
    out = repl("s-op examples off\n" + s)
    assert "Example: x(" not in out and "\t\t\t h | 1" in out
    out = repl("selector examples off\n" + s)
    assert 'Example: x("hello")' in out and "| 1" not in out
    out = lines("examples off\n" + s + "examples on\nx;\n")
    assert out == ["     s-op: x", "     selector: s", "     s-op: x",
                   ' \t Example: x("hello") = [0, 1, 2, 3, 4] (ints)']
    out = repl("s-op examples off\nselector examples off\nselector examples on\n" + s)
    assert "Example: x(" not in out and "\t\t\t h | 1" in out


# -- 2. full seq display ------------------------------------------------------------------------------

def test_full_seq_display_shows_input_and_output_rows() -> None:
    out = lines('set example "hey"\nfull seq display on\nx = indices + 10;\n')
    assert out == ["     s-op: x", " \t Example:",
                   " \t\tinput:    h  e  y \t (strings)",
                   " \t\toutput:  10 11 12 \t (ints)"]


def test_full_seq_display_marks_the_rarer_bool_and_skips_identical_values() -> None:
    out = lines('set example "abcd"\nfull seq display on # long\nindices == 1;\nindices * 0;\n'
                "full seq display off\nindices * 0;\n")
    assert out == ["     s-op: out", " \t Example:",
                   " \t\tinput:   a b c d \t (strings)",
                   " \t\toutput:    T     \t (bools)",
                   "     s-op: out",
                   ' \t Example: out("abcd") = [0]*4 (ints) [skipped full display: identical values]',
                   "     s-op: out", ' \t Example: out("abcd") = [0]*4 (ints)']


def test_full_seq_display_of_an_applied_s_op() -> None:
    out = lines('full seq display on\nindices("abc");\n(indices * 0)("ab");\n')
    assert out == ["\t = ", " \t\tinput:   a b c \t (strings)", " \t\toutput:  0 1 2 \t (ints)",
                   "\t =   [0]*2 (ints) [skipped full display: identical values]"]


# -- 3. commands followed by a comment ----------------------------------------------------------------

def test_repl_commands_with_a_trailing_comment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = lines('set example "abc" # c\nexamples off # c\nindices;\nshow example # c\n'
                "examples on # c\nfull seq display on # c\nindices;\nfull seq display off # c\n"
                "draw(indices * 0); # c\nexit # bye\nindices;\n")
    assert out[:4] == ["     s-op: indices", '\ts-op example: "abc"', '\tselector example: "abc"',
                       "     s-op: indices"]
    assert out[4:7] == [" \t Example:", " \t\tinput:   a b c \t (strings)", " \t\toutput:  0 1 2 \t (ints)"]
    assert out[-1] == "\t =  [0]*3 (ints)" and len(out) == 9   # the draw's value; nothing after exit


def test_commands_with_comments_in_a_file(tmp_path: Path) -> None:
    text = ('set example "abc" # c\nexamples off # c\nshow example # c\nfull seq display on # c\n'
            "reverse = aggregate(select(indices, length - indices - 1, ==), tokens);\n"
            "draw(reverse); # c\nreverse;\n")
    path = tmp_path / "session.rasp"
    path.write_text(text)
    assert file_example(text) == '"abc"'
    code, out = rasp("run", str(path))
    assert code == 0 and out == "[c, b, a] (strings)\n"


def test_set_example_over_several_lines_in_a_file(tmp_path: Path) -> None:
    text = "set example [3,\n   1, # the middle\n   2]\nx = tokens_int + 1;\n"
    blanked = blank_repl_commands(text)
    assert blanked.splitlines()[3] == "x = tokens_int + 1;" and not blanked.splitlines()[1].strip()
    assert file_example(text).split() == ["[3,", "1,", "2]"]
    path = tmp_path / "multi.rasp"
    path.write_text(text)
    code, out = rasp("run", str(path), "--json")
    assert code == 0 and json.loads(out) == {"output": [4, 2, 3]}


# -- 4. draw is a statement ---------------------------------------------------------------------------

def test_draw_prints_the_value_like_the_original(tmp_path: Path, monkeypatch) -> None:
    # the original README: draw(my_frac,"abcdeeee"); prints "\t =  [0.5]*8 (floats)"
    monkeypatch.chdir(tmp_path)
    out = lines('my_frac = aggregate(full_s, indicator(tokens == "e"));\n'
                'draw(my_frac, "abcdeeee");\nset example "hey"\ndraw(my_frac);\n')
    assert out[2].startswith("wrote draw-1.png") and out[3] == "\t =  [0.5]*8 (floats)"
    assert out[4].startswith("wrote draw-2.png") and out[5] == "\t =  [0.333]*3 (floats)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["draw-1.png", "draw-2.png"]


def test_draw_keeps_the_pictures_already_there(tmp_path: Path, monkeypatch) -> None:
    # a second session in the same directory overwrote the first's draw-1.png without a word
    monkeypatch.chdir(tmp_path)
    (tmp_path / "draw-1.png").write_bytes(b"an earlier session's")
    (tmp_path / "draw-3.png").write_bytes(b"the user's")
    out = lines('x = tokens;\ndraw(x);\ndraw(x);\n')
    assert [line.split(":")[0] for line in out if line.startswith("wrote ")] == \
        ["wrote draw-2.png", "wrote draw-4.png"]
    assert (tmp_path / "draw-1.png").read_bytes() == b"an earlier session's"
    assert (tmp_path / "draw-3.png").read_bytes() == b"the user's"


def test_draw_with_other_statements_in_a_def_in_a_for_and_over_lines(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = lines('examples off\nx = tokens; draw(x, "abc"); x;\n'
                "def f(a) {\n  draw(a);   # drawn at each call\n  return a + 1;\n}\n"
                "y = f(indices);\nfor i in [1, 2] { draw(indices + i); }\n"
                'draw(\n  x,\n  "ab"\n);\n')
    assert out[0] == "     s-op: x"
    assert out[1].startswith("wrote draw-1.png") and out[2] == "\t =  [a, b, c] (strings)"
    assert out[3] == "     s-op: x" and out[4] == "     console function: f(a)"
    # inside a function or loop a draw draws, and prints no value (the original's too)
    assert out[5].startswith("wrote draw-2.png") and out[6] == "     s-op: y"
    assert out[7].startswith("wrote draw-3.png") and out[8].startswith("wrote draw-4.png")
    assert out[9].startswith("wrote draw-5.png") and out[10] == "\t =  [a, b] (strings)"
    assert len(out) == 11 and "unknown name" not in "\n".join(out)


def test_draw_errors(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = repl("draw(1);\ndraw(indices, 3);\ndraw(tokens_int + 1);\n")
    assert "draw takes an s-op" in out and "got an int" in out
    assert "the example to draw on is a non-empty string or list of atoms, got 3" in out
    assert "hint: this s-op reads numbers: draw(x, [1, 2, 3])" in out and "--input-json" not in out
    assert not list(tmp_path.iterdir())
    out = repl("draw = 1;\n")
    assert "'draw' is reserved" in out


def test_draw_in_a_file_changes_nothing_and_draws_nothing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    src = ("def f(a) { draw(a); return a + 1; }\nfor i in [1] { draw(indices + i, \"ab\"); }\n"
           "x = f(indices); draw(x, [1, 2]);\ndraw(\n  x\n);\n")
    assert program_from_source(src).output == program_from_source(src.replace("draw(x, [1, 2]);", "")).output
    path = tmp_path / "p.rasp"
    path.write_text(src)
    code, out = rasp("run", str(path), "--input", "abc", "--json")
    assert code == 0 and json.loads(out) == {"output": [1, 2, 3]}
    assert [p.name for p in tmp_path.iterdir()] == ["p.rasp"]
    code, _ = rasp("compile", str(path), "--vocab", "abc", "--max-len", "4", "-o", str(tmp_path / "m"))
    assert code == 0 and not list(tmp_path.glob("draw-*"))


# -- 5. lists and dicts of s-ops and selectors --------------------------------------------------------

def test_a_list_of_s_ops_prints_each_with_its_example() -> None:
    out = lines('set example "ab"\ny = indices + 1;\nl = [tokens, y, 3];\n')
    assert out[2:] == ["     list: l =  [",
                       "\t\t     s-op: tokens",
                       '\t\t \t Example: tokens("ab") = [a, b] (strings)',
                       "\t\t     s-op: y",
                       '\t\t \t Example: y("ab") = [1, 2] (ints)',
                       "\t\t    value:  3",
                       "               ]"]


def test_a_dict_of_s_ops_and_selectors_prints_each_with_its_key() -> None:
    out = lines('set example "ab"\nexamples off\n'
                'd = {"s": tokens, "n": 1, "e": select(indices, indices, ==)};\nexamples on\nd;\n')
    assert out[:5] == ["     dict: d =  {", '\t\t\t "s" :     s-op: tokens', '\t\t\t "n" :     value:  1',
                       '\t\t\t "e" :     selector: plain select', "               }"]
    assert out[5:8] == ["     dict: d =  {", '\t\t\t "s" :     s-op: tokens',
                        '\t\t\t \t Example: tokens("ab") = [a, b] (strings)']
    assert "\t\t\t \t\t\t     a b" in out and "\t\t\t \t\t\t a | 1  " in out


def test_flat_lists_and_dicts_print_as_the_original() -> None:
    out = lines('vowels = ["a", "e"];\nd = {"a": 1};\nn = [[1, 2], 3];\n')
    assert out[:2] == ["     list: vowels = ['a', 'e']", "     dict: d = {'a': 1}"]
    assert out[2:] == ["     list: n =  [", "\t\t     list: [1, 2]", "\t\t    value:  3", "               ]"]


# -- 6. the smaller things ----------------------------------------------------------------------------

def test_set_example_goes_on_over_lines_and_says_when_it_has_no_value() -> None:
    assert lines("set example [1,\n  2,   # c\n  3]\nshow s-op example\n") == ["\ts-op example: [1, 2, 3]"]
    assert lines('set example\n"ab"\nshow s-op example\n') == ['\ts-op example: "ab"']
    usage = 'error: set example needs a value: set example "hello" or set example [1, 2, 3]'
    assert lines("set example\n") == [usage]
    assert lines("set example;\nshow s-op example\n") == [usage, '\ts-op example: "hello"']
    assert "stray" not in repl("set example\n")


def test_a_numeric_s_op_on_a_string_example_suggests_a_numeric_example() -> None:
    out = repl("tokens_int;\n")
    assert "hint: this s-op reads numbers: set example [1, 2, 3]" in out and "--input-json" not in out
    out = repl('tokens_int("ab");\n')
    assert "--input-json" not in out and "[1, 2, 3]" in out
    assert "value: " not in repl("set example [1, 2]\ntokens_int;\n")


def test_selector_grid_is_blank_where_not_selected() -> None:
    # the original README's `prevs`
    out = lines('set example "hey"\nprevs = select(indices, indices, <);\n')
    assert out == ["     selector: prevs", " \t Example:", " \t\t\t     h e y",
                   " \t\t\t h |      ", " \t\t\t e | 1    ", " \t\t\t y | 1 1  "]


def test_an_applied_selector_prints_the_labelled_grid() -> None:
    out = lines('examples off\nprevs = select(indices, indices, <=);\nprevs("hey");\n')
    assert out[1:] == ["\t = ", " \t\t\t     h e y", " \t\t\t h | 1    ", " \t\t\t e | 1 1  ",
                       " \t\t\t y | 1 1 1"]


def test_applied_s_op_and_values_print_like_the_original() -> None:
    out = lines('indices("hiya");\nx = indices("ab");\na = 3;\ns = "hi";\n')
    assert out == ["\t =  [0, 1, 2, 3] (ints)", "    value: x =  [0, 1] (ints)", "    value: a =  3",
                   '    value: s =  "hi"']


def test_functions_say_where_they_come_from() -> None:
    out = lines("def f(x, y) { return x; }\nf;\ng = sort;\nh = selector_width;\n")
    assert out == ["     console function: f(x, y)", "     console function: f(x, y)",
                   "     library function: sort(seq, key)",
                   "     built-in function: selector_width(selector)"]


def test_load_prints_names_without_examples(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "lib.rasp").write_text("def double(x) { return x * 2; }\n_hidden = indices;\n"
                                       "twice = double(indices);\nsel = select(indices, indices, ==);\n")
    monkeypatch.chdir(tmp_path)
    out = lines('load "lib";\ntwice;\n')
    assert out == ["     lib function: double(x)", "     s-op: twice", "     selector: sel",
                   "     s-op: twice", ' \t Example: twice("hello") = [0, 2, 4, 6, 8] (ints)']


def test_an_s_op_of_equal_values_folds_as_the_original() -> None:
    assert format_sequence([2, 2.0, 2.0]) == "[2]*3 (floats)"   # len(set(vals)) == 1
    assert format_sequence([1, True]) != "[1]*2 (floats)"       # a bool is not the number 1
    assert format_sequence([7]) == "[7] (ints)"
    out = repl("aggregate(select(indices, indices, ==), 0 * indices + 2.0);\n")
    assert "[2.0]*5 (floats)" in out


@pytest.mark.parametrize("command", ["examples", "s-op examples", "full seq display"])
def test_a_switch_needs_on_or_off(command: str) -> None:
    out = repl(f"{command} maybe\n")
    assert "error" in out


def test_the_worked_session_in_the_docs_is_what_the_repl_prints(tmp_path: Path, monkeypatch) -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "language.md").read_text(encoding="utf-8")
    section = doc[doc.index("## The REPL"):]
    block = section[section.index("$ rasp repl\n") + len("$ rasp repl\n"):]
    block = block[:block.index("```")]
    typed = [ln[3:] for ln in block.splitlines() if ln.startswith((">> ", ".. "))]
    shown = [ln for ln in block.splitlines() if not ln.startswith((">> ", ".. "))]
    monkeypatch.chdir(tmp_path)
    assert lines("\n".join(typed) + "\n") == shown


# -- 7. load as the original's (tests/in/load_*.txt there) --------------------------------------------

def test_a_load_with_errors_binds_the_rest_and_prints_everything_in_order(tmp_path: Path,
                                                                          monkeypatch) -> None:
    # tests/in/load_nesteds.txt: each statement of a loaded file runs on its own; a failing one is
    # reported where it stood and the rest still bind; a nested load prints when it ends
    (tmp_path / "outer.rasp").write_text('a = f;\na = 3;\nload "inner";\nc = b;\nd = _b;\n_a = 4;\ne = _a;\n')
    (tmp_path / "inner.rasp").write_text("b = 7;\n_b = 8;\n_c = a;\n")
    monkeypatch.chdir(tmp_path)
    out = lines('f = 10;\nload "outer";\na;\nb;\nc;\ne;\nd;\n')
    printed = [ln for ln in out if ln.startswith("    value:") or "error:" in ln]
    assert printed[:9] == [
        "    value: f =  10",
        f"{tmp_path / 'outer.rasp'}:1:5: error: unknown name 'f'", "    value: a =  3",
        "    value: b =  7", f"{tmp_path / 'inner.rasp'}:3:6: error: unknown name 'a'",
        "    value: c =  7", f"{tmp_path / 'outer.rasp'}:5:5: error: unknown name '_b'", "    value: e =  4",
        "    value: a =  3"]
    assert printed[9:] == ["    value: b =  7", "    value: c =  7", "    value: e =  4",
                           "<repl:7>:1:1: error: unknown name 'd'"]


def test_a_load_prints_each_name_once_as_its_last_top_level_statement_bound_it(tmp_path: Path,
                                                                                monkeypatch) -> None:
    # tests/in/load_multi_assigns2.txt and load_rover.txt's `stages`: names in the order of their
    # last top-level binding, with that binding's value; a loop binds but prints nothing
    (tmp_path / "lib.rasp").write_text("a = 4;\na = a + 5;\nb = 3;\nstages = [];\n"
                                       "for n in [1, 2] { stages = stages + [n]; }\na = a + b;\n"
                                       'x = indices;\nx("ab");\nx;\n')
    monkeypatch.chdir(tmp_path)
    assert lines('load "lib";\nstages;\nn;\n') == [
        "    value: b =  3", "     list: stages = []", "    value: a =  12", "     s-op: x",
        "     list: stages = [1, 2]", "    value: n =  2"]


def test_a_load_runs_the_files_repl_commands_and_stops_at_its_exit(tmp_path: Path, monkeypatch) -> None:
    # tests/rasps/rover.rasp sets `set example example2` and `full seq display on`, which hold after
    (tmp_path / "lib.rasp").write_text('ex = "abc";\nset example ex\nfull seq display on\n'
                                       "y = indices * 0;\nexit\nz = 1;\n")
    monkeypatch.chdir(tmp_path)
    out = lines('load "lib";\nz;\ny;\nshow example\n')
    assert out[:2] == ['    value: ex =  "abc"', "     s-op: y"]
    assert "unknown name 'z'" in out[2]
    assert ' \t Example: y("abc") = [0]*3 (ints) [skipped full display: identical values]' in out
    assert out[-2:] == ['\ts-op example: "abc"', '\tselector example: "abc"']


def test_a_loaded_function_is_named_after_the_load(tmp_path: Path, monkeypatch) -> None:
    # tests/tgt/load_rover.txt: "tests/rasps/rover function: checkfor(item, in_ness)"
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "lib.rasp").write_text("def double(x) { return x * 2; }\n")
    monkeypatch.chdir(tmp_path)
    assert lines('load "sub/lib";\ndouble;\n') == ["     sub/lib function: double(x)"] * 2


# -- 8. reserved names (tests/in/set_reserved.txt there) -----------------------------------------------

@pytest.mark.parametrize("name", ["indices", "tokens_int", "True", "range", "length", "full_s", "sort",
                                  "selector_width", "get"])
def test_built_in_and_library_names_cannot_be_set(name: str) -> None:
    out = lines(f"{name} = 2;\n{name};\n")
    assert out[0] == (f"<repl:1>:1:1: error: cannot set reserved name '{name}': "
                      "it is a built-in or library name")
    assert "=  2" not in "\n".join(out[1:])   # still the built-in's or library's


def test_tokens_can_be_set_and_library_names_used_inside_functions(tmp_path: Path, monkeypatch) -> None:
    out = lines("set example [0, 1, 2]\ntokens = tokens_int;\n"
                "def f(x) { length = x + 1; return length; }\nf(indices);\n"
                "for sort in [1] { }\n")
    assert out[:2] == ["     s-op: tokens", " \t Example: tokens([0, 1, 2]) = [0, 1, 2] (ints)"]
    assert out[3:5] == ["     s-op: out", " \t Example: out([0, 1, 2]) = [1, 2, 3] (ints)"]
    assert "cannot set reserved name 'sort'" in out[5]
    # a loaded file's public names reach the console, where they are reserved too
    (tmp_path / "lib.rasp").write_text("sort = 1;\n_max = 2;\nok = 3;\n")
    monkeypatch.chdir(tmp_path)
    out = lines('load "lib";\nok;\n')
    assert "cannot set reserved name 'sort'" in out[0] and out[-2:] == ["    value: ok =  3"] * 2


def test_a_loaded_file_keeps_its_own_value_of_a_library_name(tmp_path: Path, monkeypatch) -> None:
    """As the original's load: the file's own environment may bind `contains` (rover.rasp does),
    its later statements read that value, and only handing the name to the session is refused."""
    (tmp_path / "lib.rasp").write_text("contains = 5;\nx = contains + 1;\n")
    monkeypatch.chdir(tmp_path)
    out = lines('load "lib";\nx;\ncontains;\n')
    assert sum("cannot set reserved name 'contains' in the session" in line for line in out) == 1
    assert "    value: contains =  5" not in out
    assert out[-3:] == ["    value: x =  6", "    value: x =  6",
                        "     library function: contains(seq, atom)"]


# -- 9. names of s-ops and selectors nobody named (tests/tgt/load_rover.txt there) ---------------------
# The original names every s-op / selector when it makes it and renames it on each assignment and each
# function call that returns it (FunctionalSupport.py setname, Evaluator.py, make_operators.py,
# Sugar.py); a list or dict shows its elements by that name.

def test_a_call_names_its_result_after_the_call_and_its_arguments() -> None:
    out = lines('examples off\ndef f(x, y) { return x + 1; }\n'
                'd = {"a": f(indices, "q"), "b": f(indices, [1, 2]), "c": f(indices, {"k": 1}), '
                '"d": f(indices, [1, 2, 3, 4, 5, 6, 7, 8]), "e": f(indices, {"key": "value", "k": 2}), '
                '"f": f(indices, 2.5)};\n')
    assert out[1:] == ["     dict: d =  {",
                       '\t\t\t "a" :     s-op: f(indices , "q")',
                       '\t\t\t "b" :     s-op: f(indices , [1, 2])',
                       '\t\t\t "c" :     s-op: f(indices , {"k": 1})',
                       '\t\t\t "d" :     s-op: f(indices , (list))',
                       '\t\t\t "e" :     s-op: f(indices , (dict))',
                       '\t\t\t "f" :     s-op: f(indices , 2.5)',
                       "               }"]


def test_select_and_aggregate_nobody_named_show_their_kind() -> None:
    out = lines("examples off\nl = [select(indices, indices, ==), select(indices, indices, <) and "
                "select(tokens, tokens, ==), aggregate(select(indices, indices, ==), tokens), "
                "selector_width(select(indices, indices, <))];\n")
    assert out == ["     list: l =  [", "\t\t     selector: plain select", "\t\t     selector: plain select",
                       "\t\t     s-op: s-op", "\t\t     s-op: selector_width(plain select)",
                       "               ]"]


def test_a_name_over_30_characters_falls_back_to_the_kind() -> None:
    out = lines("examples off\ndef select_same_values(q) { return select(q, q, ==); }\n"
                "abcdefghijklmnopqrstuvwxyz_12345 = indices + 2;\n"
                "l = [abcdefghijklmnopqrstuvwxyz_12345, select_same_values(indices), "
                "select_same_values(tokens_float), (tokens == \"a\") and (indices < 2)];\n")
    assert out[2:] == ["     list: l =  [", "\t\t     s-op: s-op",
                       "\t\t     selector: select_same_values(indices)", "\t\t     selector: sel",
                       "\t\t     s-op: s-op", "               ]"]


def test_operators_name_their_result_as_the_original() -> None:
    out = lines('examples off\nv = ["a", "b"];\n'
                'l = [tokens + 1, 1 - indices, 1 < indices, indices ^ 2, -indices, round(indices), '
                'indicator(tokens == "a"), not (tokens == "a"), tokens in v, tokens in ["a"], indices[0], '
                'indices[-1], "a" in tokens, indices if tokens == "a" else 0];\n')
    assert out[1:] == ["     list: l =  [", "\t\t     s-op: ( tokens + 1 )", "\t\t     s-op: ( 1 - indices )",
                       "\t\t     s-op: ( indices > 1 )", "\t\t     s-op: ( indices pow 2 )",
                       "\t\t     s-op: ( - indices )", "\t\t     s-op: ( round indices )",
                       "\t\t     s-op: I(( tokens == a ))", "\t\t     s-op: ( not ( tokens == a ) )",
                       "\t\t     s-op: tokens in v", "\t\t     s-op: tokens in ['a']",
                       "\t\t     s-op: indices[0]", "\t\t     s-op: indices[-1]",
                       "\t\t     s-op: ( s-op > 0 )", "\t\t     s-op: s-op", "               ]"]


def test_assignment_and_calls_rename_the_value_itself() -> None:
    # `b = a` renames the s-op `a` holds; a function returning its argument renames the argument
    out = lines('set example "ab"\ndef same(s) { return s; }\na = indices + 1;\nb = a;\nexamples off\n'
                "l = [same(tokens_int), a, tokens_int, tokens_str];\nexamples on\n[a];\n")
    assert out[5:] == ["     list: l =  [", "\t\t     s-op: same(tokens_int)", "\t\t     s-op: b",
                       "\t\t     s-op: same(tokens_int)", "\t\t     s-op: tokens", "               ]",
                       "     list: out =  [", "\t\t     s-op: b", '\t\t \t Example: b("ab") = [1, 2] (ints)',
                       "                 ]"]


def test_a_function_argument_shows_in_a_call_name_as_the_repl_prints_it() -> None:
    out = lines("examples off\ndef f(a) { return a; }\ndef g(h) { return indices + 1; }\n"
                "[g(f), g(1.5), g(True)];\n")
    assert out[2:] == ["     list: out =  [", "\t\t     s-op: g(console function: f(a))",
                       "\t\t     s-op: g(1.5)", "\t\t     s-op: g(True)", "                 ]"]


def test_set_example_refuses_numbers_that_are_not_finite() -> None:
    """`set example [1e400]` was taken as [inf], which `rasp run --input-json` refuses."""
    out = lines("set example [1e400]\nset example [1, 2]\nindices;\n")
    # the literal 1e400 itself is refused now, where it is written (issue 49)
    assert out[0] == "<repl:1>:1:14: error: the number is past the float range (about 1.8e308)"
    assert out[-1] == " \t Example: indices([1, 2]) = [0, 1] (ints)"


def test_draw_on_an_example_too_long_to_compile_says_so_in_the_repl_s_words(tmp_path, monkeypatch) -> None:
    """The compiler's own error named --max-len and --fixed-length, which the REPL does not have."""
    monkeypatch.chdir(tmp_path)
    out = lines(f'set example "{"a" * 2049}"\nh = selector_width(select(tokens, tokens, ==));\ndraw(h);\n'
                'draw(h, "ab");\n')
    text = "\n".join(out)
    assert "2,049 tokens are more than the compiler takes (2,048)" in text and "--max-len" not in text
    assert ("wrote draw-1.png: compiled over the example's tokens and length, 1 layer, heads per "
            "layer [1]") in out


@pytest.mark.parametrize("line, meant", [
    ("shwo example", "show example"),
    ('set exmple "abc"', 'set example "abc"'),
    ("set s-op exampel [1, 2]", "set s-op example [1, 2]"),
    ("exampels off", "examples off"),
    ("full seq dispaly on", "full seq display on"),
    ("full seq display yes", "full seq display on | off"),
    ("examples maybe", "examples on | off"),
    ("exitt", "exit"),
    ("hlep", "help"),
])
def test_a_mistyped_command_is_named_not_read_as_a_statement_missing_a_semicolon(line: str,
                                                                                meant: str) -> None:
    """`shwo example` said "missing ';' at the end of the statement"; `exitt` and `hlep` waited
    for more lines, then said the same about the next one."""
    out = repl(f"{line}\nshow s-op example\n")
    assert out.splitlines() == [
        f"error: '{line}' is neither a RASP statement nor a REPL command",
        f"  hint: did you mean '{meant}'? ('help' lists the commands)",
        '\ts-op example: "hello"'], out


def test_statements_that_look_like_commands_still_run() -> None:
    out = lines("set = 3;\nexit_code\n= 4;\ndef help(x) { return x; }\nhelp(indices\n);\n")
    assert out[:2] == ["    value: set =  3", "    value: exit_code =  4"]
    assert "error" not in repl("set = 3;\nexit_code\n= 4;\ndef help(x) { return x; }\nhelp(indices\n);\n")


def test_set_example_with_an_unquoted_word_says_to_quote_it() -> None:
    out = repl("set example abc\n")
    assert "unknown name 'abc'" in out and 'hint: for the text itself, quote it: set example "abc"' in out
    out = repl("set example tokns\n")
    assert "did you mean 'tokens'? For the text itself, quote it: set example \"tokns\"" in out


def test_the_example_option_says_it_is_read_as_text(capsys) -> None:
    """`rasp repl --example '[1,2]'` runs on the five characters `[`, `1`, `,`, `2`, `]`, and its
    help said only "the initial running example"."""
    with pytest.raises(SystemExit):
        main(["repl", "--help"])
    assert "as text: its characters are the" in " ".join(capsys.readouterr().out.split())
    out = io.StringIO()
    Repl(example="[1,2]").loop(io.StringIO("tokens;\n"), out)
    assert '"[1,2]") = [[, 1, ,, 2, ]] (strings)' in out.getvalue()


def test_a_byte_order_mark_before_the_first_command_is_ignored(tmp_path: Path, monkeypatch) -> None:
    """A session or loaded file saved with a BOM (Windows editors): its first line's `set example`
    was read as a statement (piped) or skipped without a word (load), as `rasp run` did not."""
    assert lines('\ufeffset example "ab"\nshow s-op example\n') == ['\ts-op example: "ab"']
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bom.rasp").write_text('\ufeffset example "xy"\ny = tokens;\n', encoding="utf-8")
    assert lines('load "bom";\nshow s-op example\n')[-1] == '\ts-op example: "xy"'
