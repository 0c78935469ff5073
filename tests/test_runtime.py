"""The standalone runtime and the compile / eval / check commands: artifacts, bad inputs, exit codes."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rasp_compiler.cli import main
from rasp_compiler.compiler import compile_program, load
from rasp_compiler.errors import ArtifactError, InputError
from rasp_compiler.lang import load_program
from rasp_compiler.runtime import RaspModel

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parent.parent
REVERSE = str(ROOT / "programs" / "reverse.rasp")


@pytest.fixture()
def saved(tmp_path: Path) -> Path:
    model = compile_program(load_program(REVERSE), list("abc"), 8)
    model.save(str(tmp_path / "m"))
    return tmp_path / "m"


def test_runtime_imports_only_torch_safetensors_and_stdlib() -> None:
    tree = ast.parse((ROOT / "rasp_compiler" / "runtime.py").read_text())
    allowed = {"torch", "safetensors", "json", "math", "hashlib", "os", "typing", "__future__"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert {a.name.split(".")[0] for a in node.names} <= allowed
        elif isinstance(node, ast.ImportFrom) and node.module:
            root = node.module.split(".")[0]
            # the one optional import (the package's error classes) sits in a try/except ImportError
            assert root in allowed or node.module == "rasp_compiler.errors"


def test_runtime_runs_as_a_copied_file(saved: Path, tmp_path: Path) -> None:
    copy = tmp_path / "solo"
    copy.mkdir()
    (copy / "rasp_runtime.py").write_text((ROOT / "rasp_compiler" / "runtime.py").read_text())
    code = ("import sys; sys.modules['rasp_compiler'] = None; import rasp_runtime as r; "
            f"print(r.RaspModel.load({str(saved)!r}).run(['abca']))")
    out = subprocess.run([sys.executable, "-c", code], cwd=copy, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[['a', 'c', 'b', 'a']]"


def test_save_load_roundtrip(saved: Path) -> None:
    model = load(str(saved))
    assert isinstance(model, RaspModel)
    assert model.run(["abc", "ab"]) == [list("cba"), list("ba")]
    cfg = json.loads((saved / "config.json").read_text())
    assert cfg["output"]["values"] == ["a", "b", "c"]
    labels = [lab for sub in cfg["residual"] for lab in sub["labels"]]
    assert "tokens:a" in labels and "indices:7" in labels


def test_out_of_vocabulary_and_too_long(saved: Path) -> None:
    model = load(str(saved))
    with pytest.raises(InputError, match="not in the vocabulary"):
        model.run(["abz"])
    with pytest.raises(InputError, match="more than the 8"):
        model.run(["a" * 9])
    with pytest.raises(InputError, match="empty"):
        model.run([""])


def test_truncated_weights(saved: Path) -> None:
    w = saved / "model.safetensors"
    data = w.read_bytes()
    w.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArtifactError, match="truncated or corrupt"):
        load(str(saved))


def test_edited_config(saved: Path) -> None:
    c = saved / "config.json"
    cfg = json.loads(c.read_text())
    cfg["output"]["values"] = ["c", "b", "a"]
    c.write_text(json.dumps(cfg))
    with pytest.raises(ArtifactError, match="edited"):
        load(str(saved))


def test_changed_weights(saved: Path) -> None:
    from safetensors.torch import load_file, save_file
    w = saved / "model.safetensors"
    from safetensors import safe_open
    with safe_open(str(w), framework="pt") as fh:
        meta = fh.metadata()
    tensors = load_file(str(w))
    tensors["unembed.W_U"] = tensors["unembed.W_U"] * 2
    save_file(tensors, str(w), metadata=meta)
    with pytest.raises(ArtifactError, match="weights were changed"):
        load(str(saved))


# ---------------------------------------------------------------- the command line
def cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_compile_eval_check(tmp_path: Path, capsys) -> None:
    code, out, _ = cli(["compile", REVERSE, "--vocab", "abc", "--max-len", "6", "-o", str(tmp_path / "m")],
                       capsys)
    assert code == 0 and "layers: 2" in out and "residual width" in out
    code, out, _ = cli(["eval", str(tmp_path / "m"), "--input", "abca", "--json"], capsys)
    assert code == 0 and json.loads(out) == {"output": ["a", "c", "b", "a"]}
    code, out, _ = cli(["eval", str(tmp_path / "m"), "--input-json", '["a", "b"]', "--json"], capsys)
    assert json.loads(out) == {"output": ["b", "a"]}
    code, out, _ = cli(["check", REVERSE, "--vocab", "abc", "--max-len", "4", "--json"], capsys)
    rep = json.loads(out)
    assert code == 0 and rep["inputs_checked"] == 3 + 9 + 27 + 81 == rep["inputs_agreeing"]
    for k in ("layers", "heads_per_layer", "residual_width", "params", "max_abs_error", "compile_seconds"):
        assert k in rep
    code, out, _ = cli(["check", REVERSE, "--vocab", '["a","b","c"]', "--max-len", "16", "--samples", "50",
                        "--json"], capsys)
    assert code == 0 and json.loads(out)["mode"] == "random"


def test_cli_bad_inputs_exit_nonzero_without_traceback(tmp_path: Path, capsys) -> None:
    m = str(tmp_path / "m")
    assert cli(["compile", REVERSE, "--vocab", "abc", "--max-len", "4", "-o", m], capsys)[0] == 0
    code, out, err = cli(["eval", m, "--input", "abz"], capsys)
    assert code != 0 and "not in the vocabulary" in err and "Traceback" not in err
    code, out, err = cli(["eval", m, "--input", "abcab"], capsys)
    assert code != 0 and "more than the 4" in err
    w = Path(m) / "model.safetensors"
    w.write_bytes(w.read_bytes()[:100])
    code, out, err = cli(["eval", m, "--input", "ab"], capsys)
    assert code != 0 and "truncated" in err
    bad = tmp_path / "bad.rasp"
    bad.write_text("x = 1;\ny = aggregate(select(tokens, tokens, ==), indices, \"none\");\nnumerical(y);\n")
    code, out, err = cli(["compile", str(bad), "--vocab", "abc", "--max-len", "4", "-o", m], capsys)
    assert code != 0 and "bad.rasp:" in err and "Traceback" not in err


def test_ambiguous_output_is_refused_not_decoded() -> None:
    """A categorical output that is not a clean one-hot raises instead of decoding by argmax, so a
    model outside its derived exactness fails loudly; `check` counts it as a disagreement."""
    from rasp_compiler.runtime import ModelOutputError

    model = compile_program(load_program(REVERSE), list("abc"), 8)
    logits = model.forward([list("abc")])
    assert model.decode(logits, [3]) == [list("cba")]
    assert model.unclean(logits, [3]) == [[]]
    blurred = logits.clone()
    best, second = blurred[0, 1].topk(2).indices.tolist()
    blurred[0, 1, second] = blurred[0, 1, best] - 1.0
    with pytest.raises(ModelOutputError, match="position 1 of input 0 is ambiguous"):
        model.decode(blurred, [3])
    assert isinstance(ModelOutputError("x"), ArtifactError)  # a clean CLI error, not a traceback
    assert model.decode(blurred, [3], strict=False)[0][1] == "b"
    assert model.unclean(blurred, [3]) == [[1]]
