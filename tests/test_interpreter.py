"""Elaboration + interpretation against hand-worked cases and the original REPL's recorded outputs
(tech-srl/RASP tests/ and .github/workflows/tests/ in/tgt pairs, where they apply to files)."""

from pathlib import Path

import numpy as np
import pytest

from rasp_compiler.errors import InputError, RaspError
from rasp_compiler.graph import Aggregate, Length, Map, Select, SelectorWidth, SequenceMap, Tokens
from rasp_compiler.interpreter import evaluate, run
from rasp_compiler.lang import program_from_source


def value(src: str, inputs="hello", output=None):
    return run(program_from_source(src), inputs, output)


# ---------------------------------------------------------------- original REPL recordings
def test_simple_sequences_from_the_original():
    # .github/workflows/tests: simple_sequences_no_errors
    assert value("indices;") == [0, 1, 2, 3, 4]
    assert value("length;") == [5] * 5
    assert value("tokens;") == list("hello")
    assert value("indices+1;") == [1, 2, 3, 4, 5]
    assert value("indices*3;") == [0, 3, 6, 9, 12]
    assert value("tokens=tokens_int; tokens*indices;", [4, 7, 10]) == [0, 7, 20]
    assert value("tokens=tokens_int; tokens[0];", [4, 7, 10]) == [4, 4, 4]
    assert value("selector_width(select(tokens,tokens,==));", "hello there") == [
        2, 3, 2, 2, 1, 1, 1, 2, 3, 1, 3]
    assert value('"a" if indices%2==1 else tokens;', "hello there") == list("halaoataeae")


def test_indexing_from_the_original():
    # tests/in/indexing.txt on example "12345"
    d = 'd = {"1":1, "2":2, "3":3, "4":5, "5":4};'
    assert value(d + "d[tokens];", "12345") == [1, 2, 3, 5, 4]
    a = 'a="qwertyuioplkjhgfdsazxcvbnm";'
    assert value(a + "a[indices];", "12345") == list("qwert")
    assert value(a + "a[indices*3];", "12345") == list("qrupj")
    assert value("tokens[4];", "12345") == ["5"] * 5
    assert value("b = [5,8,2,9,4,7,5]; b[indices];", "12345") == [5, 8, 2, 9, 4]
    with pytest.raises(RaspError, match="key 0 is not in the dict"):
        value(d + "d[indices];", "12345")
    with pytest.raises(RaspError, match="key 4 is not in the dict"):
        program_from_source(d + "d[4];")
    with pytest.raises(RaspError, match="indexed only by an int"):
        program_from_source("tokens[indices];")


def test_forloop_from_the_original():
    # tests/in/forloop.txt: a=3; for i in range(4) { a = a+i; } a;  -> 9
    src = "a=3;\nfor i in range(4) {\n\ta = a+i;\n}\nb = indices + a;\nb;"
    assert value(src) == [9, 10, 11, 12, 13]


PAPER = (Path(__file__).parent / "data" / "paper_examples.rasp").read_text(encoding="utf-8")


