"""Weights before torch (compiler/artifact.py): ``rasp compile`` writes its files without importing
torch, and they are byte for byte the files the torch runtime writes from the same weights."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from rasp_compiler import runtime
from rasp_compiler.compiler import artifact, compile_program, compile_weights, load
from rasp_compiler.errors import ArtifactError
from rasp_compiler.lang import load_program

ROOT = Path(__file__).resolve().parents[1]


def _files(directory: Path) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in (artifact.CONFIG_FILE, artifact.WEIGHTS_FILE)}


def test_the_artifact_names_are_the_runtimes() -> None:
    assert (artifact.FORMAT, artifact.CONFIG_FILE, artifact.WEIGHTS_FILE) == \
        (runtime.FORMAT, runtime.CONFIG_FILE, runtime.WEIGHTS_FILE)


def test_the_weights_digest_is_the_runtimes_for_every_dtype_and_shape() -> None:
    rng = np.random.default_rng(0)
    tensors = {"b": rng.standard_normal(5).astype(np.float32),
               "a": rng.standard_normal((3, 4)),                       # float64
               "empty": np.zeros((0, 7), dtype=np.float32),
               "strided": rng.standard_normal((6, 6)).astype(np.float32)[:, ::2]}
    as_torch = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in tensors.items()}
    assert artifact.weights_digest(tensors) == runtime.weights_digest(as_torch)
    tensors["a"] = tensors["a"].astype(np.float32)  # the dtype is part of the digest
    assert artifact.weights_digest(tensors) != runtime.weights_digest(as_torch)
    config = {"z": [1, 2.5, "§"], "a": {"b": None}}
    assert artifact.config_digest(config) == runtime.config_digest(config)


@pytest.mark.parametrize("name, vocab, max_len, options", [
    ("reverse", "abcde", 12, {}),                          # a float64 MLP inside a float32 model
    ("tracr/shuffle_dyck2", "()[]x", 10, {}),
    ("sort", "abc", 7, {"dtype": "float64"}),
    ("softmax", None, 6, {"input_range": (-50, 50), "fixed_length": 6}),  # real-valued tokens
])
def test_saved_weights_are_byte_identical_to_the_torch_models(name, vocab, max_len, options,
                                                               tmp_path: Path) -> None:
    program = load_program(str(ROOT / "programs" / f"{name}.rasp"))
    weights = compile_weights(program, vocab and list(vocab), max_len, **options)
    model = compile_program(program, vocab and list(vocab), max_len, **options)
    weights.save(tmp_path / "weights")
    model.save(str(tmp_path / "model"))
    assert _files(tmp_path / "weights") == _files(tmp_path / "model")
    assert weights.summary().split("compile time")[0] == model.summary().split("compile time")[0]
    assert {k: v for k, v in weights.stats().items() if k != "compile_seconds"} == \
        {k: v for k, v in model.stats().items() if k != "compile_seconds"}
    assert weights.params == model.params
    reloaded = load(str(tmp_path / "weights"))  # the runtime's checks of both hashes pass
    assert reloaded.config["weights_sha256"] == weights.config["weights_sha256"]


def test_the_torch_model_of_the_weights_runs_them(tmp_path: Path) -> None:
    weights = compile_weights(load_program(str(ROOT / "programs/reverse.rasp")), list("abc"), 8)
    assert repr(weights) == (f"CompiledWeights(layers=2, heads_per_layer={weights.heads_per_layer}, "
                             f"residual_width={weights.residual_width}, params={weights.params:,})")
    model = weights.model()
    assert model.run(["abca", "cb"]) == [list("acba"), list("bc")]
    assert model.compile_seconds == weights.compile_seconds and model.analysis is weights.analysis


def test_saving_weights_refuses_a_file_or_a_non_path(tmp_path: Path) -> None:
    weights = compile_weights(load_program(str(ROOT / "programs/length.rasp")), list("ab"), 4)
    (tmp_path / "taken").write_text("x")
    with pytest.raises(ArtifactError, match="it is a file, not a directory"):
        weights.save(tmp_path / "taken")
    with pytest.raises(ArtifactError, match="a model directory is a path, not int"):
        weights.save(3)
    with pytest.raises(ArtifactError, match="cannot write the model"):
        weights.save(tmp_path / "taken" / "below")
    assert not (tmp_path / "taken" / "below").exists()


@pytest.mark.parametrize("args, wrote", [
    (["compile", "programs/tracr/shuffle_dyck2.rasp", "--vocab", "()[]x", "--max-len", "8", "-o", "out"],
     "out/model.safetensors"),
    (["compile", "programs/softmax.rasp", "--input-range", "-50", "50", "-o", "out"],
     "out/model.safetensors"),
    (["show", "programs/reverse.rasp", "--vocab", "abc", "--max-len", "8", "-o", "plan.png"], "plan.png"),
])
def test_commands_that_run_no_model_never_import_torch(args, wrote, tmp_path: Path) -> None:
    # torch is most of such a command's start-up; one that pulls it back in shows here
    probe = ("import sys\n"
             "from rasp_compiler.cli import main\n"
             "code = main(sys.argv[1:])\n"
             "print('torch' in sys.modules)\n"
             "sys.exit(code)\n")
    args = [str(tmp_path / a) if a in ("out", "plan.png") else a for a in args]
    done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False"
    assert (tmp_path / wrote).is_file()
