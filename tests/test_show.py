"""rasp show: the pictures exist, have sensible sizes, and say what the program says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rasp_compiler.cli import main as cli
from rasp_compiler.compiler import compile_program
from rasp_compiler.lang import load_program
from rasp_compiler.viz import draw_plan, draw_trace, place_nodes
from rasp_compiler.viz.common import image_size

ROOT = Path(__file__).resolve().parents[1]
REVERSE, SORT = str(ROOT / "programs/reverse.rasp"), str(ROOT / "programs/sort.rasp")


def test_plan_labels_and_colours_match_the_program(tmp_path) -> None:
    program = load_program(SORT)
    model = compile_program(program, "abc", 8)
    pic = draw_plan(program, model.plan, str(tmp_path / "plan.png"))
    assert set(pic.labels) == set(program.graph.nodes)
    for nid, label in pic.labels.items():
        node = program.node(nid)
        assert label.startswith(nid)
        if node.pos is not None and node.pos.text and node.pos.text != nid:
            assert " ".join(node.pos.text.split())[:20] in label
    # every head of the plan colours the node it computes with its own legend entry (a node computed
    # by several heads — sort's width, split in two — takes the first one's)
    seen: set[str] = set()
    for lp in model.plan:
        for h in lp["heads"]:
            if h["node"] in program.graph and h["node"] not in seen:
                seen.add(h["node"])
                assert pic.placement[h["node"]].unit == f"L{lp['layer']} head {h['head']}"
                assert pic.placement[h["node"]].column == 1 + 2 * lp["layer"]
    assert pic.placement["tokens"].unit == "embedding"
    # a selector is drawn with the head that reads it
    sel = program.node("sorted").inputs[0]
    assert pic.placement[sel].unit == pic.placement["sorted"].unit
    width, height = image_size(pic.path)
    assert (width, height) == pic.size_px
    assert 600 <= width <= 6000 and 300 <= height <= 6000


def test_plan_captions_the_heads_and_mlp_ops_without_a_box(tmp_path) -> None:
    """sort's width takes two heads and a decoding MLP in layer 0; the node has one box (head 0),
    so head 1 and the MLP are captioned in their columns instead of leaving them looking empty."""
    program = load_program(SORT)
    model = compile_program(program, "abc", 8)
    pic = draw_plan(program, model.plan, str(tmp_path / "plan.png"))
    assert pic.placement["sort_by.place"].unit == "L0 head 0"
    assert pic.captions[1] == ["head 1: width → sort_by.place"]
    assert pic.captions[2] == ["width_decode → sort_by.place"]
    assert 3 not in pic.captions and 4 not in pic.captions   # layer 1's head has its own box
    # a map program whose MLP ops all have their own boxes gets no MLP caption
    rev = load_program(str(ROOT / "programs/reverse.rasp"))
    rmodel = compile_program(rev, "abc", 8)
    rpic = draw_plan(rev, rmodel.plan, str(tmp_path / "rev.png"), residual=rmodel.config["residual"])
    boxed = {op["node"] for lp in rmodel.plan for op in (lp["mlp"] or {}).get("ops", [])
             if op["writes"] == op["node"] and op["node"] in rpic.placement}
    for column, lines in rpic.captions.items():
        assert not any(line.endswith(f"→ {n}") and rpic.placement[n].column == column for n in boxed
                       for line in lines)


def test_plan_of_a_map_program_places_mlps(tmp_path) -> None:
    program = load_program(str(ROOT / "programs/dyck1.rasp"))
    model = compile_program(program, "()", 6)
    place = place_nodes(program, model.plan)
    mlp_nodes = {op["node"] for lp in model.plan for op in (lp["mlp"] or {}).get("ops", [])
                 if op["writes"] == op["node"]}
    assert mlp_nodes, "dyck1 should schedule some map in an MLP"
    for nid in mlp_nodes & set(program.graph.nodes):
        assert place[nid].unit.endswith("MLP")
    assert set(place) == set(program.graph.nodes)


def test_cli_show_plan_png_and_svg(tmp_path, capsys) -> None:
    png = tmp_path / "plan.png"
    assert cli(["show", REVERSE, "--vocab", "abc", "--max-len", "8", "-o", str(png), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert png.read_bytes().startswith(b"\x89PNG")
    assert result["format"] == "png" and result["width"] >= 600
    assert "flip" in result["labels"] and "reverse" in result["labels"]
    svg = tmp_path / "plan.svg"
    assert cli(["show", REVERSE, "--vocab", "abc", "--max-len", "8", "-o", str(svg)]) == 0
    assert b"<svg" in svg.read_bytes()[:2000]
    forced = tmp_path / "plan.out"
    assert cli(["show", REVERSE, "--vocab", "abc", "--max-len", "8", "-o", str(forced),
                "--format", "svg"]) == 0
    assert b"<svg" in forced.read_bytes()[:2000]


def test_trace_titles_and_rows_match_the_model(tmp_path) -> None:
    program = load_program(SORT)
    model = compile_program(program, "abc", 8)
    pic = draw_trace(model, list("abca"), str(tmp_path / "trace.png"))
    heads = [(lp["layer"], h) for lp in model.plan for h in lp["heads"]]
    assert len(pic.head_titles) == len(heads)
    for title, (layer, h) in zip(pic.head_titles, heads, strict=True):
        assert title.startswith(f"layer {layer} head {h['head']}")
        assert h["node"] in title
    # the aggregate's title shows the select it implements (from the program source)
    assert any("select(place, indices, ==)" in t for t in pic.head_titles)
    assert pic.residual_labels == model.labels()
    assert any(lab.startswith("tokens:") for lab in pic.residual_labels)
    assert pic.stages == ["embedding"] + [f"after layer {i}" for i in range(model.n_layers)]
    width, height = image_size(pic.path)
    assert 500 <= width <= 8000 and 400 <= height <= 12000


def test_cli_show_trace(tmp_path, capsys) -> None:
    out = tmp_path / "model"
    assert cli(["compile", REVERSE, "--vocab", "abc", "--max-len", "8", "-o", str(out)]) == 0
    capsys.readouterr()
    png = tmp_path / "trace.png"
    assert cli(["show", str(out), "--input", "abca", "-o", str(png), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert png.is_file() and result["heads"] and result["residual_labels"]
    assert any("flip" in t or "select(indices" in t for t in result["heads"])


@pytest.mark.parametrize("options, message", [
    ([], "--vocab and --max-len"),
    (["--vocab", "ab", "--max-len", "4", "--input", "ab"], "model directory"),
])
def test_cli_show_errors(options, message, capsys, tmp_path) -> None:
    assert cli(["show", REVERSE, *options, "-o", str(tmp_path / "x.png")]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_cli_show_says_whether_the_pictures_directory_is_missing_or_a_file(capsys, tmp_path) -> None:
    """`-o nodir/x.png` said "nodir is not a directory" when nodir did not exist at all."""
    plan = ["show", REVERSE, "--vocab", "ab", "--max-len", "4", "-o"]
    assert cli([*plan, str(tmp_path / "nodir" / "x.png")]) == 1
    err = capsys.readouterr().err
    assert f"the directory {tmp_path / 'nodir'} does not exist" in err and "hint: create it first" in err
    (tmp_path / "afile").write_text("x")
    assert cli([*plan, str(tmp_path / "afile" / "x.png")]) == 1
    assert f"{tmp_path / 'afile'} is not a directory" in capsys.readouterr().err


def test_cli_show_model_needs_input_and_known_tokens(tmp_path, capsys) -> None:
    out = tmp_path / "model"
    assert cli(["compile", REVERSE, "--vocab", "abc", "--max-len", "4", "-o", str(out)]) == 0
    capsys.readouterr()
    assert cli(["show", str(out), "-o", str(tmp_path / "t.png")]) == 1
    assert "--input" in capsys.readouterr().err
    assert cli(["show", str(out), "--input", "abz", "-o", str(tmp_path / "t.png")]) == 1
    assert "not in the vocabulary" in capsys.readouterr().err
    assert cli(["show", str(out), "--input", "abcab", "-o", str(tmp_path / "t.png")]) == 1
    assert "more than" in capsys.readouterr().err


def _columns_never_go_back(program, place) -> list:
    import networkx as nx

    shown = program.graph.subgraph(nx.ancestors(program.graph, program.output) | {program.output})
    return [(a, b) for a, b in shown.edges() if place[a].column > place[b].column]


@pytest.mark.parametrize("with_residual", [True, False])
def test_plan_embedded_maps_are_drawn_in_the_embedding(with_residual) -> None:
    """dyck2 holds `indicator(is_open) - indicator(is_close)` in the residual from the embedding and
    layer 0's head reads it: drawing it in layer 0's MLP gave an arrow back in time."""
    program = load_program(str(ROOT / "programs/dyck2.rasp"))
    model = compile_program(program, "(){}", 16)
    place = place_nodes(program, model.plan, model.config["residual"] if with_residual else None)
    assert place["sequence_map_1"].unit == "embedding" and place["is_open"].unit == "embedding"
    assert _columns_never_go_back(program, place) == []
    for lp in model.plan:  # what the plan computes stays where the plan says
        for op in (lp["mlp"] or {}).get("ops", []):
            if op["writes"] == op["node"] and op["node"] in program.graph and op["kind"] == "map":
                assert place[op["node"]].unit == f"L{lp['layer']} MLP"


def test_trace_rows_are_scaled_so_one_hot_rows_stay_visible(tmp_path) -> None:
    """reverse at 64 tokens holds length - indices - 1 (up to 63) in one dimension; a shared colour
    scale drew every one-hot row at 1/63 of full colour, i.e. white."""
    model = compile_program(load_program(REVERSE), "abc", 64)
    tokens = list(("abc" * 22)[:64])
    pic = draw_trace(model, tokens, str(tmp_path / "t.png"))
    labels = model.labels()
    assert pic.row_scales[labels.index("tokens:a")] == 1.0
    assert pic.row_scales[labels.index("indices:5")] == 1.0
    big = max(range(len(labels)), key=lambda i: pic.row_scales[i])
    assert pic.row_scales[big] > 60
    width, height = image_size(pic.path)
    assert width >= 3000 and height >= 2000  # 65 positions stay legible


def test_cli_show_model_with_real_valued_tokens(tmp_path, capsys) -> None:
    out = tmp_path / "mm"
    maxmin = str(ROOT / "programs/maxmin.rasp")
    assert cli(["compile", maxmin, "--input-range", "-1", "1", "-o", str(out)]) == 0
    capsys.readouterr()
    png = tmp_path / "mm.png"
    assert cli(["show", str(out), "--input-json", "[0.5, -0.2, 0.9, 0.1, -1]", "-o", str(png), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert png.read_bytes().startswith(b"\x89PNG") and "tokens_float" in result["residual_labels"]
    assert len(result["row_scales"]) == len(result["residual_labels"])
    assert result["row_scales"][result["residual_labels"].index("tokens_float")] == pytest.approx(1.0)
    wide = "[0.5, -0.2, 0.9, 0.1, 3]"
    assert cli(["show", str(out), "--input-json", wide, "-o", str(tmp_path / "x.png")]) == 1
    err = capsys.readouterr().err
    assert "outside the input range" in err and err.count("error:") == 1


@pytest.mark.parametrize("options, message", [
    (["--vocab", "abc"], "--vocab: options for compiling a program"),
    (["--max-len", "4"], "--max-len"),
    (["--causal"], "--causal"),
    (["--output", "flip"], "--output"),
    (["--dtype", "float64"], "--dtype"),
    (["--fixed-length", "4"], "--fixed-length"),
    (["--input-range", "0", "1"], "--input-range"),
])
def test_cli_show_model_refuses_compile_options(options, message, tmp_path, capsys) -> None:
    out = tmp_path / "model"
    assert cli(["compile", REVERSE, "--vocab", "abc", "--max-len", "4", "-o", str(out)]) == 0
    capsys.readouterr()
    assert cli(["show", str(out), "--input", "ab", *options, "-o", str(tmp_path / "t.png")]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("error:") == 1
    assert not (tmp_path / "t.png").exists()


def test_cli_show_missing_target(tmp_path, capsys) -> None:
    assert cli(["show", str(tmp_path / "nope"), "--input", "ab", "-o", str(tmp_path / "t.png")]) == 1
    err = capsys.readouterr().err
    assert "no such file or directory" in err and "give a model directory" not in err


def test_trace_titles_come_from_the_compiled_plan_not_the_file_as_it_is_now(tmp_path) -> None:
    """The titles were read from the program file when drawing: after an edit of the file, a saved
    reverse model was titled with a selector its weights do not implement."""
    src = tmp_path / "rev.rasp"
    src.write_text("flip = select(indices, length - indices - 1, ==);\n"
                   "rev = aggregate(flip, tokens);\nrev;\n")
    compile_program(load_program(str(src)), "abc", 6).save(str(tmp_path / "m"))
    src.write_text("flip = select(tokens, tokens, <);\nrev = aggregate(flip, tokens);\nrev;\n")
    from rasp_compiler.runtime import RaspModel

    pic = draw_trace(RaspModel.load(str(tmp_path / "m")), list("abc"), str(tmp_path / "t.png"))
    assert any("select(indices, length - indices - 1, ==)" in t for t in pic.head_titles)
    assert not any("select(tokens, tokens, <)" in t for t in pic.head_titles)


def test_plan_draws_the_heads_of_rewritten_bos_counts(tmp_path) -> None:
    """The original paper's hand-made BOS count compiles to a width head named after the
    aggregate it replaces (aggregate_1.count); the picture left that head's column empty."""
    program = load_program(str(ROOT / "tests/data/paper_examples.rasp"), output="hist_bos")
    model = compile_program(program, "abc", 6)
    assert any(h["node"] not in program.graph for lp in model.plan for h in lp["heads"])
    pic = draw_plan(program, model.plan, str(tmp_path / "plan.png"))
    assert "L0 head 0" in pic.units
    head = next(h for lp in model.plan for h in lp["heads"])
    assert pic.placement[head["node"].split(".")[0]].unit == "L0 head 0"