@pytest.mark.parametrize("name, text, expected", [
    # tests/tgt/paper_examples.txt (the original's recorded outputs)
    ("hist_bos", "§hiya how are you doing there ey",
     [0, 3, 2, 3, 2, 6, 3, 3, 1, 6, 2, 2, 4, 6, 3, 3, 1, 6, 1, 3, 2, 1, 1, 6, 1, 3, 4, 2, 4, 6, 4, 3]),
    ("hist_nobos", "hiya howdy doodly doo", [2, 1, 3, 1, 3, 2, 5, 1, 4, 3, 3, 4, 5, 5, 4, 1, 3, 3, 4, 5, 5]),
    ("sort_bos", "§dfgfhfghDVSHRDFHdfsfsfegDGDFHDFG", list("§DDDDDFFFGGHHHRSVddeffffffggghhss")),
    ("hist2_bos", "§dkdnvdlvnksmncksnsknvkjns",
     [0, 2, 1, 2, 1, 2, 2, 4, 2, 1, 1, 1, 4, 1, 4, 1, 1, 1, 1, 1, 1, 2, 1, 4, 1, 1]),
    ("sort_by_most_freq", "§dnv,dmnvs,alaadslksmvxlmvlskd", list("§dvslman,kx") + ["§"] * 19),
    ("dyck1_ptf", "()(()())(((())(()(()))))((())((()()))(()))))(())((",
     list("PTPPPPPTPPPPPPPPPPPPPPPTPPPPPPPPPPPPPPPPPTFFFFFFFF")),
    # (The recorded dyck2 output is left out: at position 24 this listing computes
    # 25 * (14 / 25) = 14.000000000000002 in floats, with the original's own mean, so a later
    # float equality fails. The recording was made with a later version of the listing, which
    # rounds n_opens and n_closes; the original run live on this version fails there too.)
    ("dyck3_ptf", "()[](){{}(){}[]}[[]]([]){}()(])[[]]{{}}()[]",
     list("PTPTPTPPPPPPPPPTPPPTPPPTPTPTPFFFFFFFFFFFFFF")),
])
def test_paper_examples_match_the_original(name, text, expected):
    program = program_from_source(PAPER, output=name)
    got = run(program, text)
    if name in ("hist_bos", "hist2_bos"):
        # 1/x - 1 in floats, which the original prints as floats too on this version of the listing;
        # the recording's later version wraps them in round(...)
        got = [round(v) for v in got]
    assert got == expected


def test_private_names_are_not_outputs():
    program = program_from_source(PAPER, output="reverse")
    assert "reverse" in program.names and "_flip_s" in program.names  # same file: visible
    assert run(program, "abc", "reverse") == ["c", "b", "a"]


# ---------------------------------------------------------------- core semantics
def test_select_orientation_is_key_op_query():
    program = program_from_source("s = select(indices, indices, <); x = selector_width(s); x;")
    values = evaluate(program, "abcd")
    sel = values[program.names["s"]]
    # sel[q][k] = keys[k] < queries[q]: query 2 selects keys 0 and 1
    assert sel[2].tolist() == [True, True, False, False]
    assert values[program.output] == [0, 1, 2, 3]
    assert value("selector_width(select(indices, 0, ==));", "abc") == [1, 1, 1]
    assert value("selector_width(select(tokens, \"l\", ==));") == [2] * 5


def test_aggregate_default_single_and_mean():
    assert value("aggregate(select(indices, indices - 1, ==), tokens, \"_\");") == list("_hell")
    assert value("aggregate(select(indices, indices - 1, ==), indices);") == [0, 0, 1, 2, 3]
    # several keys: the mean, a float
    assert value("aggregate(select(indices, indices, <=), indices);", "abcd") == [0, 0.5, 1.0, 1.5]
    # single selected value keeps its type
    assert value("aggregate(select(indices, 0, ==), tokens);") == ["h"] * 5


def test_mean_of_non_numbers_is_an_error_naming_the_line():
    program = program_from_source("x = 1;\ny = aggregate(select(indices, indices, <=), tokens);\ny;",
                                  "p.rasp")
    with pytest.raises(RaspError, match="mean of non-numbers") as info:
        run(program, "hello")
    assert info.value.line == 2
    # booleans are not averaged either (as in the original); indicator makes them numbers
    with pytest.raises(RaspError, match="booleans"):
        value("aggregate(select(indices, indices, <=), tokens == \"l\");")
    assert value("aggregate(select(indices, indices, <=), indicator(tokens == \"l\"));", "al") == [0, 0.5]


def test_selector_combinations():
    src = 'a = select(indices, indices, <=); b = select(indices, indices, >=);'
    assert value(src + "selector_width(a and b);") == [1] * 5
    assert value(src + "selector_width(a or b);") == [5] * 5
    assert value(src + "selector_width(not a);") == [4, 3, 2, 1, 0]
    with pytest.raises(RaspError, match="selector"):
        program_from_source(src + "x = a and indices;")


