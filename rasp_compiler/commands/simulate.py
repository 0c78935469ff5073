"""``rasp simulate``: generate the universal simulator U of one attention layer, or check it."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from rasp_compiler.commands.options import (
    SEED_HELP,
    check_at_least,
    check_finite,
    check_not_empty,
    check_seed,
    refuse_unless,
)
from rasp_compiler.errors import CompileError, UserError

EPILOG = """examples:
  rasp simulate --n 4 --d 4 --heads 2 -o U/                    generate U (float64) and save it
  rasp simulate --n 3 --d 3 --heads 1 --emit-rasp u.rasp -o U/  also save U's RASP source
  rasp simulate --n 8 --d 8 --heads 2 --check --trials 100 --trace --json
  rasp simulate --model U/ --input-json '[...]'                 run a saved U on one sequence

U is ONE transformer, compiled by the ordinary compiler from generated RASP source.  It reads
one sequence, row-major, one scalar per position:
  A_1..A_H (H*d*d), V_1..V_H (H*d*d), X (n*d), zeros up to L = max(2*H*d*d + n*d, n*H*d),
and writes T(X) = concat_h softmax_row(X A_h X^T) X V_h at the first n*H*d positions
(T[i][h*d + c] at i*H*d + h*d + c).  --causal masks j > i in every simulated head.
--check draws A, V, X uniform in --input-range (seeded) and compares with NumPy (stable softmax); an
output that is not finite (NaN or inf) anywhere fails the check (exit status 1).  U's margins grow
with --input-range: a range whose weights do not fit in --dtype is refused.
--trace adds the error of X^T, XA, XAX^T, softmax, XV and the output read from U's residual
stream and attention pattern."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("simulate", help="generate / check the universal simulator U of attention",
                              description="Generate U, one transformer that reads an attention layer's "
                              "weights and input as a sequence and outputs the layer's result.",
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, help="rows of X (the simulated layer's sequence length)")
    p.add_argument("--d", type=int, help="columns of X (the simulated layer's width)")
    p.add_argument("--heads", type=int, help="simulated heads H (default 1)")
    p.add_argument("--causal", action="store_true", help="the simulated layer uses a causal mask")
    p.add_argument("--dtype", choices=("float32", "float64"), help="U's dtype (default float64)")
    p.add_argument("--input-range", nargs=2, type=float, metavar=("LO", "HI"),
                   help="range of the entries of A, V, X U accepts (default -1 1): sizes its margins; "
                        "--check draws its entries from it")
    p.add_argument("--emit-rasp", metavar="FILE", help="write U's generated RASP source to FILE")
    p.add_argument("-o", "--out", metavar="DIR", help="save U (model.safetensors + config.json) to DIR")
    p.add_argument("--force", action="store_true",
                   help="with -o: write into a non-empty directory that holds no model (its "
                        "config.json and model.safetensors are replaced, other files kept); with "
                        "--emit-rasp: replace a file that is not RASP text")
    p.add_argument("--check", action="store_true", help="compare U with NumPy on random layers")
    p.add_argument("--trials", type=int, help="random layers for --check (default 100)")
    p.add_argument("--trace", action="store_true", help="with --check: the error of every intermediate")
    p.add_argument("--tolerance", type=float,
                   help="with --check: the largest max rel error (max |U - T| / max |T| per layer) that "
                        "passes; above it the check exits 1 (default 1e-9 for float64, 5e-6 for "
                        "float32); a NaN or inf output always fails")
    p.add_argument("--seed", type=int, default=None,
                   help=f"with --check: seed of the random layers, {SEED_HELP} (default 0)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--model", metavar="DIR", help="run a saved U (with --input-json) instead of generating")
    p.add_argument("--input-json", metavar="JSON", help="with --model: U's input sequence as a JSON list")
    p.set_defaults(func=main)


def _run_saved(args: argparse.Namespace) -> int:
    import math

    import numpy as np

    from rasp_compiler.errors import InputError
    from rasp_compiler.simulator import load_simulator

    if args.input_json is None:
        raise UserError("--model needs --input-json with U's input sequence")
    from rasp_compiler.bounded_json import load_json_text

    seq = load_json_text(args.input_json, "--input-json", error=InputError)
    if not isinstance(seq, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                            for v in seq):
        raise InputError("--input-json must be a JSON list of numbers")
    values = []
    for v in seq:
        try:
            values.append(float(v))
        except OverflowError:  # an int past the float range: refused below as a non-finite value
            values.append(math.inf)
    sim = load_simulator(args.model)
    arr = sim.layout.check_sequence(np.array(values, dtype=np.float64))
    T = sim.layout.read_output(sim.run_sequences(arr[None])[0])
    if args.json:
        print(json.dumps({"output": T.tolist()}))
    else:
        np.set_printoptions(floatmode="unique", suppress=True, linewidth=120)  # every digit: U is exact
        print(T)
    return 0


# options that shape or check a new U: a saved U (--model) has its own, and ignoring them silently
# let `--model U/ --check` print one output as if it were a check
GENERATE_ONLY = ("n", "d", "heads", "causal", "dtype", "input_range", "emit_rasp", "out", "check",
                 "trials", "trace", "seed", "tolerance")
