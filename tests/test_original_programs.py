"""Programs written for the original RASP REPL (tech-srl/RASP), compiled: aggregates with the same
attention pattern share one head (``schedule.shared_heads``), a hand-made BOS selector stays small
(``Lowering._narrowed``), and program files may hold the REPL's commands (``lang.repl_commands``)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rasp_compiler.compiler import compile_program
from rasp_compiler.compiler.checking import check_model, edge_inputs, exhaustive_inputs, random_inputs
from rasp_compiler.errors import RaspError
from rasp_compiler.interpreter import run
from rasp_compiler.lang import load_program, program_from_source
from rasp_compiler.viz import draw_plan, place_nodes

# The original paper's Dyck programs (tech-srl/RASP paper_examples.rasp, as published): the counts
# of openers and closers are two means over one selector.
PAPER_DYCK = (Path(__file__).parent / "data" / "paper_examples.rasp").read_text(encoding="utf-8")


def _shared(model) -> list[dict]:
    return [h for lp in model.plan for h in lp["heads"] if "nodes" in h]


def test_paper_dyck1_is_two_layers_one_head_and_exact() -> None:
    program = program_from_source(PAPER_DYCK, "paper.rasp", output="dyck1_ptf")
    model = compile_program(program, list("()"), 8)
    assert model.n_layers == 2 and model.heads_per_layer == [1, 1]
    (head,) = _shared(model)
    assert len(head["nodes"]) == 2 and len(head["sources"]) == 2
    lines = [n for n, text in enumerate(PAPER_DYCK.splitlines(), 1)
             if "aggregate(up_to_self,indicator(tokens_str" in text]
    assert sorted(int(src.rsplit(":", 1)[1]) for src in head["sources"]) == lines  # the two means' lines
    res = check_model(model, program, exhaustive_inputs(list("()"), 8))
    assert res.ok and res.inputs_checked == 510, res.failures[:1]
    # both nodes are drawn in the head that computes them
    place = place_nodes(program, model.plan)
    assert {place[n].unit for n in head["nodes"]} == {"L0 head 0"}
    assert f"paper.rasp:{lines[0]}, {lines[1]}" in model.summary()


@pytest.mark.parametrize("name,vocab", [("dyck1_ptf", "()"), ("dyck2_ptf", "(){}")])
def test_priority_output_is_chosen_where_cheaper_than_the_fused_table(name: str, vocab: str) -> None:
    """At max_len 8 the last line's fused table fits one MLP, but its two priority parts (override
    score for F, one-hot of T/P) need fewer hidden units for the same layers."""
    from rasp_compiler.compiler.analysis import Analysis
    from rasp_compiler.compiler.lowering import Lowering
    from rasp_compiler.compiler.rewrites import rewritten

    program = program_from_source(PAPER_DYCK, "paper.rasp", output=name)
    model = compile_program(program, list(vocab), 8)
    (last,) = [op for op in model.plan[-1]["mlp"]["ops"] if op["node"] == name]
    assert last["kind"] == "priority"
    # the one table it replaced, counted by the lowering itself on the program the compiler lowers
    low = Lowering(Analysis(rewritten(program, 8), list(vocab), 8))
    front = low.frontier(name)
    assert last["units"][1] - last["units"][0] < low._units(front, low._rows(name, front), False)
    res = check_model(model, program, exhaustive_inputs(list(vocab), 6 if len(vocab) > 2 else 8))
    assert res.ok, res.failures[:1]


def test_plan_picture_of_one_program_in_a_file_of_many(tmp_path) -> None:
    """paper_examples.rasp defines seven programs: the picture of one holds only its own nodes
    (as compiled: its two `indices + 1` are one node)."""
    import networkx as nx

    from rasp_compiler.compiler.rewrites import shared_subexpressions

    program = program_from_source(PAPER_DYCK, "paper.rasp", output="dyck1_ptf")
    model = compile_program(program, list("()"), 8)
    pic = draw_plan(program, model.plan, str(tmp_path / "plan.png"))
    merged = shared_subexpressions(program).graph
    wanted = nx.ancestors(merged, "dyck1_ptf") | {"dyck1_ptf"}
    assert set(pic.labels) == wanted and "reverse" in program.graph
    assert len(nx.ancestors(program.graph, "dyck1_ptf")) == len(nx.ancestors(merged, "dyck1_ptf")) + 1
    assert pic.size_px[1] < 2000


@pytest.mark.parametrize("max_len", [12, 24])
def test_paper_dyck2_needs_no_more_than_the_original_analysis(max_len: int) -> None:
    """The original's own comment: 'this function creates dyck2 with 4 layers and 2 heads'.  At
    max_len 16 and more its `delay_closer` reads more than 6,000 joint assignments of two means,
    the index and the token: fused anyway (``MULTI_NUMERIC_LAST_CAP``), it keeps 4 layers."""
    program = program_from_source(PAPER_DYCK, "paper.rasp", output="dyck2_ptf")
    vocab = list("(){}")
    model = compile_program(program, vocab, max_len)
    assert model.n_layers <= 4 and max(model.heads_per_layer) <= 2, model.config["critical_path"]
    inputs = random_inputs(vocab, max_len, 200, seed=5) + edge_inputs(vocab, max_len)
    res = check_model(model, program, inputs)
    assert res.ok, res.failures[:1]


def _inexact_prefix_inputs(vocab: list[str], max_len: int, per_pair: int, seed: int) -> list[list[str]]:
    """Inputs whose prefix of some length n holds k openers (or k closers) where
    (n * (k / n)) != k in float64, so that the paper's `depth` is not a whole number there."""
    rng = random.Random(seed)
    out = []
    for n in range(1, max_len + 1):
        for k in range(n + 1):
            if n * (k / n) == k:
                continue
            for t in range(per_pair):
                side, other = (vocab[0::2], vocab[1::2]) if t % 2 == 0 else (vocab[1::2], vocab[0::2])
                head = [rng.choice(side) for _ in range(k)] + [rng.choice(other) for _ in range(n - k)]
                rng.shuffle(head)
                out.append(head + [rng.choice(vocab) for _ in range(rng.randint(0, max_len - n))])
    return out


