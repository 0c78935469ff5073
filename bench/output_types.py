"""Do a compiled model's numerical outputs have the interpreter's types (docs/known-bugs.md #19)?

For the differential generator's programs (``random_source``, seeds --start .. --start + --count - 1,
max length 5) whose output is numerical, this runs --inputs random inputs each through the
interpreter and through the model two ways: ``decode(forward(x))`` (every position an int where
every value of the output's set is an int, else a float: the decoding before 7 Dec) and
``run(x)`` (typed by the keys the output head read: ``RaspModel.typed``).  It counts the defined
inputs where the output differs from the interpreter's in a value or in a type, and the defined
inputs that ``run`` refuses (there should be none).

    .venv/bin/python bench/output_types.py --start 1000 --count 400

Prints one line and writes bench/results/output_types.json.
"""

from __future__ import annotations

import argparse
import json
import random
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "output_types.json"


def same(got: list, want: list) -> bool:
    """Equal values (within float rounding) of equal types, position by position."""
    return len(got) == len(want) and all(
        type(a) is type(b) and (a == b or abs(a - b) < 1e-4 * max(1, abs(b)))
        for a, b in zip(got, want, strict=True))


def main() -> None:
    from rasp_compiler.compiler import compile_program
    from rasp_compiler.errors import CompileWarning
    from rasp_compiler.interpreter import run
    from rasp_compiler.lang import program_from_source
    from rasp_compiler.runtime import ModelOutputError
    from rasp_compiler.testing.random_source import generate, random_input

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", type=int, default=1000)
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--inputs", type=int, default=40)
    args = ap.parse_args()
    warnings.simplefilter("ignore", CompileWarning)
    models = typed = checked = old_differs = new_differs = refused = 0
    examples = []
    for seed in range(args.start, args.start + args.count):
        gen = generate(seed, max_len=5)
        try:
            program = program_from_source(gen.source)
            model = compile_program(program, list(gen.vocab), 5, causal=gen.causal)
        except Exception:  # noqa: BLE001 - refused or failed programs are not this bench's subject
            continue
        if model.config["output"]["encoding"] != "numerical":
            continue
        models += 1
        typed += model.output_head is not None
        rng = random.Random(seed)
        for _ in range(args.inputs):
            x = random_input(rng, 5, tuple(gen.vocab))
            try:
                want = run(program, x)
            except Exception:  # noqa: BLE001 - undefined there: not compared
                continue
            try:
                got = model.run([x])[0]
            except ModelOutputError:
                refused += 1
                continue
            old = model.decode(model.forward([x]), [len(x)], strict=False)[0]
            checked += 1
            old_differs += not same(old, want)
            if not same(got, want):
                new_differs += 1
                if len(examples) < 5:
                    examples.append({"seed": seed, "input": x, "model": got, "interpreter": want})
    result = {"seeds": [args.start, args.start + args.count - 1], "inputs_per_program": args.inputs,
              "numerical_output_models": models, "typed_by_output_head": typed, "defined_inputs": checked,
              "differ_old_decoding": old_differs, "differ_run": new_differs,
              "defined_inputs_refused": refused, "examples": examples}
    print(f"seeds {args.start}..{args.start + args.count - 1}: {models} models with a numerical output "
          f"({typed} typed by the output head); {checked} defined inputs; a value or type differs from "
          f"the interpreter's: decode(forward) {old_differs}, run {new_differs}; defined inputs "
          f"refused {refused}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