def test_operator_semantics_follow_the_original():
    assert value("indices / 2;", "abc") == [0.0, 0.5, 1.0]              # true division on ints
    assert value("(indices - 2) % 3;", "abcd") == [1, 2, 0, 1]          # Python modulo
    assert value("indices ^ 2;", "abc") == [0, 1, 4]
    assert value("round(indices / 2 + 0.5);", "abcd") == [0, 1, 2, 2]   # ties to even, as Python
    assert value("indices and 1;", "ab") == [False, True]               # booleans, not operands
    assert value("not tokens == \"h\";", "hi") == [False, False]        # (not tokens) == "h"
    assert value("tokens != \"h\";", "hi") == [False, True]             # != elementwise (a fix)
    assert value("indicator(tokens == \"i\");", "hi") == [0, 1]
    assert value("x = 2^3^2; indices + x;", "a") == [64]
    assert value("indices + .5;", "ab") == [0.5, 1.5]
    assert value("indices * 1e-3;", "ab") == [0.0, 0.001]
    assert value('tokens + "\\n";', "a") == ["a\n"]


def test_ternary_elementwise_and_lazy():
    assert value('"x" if indices == 1 else tokens;', "abc") == ["a", "x", "c"]
    # an atom condition is lazy: the recursion stops at n == 0
    src = "def f(n) { return indices if n == 0 else f(n - 1) + 1; } f(3);"
    assert value(src, "ab") == [3, 4]


def test_membership():
    assert value('tokens in ["a", "b"];', "abc") == [True, True, False]
    assert value('"b" in tokens;', "abc") == [True] * 3
    assert value('"z" in tokens;', "abc") == [False] * 3
    assert value('x = 2 in [1, 2]; y = "el" in "hello"; indices + indicator(x and y);', "a") == [1]


def test_sop_element_broadcast():
    assert value("tokens[1];", "abc") == ["b"] * 3
    assert value("tokens[-1];", "abc") == ["c"] * 3
    assert value("tokens[5];", "abc") == [0] * 3  # nothing selected: the default


def test_functions_closures_multiple_returns_and_loops():
    src = '''
    def make_shift(n) {
        def shift_by(seq) { return aggregate(select(indices, indices - n, ==), seq, "_"); }
        return shift_by;
    }
    s2 = make_shift(2);
    def two(a) { return a, a + 1; }
    p, q = two(indices);
    total = 0;
    for k, v in {"a": 1, "b": 2} { total = total + v; }
    keys = [k for k in {"x": 1, "y": 2}];
    r = s2(tokens);
    out_q = q + total + len(keys);
    '''
    program = program_from_source(src + "r;")
    assert run(program, "hello") == list("__hel")
    assert run(program, "ab", "out_q") == [6, 7]


def test_library_names_and_shadowing():
    assert value("sort(tokens, tokens);", "banana") == list("aaabnn")
    assert value("count(tokens, \"a\");", "banana") == [3] * 6
    assert value("shift(tokens, 1, \"_\");", "abc") == list("_ab")
    assert value("mark_first_instance(tokens, \"a\");", "banana") == [False, True, False, False, False, False]
    assert value("mark_last_instance(tokens, \"a\");", "banana") == [False] * 5 + [True]
    assert value("aggregate(select_from_first(tokens, \"n\"), indices);", "banana") == [2] * 6
    assert value("aggregate(select_from_last(tokens, \"n\"), indices);", "banana") == [4] * 6
    assert value("max(indices, 2);", "abcd") == [2, 2, 2, 3]
    assert value("min(indices, 2);", "abcd") == [0, 1, 2, 2]
    assert value("x = tokens_int; average(x);", [1, 2, 3]) == [2.0] * 3
    assert value("load_from_location(tokens, 2);", "abc") == ["c"] * 3
    assert value("has_focus(select(tokens, \"a\", ==));", "ab") == [True, True]
    assert value("has_focus(select(tokens, \"z\", ==));", "ab") == [False, False]
    assert value("contains(tokens, \"b\");", "ab") == [True, True]
    assert value("selector_width(select_next_identical(tokens));", "abab") == [1, 1, 0, 0]
    assert value("length;", "abc") == [3, 3, 3]
    # a program may define its own `max` / `length` (the original reserved them)
    assert value("def max(a, b) { return a + b; } max(indices, 10);", "ab") == [10, 11]
    assert value("length = 7; indices + length;", "ab") == [7, 8]


