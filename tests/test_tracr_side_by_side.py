"""bench/tracr_side_by_side.py: its cells build and agree through our Python API, and its tracr
half (bench/tracr_driver.py, run in another Python) reaches the bench's table through the
protocol it documents.  tracr itself is not installed here: the protocol test runs the driver
against a stand-in ``tracr`` package (written below) that answers tracr's calls with this
compiler, so that what it checks is the plumbing, not tracr."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import tracr_cells  # noqa: E402
import tracr_side_by_side as bench  # noqa: E402


def small_args(**kw) -> argparse.Namespace:
    base = dict(batch=4, inputs=25, repeats=1, forward_repeats=1, compile_budget=30.0)
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.mark.parametrize("name", list(tracr_cells.PROGRAMS))
def test_each_cell_compiles_and_agrees_with_the_evaluator(name):
    row = bench.summarise(bench.ours(name, 6, small_args()), None)
    assert "ours_error" not in row, row
    assert row["inputs_with_answer"] > 0
    assert row["ours_correct"] == row["inputs_with_answer"], row
    assert row["ours_compiles_timed"] == 1 and row["ours_forward_s"] > 0


def test_inputs_are_the_same_in_both_processes():
    a, b = tracr_cells.check_inputs("sort", 10, 50), tracr_cells.check_inputs("sort", 10, 50)
    assert a == b and len({len(x) for x in a}) > 3 and all(1 <= len(x) <= 10 for x in a)
    assert all(len(x) == 10 for x in tracr_cells.batch_inputs("sort", 10, 5))


def test_numbers_agree_within_the_tolerance_booleans_as_0_and_1():
    assert tracr_cells.agrees(7.7e-18, 0.0) and tracr_cells.agrees(3, 3.0)
    assert not tracr_cells.agrees(0.5, 0.5 + 1e-3)
    assert tracr_cells.agrees(True, True) and not tracr_cells.agrees(True, False)
    assert tracr_cells.agrees(4.7e-18, False) and not tracr_cells.agrees(0.5, False)
    assert not tracr_cells.agrees("a", "b") and tracr_cells.agrees(None, None)


def test_a_row_counts_only_inputs_with_an_answer():
    row = {"outputs": [[1, 2], [3], [4]], "compile_cpu_s": [1.0], "forward_cpu_s": [1.0]}
    reference = [[1, 2], {"error": "ValueError"}, [5]]
    assert bench.correct(row, reference, numerical=False) == (1, 2, None)
    reference = [[1, None], [3], [4]]
    assert bench.correct(row, reference, numerical=False)[:2] == (2, 2)


STAND_IN = {
    "haiku/__init__.py": '__version__ = "stand-in"\n',
    "jax/__init__.py": '__version__ = "stand-in"\n\ndef jit(f):\n    return f\n',
    "jax/numpy.py": "from numpy import asarray  # noqa: F401\n",
    "tracr/__init__.py": "",
    "tracr/rasp/__init__.py": "",
    "tracr/rasp/rasp.py": "from rasp_compiler.pyapi import *  # noqa: F401,F403\n"
                          "from rasp_compiler.pyapi import evaluate, tokens  # noqa: F401\n",
    "tracr/compiler/__init__.py": "",
    "tracr/compiler/lib.py": "from rasp_compiler.pyapi.lib import *  # noqa: F401,F403\n",
    "tracr/compiler/compiling.py": textwrap.dedent('''
        """Answers the calls bench/tracr_driver.py makes of tracr with this compiler."""
        import types

        import numpy as np
        import torch

        from rasp_compiler.pyapi import compiling


        class Ready:
            def __init__(self, array):
                self.array = array

            def block_until_ready(self):
                return self

            def __array__(self, dtype=None, copy=None):
                return self.array


        class Model:
            def __init__(self, assembled):
                self.assembled, compiled = assembled, assembled.model
                self.model_config = types.SimpleNamespace(num_layers=compiled.n_layers)
                self.residual_labels = assembled.residual_labels
                self.params = assembled.params
                self.input_encoder, self.output_encoder = assembled.input_encoder, assembled.output_encoder

            def forward(self, params, ids):
                compiled = self.assembled.model
                ids = torch.as_tensor(np.asarray(ids))
                lengths = torch.full((ids.shape[0],), ids.shape[1] - 1)
                with torch.inference_mode():
                    logits = compiled.module(ids, lengths)
                out = logits.argmax(-1) if compiled.config["output"]["encoding"] == "categorical" \\
                    else logits[..., 0]
                return types.SimpleNamespace(unembedded_output=Ready(out.numpy()))


        def compile_rasp_to_model(program, vocab, max_seq_len, compiler_bos="compiler_bos"):
            return Model(compiling.compile_rasp_to_model(program, vocab, max_seq_len,
                                                         compiler_bos=compiler_bos))
    '''),
}


def test_the_driver_protocol_through_a_stand_in_tracr(tmp_path, monkeypatch, capsys):
    for rel, text in STAND_IN.items():
        path = tmp_path / "stand_in" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    out = tmp_path / "side_by_side.json"
    # the stand-in imports rasp_compiler: the driver runs from "/", so the checkout goes on the path
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setattr(sys, "argv", ["tracr_side_by_side.py", "--tracr-python", sys.executable,
                                      "--tracr-path", str(tmp_path / "stand_in"), "--programs", "reverse",
                                      "hist", "--lengths", "6", "--batch", "4", "--inputs", "20",
                                      "--repeats", "1", "--forward-repeats", "1", "--out", str(out)])
    assert bench.main() == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["program"], r["max_len"]) for r in rows] == [("reverse", 6), ("hist", 6)]
    for r in rows:
        assert r["reference"] == "tracr rasp.evaluate"
        assert r["tracr_correct"] == r["ours_correct"] == r["inputs_with_answer"] == 20, r
        assert r["evaluators_agree"] == "20/20"
        assert r["tracr_layers"] == r["ours_layers"] and r["compile_speedup"] > 0
    assert "compile >= 20x tracr's" in capsys.readouterr().out


def test_a_python_without_tracr_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["tracr_side_by_side.py", "--tracr-python", sys.executable,
                                      "--programs", "hist", "--lengths", "4",
                                      "--out", str(tmp_path / "o.json")])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        bench.main()
    assert "cannot import" in str(stop.value)
