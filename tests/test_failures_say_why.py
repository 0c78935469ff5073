"""A command that fails says why on stderr, with --json too (docs/robustness.md): `rasp simulate
--check --json` above its tolerance, `rasp check` of no input or with a disagreement (text and JSON,
categorical and real-valued), `rasp universal --program --json` and `--with-mlps --json` exited 1
with an empty stderr (the JSON, where there was one, carried a verdict at best)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rasp_compiler.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _one_error(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if not line.startswith("  hint:")]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_simulate_check_above_its_tolerance_says_why_with_json(capsys) -> None:
    rc = main(["simulate", "--n", "2", "--d", "2", "--check", "--trials", "2", "--tolerance", "0", "--json"])
    captured = capsys.readouterr()
    assert rc == 1 and json.loads(captured.out)["passed"] is False
    assert _one_error(captured.err).endswith("is above the tolerance 0")


@pytest.mark.parametrize("as_json", [False, True])
def test_check_of_no_defined_input_says_why(tmp_path: Path, capsys, as_json: bool) -> None:
    """Over the one-token vocabulary at length 2 the program averages two strings on its only input:
    the interpreter raises, nothing is checked, exit 1; stderr was empty in both modes."""
    src = tmp_path / "same.rasp"
    src.write_text("aggregate(select(tokens, tokens, ==), tokens);\n")
    rc = main(["check", str(src), "--vocab", "a", "--max-len", "2", "--fixed-length", "2"]
              + (["--json"] if as_json else []))
    captured = capsys.readouterr()
    assert rc == 1
    if as_json:
        assert json.loads(captured.out)["inputs_undefined"] == 1
    assert _one_error(captured.err) == "error: no input was checked: the interpreter raises on 1"


@pytest.mark.parametrize("as_json", [False, True])
def test_check_with_a_disagreement_says_why(capsys, monkeypatch, as_json: bool) -> None:
    """The model made wrong on purpose (its answers reversed): the report lists the inputs, and
    stderr says how many disagree."""
    from rasp_compiler.runtime import RaspModel

    real_decode = RaspModel.decode
    monkeypatch.setattr(RaspModel, "decode", lambda self, *a, **kw: [
        list(reversed(o)) if o is not None else o for o in real_decode(self, *a, **kw)])
    rc = main(["check", str(ROOT / "programs/sort.rasp"), "--vocab", "ab", "--max-len", "3"]
              + (["--json"] if as_json else []))
    captured = capsys.readouterr()
    assert rc == 1
    if as_json:
        assert json.loads(captured.out)["failures"]
    assert _one_error(captured.err) == "error: the model disagrees with the interpreter on 8 of 14 inputs"


def test_real_valued_check_with_a_disagreement_says_why_with_json(capsys, monkeypatch) -> None:
    from rasp_compiler.runtime import RaspModel

    real_run = RaspModel.run
    monkeypatch.setattr(RaspModel, "run", lambda self, xs, **kw: [[v + 1.0 for v in o] if o is not None
                                                                  else o for o in real_run(self, xs, **kw)])
    rc = main(["check", str(ROOT / "programs/softmax.rasp"), "--input-range", "-5", "5", "--max-len", "6",
               "--fixed-length", "6", "--samples", "20", "--json"])
    captured = capsys.readouterr()
    assert rc == 1 and json.loads(captured.out)["failures"]
    # 20 random inputs + 3 corners
    assert _one_error(captured.err) == "error: the model disagrees with the interpreter on 23 of 23 inputs"


def test_universal_program_sublayer_check_says_why_with_json(capsys) -> None:
    rc = main(["universal", "--program", str(ROOT / "programs/reverse.rasp"), "--vocab", "ab",
               "--max-len", "3", "--construction", "random", "--width", "3", "--attention-layer", "0",
               "--json"])
    captured = capsys.readouterr()
    assert rc == 1 and json.loads(captured.out)["max_abs_error"] > 1e-9
    assert _one_error(captured.err).startswith("error: the UT's stream after attention sublayer 0 differs")


def test_universal_with_mlps_names_the_refused_program_with_json(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.rasp"
    bad.write_text("nosuchname;\n")
    rc = main(["universal", "--with-mlps", "--programs", str(ROOT / "programs/length.rasp"), str(bad),
               "--vocab", "ab", "--max-len", "3", "--json"])
    captured = capsys.readouterr()
    assert rc == 1 and json.loads(captured.out.splitlines()[1])["refused"] == "unknown name 'nosuchname'"
    assert _one_error(captured.err) == f"error: 1 of 2 programs refused ({bad})"