def test_plan_draws_a_repeated_expression_once_where_it_is_computed(tmp_path) -> None:
    """Alike nodes are compiled once (rewrites.shared_subexpressions): the picture drew the
    second copy of a helper's aggregate in the embedding column, which computes no aggregate."""
    from rasp_compiler.lang import program_from_source

    program = program_from_source('def prev(x) {\n    return aggregate(select(indices, indices - 1, ==), '
                                  'x, "-");\n}\na = prev(tokens);\nb = prev(tokens);\nc = a + b;\nc;\n')
    model = compile_program(program, "abc", 6)
    assert model.heads_per_layer == [1]
    pic = draw_plan(program, model.plan, str(tmp_path / "plan.png"))
    assert "a" in pic.labels and "b" not in pic.labels
    assert pic.placement["a"].unit == "L0 head 0"
    assert all(p.unit != "embedding" for nid, p in pic.placement.items()
               if program.node(nid).kind == "aggregate")


def test_trace_titles_name_the_disjunct_of_a_split_width_and_stay_short(tmp_path) -> None:
    model = compile_program(load_program(SORT), "abc", 8)
    pic = draw_trace(model, list("abca"), str(tmp_path / "trace.png"))
    assert [t for t in pic.head_titles if "disjunct" in t] == [
        t for t in pic.head_titles if "selector_width" in t] and len(pic.head_titles) == 3
    assert {t.split("(disjunct ")[1][0] for t in pic.head_titles if "disjunct" in t} == {"0", "1"}
    assert all(len(line) <= 64 for t in pic.head_titles for line in t.splitlines())