def test_paper_dyck2_at_40_steps_along_the_difference_of_its_means() -> None:
    """`delay_closer` reads two prefix means, the index and the token.  At a position where
    (i + 1) * (k / (i + 1)) is not k it is not a function of m1 - m2: its step MLP orders that
    position's grid of points by m1 - m2, then by m1 (``numeric.projection``), not one step pair
    per point by mixed radix; the other positions share their steps along m1 - m2
    (``numeric.shared_projected_steps``).  Layer 0's MLP: 36,140 hidden units (34.6M parameters)
    before, 11,094 (11.9M) with the first, 7,134 (8.1M) with both."""
    program = program_from_source(PAPER_DYCK, "paper.rasp", output="dyck2_ptf")
    vocab = list("(){}")
    model = compile_program(program, vocab, 40)
    assert model.n_layers == 4 and model.heads_per_layer == [1, 1, 1, 1]
    assert model.params < 9_000_000, model.params
    inputs = _inexact_prefix_inputs(vocab, 40, 4, seed=3)
    # the inputs reach the float artefacts the program compares with ==
    depths = [run(program, x, "dyckk_ptf.depth") for x in inputs[:40]]
    assert any(d != round(d) for ds in depths for d in ds)
    res = check_model(model, program, inputs + random_inputs(vocab, 40, 100, seed=6))
    assert res.ok, res.failures[:1]


