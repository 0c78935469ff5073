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