def test_shortened_labels_keep_their_last_operator() -> None:
    from rasp_compiler.viz.common import shorten

    text = "aggregate(up_to_here, indicator(bad_closing_bracket)) > 0"
    short = shorten(text, 34)
    assert len(short) == 34 and short.endswith("> 0") and short.startswith("aggregate(")
    assert shorten("a  b", 34) == "a b"


def test_cli_show_program_takes_the_compile_options(tmp_path, capsys) -> None:
    """The plan is of the model 'rasp compile' builds with the same options: a fixed-length reverse
    has 1 layer (length is a constant), and a real-valued program draws with --input-range."""
    assert cli(["show", REVERSE, "--vocab", "abc", "--max-len", "4", "--fixed-length", "4",
                "-o", str(tmp_path / "f.png"), "--json"]) == 0
    units = json.loads(capsys.readouterr().out)["units"]
    assert "L0 head 0" in units and not any(u.startswith("L1") for u in units)
    assert cli(["show", str(ROOT / "programs/maxmin.rasp"), "--input-range", "-1", "1",
                "-o", str(tmp_path / "m.png"), "--json"]) == 0
    assert "L0 head 0" in json.loads(capsys.readouterr().out)["units"]


def test_trace_picture_says_the_answer_and_scales_rows_on_the_input_not_bos(tmp_path) -> None:
    """Reverse's `length - indices - 1` holds 7 at BOS whatever the input: its row scale came from
    there, and the picture never said what the model answered."""
    from rasp_compiler.viz.trace import row_scales

    model = compile_program(load_program(REVERSE), "abc", 8)
    trace = model.trace([list("ab")])
    num = trace["labels"].index(next(lab for lab in trace["labels"] if lab.startswith("map_1")))
    scales = row_scales(trace["residuals"])
    on_input = max(float(r[0, 1:, num].abs().max()) for r in trace["residuals"])
    assert scales[num] == on_input < float(max(r[0, 0, num].abs() for r in trace["residuals"]))
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    captured = {}
    real_suptitle = plt.Figure.suptitle

    def spy(self, text, **kw):
        captured["title"] = text
        return real_suptitle(self, text, **kw)

    plt.Figure.suptitle = spy
    try:
        draw_trace(model, list("ab"), str(tmp_path / "t.png"))
    finally:
        plt.Figure.suptitle = real_suptitle
    assert "on ab → ba" in captured["title"]