def test_a_map_past_the_domain_cap_that_costs_a_layer_is_tabulated_in_a_second_plan(monkeypatch) -> None:
    """At max_len 64 the paper's `delay_closer` has 374,656 joint assignments, past DOMAIN_CAP: it
    became opaque and took an MLP layer of its own.  The same happens at max_len 12 under a cap of
    3,000 (its table has 3,272 rows); the second plan, with joint domains up to WIDE_DOMAIN_CAP,
    fuses it into layer 0's MLP and is kept for its fewer layers."""
    from rasp_compiler.compiler.analysis import limits

    program = program_from_source(PAPER_DYCK, "paper.rasp", output="dyck2_ptf")
    vocab = list("(){}")
    monkeypatch.setattr(limits, "DOMAIN_CAP", 3_000)
    monkeypatch.setattr(limits, "WIDE_DOMAIN_CAP", 0)  # no second plan
    first = compile_program(program, vocab, 12)
    assert first.n_layers == 5 and first.heads_per_layer[1] == 0
    (own,) = first.plan[1]["mlp"]["ops"]
    assert own["node"] == "dyckk_ptf.delay_closer"  # the layer the opaque map costs
    assert first.config["notes"] == []  # the analysis's markers ("independent") are not notes
    monkeypatch.setattr(limits, "WIDE_DOMAIN_CAP", 12_000)
    model = compile_program(program, vocab, 12)
    assert model.n_layers == 4 and model.heads_per_layer == [1, 1, 1, 1]
    assert "dyckk_ptf.delay_closer" in [op["node"] for op in model.plan[0]["mlp"]["ops"]]
    res = check_model(model, program, _inexact_prefix_inputs(vocab, 12, 4, seed=1)
                      + random_inputs(vocab, 12, 200, seed=2) + edge_inputs(vocab, 12))
    assert res.ok, res.failures[:1]
    # below the wide cap's reach (3,272 rows > 3,000) the first plan stands
    monkeypatch.setattr(limits, "WIDE_DOMAIN_CAP", 3_200)
    assert compile_program(program, vocab, 12).n_layers == 5


def test_where_a_smaller_deferred_map_costs_a_layer_only_the_larger_are_deferred(monkeypatch) -> None:
    """Past limits.DEFER_FROM joint assignments a map is kept opaque in the first plan.  At max_len
    12 under a threshold of 1,000 the paper's `delay_closer` (3,272 rows) and two larger maps are;
    opaque, `delay_closer` costs a fifth layer that the four heads do not need, so the compiler
    defers only the two larger ones: 4 layers, and fewer parameters than with every map tabulated."""
    from rasp_compiler.compiler import compile_weights
    from rasp_compiler.compiler.analysis import Analysis, limits

    program = program_from_source(PAPER_DYCK, "paper.rasp", output="dyck2_ptf")
    vocab = list("(){}")
    monkeypatch.setattr(limits, "DEFER_FROM", None)
    plain = compile_weights(program, vocab, 12)
    monkeypatch.setattr(limits, "DEFER_FROM", 1_000)
    first = Analysis(program, vocab, 12, defer_from=1_000).deferred
    assert sorted(sid for sid, _ in first) == ["dyck2_ptf", "dyckk_ptf.delay_closer", "sequence_map_3"]
    model = compile_weights(program, vocab, 12)
    assert sorted(sid for sid, _ in model.analysis.deferred) == ["dyck2_ptf", "sequence_map_3"]
    assert model.config["n_layers"] == plain.config["n_layers"] == 4
    assert model.params < plain.params, (model.params, plain.params)
    inputs = _inexact_prefix_inputs(vocab, 12, 1, seed=4) + random_inputs(vocab, 12, 300, seed=7)
    res = check_model(model.model(), program, inputs + edge_inputs(vocab, 12))
    assert res.ok, res.failures[:1]


@pytest.mark.slow
def test_paper_dyck2_at_64_keeps_the_original_four_layers() -> None:
    """The real size: 374,656 rows, a 42,118-unit layer-0 MLP, about 15 s of compile."""
    program = program_from_source(PAPER_DYCK, "paper.rasp", output="dyck2_ptf")
    vocab = list("(){}")
    model = compile_program(program, vocab, 64)
    assert model.n_layers == 4 and model.heads_per_layer == [1, 1, 1, 1], model.config["critical_path"]
    inputs = _inexact_prefix_inputs(vocab, 64, 1, seed=4) + random_inputs(vocab, 64, 100, seed=7)
    res = check_model(model, program, inputs + edge_inputs(vocab, 64))
    assert res.ok, res.failures[:1]


def test_categorical_and_numerical_aggregates_share_a_hard_head() -> None:
    """A categorical copy and a numerical copy through one at-most-one selector: one head whose
    value/output circuit writes a one-hot and a number."""
    src = '''prev = select(indices, indices - 1, ==);
a = aggregate(prev, tokens, "z");
b = numerical(aggregate(prev, indicator(tokens == "a"), 0));
out_ = a + "" if b == 1 else "n";
out_;'''
    program = program_from_source(src)
    model = compile_program(program, list("abc"), 6)
    (head,) = _shared(model)
    assert sorted(head["nodes"]) == ["a", "b"]
    assert model.heads_per_layer[0] == 1
    res = check_model(model, program, exhaustive_inputs(list("abc"), 6))
    assert res.ok, res.failures[:1]


