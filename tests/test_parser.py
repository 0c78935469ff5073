"""The grammar: conflict-free LALR, the original's syntax, and the fixes over it."""

import pytest
from lark import Lark, Tree

from rasp_compiler.lang.parser import GRAMMAR_PATH, _terminal_collision_check, grammar, parse_source


@pytest.mark.parametrize("lexer", ["basic", "contextual"])
def test_grammar_is_conflict_free_under_strict(lexer):
    # strict=True refuses shift/reduce conflicts and colliding terminals (needs `interegular`)
    parser = Lark(GRAMMAR_PATH.read_text(), parser="lalr", lexer=lexer, strict=True)
    assert parser.parse("x = 1;")
    assert grammar(strict=True).parse("x = 1;")  # the configuration parse_source uses


def test_the_run_time_grammar_skips_the_collision_check_and_puts_the_flag_back():
    import lark.lexer

    before = lark.lexer.has_interegular
    with _terminal_collision_check(False):
        assert lark.lexer.has_interegular is False
    with _terminal_collision_check(True):
        assert lark.lexer.has_interegular == before  # strict keeps lark's own check
    assert lark.lexer.has_interegular == before
    with pytest.raises(ValueError), _terminal_collision_check(False):
        raise ValueError
    assert lark.lexer.has_interegular == before


def shape(tree):
    """A compact s-expression of the syntax tree, to assert how things group."""
    if not isinstance(tree, Tree):
        return str(tree)
    if tree.data in ("var", "int", "float", "string"):
        return str(tree.children[0])
    if tree.data == "binop":
        left, op, right = tree.children
        return f"({shape(left)} {op} {shape(right)})"
    if tree.data == "unop":
        return f"({tree.children[0]} {shape(tree.children[1])})"
    if tree.data == "ternary":
        a, c, b = tree.children
        return f"({shape(a)} if {shape(c)} else {shape(b)})"
    if tree.data == "contains":
        return f"({shape(tree.children[0])} in {shape(tree.children[1])})"
    return f"{tree.data}[" + " ".join(shape(c) for c in tree.children) + "]"


def expr_shape(text: str) -> str:
    tree = parse_source(text + ";")
    return shape(tree.children[0].children[0].children[0])


@pytest.mark.parametrize("text, expected", [
    ("not a == b", "((not a) == b)"),                     # not binds tighter than ==
    ("a or b and c", "((a or b) and c)"),                 # one shared level, left-assoc
    ("a and b or c", "((a and b) or c)"),
    ("2 ^ 3 ^ 2", "((2 ^ 3) ^ 2)"),                       # ^ is left-associative
    ("a + b % c", "(a + (b % c))"),                       # % tighter than +
    ("a * b % c", "((a * b) % c)"),                       # % looser than *
    ("a % b * c", "(a % (b * c))"),
    ("-a ^ 2", "((- a) ^ 2)"),                            # prefix binds tighter than ^
    ("- a[0]", "(- index[a 0])"),                         # postfix binds tighter than prefix
    ("a if c1 else b if c2 else d", "((a if c1 else b) if c2 else d)"),  # ternaries group left
    ("a == b and c < d", "((a == b) and (c < d))"),
    ("a if c else b in L", "((a if c else b) in L)"),     # `in` is loosest
    ("a if x in L else b", "(a if (x in L) else b)"),     # the condition is a whole expression
    ("a in b in c", "((a in b) in c)"),
    ("a - b - c", "((a - b) - c)"),
    ("a < b < c", "((a < b) < c)"),
    ("a != b", "(a != b)"),
    ("round(x) + 1", "((round x) + 1)"),
    ("not not x", "(not (not x))"),
])
def test_precedence_is_the_originals(text, expected):
    assert expr_shape(text) == expected


def test_statement_forms():
    tree = parse_source("""
        a, b = 1, 2;   c = a;  # several statements on one line, comment
        def f(x, y) { z = x; return z, y; }
        def g() { return 1; }
        for k, v in D { q = k; }
        load "lib";
        e;
    """)
    kinds = [s.data if s.data != "statement" else s.children[0].data for s in tree.children]
    assert kinds == ["assign", "assign", "funcdef", "funcdef", "forloop", "load", "expr_stmt"]


