"""The tracr half of ``bench/tracr_side_by_side.py``: run in a Python that can import tracr (jax,
haiku), never in this project's environment, and started by that bench.

Reads a job from stdin, a JSON object: ``cells`` ([program, max_len] pairs of
``bench/tracr_cells.py``), ``batch``, ``inputs``, ``repeats``, ``forward_repeats`` and
``compile_budget`` (seconds).  Writes one JSON object per cell to stdout as it finishes it:

* ``compile_cpu_s``: CPU seconds of each timed compile (``compiling.compile_rasp_to_model``, with
  BOS "BOS"); the first compile of a cell is a warm-up, unless it alone took longer than
  ``compile_budget``, in which case it is the only one;
* ``forward_cpu_s``: CPU seconds of each run of the jitted forward (``jax.jit(model.forward)``,
  its output waited for) on ``batch`` inputs of full length, after a run that compiles it;
* ``outputs``: the model's decoded output on each of ``inputs`` random inputs (its forward on the
  inputs of each length as one batch, decoded as ``AssembledTransformerModel.apply`` decodes),
  and ``reference``: ``rasp.evaluate`` of the program on each, or ``{"error": ...}``;
* ``layers``, ``residual_width``, ``params`` (dense), or ``error`` where tracr refused the program.

The process stays up for all cells (a warm process), on one CPU thread where the caller sets
XLA_FLAGS (the bench does).
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tracr_cells import PROGRAMS, batch_inputs, check_inputs, compile_times  # noqa: E402


def plain(value):
    """A JSON value: numpy scalars as Python numbers, lists element by element."""
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return value


def run_cell(name: str, n: int, job: dict) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from tracr.compiler import compiling, lib
    from tracr.rasp import rasp

    cell = PROGRAMS[name]
    out: dict = {"program": name, "max_len": n}

    def compile_once():
        program = cell.build(rasp, lib, n)
        return compiling.compile_rasp_to_model(program, set(cell.vocab), max_seq_len=n, compiler_bos="BOS")

    try:
        out["compile_cpu_s"], model = compile_times(compile_once, job["repeats"], job["compile_budget"])
    except Exception as err:  # tracr refuses the program (NotImplementedError and others)
        out["error"] = f"{type(err).__name__}: {err}".splitlines()[0][:300]
        return out
    out["layers"] = int(model.model_config.num_layers)
    out["residual_width"] = len(model.residual_labels)
    out["params"] = int(sum(np.size(w) for module in model.params.values() for w in module.values()))

    def encode(inputs):
        return jnp.asarray(np.array([model.input_encoder.encode(["BOS", *x]) for x in inputs]))

    forward = jax.jit(model.forward)
    ids = encode(batch_inputs(name, n, job["batch"]))
    forward(model.params, ids).unembedded_output.block_until_ready()  # compiles the jitted forward
    times = []
    for _ in range(job["forward_repeats"]):
        c0 = time.process_time()
        forward(model.params, ids).unembedded_output.block_until_ready()
        times.append(time.process_time() - c0)
    out["forward_cpu_s"] = times

    program = cell.build(rasp, lib, n)
    inputs = check_inputs(name, n, job["inputs"])
    outputs: list = [None] * len(inputs)
    by_length: dict[int, list[int]] = {}
    for k, x in enumerate(inputs):
        by_length.setdefault(len(x), []).append(k)
    for ks in by_length.values():
        got = np.asarray(model.forward(model.params, encode([inputs[k] for k in ks])).unembedded_output)
        for row, k in enumerate(ks):
            decoded = got[row].tolist()
            if model.output_encoder:
                decoded = model.output_encoder.decode(decoded)
            outputs[k] = plain(decoded[1:])  # position 0 is BOS
    reference = []
    for x in inputs:
        try:
            reference.append(plain(rasp.evaluate(program, x)))
        except Exception as err:
            reference.append({"error": type(err).__name__})
    out["outputs"], out["reference"] = outputs, reference
    return out


def main() -> int:
    job = json.load(sys.stdin)
    try:
        import haiku
        import jax
        versions = {"jax": jax.__version__, "haiku": haiku.__version__}
    except ImportError as err:
        print(json.dumps({"fatal": f"cannot import tracr's dependencies: {err}"}), flush=True)
        return 1
    try:
        from tracr.compiler import compiling, lib
    except ImportError as err:
        print(json.dumps({"fatal": f"cannot import tracr: {err}"}), flush=True)
        return 1
    # a first compile, so that jax's own start-up is not counted in the first cell
    compiling.compile_rasp_to_model(lib.make_length(), {"a", "b"}, max_seq_len=4, compiler_bos="BOS")
    print(json.dumps({"versions": versions}), flush=True)
    for name, n in job["cells"]:
        try:
            row = run_cell(name, n, job)
        except Exception:
            row = {"program": name, "max_len": n, "error": "driver failed: " +
                   traceback.format_exc().strip().splitlines()[-1][:300]}
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