def test_trace_marks_the_positions_of_each_input() -> None:
    model = compile_program(load_program(REVERSE), "abc", 8)
    trace = model.trace([list("abc"), list("a")])
    assert trace["valid"].tolist() == [[True] * 4, [True, True, False, False]]


def test_a_real_valued_trace_draws_and_an_svg_size_is_in_points(tmp_path, capsys) -> None:
    model_dir = tmp_path / "m"
    assert cli(["compile", str(ROOT / "programs/maxmin.rasp"), "--input-range", "-1", "1",
                "-o", str(model_dir)]) == 0
    capsys.readouterr()
    from rasp_compiler.runtime import RaspModel

    model = RaspModel.load(str(model_dir))
    n = model.config["fixed_length"]
    values = [0.5, -0.5, 0.25, 0.25, -1.0, 1.0][:n]
    pic = draw_trace(model, values, str(tmp_path / "t.png"))
    assert pic.size_px[0] > 0
    svg = str(tmp_path / "t.svg")
    assert cli(["show", str(model_dir), "--input-json", json.dumps(values), "-o", svg]) == 0
    assert capsys.readouterr().out.strip().endswith("pt)")


def test_no_plan_draws_a_node_before_what_it_reads() -> None:
    """Every edge of every shipped program's plan runs forward (or within a column): tracr's
    sort_freq drew `hist` and `keys`, which layer 1's head scores straight from layer 0's
    output, in the embedding, with arrows running back."""
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from shipped import PROGRAMS

    for s in PROGRAMS:
        program = load_program(str(s.file))
        model = compile_program(program, list(s.vocab3), 6)
        place = place_nodes(program, model.plan, model.config.get("residual"))
        backward = [(a, b) for a, b in program.graph.edges if place[a].column > place[b].column]
        assert not backward, (s.name, backward)