def test_different_patterns_keep_their_own_heads() -> None:
    src = '''a = numerical(aggregate(select(indices, indices, <=), indicator(tokens == "a"), 0));
b = numerical(aggregate(select(indices, indices, >=), indicator(tokens == "a"), 0));
a + b;'''
    program = program_from_source(src)
    model = compile_program(program, list("ab"), 6)
    assert model.heads_per_layer == [2] and not _shared(model)
    res = check_model(model, program, exhaustive_inputs(list("ab"), 6))
    assert res.ok and res.max_abs_error < 1e-4, (res.failures[:1], res.max_abs_error)


@pytest.mark.parametrize("max_len", [16, 64])
def test_shared_means_stay_exact_at_length(max_len: int) -> None:
    program = program_from_source(PAPER_DYCK, "paper.rasp", output="dyck1_ptf")
    model = compile_program(program, list("()"), max_len)
    assert model.heads_per_layer == [1, 1]
    inputs = random_inputs(list("()"), max_len, 200, seed=1) + edge_inputs(list("()"), max_len)
    res = check_model(model, program, inputs)
    assert res.ok, res.failures[:1]


def test_hand_made_bos_count_is_one_width_head() -> None:
    """The paper's ``(1/aggregate(s or select(indices, 0, ==), indicator(indices == 0))) - 1``
    counts the keys of s other than 0 (``rewrites.bos_counts``): one width head in the first
    layer, no joint key, as the original analysis counts it."""
    program = program_from_source(PAPER_DYCK, "paper.rasp", output="hist_bos")
    model = compile_program(program, list("abc"), 16)
    assert model.heads_per_layer == [1]
    sizes = {r["feature"]: r["size"] for r in model.config["residual"]}
    assert not [f for f in sizes if f.startswith("(")], sizes
    res = check_model(model, program, list(exhaustive_inputs(list("abc"), 6))
                      + random_inputs(list("abc"), 16, 100, seed=2))
    assert res.ok, res.failures[:1]


def test_hand_made_bos_mean_reads_a_small_product_one_hot() -> None:
    """A mean over ``s or select(indices, 0, ==)`` of a value that is not a count (it reads the
    tokens) needs the joint key: the product one-hot holds (indices == 0, tokens), 2·|vocab|
    values, not max_len·|vocab|."""
    src = ('s = select(tokens, tokens, ==) or select(indices, 0, ==);\n'
           'm = numerical(aggregate(s, indicator(tokens == "a"), 0));\nm;\n')
    program = program_from_source(src)
    model = compile_program(program, list("abc"), 16)
    sizes = {r["feature"]: r["size"] for r in model.config["residual"]}
    joint = [f for f in sizes if f.startswith("(") and "tokens" in f]
    assert joint and all(sizes[f] == 6 for f in joint), sizes
    res = check_model(model, program, list(exhaustive_inputs(list("abc"), 6))
                      + random_inputs(list("abc"), 16, 100, seed=2))
    assert res.ok, res.failures[:1]


@pytest.mark.parametrize("name, layers", [("hist_bos", 1), ("sort_bos", 2), ("hist2_bos", 2),
                                          ("sort_by_most_freq", 3)])
def test_hand_made_bos_programs_keep_the_original_depth(name: str, layers: int) -> None:
    """The original analysis' layer counts (the paper's Table 1) for its own BOS programs."""
    program = program_from_source(PAPER_DYCK, "paper.rasp", output=name)
    model = compile_program(program, list("abc"), 10)
    assert model.n_layers == layers, model.summary()
    res = check_model(model, program, list(exhaustive_inputs(list("abc"), 5))
                      + random_inputs(list("abc"), 10, 200, seed=3) + edge_inputs(list("abc"), 10))
    assert res.ok, res.failures[:1]


# -- the original REPL's commands inside a program file -------------------------------------------------

PLAIN = 'reverse = aggregate(select(indices, length - indices - 1, ==), tokens);\nreverse;\n'