def test_sort_breaks_ties_by_position():
    src = "tokens = tokens_int; sort(indices, tokens);"
    assert value(src, [3, 1, 3, 1]) == [1, 3, 0, 2]


def test_graph_node_kinds_ids_and_positions():
    src = ("x = tokens + 1;\nh = selector_width(select(tokens, tokens, ==));\n"
           "r = aggregate(select(indices, length - indices - 1, ==), tokens);\nr;")
    program = program_from_source(src, "prog.rasp")
    assert program.output == "r" and program.names["out"] == "r"
    assert isinstance(program.node("x"), Map)
    assert isinstance(program.node("h"), SelectorWidth)
    assert isinstance(program.node("r"), Aggregate)
    assert isinstance(program.node("tokens"), Tokens)
    assert any(isinstance(n, Length) for n in program.nodes())
    assert any(isinstance(n, SequenceMap) for n in program.nodes())
    sel = program.node(program.node("r").inputs[0])
    assert isinstance(sel, Select) and sel.op == "=="
    assert program.node("x").pos.line == 1 and program.node("x").pos.text == "tokens + 1"
    assert program.node("r").pos.line == 3
    # library values the program never uses are not in the graph
    assert "full_s" not in program.graph
    # ids are deterministic
    again = program_from_source(src, "prog.rasp")
    assert sorted(program.graph.nodes) == sorted(again.graph.nodes)


def test_encoding_annotations():
    program = program_from_source("x = numerical(indices + 1); y = categorical(tokens); x;")
    assert program.node("x").encoding == "numerical"
    assert program.node(program.names["y"]).encoding == "categorical"  # the tokens node itself


def test_input_conversion():
    program = program_from_source("tokens_int + 1;")
    assert run(program, ["1", 2, 3.0]) == [2, 3, 4]
    with pytest.raises(InputError, match="position 1"):
        run(program, ["1", "x"])
    assert value("tokens_bool;", [0, 1]) == [False, True]
    assert value("tokens_float;", [1, "2.5"]) == [1.0, 2.5]
    with pytest.raises(InputError, match="empty"):
        run(program, [])


def test_numeric_select_is_vectorised_and_matches_python_at_512():
    program = program_from_source("tokens = tokens_int; sort(tokens, tokens);")
    rng = np.random.default_rng(0)
    data = [int(v) for v in rng.integers(0, 50, 512)]
    assert run(program, data) == sorted(data)


def test_mixed_type_comparisons():
    # a string never equals a number: nothing selected
    assert value("x = selector_width(select(tokens, 1, ==)); x;", "ab") == [0, 0]
    with pytest.raises(RaspError, match="cannot apply '<'"):
        value("selector_width(select(tokens, 1, <));", "ab")
    with pytest.raises(RaspError, match="cannot apply '\\+'"):
        value("tokens + 1;", "ab")


def test_apply_sop_to_concrete_input():
    src = ('reverse = aggregate(select(indices, length - indices - 1, ==), tokens); x = reverse("abc"); '
           'y = indices + len(x); y;')
    assert value(src, "ab") == [3, 4]