def test_rows_of_made_up_ids_carry_their_source_text() -> None:
    from rasp_compiler.viz.trace import _with_source, source_texts

    model = compile_program(load_program(str(ROOT / "programs/dyck1.rasp")), "()a", 8)
    texts = source_texts(model)
    assert "indicator(depth < 0)" in texts.values() and all(k[-1].isdigit() for k in texts)
    shown = _with_source(model.labels(), texts)
    made_up = next(k for k, v in texts.items() if v == "indicator(depth < 0)")
    rows = [lab for lab in shown if lab.startswith(made_up + ":")]
    assert rows[0].endswith("= indicator(depth < 0)") and all("=" not in r for r in rows[1:])


MATMUL = str(ROOT / "programs/matmul.rasp")


def _matmul_model():
    return compile_program(load_program(MATMUL), None, 10, fixed_length=10, input_range=(-1.0, 1.0))


def test_trace_titles_tell_apart_heads_made_by_one_line_of_a_function(tmp_path) -> None:
    """matmul's four heads all come from `select(indices, position, ==)` in entry_at's body: their
    titles read the same.  The plan records which call (and which pass of the loop) made each."""
    model = _matmul_model()
    heads = [h for lp in model.plan for h in lp["heads"]]
    assert [h["context"] for h in heads] == [
        "entry_at(t * k + m), m = 0", "entry_at(r * k + m * c + u), m = 0",
        "entry_at(t * k + m), m = 1", "entry_at(r * k + m * c + u), m = 1"]
    assert all(h["selector"] == "select(indices, position, ==)" for h in heads)
    values = [0.1 * i for i in range(10)]
    pic = draw_trace(model, values, str(tmp_path / "t.png"))
    assert len(set(pic.head_titles)) == len(pic.head_titles) == 4
    # the rows of the four aggregates too: `aggregate_1 = aggregate(select(i…m), m = 0`
    from rasp_compiler.viz.trace import source_texts

    texts = source_texts(model)
    assert len({texts[f"aggregate_{i}"] for i in range(1, 5)}) == 4
    assert texts["aggregate_1"].endswith("↳ entry_at(t * k + m), m = 0")
    assert len({t.splitlines()[-1] for t in pic.head_titles}) == 4
    assert all(t.splitlines()[-1].startswith("↳ entry_at(") for t in pic.head_titles)
    assert all(len(line) <= 64 for t in pic.head_titles for line in t.splitlines())
    # a model saved before plans held contexts still draws, as before: no third line
    for h in (h for lp in model.config["plan"] for h in lp["heads"]):
        h.pop("context")
    old = draw_trace(model, values, str(tmp_path / "old.png"))
    assert [t.splitlines()[1:] for t in old.head_titles] == [["select(indices, position, ==)"]] * 4
    # ... and one saved before plans held selectors reads both from the program file
    for h in (h for lp in model.config["plan"] for h in lp["heads"]):
        h.pop("selector")
    older = draw_trace(model, values, str(tmp_path / "older.png"))
    assert older.head_titles == pic.head_titles


def test_trace_titles_add_no_context_where_it_tells_nothing_apart(tmp_path) -> None:
    """sort's two width heads share their selector and the call that made it: no third line; nor
    for its aggregate, whose selector is its own."""
    model = compile_program(load_program(SORT), "abc", 8)
    assert {h.get("context") for lp in model.plan for h in lp["heads"]} == {"sort_by(tokens, tokens)"}
    pic = draw_trace(model, list("abca"), str(tmp_path / "t.png"))
    assert all(len(t.splitlines()) == 2 and "↳" not in t for t in pic.head_titles)


def test_source_context_names_the_outermost_call_and_the_loop_values(tmp_path) -> None:
    src = tmp_path / "ctx.rasp"
    src.write_text('def pick(q) {\n    return aggregate(select(tokens, q, ==), indices);\n}\n'
                   'def twice(q) {\n    return pick(q);\n}\n'
                   'outs = [twice(c) for c in ["a", "b"]];\n'
                   'top = select(indices, indices, ==);\n'
                   'res = outs[0] + outs[1];\nres;\n')
    program = load_program(str(src))
    contexts = {program.node(n).pos.context for n in program.graph
                if program.node(n).kind == "aggregate"}
    assert contexts == {'twice(c), c = "a"', 'twice(c), c = "b"'}
    top = next(n for n in program.graph if program.node(n).pos and
               program.node(n).pos.text == "select(indices, indices, ==)")
    assert program.node(top).pos.context == ""


def _saved_figure(monkeypatch):
    """The figure draw_trace saves (captured at savefig)."""
    from matplotlib.figure import Figure

    saved = {}
    real = Figure.savefig

    def spy(self, *args, **kw):
        saved["fig"] = self
        return real(self, *args, **kw)

    monkeypatch.setattr(Figure, "savefig", spy)
    return saved