DEFAULTS = {"heads": 1, "dtype": "float64", "input_range": (-1.0, 1.0), "trials": 100, "seed": 0}
# options of --check alone, with their parser defaults: without --check they changed nothing
CHECK_ONLY = {"trials": None, "trace": False, "seed": None, "tolerance": None}
# the bars of docs/simulator.md, as relative errors: a wider --input-range scales the error with T
TOLERANCE = {"float64": 1e-9, "float32": 5e-6}
MAX_DRAWN_BYTES = 1 << 30  # --check draws every random layer at once (seeded, reproducible)


def _check_combination(args: argparse.Namespace) -> None:
    """One error for options that do not apply, instead of ignoring them."""
    check_not_empty(args, "model", "out", "emit_rasp")
    if args.model:
        given = [name for name in GENERATE_ONLY if getattr(args, name) not in (None, False)]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise UserError(f"{flag} does not apply to --model (a saved U has its sizes and range)",
                            hint="rasp simulate --model DIR --input-json '[...]' runs it; generate a "
                                 "new U without --model")
    elif args.input_json is not None:
        raise UserError("--input-json needs --model DIR (the saved U to run it on)",
                        hint="save U with -o DIR first, then rasp simulate --model DIR --input-json ...")
    if not args.model and not args.check:
        refuse_unless(args, "--check", CHECK_ONLY)
    for name, value in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


U_SOURCE_HEAD = b"# U, the universal simulator"   # the first line generate_source writes


def _replaceable_text(path: str) -> bool:
    """Whether --emit-rasp may replace ``path``: it is absent, a link (replaced, never followed),
    empty, U's source written before, or a UTF-8 text file named ``.rasp``.  Any other text
    (`--emit-rasp notes.txt`, a `.py` or `.md` file) was replaced too, though --help says --force
    is needed to replace a file that is not RASP text."""
    if not os.path.isfile(path) or os.path.islink(path):
        return True
    if path.endswith((".json", ".safetensors")):
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 16)
        (head if len(head) < 1 << 16 else head[:-4]).decode("utf-8")  # not a character cut in two
    except UnicodeDecodeError:
        return False
    except OSError:
        return True  # unreadable: writing it says why
    if b"\0" in head:
        return False
    return not head.strip() or head.startswith(U_SOURCE_HEAD) or path.endswith(".rasp")


def _refuse_too_many_trials(args: argparse.Namespace, layout) -> None:
    """--check draws all random layers up front: refuse a count whose draw alone exhausts memory."""
    per_trial = 8 * (2 * layout.heads * layout.d ** 2 + layout.n * layout.d)
    if args.check and args.trials * per_trial > MAX_DRAWN_BYTES:
        raise UserError(f"--trials {args.trials:,} draws {args.trials * per_trial / 2 ** 30:,.1f} GiB of "
                        f"random layers at once (at most {MAX_DRAWN_BYTES // per_trial:,} trials for "
                        f"this size)", hint="fewer --trials, or several runs with different --seed")