def test_numbers_strings_and_select_with_space():
    shape_of = expr_shape
    assert shape_of(".5") == ".5"
    assert shape_of("1e-3") == "1e-3"
    assert shape_of("2.5E+4") == "2.5E+4"
    assert shape_of('"a\\"b"') == '"a\\"b"'
    assert shape_of("select (a, b, <=)").startswith("select[a b <=")


def test_keywords_do_not_swallow_longer_names():
    # names that start with a keyword are plain names
    tree = parse_source("selector = 1; android = 2; notx = 3; index = 4; format = 5; infix = 6; "
                        "ifx = 7; rounded = 8; indicators = 9; forx = 10; defy = 11;")
    assert len(tree.children) == 11


def test_comprehensions_and_literals():
    assert expr_shape("[x for x in L]").startswith("listcomp[")
    assert expr_shape("{k: 1 for k in L}").startswith("dictcomp[")
    assert expr_shape("{}").startswith("dict[")
    assert expr_shape("[]").startswith("list[")
    assert expr_shape("aggregate(s, t, 0)").startswith("aggregate[")
    assert expr_shape("f(x)(y)[1]").startswith("index[call[call[")


def test_empty_program_parses():
    assert parse_source("# only a comment\n").children == []


def test_a_byte_order_mark_starts_a_file_as_windows_editors_save_it(tmp_path):
    import contextlib
    import io

    from rasp_compiler.cli import main
    from rasp_compiler.interpreter import run
    from rasp_compiler.lang import load_program, program_from_source

    assert run(program_from_source("\ufeffx = indices;\nx;\n"), "ab") == [0, 1]
    path = tmp_path / "bom.rasp"
    path.write_text('\ufeffset example "abc"\nx = indices;\n', encoding="utf-8")
    assert run(load_program(path), "ab") == [0, 1]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["run", str(path)])  # the file's own example, read past the mark
    assert code == 0 and out.getvalue() == "[0, 1, 2] (ints)\n"


def test_statements_after_set_example_on_its_line_are_kept():
    from rasp_compiler.interpreter import run
    from rasp_compiler.lang import program_from_source
    from rasp_compiler.lang.repl_commands import blank_repl_commands, file_example

    text = 'set example "a;b"; x = indices; # c\ny = x + 1;\n'
    blanked = blank_repl_commands(text).splitlines()
    assert blanked[0] == " " * 19 + "x = indices; # c"   # same columns as in the file
    assert file_example(text) == '"a;b"'
    assert run(program_from_source(text), "ab") == [1, 2]
    # an example over two lines, then a statement after its ';'
    text = "set example [1,\n 2]; z = indices;\n"
    assert blank_repl_commands(text).splitlines()[1] == " " * 5 + "z = indices;"
    assert run(program_from_source(text), "abc") == [0, 1, 2]


def test_the_repl_runs_statements_after_set_example_on_its_line():
    import io

    from rasp_compiler.commands.repl import Repl

    out = io.StringIO()
    Repl().loop(io.StringIO('set example "ab"; x = indices;\nset example "abc"; y = x +\n 1;\n'), out)
    assert out.getvalue().splitlines() == ["     s-op: x", ' \t Example: x("ab") = [0, 1] (ints)',
                                           "     s-op: y", ' \t Example: y("abc") = [1, 2, 3] (ints)']


def test_names_given_in_a_long_loop_keep_their_order_and_suffixes() -> None:
    """Each new binding of x took x_2, x_3, … scanned from the start (quadratic: 20,000 bindings
    took 27 s); the suffixes must still be x, x_2, x_3, … in binding order."""
    from rasp_compiler.lang import program_from_source

    program = program_from_source("x = tokens_int;\nfor i in range(6) { x = x + 1; }\nx;\n")
    ids = [node.id for node in program.nodes() if node.name == "x"]
    assert ids == ["x_2", "x_3", "x_4", "x_5", "x_6", "x"]  # the binding in force keeps the bare name