def test_repl_commands_in_a_file_are_skipped() -> None:
    body = PLAIN.replace("reverse;", 'draw(reverse,\n  "abc");\nreverse;')
    text = ('# saved from a REPL session\nset example "hello"\nexamples off\nset s-op example [1, 2]\n'
            'full seq display on\nshow example\n' + body + "quit()\nnot a program line\n")
    program = program_from_source(text, "session.rasp")
    assert run(program, "abc") == ["c", "b", "a"]
    # positions are kept: the reverse aggregate is still on line 7
    assert program.node("reverse").pos.line == 7


def test_exit_ends_the_file_and_later_errors_are_not_reported() -> None:
    program = program_from_source(PLAIN + "exit\nx = = ;\n")
    assert run(program, "ab") == ["b", "a"]


def test_repl_command_inside_a_def_is_still_an_error() -> None:
    with pytest.raises(RaspError) as err:
        program_from_source('def f() {\n    set example "x"\n    return tokens;\n}\nf();\n', "bad.rasp")
    assert "bad.rasp:2" in str(err.value.render())


def test_command_words_stay_usable_as_names() -> None:
    program = program_from_source('set = tokens;\nshow = set + "!";\nexample = show;\nexample;\n')
    assert run(program, "ab") == ["a!", "b!"]


def test_one_program_of_a_file_compiles_without_the_others() -> None:
    """A file may define several programs (paper_examples.rasp): compiling one analyses only the
    s-ops it depends on, so another's error, size or notes do not reach it."""
    src = ('odd = numerical(tokens + "x");\n'          # not compilable: a numerical string
           'other = aggregate(select(indices, indices, <=), tokens);\n'   # a note when analysed
           'good = aggregate(select(indices, length - indices - 1, ==), tokens);\n')
    with pytest.raises(RaspError, match="numerical"):
        compile_program(program_from_source(src, output="odd"), list("ab"), 4)
    model = compile_program(program_from_source(src, output="good"), list("ab"), 4)
    assert model.run([list("ab")]) == [["b", "a"]]
    assert not model.config["notes"] and "other" not in model.summary()