def main(args: argparse.Namespace) -> int:
    import torch

    torch.set_num_threads(max(1, min(4, torch.get_num_threads())))
    _check_combination(args)
    if args.model:
        return _run_saved(args)
    for name in ("n", "d"):
        if getattr(args, name) is None:
            raise UserError(f"--{name} is required", hint="e.g. rasp simulate --n 4 --d 4 --heads 2 -o U/")
    check_at_least(args, 1, "n", "d", "heads", "trials")
    check_finite(args, "tolerance")
    check_seed(args)
    if not (args.check or args.out or args.emit_rasp):
        raise UserError("nothing to do", hint="give -o DIR to save U, --emit-rasp FILE, or --check")
    from rasp_compiler.commands.compile import CompileStatus
    from rasp_compiler.commands.real_options import range_from_args
    from rasp_compiler.simulator import build_simulator, check_simulator, generate_source
    from rasp_compiler.simulator.build import check_range, check_size

    input_range = range_from_args(args)
    _refuse_too_many_trials(args, check_size(args.n, args.d, args.heads))  # before any file is written
    check_range(input_range, args.dtype)
    if args.emit_rasp:
        from rasp_compiler.atomic_dir import write_file
        from rasp_compiler.errors import file_in_the_way

        if os.path.isdir(args.emit_rasp):
            raise UserError(f"--emit-rasp {args.emit_rasp} is a directory, not a file",
                            hint=f"give the file's name, e.g. {os.path.join(args.emit_rasp, 'u.rasp')}")
        if not args.force and not _replaceable_text(args.emit_rasp):
            # it was replaced silently: `--emit-rasp U/model.safetensors` wrote over a saved U
            raise UserError(f"--emit-rasp {args.emit_rasp} exists and is not a text file of RASP "
                            "source (a model's weights or config, other text or data); it is not "
                            "replaced",
                            hint="give another file name, or --force to replace it")
        blocker = file_in_the_way(os.path.dirname(os.path.abspath(args.emit_rasp)))
        if blocker is not None:  # makedirs would say only "File exists"
            raise UserError(f"{args.emit_rasp}: cannot write U's RASP source: {blocker} is a file, "
                            "not a directory")

        source = generate_source(args.n, args.d, args.heads, args.causal, dtype=args.dtype,
                                 input_range=input_range)

        def write(tmp: str) -> None:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(source)
        try:  # beside it, renamed over it, as every single-file artifact: never half-written, never
            write_file(args.emit_rasp, write)  # through a link (open() followed one, truncating its target)
        except OSError as err:
            raise UserError(f"{args.emit_rasp}: cannot write U's RASP source "
                            f"({err.strerror or err})") from None
    start = time.perf_counter()
    status = CompileStatus(doing="generating U")
    try:
        sim = build_simulator(args.n, args.d, args.heads, causal=args.causal, dtype=args.dtype,
                              input_range=input_range, progress=status)
    except CompileError as err:  # the compiler's hint speaks to a program's author (its s-ops)
        err.hint = "a narrower --input-range" + (" or --dtype float64" if args.dtype == "float32" else "") \
            + " (--emit-rasp FILE writes U's source, where the line shown is)"
        raise
    finally:
        status.close()
    seconds = time.perf_counter() - start
    _refuse_overflowing_weights(sim, args)
    if args.out:
        _save(sim, args.out, force=args.force)
    report = {"n": args.n, "d": args.d, "heads": args.heads, "causal": args.causal, "dtype": args.dtype,
              **sim.size(), "generation_seconds": round(seconds, 3)}
    if args.check:
        status = CompileStatus(doing="checking U")
        try:
            res = check_simulator(sim, trials=args.trials, seed=args.seed, trace=args.trace,
                                  bounds=input_range, progress=status)
        finally:
            status.close()
        tolerance = TOLERANCE[args.dtype] if args.tolerance is None else args.tolerance
        report = {**res, "generation_seconds": round(seconds, 3), "tolerance": tolerance,
                  "passed": not res["non_finite_trials"] and res["max_rel_error"] <= tolerance}
    if args.json:
        print(json.dumps(_json_safe(report)))
    else:
        print(f"U for n={args.n}, d={args.d}, H={args.heads}{' (causal)' if args.causal else ''}, "
              f"{args.dtype}: {report['layers']} layers, heads per layer {report['heads_per_layer']}, "
              f"residual width {report['residual_width']}, sequence length {report['sequence_length']}, "
              f"{report['params']:,} parameters; generated in {seconds:.2f} s")
        if args.check:
            lo, hi = input_range
            print(f"{args.trials} random layers (seed {args.seed}, entries uniform in [{lo:g}, {hi:g}]): "
                  f"max abs error {report['max_abs_error']:.3g}, "
                  f"max rel error {report['max_rel_error']:.3g} "
                  f"({'within' if report['passed'] else 'ABOVE'} the tolerance {report['tolerance']:g})")
            for stage, err in report.get("stages", {}).items():
                print(f"  {stage:8s} max abs error {err:.3g}")
        if args.out:
            print(f"wrote {os.path.join(args.out, 'model.safetensors')} and "
                  f"{os.path.join(args.out, 'config.json')}")
        if args.emit_rasp:
            print(f"wrote {args.emit_rasp}")
    if args.check and report["non_finite_trials"]:
        raise UserError(f"U's output is not finite (NaN or inf) on {report['non_finite_trials']} of "
                        f"{args.trials} random layers",
                        hint="its intermediates overflow " + args.dtype + ": a narrower --input-range"
                             + (" or --dtype float64" if args.dtype == "float32" else ""))
    if args.check and not report["passed"]:  # with --json too: beside the JSON, on stderr, or exit
        print(f"error: max rel error {report['max_rel_error']:.3e} is above the tolerance "  # 1 had no word
              f"{report['tolerance']:g}", file=sys.stderr)
        return 1
    return 0


def _refuse_overflowing_weights(sim, args: argparse.Namespace) -> None:
    """U's attention margins grow with --input-range (as a power of it); refuse a U whose weights
    overflow its dtype rather than save or check one that outputs NaN."""
    import torch

    if all(bool(torch.isfinite(t).all()) for t in sim.model.tensors.values()):
        return
    lo, hi = args.input_range
    raise UserError(f"--input-range {lo:g} {hi:g} is too wide for {args.dtype}: the weights U needs "
                    "for it overflow (some are inf or NaN)",
                    hint="a narrower --input-range" + (" or --dtype float64" if args.dtype == "float32"
                                                         else ""))


def _save(sim, out: str, force: bool = False) -> None:
    """Save U to ``out``; a directory that cannot be written is one UserError naming it."""
    import re

    from safetensors import SafetensorError

    try:
        sim.model.save(out, force=force)
    except OSError as err:
        raise UserError(f"{out}: cannot write U ({err.strerror or err})") from None
    except SafetensorError as err:  # safetensors reports a failed write as its own error
        m = re.search(r"I/O error: (.*?) \(os error", str(err))
        raise UserError(f"{out}: cannot write U ({m.group(1) if m else err})") from None


def _json_safe(value):
    """NaN / inf become null: json.dumps would write NaN or Infinity, which is not JSON."""
    import math

    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value
