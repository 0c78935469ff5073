"""The command-line side of real-valued tokens (``--input-range LO HI``): the range and the default
length read from the arguments and the program file, and ``rasp check``'s real-valued mode (the
checking itself is ``rasp_compiler.compiler.real_check``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from rasp_compiler.errors import UserError


def example_length(path: str) -> int:
    """The input length a program file states: its first ``# example-json: [...] -> ...`` input,
    else its ``# fixed-length: N`` line, else the list or string of its last ``set example …`` (the
    original REPL's command, as the simulator paper's listings set their matrices)."""
    from rasp_compiler.bounded_json import load_json_text

    try:
        with open(path, encoding="utf-8-sig") as fh:  # a BOM before the first line: still read
            for number, line in enumerate(fh, 1):
                if line.startswith("# example-json:"):
                    # bounded: a line of 100,000 "[" raised RecursionError here
                    value = load_json_text(line.split(":", 1)[1].split("->")[0],
                                           f"{path}:{number} (# example-json)")
                    if isinstance(value, list) and value:
                        return len(value)
    except (OSError, ValueError):
        pass
    from rasp_compiler.commands.run import fixed_length

    stated = fixed_length(path)
    if stated is not None:
        return stated
    length = _set_example_length(path)
    if length is not None:
        return length
    raise UserError(f"--max-len is required: {path} states no input to take the length from "
                    "(no '# example-json' line, '# fixed-length' line or 'set example [...]')",
                    hint="give --max-len N (and --fixed-length N for a fixed shape)")


def _set_example_length(path: str) -> int | None:
    """The length of the value the file's last ``set example`` sets, or None (no such command, or
    a value that is not a non-empty list or string)."""
    from pathlib import Path

    from rasp_compiler.lang.elaborator import Session
    from rasp_compiler.lang.repl_commands import file_example

    try:
        with open(path, encoding="utf-8-sig") as fh:
            text = fh.read()
    except (OSError, ValueError):
        return None
    example = file_example(text)
    if example is None:
        return None
    session = Session()  # the example may name the file's own values (`set example ex2`)
    session.exec_source(text, path, directory=Path(path).resolve().parent)
    value = session.eval_expression(example, f"{path} (set example)",
                                    usage="set example [1, 2, 3]")
    if isinstance(value, list) and any(isinstance(v, (list, dict)) for v in value):
        raise UserError(f"{path}'s example {' '.join(example.split())} is a nested list: an input is one "
                        "flat sequence (a matrix row-major, one entry per position)",
                        hint="set example [1, 2, 3, 4] for [[1, 2], [3, 4]], or give --max-len N")
    if isinstance(value, (list, str)) and value:
        print(f"(length {len(value)}: the file's example {' '.join(example.split())})", file=sys.stderr)
        return len(value)
    return None


def _stated(model, at_widest: float) -> str:
    """The bound each value is checked against, as ``rasp compile`` states it: ``A + R x |value|``
    where it has a relative part (a division), else the absolute bound."""
    parts = (model.config.get("numeric") or {}).get("error_bound") or {}
    relative = float(parts.get("relative", 0.0))
    if relative <= 0:
        return f"{at_widest:.3g}"
    absolute = float(parts.get("absolute", 0.0))
    return (f"{absolute:.3g} + " if absolute else "") + f"{relative:.3g} x |value|"


def range_from_args(args: argparse.Namespace) -> tuple[float, float] | None:
    r = getattr(args, "input_range", None)
    if r is None:
        return None
    lo, hi = float(r[0]), float(r[1])
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise UserError(f"--input-range needs finite LO <= HI, got {r[0]} {r[1]}")
    return lo, hi


def main_check(args: argparse.Namespace) -> int:
    """``rasp check`` with ``--input-range``: the model against the interpreter on sampled inputs."""
    import torch

    from rasp_compiler.commands.check import CheckProgress, check_failure
    from rasp_compiler.commands.compile import compile_from_args
    from rasp_compiler.compiler.real_check import (
        check_real,
        corner_count,
        describe_maps,
        lengths_for,
        rounding_allowance,
        sample_inputs,
    )
    from rasp_compiler.lang import load_program

    torch.set_num_threads(max(1, min(4, torch.get_num_threads())))
    lo, hi = range_from_args(args)  # type: ignore[misc]
    model = compile_from_args(args)
    program = load_program(args.file, output=args.output or "out")
    samples = args.samples if args.samples is not None else 1000
    spec = model.config.get("input") or {}
    numeric = spec.get("kind") == "numerical"
    # inputs the model takes: integers for integer tokens (categorical, or numeric on the grid 1),
    # multiples of --input-grid where it was compiled with one
    integers = not numeric or spec.get("grid") == 1
    lengths = lengths_for(model)
    inputs = sample_inputs(lo, hi, lengths, samples, args.seed, integers=integers,
                           grid=None if integers else spec.get("grid"))
    corners = corner_count(lengths, integers=integers)
    model.to(args.device)  # the model's run moves its inputs there and its logits back
    with CheckProgress(len(inputs), "checking (random)") as bar:
        res = check_real(model, program, inputs, progress=bar)
    stats = model.stats()
    report = {"layers": stats["layers"], "heads_per_layer": stats["heads_per_layer"],
              "residual_width": stats["residual_width"], "mlp_hidden": stats["mlp_hidden"],
              "params": stats["params"], "mode": "random", "input_range": [lo, hi],
              "inputs_checked": res["inputs_checked"], "inputs_undefined": res["inputs_undefined"],
              "inputs_flagged": res["inputs_flagged"],
              "inputs_random": samples, "inputs_corner": corners,
              "max_abs_error": res["max_abs_error"], "error_bound": res["error_bound"],
              "maps": model.config.get("numeric", {}).get("maps", []),
              "compile_seconds": stats["compile_seconds"],
              "output_encoding": model.config["output"]["encoding"], "device": str(model.device),
              "failures": res["failures"]}
    if args.json:
        print(json.dumps(report))
    else:
        print(model.summary())
        print("\n".join(describe_maps(model)))
        rounding = rounding_allowance(model.config["dtype"], model.max_len)
        print(f"random: {res['inputs_checked']} inputs in [{lo:g}, {hi:g}] ({samples} random"
              + (f" + {corners} corner" if corners else "") + " inputs"
              + (f"; {res['inputs_undefined']} where the interpreter raises were skipped"
                 if res["inputs_undefined"] else "")
              + (f"; {res['inputs_flagged']} flagged by the model (an excluded denominator, "
                 "--min-denominator) and not answered" if res["inputs_flagged"] else "")
              + f"), max abs error {res['max_abs_error']:.3g} "
              f"(stated bound {_stated(model, res['error_bound'])} + rounding, up to {rounding:.2g} x "
              f"max(1, |value|) at length {model.max_len})")
        for f in res["failures"]:
            if f["interpreter"] is None:
                print(f"  answered {f['input']!r}, where the program is undefined (the model should flag it)")
            else:
                print(f"  disagree on {f['input']!r}: error {f['error']:.3g}")
    failed = check_failure(res["inputs_checked"], res["inputs_failing"], res["inputs_undefined"],
                           res["inputs_flagged"])
    if failed is None and not res["ok"]:  # an answer where the program is undefined
        failed = UserError(f"the model answered {res['inputs_answered_undefined']:,} inputs where the "
                           "interpreter raises (it should flag them)")
    if failed:  # in text and --json mode: exit 1 never comes without a word on stderr
        print(failed.render(), file=sys.stderr)
        return 1
    return 0
