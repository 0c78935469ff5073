"""``rasp eval``: run a saved compiled model on one input, or on a file of inputs (one per line)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

EPILOG = """examples:
  rasp eval out/ --input abca
  rasp eval out/ --input-json '["a", "b"]' --json      -> {"output": [...]}
  rasp eval out/ --inputs words.txt                     one output per line, in order
  rasp eval out/ --inputs-json inputs.jsonl --json      one {"input": ..., "output": ...} per line
  printf 'abc\\nba\\n' | rasp eval out/ --inputs -
  rasp eval out/ --explain                              which path each weight's product takes

--inputs reads one input string per line; --inputs-json one JSON list (or string) per line (JSON
Lines).  The inputs run in batches.  The first line that cannot be read or run stops the run: the
outputs of the lines before it are printed, then the error names the line, and the exit status is 1.
A model over numbers refuses an input outside its --input-range, off its --input-grid (or a
fraction, for integer tokens), and one its compile excluded (--min-denominator: a denominator
nearer 0 than EPS), naming the denominator and the position: it never answers those."""

BATCH = 512


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("eval", help="run a compiled model on an input",
                              description="Run a model written by 'rasp compile' (torch + safetensors "
                              "only) and print the decoded output.", epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="DIR", help="directory with model.safetensors and config.json")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--input", metavar="TEXT", help="input string; its characters are the tokens")
    src.add_argument("--input-json", metavar="JSON", help="input as a JSON list")
    src.add_argument("--inputs", metavar="FILE", help="one input string per line (- for stdin)")
    src.add_argument("--inputs-json", metavar="FILE",
                     help="one JSON list per line, JSON Lines (- for stdin)")
    p.add_argument("--json", action="store_true", help='print {"output": [...]}')
    p.add_argument("--device", default="cpu", metavar="cpu|cuda",
                   help="where the network runs (default cpu)")
    p.add_argument("--paths", choices=("auto", "dense"), default="auto",
                   help="auto (default): each product skips its weight's zeros where that is faster on the "
                        "device; dense: every product on whole matrices (the same outputs, bit for bit)")
    p.add_argument("--explain", action="store_true",
                   help="print which path each weight's product takes, and why (to stderr where inputs run)")
    p.set_defaults(func=main)


def explain_table(model: Any) -> str:
    """One line per weight's product: name, shape, non-zero entries, path and why."""
    rows = model.module.explain()
    width = max(len(r["tensor"]) for r in rows)
    return "\n".join(f"{r['tensor']:<{width}}  {'x'.join(map(str, r['shape'])):>11}  "
                     f"{r['nonzero']:>9,} nonzero  {r['path']:<7}  {r['why']}" for r in rows)


def main(args: argparse.Namespace) -> int:
    from rasp_compiler.commands.run import parse_input_json
    from rasp_compiler.runtime import RaspModel

    batch_file = args.inputs if args.inputs is not None else args.inputs_json
    if batch_file:
        inputs, unreadable = read_batch(batch_file, json_lines=args.inputs_json is not None)
    model = RaspModel.load(args.model).to(args.device)
    model.module.paths = args.paths
    if args.explain:
        alone = args.input is None and args.input_json is None and not batch_file
        print(explain_table(model), file=sys.stdout if alone else sys.stderr)
        if alone:
            return 0
    elif args.input is None and args.input_json is None and not batch_file:
        from rasp_compiler.errors import InputError

        raise InputError("rasp eval needs an input: --input, --input-json, --inputs or --inputs-json "
                         "(or --explain alone)")
    if not batch_file:
        single = list(args.input) if args.input is not None else parse_input_json(args.input_json)
        out = _tidy(model.run([single])[0], model.config["dtype"])
        print(json.dumps({"output": out}) if args.json else _shown(out))
        return 0
    from rasp_compiler.commands.check import CheckProgress

    # a bar on stderr (a terminal only) once the run looks longer than a couple of seconds
    with CheckProgress(len(inputs), "evaluating") as bar:
        for start in range(0, len(inputs), BATCH):
            chunk = inputs[start:start + BATCH]
            outputs, failure = _run_chunk(model, chunk, batch_file)
            for (_, x), out in zip(chunk, outputs, strict=False):  # outputs stop at a refused line
                out = _tidy(out, model.config["dtype"])
                print(json.dumps({"input": x, "output": out}) if args.json else _shown(out))
            if failure is not None:
                sys.stdout.flush()  # the outputs before the bad line come out before its error
                raise failure
            bar(len(chunk))
    if unreadable is not None:
        sys.stdout.flush()
        raise unreadable
    return 0


def _tidy(out: list[Any], dtype: str) -> list[Any]:
    """A numerical output as its model computed it, printed without float noise: a float32 value
    as the shortest decimal that is that float32 (0.2, not 0.20000000298023224), and a magnitude
    under 1e-9 (rounding residue, far below the 1e-4 tolerance of numerical outputs) as 0.0."""
    return [_shortest(v, dtype) if isinstance(v, float) else v for v in out]


def _shortest(v: float, dtype: str) -> float:
    if abs(v) < 1e-9:
        return 0.0
    if dtype != "float32" or v != v or v in (float("inf"), float("-inf")):
        return v
    import struct

    exact = struct.pack("<f", v)
    for digits in range(6, 10):
        short = float(f"{v:.{digits}g}")
        if struct.pack("<f", short) == exact:
            return short
    return v


def read_batch(path: str, json_lines: bool) -> tuple[list[tuple[int, list[Any]]], Exception | None]:
    """(line number, input) for every line of ``path`` (``-``: stdin) up to the first line that
    cannot be parsed, and that line's error (None when every line parses); a final newline ends
    the last line rather than adding an empty input."""
    from rasp_compiler.commands.run import parse_input_json
    from rasp_compiler.errors import InputError, UserError

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: cannot read ({getattr(err, 'strerror', None) or err})") from None
    shown = _source_name(path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise InputError(f"{shown} holds no inputs", hint="one input per line")
    out = []
    for number, line in enumerate(lines, 1):
        line = line.removesuffix("\r")
        try:
            value = parse_input_json(line) if json_lines else list(line)
        except InputError as err:
            message = err.message.replace("--input-json position", "position")
            return out, InputError(f"{shown}:{number}: {message.replace('--input-json', 'the line')}")
        out.append((number, value))
    return out, None


def _run_chunk(model: Any, chunk: list[tuple[int, list[Any]]],
               path: str) -> tuple[list[list[Any]], Exception | None]:
    """The outputs of a chunk of (line, input) up to its first input the model refuses, and that
    input's error naming its line (None when all run). A refused batch is re-run input by input,
    which finds the line and the outputs before it."""
    from rasp_compiler.errors import UserError

    try:
        return model.run([x for _, x in chunk]), None
    except UserError:
        pass
    outputs = []
    for number, x in chunk:
        try:
            outputs.append(model.run([x])[0])
        except UserError as err:
            message = err.message.replace("input 0 ", "the input ")
            return outputs, type(err)(f"{_source_name(path)}:{number}: {message}", err.hint)
    raise AssertionError("a chunk failed, but none of its inputs alone")  # not expected


def _source_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


def _shown(out: list[Any]) -> str:
    try:
        from rasp_compiler.lang.format import format_value

        return format_value(out)
    except Exception:
        return str(out)