def test_load_scoping_follows_the_original(tmp_path):
    # tests/rasps/loadA / loadB: a loaded file sees the library but not its loader's names;
    # it exports its public names (also those it loaded itself), never `_private` ones or `out`.
    from rasp_compiler.lang import load_program

    (tmp_path / "b.rasp").write_text("b = 7;\n_b = 8;\nbb = indices + b;\nindices;\n")
    (tmp_path / "a.rasp").write_text('a = 3;\nload "b";\nc = b;\n_a = 4;\ne = _a;\naa = bb + c;\n')
    main = tmp_path / "main.rasp"
    main.write_text('load "a";\nx = aa + a + e;\nx;\n')
    assert run(load_program(main), "ab") == [7 + 7 + 3 + 4, 8 + 7 + 3 + 4]
    (tmp_path / "c.rasp").write_text("g = f;\n")  # f is the loader's: not visible here
    main.write_text('f = 10;\nload "c";\nindices;\n')
    with pytest.raises(RaspError, match="unknown name 'f'"):
        load_program(main)
    main.write_text('load "a";\n_b;\n')
    with pytest.raises(RaspError, match="unknown name '_b'"):
        load_program(main)
    main.write_text('load "b";\nout;\n')  # the loaded file's `out` stays there
    with pytest.raises(RaspError, match="unknown name 'out'"):
        load_program(main)


def test_api_doc_example_prints_what_the_doc_shows(monkeypatch):
    import contextlib
    import io
    import re
    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    doc = (root / "docs" / "api.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```\n\n```\n(.*?)```", doc, re.S)
    script = (root / "docs" / "api_example.py").read_text()
    assert blocks and blocks[0][0].strip() in script
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(script, "api_example.py", "exec"), {"__name__": "__main__"})  # noqa: S102
    assert out.getvalue() == blocks[0][1]


def test_numerical_aggregate_averages_booleans_as_in_tracr():
    src = 'x = numerical(aggregate(select(indices, indices, <=), tokens == "a")); x;'
    assert value(src, "aba") == [True, 0.5, 2 / 3]


def test_bindings_stay_constant():
    # tests/in/stay_constant.txt: rebinding a name does not change values bound from it earlier
    program = program_from_source("a = 4; b = a; a = 3; c = indices + a + b;\n"
                                  "a = indices; b = a; a = a + 1; a; ")
    assert run(program, "xy", "b") == [0, 1]
    assert run(program, "xy", "a") == [1, 2]
    assert run(program, "xy", "c") == [7, 8]
    # the current value of a name is named after it; built-in nodes keep their own names
    assert program.names["a"] == "a" and program.names["b"] == "indices"
    program = program_from_source('a = tokens + "x"; a = a + "y"; b = a; a;')
    assert sorted(program.graph.nodes) == ["a", "a_2", "tokens"] and program.names["b"] == "a"


def test_an_input_whose_selections_cannot_fit_in_memory_is_refused(monkeypatch):
    """Found by fuzzing: `rasp run` on 100,000 tokens swapped for minutes (n² per selection)."""
    import rasp_compiler.interpreter as interpreter

    program = program_from_source("selector_width(select(tokens, tokens, ==));")
    monkeypatch.setattr(interpreter, "available_memory", lambda: 2**20)  # 1 MiB free
    with pytest.raises(InputError, match=r"an input of 5,000 tokens needs about 0\.1 GiB"):
        run(program, "a" * 5000)
    assert run(program, "a" * 100) == [100] * 100  # short inputs are never checked
    monkeypatch.setattr(interpreter, "available_memory", lambda: None)  # unknown: not refused
    assert run(program, "ab" * 2500)[:2] == [2500, 2500]