FIVE_HEADS = """isa = numerical(indicator(tokens == "a"));
a = numerical(aggregate(select(indices, indices, ==), isa, 0));
b = numerical(aggregate(select(indices, indices + 1, ==), isa, 0));
c = numerical(aggregate(select(indices, indices - 1, ==), isa, 0));
d = numerical(aggregate(select(indices, indices + 2, ==), isa, 0));
e = numerical(aggregate(select(indices, indices - 2, ==), isa, 0));
res = a + b + c + d + e;
res;
"""


def test_trace_of_five_heads_leaves_no_empty_band(tmp_path, monkeypatch) -> None:
    """Five heads in one layer take two rows; the layout's fixed fractions left an empty band
    (inches high) between the title and the heads, and between the rows."""
    src = tmp_path / "five.rasp"
    src.write_text(FIVE_HEADS)
    model = compile_program(load_program(str(src)), "abc", 5)
    assert [len(lp["heads"]) for lp in model.plan] == [5]
    saved = _saved_figure(monkeypatch)
    draw_trace(model, list("abca"), str(tmp_path / "t.png"))
    fig = saved["fig"]
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()  # pyplot closed the figure
    heads = [ax for ax in fig.axes if ax.get_ylabel() == "query"]
    assert len(heads) == 5
    inch = fig.dpi

    def box(artist):
        return artist.get_tightbbox(renderer) if hasattr(artist, "get_tightbbox") else \
            artist.get_window_extent(renderer)

    title_bottom = fig._suptitle.get_window_extent(renderer).y0
    first_row_top = max(box(ax).y1 for ax in heads[:4])
    assert (title_bottom - first_row_top) / inch < 0.5
    second_row_top = box(heads[4]).y1
    first_row_bottom = min(box(ax).y0 for ax in heads[:4])
    assert (first_row_bottom - second_row_top) / inch < 0.6
    stages = [ax for ax in fig.axes if ax.get_title().startswith("residual ")]
    assert (box(heads[4]).y0 - max(box(ax).y1 for ax in stages)) / inch < 0.6


def test_trace_has_colour_bars_for_attention_and_residual(tmp_path, monkeypatch) -> None:
    saved = _saved_figure(monkeypatch)
    draw_trace(compile_program(load_program(SORT), "abc", 8), list("abca"), str(tmp_path / "t.png"))
    bars = {ax.get_label(): ax for ax in saved["fig"].axes if ax.get_label().endswith("colour bar")}
    assert set(bars) == {"attention colour bar", "residual colour bar"}
    assert bars["attention colour bar"].get_ylim() == (0.0, 1.0)
    assert bars["residual colour bar"].get_ylim() == (-1.0, 1.0)
    assert bars["attention colour bar"].get_ylabel() == "attention weight"
    # a model without heads draws the residual's bar only
    src = tmp_path / "nohead.rasp"
    src.write_text('x = tokens == "a";\nx;\n')
    draw_trace(compile_program(load_program(str(src)), "abc", 4), list("ab"), str(tmp_path / "n.png"))
    assert [ax.get_label() for ax in saved["fig"].axes if ax.get_label().endswith("colour bar")] == [
        "residual colour bar"]


def test_draw_plan_takes_an_s_op_and_refuses_a_model_or_the_plan_of_another_program(tmp_path) -> None:
    """Audit: an s-op raised AttributeError 'graph', a model TypeError 'not iterable', and the plan
    of another program drew an embedding column alone, with no error."""
    from rasp_compiler.errors import UserError
    from rasp_compiler.pyapi import Comparison, aggregate, indices, length, select, tokens
    from rasp_compiler.pyapi import compile_program as compile_sop

    reverse = aggregate(select(indices, length - indices - 1, Comparison.EQ), tokens).named("reverse")
    model = compile_sop(reverse, "abc", 5)
    pic = draw_plan(reverse, model.plan, str(tmp_path / "p.png"))
    assert pic.placement["reverse"].unit.startswith("L1 head")
    with pytest.raises(UserError, match="draw_plan's plan is a compiled model's plan .*got CompiledModel"):
        draw_plan(reverse.program(), model, str(tmp_path / "p.png"))
    with pytest.raises(UserError, match="the plan is of another program, .*: it computes .*reverse"):
        draw_plan(load_program(ROOT / "programs/histogram.rasp"), model.plan, str(tmp_path / "p.png"))
    with pytest.raises(UserError, match="the plan is of another program: it computes .*reverse.* max_len 5"):
        draw_plan(load_program(ROOT / "programs/histogram.rasp"), model.plan, str(tmp_path / "p.png"),
                  max_len=5)