def test_rasp_run_uses_the_files_example_when_no_input_is_given(tmp_path, capsys) -> None:
    from rasp_compiler.cli import main

    session = tmp_path / "session.rasp"
    session.write_text('set example "hello"\nset selector example "ab"\n' + PLAIN)
    assert main(["run", str(session)]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == "[o, l, l, e, h] (strings)"
    assert 'example "hello"' in captured.err
    assert main(["run", str(session), "--input", "ab"]) == 0      # an explicit input wins
    assert capsys.readouterr().out.strip() == "[b, a] (strings)"
    plain = tmp_path / "plain.rasp"
    plain.write_text(PLAIN)
    assert main(["run", str(plain)]) == 1
    assert "no input: give --input TEXT or --input-json JSON" in capsys.readouterr().err
    # the shipped programs state examples in comments: the hint gives the command that runs one
    plain.write_text("# example: a b -> b a\n# example: xy -> yx\n" + PLAIN)
    assert main(["run", str(plain)]) == 1
    assert f"hint: its comments show one: rasp run {plain} --input 'a b'" in capsys.readouterr().err
    plain.write_text("# example-json: [1, 2] -> [2, 1]\n" + PLAIN)
    assert main(["run", str(plain)]) == 1
    assert f"rasp run {plain} --input-json '[1, 2]'" in capsys.readouterr().err


def test_the_original_library_selector_width_is_one_layer() -> None:
    """The original REPL's own selector_width is library code built on the BOS trick (a mean
    over ``s or select(indices, 0, ==)`` plus a lookup at key 0); a file that defines it that
    way compiles to 1 layer, with the one head of the built-in ``selector_width`` since the
    lookup is read from the width too (``rewrites.bos_widths``; 2 heads before)."""
    src = '''def bos_width(sel) {
    first = select(indices, 0, ==);
    share = aggregate(sel or first, indicator(indices == 0));
    at_first = aggregate(sel and first, 1, 0);
    return round((1 / share) - 1 + at_first);
}
hist = bos_width(select(tokens, tokens, ==));
hist;'''
    program = program_from_source(src)
    model = compile_program(program, list("abc"), 12)
    assert model.heads_per_layer == [1], model.summary()
    builtin_src = "hist = selector_width(select(tokens, tokens, ==));\nhist;"
    builtin = compile_program(program_from_source(builtin_src), list("abc"), 12)
    assert (model.residual_width, model.params) == (builtin.residual_width, builtin.params)
    res = check_model(model, program, list(exhaustive_inputs(list("abc"), 6))
                      + random_inputs(list("abc"), 12, 200, seed=4) + edge_inputs(list("abc"), 12))
    assert res.ok, res.failures[:1]


@pytest.mark.parametrize("value, rewritten", [
    ("indicator(indices == 0)", True),           # 1 at key 0, 0 elsewhere: a count
    ("3 * indicator(indices == 0)", True),
    ("indicator(indices == 1)", False),          # not zero away from key 0
    ("indicator(tokens == \"a\")", False),       # reads the input
])
def test_bos_count_rewrite_applies_only_where_values_are_kept(value: str, rewritten: bool) -> None:
    from rasp_compiler.compiler.rewrites import bos_counts

    src = f"m = numerical(aggregate(select(tokens, tokens, <) or select(indices, 0, ==), {value}, 0));\nm;\n"
    program = program_from_source(src)
    after = bos_counts(program, 8)
    assert (after.node("m").kind == "map") == rewritten
    inputs = list(exhaustive_inputs(list("abc"), 5)) + random_inputs(list("abc"), 8, 100, seed=6)
    for x in inputs:
        assert run(after, x) == run(program, x)
    res = check_model(compile_program(program, list("abc"), 8), program, inputs)
    assert res.ok, res.failures[:1]


def test_a_disjunct_of_positions_that_adds_nothing_is_dropped() -> None:
    """``select(k, indices - 1, ==) or (select(indices, 0, ==) and select(indices, indices, ==))``
    where k is -1 at index 0: the second disjunct never selects a key the first does not, so the
    head needs no one-hot of (k, indices)."""
    src = '''k = -1 if indices == 0 else selector_width(select(tokens, tokens, <));
grab = select(k, indices - 1, ==) or (select(indices, 0, ==) and select(indices, indices, ==));
out_ = aggregate(grab, tokens, "-");
out_;'''
    program = program_from_source(src)
    model = compile_program(program, list("abc"), 8)
    sizes = {r["feature"]: r["size"] for r in model.config["residual"]}
    assert not [f for f in sizes if f.startswith("(")], sizes
    res = check_model(model, program, list(exhaustive_inputs(list("abc"), 6)))
    assert res.ok, res.failures[:1]


@pytest.mark.parametrize("test, rewritten", [
    ("w > 0", True),
    ("0 if w == 0 else 5", True),
    ("w > 1", False),                    # tells 1 from 2: needs the width itself
    ("(1 / (1 / (w + 1))) - 1 > 0", True),
])
def test_a_width_read_only_as_nonzero_becomes_a_0_1_head(test: str, rewritten: bool) -> None:
    from rasp_compiler.compiler.rewrites import nonzero_widths

    src = f"w = selector_width(select(tokens, tokens, <));\nt = {test};\nt;\n"
    program = program_from_source(src)
    after = nonzero_widths(program, 8)
    reads = [after.node(i).kind for i in after.node("t").inputs] if "t" in after.graph else []
    assert ("aggregate" in reads) == rewritten, reads
    inputs = list(exhaustive_inputs(list("abc"), 5)) + random_inputs(list("abc"), 8, 100, seed=7)
    for x in inputs:
        assert run(after, x) == run(program, x)
    res = check_model(compile_program(program, list("abc"), 8), program, inputs)
    assert res.ok, res.failures[:1]


LONG_ADDITION = Path(__file__).parent / "data" / "long_addition.rasp"


def _sum_input(rng: random.Random, k: int) -> tuple[str, int, int]:
    a, b = rng.randrange(10 ** k), rng.randrange(10 ** k)
    return f"{a:0{k}d}+{b:0{k}d}", a, b


def test_original_long_addition_adds() -> None:
    program = load_program(LONG_ADDITION)
    rng = random.Random(8)
    for _ in range(60):
        k = rng.randint(1, 4)
        text, a, b = _sum_input(rng, k)
        digits = run(program, text)[-k:]
        assert int("".join(map(str, digits))) == (a + b) % 10 ** k, text


def test_original_long_addition_compiles_small_and_agrees() -> None:
    """Its "+" position is a mean of indices (hundreds of fractions over all inputs); the
    position it computes from it is compared with indices only, so the head reads one class of
    the fractions that match nothing (``Lowering._quotient``), and the copy through it provably
    picks one key (``Analysis.injective`` with the length and the "+" position, which are the
    same at every position)."""
    program = load_program(LONG_ADDITION)
    vocab = list("0123456789+")
    model = compile_program(program, vocab, 9)
    assert model.params < 1_000_000, model.summary()
    rng = random.Random(9)
    sums = [list(_sum_input(rng, rng.randint(1, 4))[0]) for _ in range(300)]
    res = check_model(model, program, sums + random_inputs(vocab, 9, 700, seed=10) + edge_inputs(vocab, 9))
    assert res.ok and res.inputs_checked > 900, res.failures[:1]


def test_a_selector_side_is_read_through_its_classes() -> None:
    """select(k, indices, ==) with k a mean: the values of k that no index equals form one class."""
    src = '''plus = aggregate(select(tokens, "+", ==), indices, 0);
k = indices + plus;
copy = aggregate(select(k, indices, ==), tokens, "-");
copy;'''
    program = program_from_source(src)
    model = compile_program(program, list("ab+"), 8)
    sizes = {r["feature"]: r["size"] for r in model.config["residual"]}
    quotient = [f for f in sizes if f.startswith("k~")]
    assert quotient and "k" not in sizes and sizes[quotient[0]] <= 2 * 8, sizes
    inputs = list(exhaustive_inputs(list("ab+"), 6)) + random_inputs(list("ab+"), 8, 300, seed=11)
    res = check_model(model, program, inputs)
    assert res.ok, res.failures[:1]


def test_one_s_op_read_through_different_classes_by_different_blocks() -> None:
    """k is compared with indices (==) in one block and with length - 1 (<) in another, and the
    parts of a split width class it differently again: each block reads its own map of k."""
    src = '''plus = aggregate(select(tokens, "+", ==), indices, 0);
k = indices + plus;
copy = aggregate(select(k, indices, ==) and select(k, length - 1, <), tokens, "-");
w = selector_width(select(k, indices, <) or (select(k, indices, ==) and select(indices, indices, <)));
out_ = copy + "" if w > 2 else "x";
out_;'''
    program = program_from_source(src)
    model = compile_program(program, list("ab+"), 8)
    sizes = {r["feature"]: r["size"] for r in model.config["residual"]}
    assert len([f for f in sizes if f.startswith("k~")]) >= 2, sizes
    inputs = list(exhaustive_inputs(list("ab+"), 6)) + random_inputs(list("ab+"), 8, 400, seed=12)
    res = check_model(model, program, inputs)
    assert res.ok, res.failures[:1]


ROVER = Path(__file__).parent / "data" / "rover.rasp"


def test_original_rover_answers_every_example_as_its_comment_says() -> None:
    """The original's logic puzzle (loops, nested functions, dicts of s-ops, s-op indexing, REPL
    commands in the file): each ``exampleN = "..."; # T`` line states the answer."""
    import re

    text = ROVER.read_text(encoding="utf-8")
    examples = re.findall(r'^example\d+ = "([^"]+)"; # ([TF?])', text, flags=re.M)
    assert len(examples) == 22
    program = load_program(ROVER, output="res")
    for puzzle, answer in examples:
        assert run(program, puzzle) == [answer] * len(puzzle), puzzle


def test_run_uses_an_example_the_file_names(capsys: pytest.CaptureFixture[str]) -> None:
    """rover.rasp says ``set example example2``: the name of one of its own strings."""
    from rasp_compiler.cli import main

    assert main(["run", str(ROVER), "--output", "res"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == "[?]*8 (strings)"   # example2 = "a<A,a<B?"; # ?
    assert "example2" in captured.err


def test_a_program_too_large_as_a_whole_says_so() -> None:
    """rover's model would be too large because it is 31 layers deep, not because of one s-op:
    the error says that, at the output's line, and suggests compiling a part."""
    from rasp_compiler.errors import CompileError

    program = load_program(ROVER, output="res")
    with pytest.raises(CompileError) as err:
        compile_program(program, list("abcxABCX<#:,?"), 8)
    shown = err.value.render()
    assert "no single s-op dominates" in shown and " layers, " in shown, shown
    assert "--output NAME" in shown