def test_string_selections_and_means_take_one_byte_a_pair(monkeypatch):
    """sort on 40,000 tokens ended in "out of memory": a selection of strings compared object
    arrays (an n x n array of Python bools first, 8 bytes a pair) and a mean turned the whole
    selection into float64.  Both now stay near the n x n bools."""
    import tracemalloc

    from rasp_compiler.graph import semantics
    from rasp_compiler.interpreter import _select

    rng = np.random.default_rng(0)
    n = 2000
    words = [str(w) for w in rng.choice(["b", "a", "ab", "", "é", "B"], n)]
    for op in ("==", "!=", "<", ">", "<=", ">="):
        tracemalloc.start()
        got = _select(op, words, words)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 2.5 * n * n, (op, peak)  # object arrays: over 8 n² bytes
        k = np.array(words, dtype=object)
        assert np.array_equal(got, np.asarray(interpreter_compare(op, k[None, :], k[:, None]), dtype=bool))
    rows = rng.random((n, n)) < 0.5
    values = [int(v) for v in rng.integers(-5, 6, n)]
    tracemalloc.start()
    means = semantics.exact_means(values, rows)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 3 * n * n, peak  # rows.astype(float64) alone is 8 n² bytes
    want = [float(sum(v for v, s in zip(values, row, strict=True) if s)) / int(row.sum())
            for row in rows[:50]]
    assert means[:50] == want


def interpreter_compare(op, a, b):
    import operator

    return {"==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt,
            "<=": operator.le, ">=": operator.ge}[op](a, b)


def test_available_memory_is_at_most_what_an_address_space_cap_leaves(monkeypatch):
    """Under `ulimit -v 8500000` the size guards were told of the machine's 19 GB free, let a
    verify batch of 27 inputs through, and the run died in "out of memory"."""
    import resource

    from rasp_compiler import memory

    uncapped = memory.available_memory()
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY,) * 2)
    assert memory.available_memory() == uncapped or abs(memory.available_memory() - uncapped) < 2**30
    with open("/proc/self/status", encoding="ascii") as fh:
        used = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
    monkeypatch.setattr(resource, "getrlimit", lambda which: (used + 2**30, resource.RLIM_INFINITY))
    assert 0 < memory.available_memory() <= 2**30
    monkeypatch.setattr(resource, "getrlimit", lambda which: (used // 2, resource.RLIM_INFINITY))
    assert memory.available_memory() == 0  # already past its cap: nothing left


def test_evaluate_takes_one_target_and_names_and_names_an_unknown_one():
    """Audit: targets="reverse" and targets=["nope"] raised NetworkXError."""
    from rasp_compiler.errors import UserError

    program = program_from_source("flip = select(indices, length - indices - 1, ==);\n"
                                  "reverse = aggregate(flip, tokens); reverse;")
    assert evaluate(program, "abc", targets="reverse")["reverse"] == ["c", "b", "a"]
    values = evaluate(program, "abc", targets=["out"])  # a name: its value under the name too
    assert values["out"] == values["reverse"] == ["c", "b", "a"]
    for bad in (["nope"], "nope", ["revers"]):
        with pytest.raises(UserError, match=r"no s-op or selector named '(nope|revers)' "
                                            r"\(names: flip, out, reverse\)") as info:
            evaluate(program, "abc", targets=bad)
    assert "did you mean 'reverse'" in str(info.value)


def test_program_node_and_with_output_name_the_names_a_program_has():
    """Audit: program.node("nope") and program.with_output("nope") raised a bare KeyError."""
    from rasp_compiler.errors import UserError

    program = program_from_source("a = tokens + \"x\"; b = indices + 1; a;")
    assert program.node("out") is program.node("a")  # a name as well as a node id
    assert program.with_output("b").output == "b"
    for call in (program.node, program.with_output):
        with pytest.raises(UserError, match=r"no s-op or selector named 'nope' \(names: a, b, out\)"):
            call("nope")
        with pytest.raises(KeyError):  # what both raised before, for code that catches it
            call("nope")
    many = program_from_source("".join(f"v{i} = indices + {i};" for i in range(20)))
    with pytest.raises(UserError, match=r"\(names: out, v0, v1, v10, .*, … \(21 in all\)\)") as info:
        many.node("nope")
    assert info.value.hint == "program.names lists every name"