def test_draw_trace_refuses_a_batch_and_a_picture_it_cannot_write(tmp_path) -> None:
    """Audit: ["abc"] said token 'abc' is not in the vocabulary; a missing directory and an unknown
    suffix raised FileNotFoundError and ValueError after drawing."""
    from rasp_compiler.errors import InputError, UserError

    model = compile_program(load_program(REVERSE), "abc", 5)
    with pytest.raises(InputError, match=r"draw_trace takes one input \(a string or a list of tokens\), "
                                         r"not a batch: got \['abc'\]"):
        draw_trace(model, ["abc"], str(tmp_path / "x.png"))
    with pytest.raises(InputError, match="not a batch"):
        draw_trace(model, [["a", "b"]], str(tmp_path / "x.png"))
    with pytest.raises(UserError, match=r"cannot write .*x\.png: the directory .*nonexistent does not exist"):
        draw_trace(model, "abc", str(tmp_path / "nonexistent" / "x.png"))
    with pytest.raises(UserError, match=r"unknown image format 'foo'") as info:
        draw_trace(model, "abc", str(tmp_path / "x.foo"))
    assert "png" in info.value.hint and "svg" in info.value.hint
    assert not list(tmp_path.iterdir())
    # a list of tokens is one input, a token of several characters too
    assert draw_trace(model, ["a", "b"], str(tmp_path / "ab.png")).stages[0] == "embedding"
    long_tokens = compile_program(load_program(REVERSE), ["ab", "c"], 3)
    assert draw_trace(long_tokens, ["ab"], str(tmp_path / "one.png")).size_px[0] > 0


def test_a_picture_too_large_to_draw_is_refused_not_allocated(tmp_path: Path, monkeypatch) -> None:
    """A scale audit: a 512-token trace asked matplotlib for 4.4 billion pixels (bad_alloc)."""
    from rasp_compiler.errors import UserError
    from rasp_compiler.viz import common

    model = compile_program(load_program(str(ROOT / "programs" / "reverse.rasp")), list("abc"), 8)
    monkeypatch.setattr(common, "MAX_PIXELS", 10_000)
    with pytest.raises(UserError, match=r"the picture would be [\d,]+ x [\d,]+ pixels, more than"):
        draw_trace(model, list("abca"), str(tmp_path / "t.png"))
    assert not (tmp_path / "t.png").exists()


def _every_program() -> list[tuple[str, list[str]]]:
    """(label, `rasp show`/`rasp compile` arguments) for every shipped program, the original
    repository's paper programs and the hand-written widths of bench/width_idioms.py."""
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from paper_programs import PROGRAMS as PAPER
    from shipped import PROGRAMS
    from width_idioms import HAND_WIDTHS
    from width_idioms import PROGRAMS as IDIOM_PROGRAMS

    cases = [(s.name, [str(s.file), "--vocab", json.dumps(list(s.vocab3)), "--max-len", "6"])
             for s in PROGRAMS]
    shipped = {str(s.file) for s in PROGRAMS}
    for path in sorted((ROOT / "programs").rglob("*.rasp")):  # over real-valued tokens
        if str(path) not in shipped:
            cases.append((path.name, [str(path), "--input-range", "-1", "1", "--max-len", "6"]))
    for name, vocab, _ in PAPER:
        cases.append((f"paper/{name}", [str(ROOT / "tests/data/paper_examples.rasp"), "--output", name,
                                        "--vocab", vocab, "--max-len", "6"]))
    for hand in HAND_WIDTHS:
        for program in IDIOM_PROGRAMS:
            cases.append((f"idiom/{hand}/{program}", [f"idiom:{hand}:{program}", "--vocab", "abcde",
                                                      "--max-len", "10"]))
    return cases


@pytest.mark.parametrize("label,args", _every_program(), ids=[c[0] for c in _every_program()])
def test_show_draws_every_program_that_compile_compiles(tmp_path, capsys, label: str,
                                                        args: list[str]) -> None:
    """Issue 47: a program the compiler rewrote (a hand-written width) compiled, but `rasp show`
    said "the plan is of another program". The picture is now of the program as compiled."""
    if args[0].startswith("idiom:"):
        import sys

        sys.path.insert(0, str(ROOT / "bench"))
        from width_idioms import source

        _, hand, program = args[0].split(":")
        path = tmp_path / f"{hand}_{program}.rasp"
        path.write_text(source(hand, program))
        args = [str(path), *args[1:]]
    rc = cli(["show", *args, "-o", str(tmp_path / "plan.svg"), "--json"])
    out = capsys.readouterr()
    if rc != 0:  # only a program `rasp compile` refuses may be refused
        assert cli(["compile", *args, "-o", str(tmp_path / "m")]) != 0, out.err
        return
    drawn = json.loads(out.out)
    assert (tmp_path / "plan.svg").stat().st_size > 1000
    # every unit of the plan is drawn, and no node sits in a column past the model's last
    model_rc = cli(["compile", *args, "-o", str(tmp_path / "m")])
    assert model_rc == 0
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    for lp in config["plan"]:  # every head colours a node, or is a caption in its column
        for h in lp["heads"]:
            captions = drawn["captions"].get(str(1 + 2 * lp["layer"]), [])
            assert f"L{lp['layer']} head {h['head']}" in drawn["units"] or any(
                line.startswith(f"head {h['head']}:") for line in captions), (label, h, drawn["units"])
    assert max(p["column"] for p in drawn["placement"].values()) <= 2 * config["n_layers"]


def test_show_draws_a_hand_written_width_as_the_width_it_compiles_to(tmp_path, capsys) -> None:
    """The sort of the original RASP library, its width written by hand (issue 47's program):
    the picture is of the program as compiled, its names kept where they survive."""
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from width_idioms import source

    path = tmp_path / "sort.rasp"
    path.write_text(source("rasplib", "sort"))
    assert cli(["show", str(path), "--vocab", "abcde", "--max-len", "10", "-o", str(tmp_path / "p.png"),
                "--json"]) == 0
    drawn = json.loads(capsys.readouterr().out)
    place = drawn["placement"]
    assert place["sort_by.before.width"]["unit"] == "L0 head 0"  # the width, named after its selector
    assert place["sort_by.place"]["unit"] == "L0 MLP"  # the user's name for it survives
    assert place["sorted"]["unit"] == "L1 head 0"
    # the hand-made parts the compiler no longer computes are not drawn
    assert not any(nid.startswith("width.") for nid in drawn["labels"])
    assert "round(except0 + valat0)" in drawn["labels"]["sort_by.place"]


def test_the_same_picture_drawn_twice_is_byte_identical(tmp_path, capsys) -> None:
    """An SVG carried the time it was drawn (dc:date) and random clip-path and image ids; a PDF
    drawn through the API its creation date."""
    model = tmp_path / "m"
    assert cli(["compile", str(ROOT / "programs" / "reverse.rasp"), "--vocab", "ab", "--max-len", "3",
                "-o", str(model)]) == 0
    for args in (["show", str(model), "--input", "ab"],
                 ["show", str(ROOT / "programs" / "reverse.rasp"), "--vocab", "ab", "--max-len", "3"]):
        drawn = []
        for i in range(2):
            assert cli(args + ["-o", str(tmp_path / f"p{i}.svg")]) == 0
            drawn.append((tmp_path / f"p{i}.svg").read_bytes())
        assert drawn[0] == drawn[1] and b"<dc:date>" not in drawn[0]
    program = load_program(REVERSE)
    plan = compile_program(program, "ab", 3).plan
    pdfs = []
    for i in range(2):
        draw_plan(program, plan, str(tmp_path / f"p{i}.pdf"))
        pdfs.append((tmp_path / f"p{i}.pdf").read_bytes())
    assert pdfs[0] == pdfs[1]


def test_draw_trace_of_tracrs_assembled_model_says_to_pass_its_model(tmp_path) -> None:
    """First use: draw_trace(compile_rasp_to_model(...), ...) said only "takes a compiled model
    ..., got AssembledModel", not that the compiled model is its .model (and takes no BOS)."""
    import warnings

    from rasp_compiler.errors import UserError
    from rasp_compiler.pyapi import compiling, lib, tokens

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assembled = compiling.compile_rasp_to_model(lib.make_reverse(tokens), {"a", "b"}, 4,
                                                    compiler_bos="BOS")
    with pytest.raises(UserError, match="got AssembledModel") as err:
        draw_trace(assembled, ["BOS", "a", "b"], str(tmp_path / "t.png"))
    assert "assembled.model" in err.value.hint and "without BOS" in err.value.hint
    with pytest.raises(UserError, match="got Aggregate") as err:
        draw_trace(lib.make_reverse(tokens), "ab", str(tmp_path / "t.png"))
    assert "compile it first" in err.value.hint
    assert draw_trace(assembled.model, "ab", str(tmp_path / "t.png")).head_titles


def test_draw_plan_of_a_loaded_models_compiled_program_says_it_is_not_saved(tmp_path) -> None:
    """First use: draw_plan(loaded.compiled_program, loaded.plan, path) said only "takes a Program,
    got NoneType": a loaded model has no compiled_program, and nothing said so."""
    import warnings

    from rasp_compiler.compiler import CompiledModel
    from rasp_compiler.errors import UserError
    from rasp_compiler.pyapi import compile_program as compile_sop
    from rasp_compiler.pyapi import lib, tokens

    reverse = lib.make_reverse(tokens)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile_sop(reverse, "ab", 4).save(str(tmp_path / "m"))
    loaded = CompiledModel.load(str(tmp_path / "m"))
    with pytest.raises(UserError, match="got NoneType") as err:
        draw_plan(loaded.compiled_program, loaded.plan, str(tmp_path / "p.png"))
    assert "loaded from disk" in err.value.hint
    assert draw_plan(reverse, loaded.plan, str(tmp_path / "p.png"), max_len=4).units[0] == "embedding"


def test_a_picture_is_written_beside_its_path_and_renamed_over_it(tmp_path, capsys) -> None:
    # savefig wrote in place: through a link there (the file it names was overwritten with the
    # picture) and, killed while drawing, half a picture
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    link = tmp_path / "plan.png"
    link.symlink_to(precious)
    args = ["show", str(ROOT / "programs/sort.rasp"), "--vocab", "abc", "--max-len", "4"]
    assert cli([*args, "-o", str(link)]) == 0
    assert precious.read_text() == "keep me\n"
    assert not link.is_symlink() and link.read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.png", "precious.txt"]  # no temporary
    assert cli([*args, "-o", str(tmp_path / "again.png")]) == 0
    assert (tmp_path / "again.png").read_bytes() == link.read_bytes()
