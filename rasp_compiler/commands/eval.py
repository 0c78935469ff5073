"""``rasp eval``: run a saved compiled model on one input, or on a file of inputs (one per line)."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator
from typing import Any

EPILOG = """examples:
  rasp eval out/ --input abca
  rasp eval out/ --input-json '["a", "b"]' --json      -> {"output": [...]}
  rasp eval out/ --inputs words.txt                     one output per line, in order
  rasp eval out/ --inputs-json inputs.jsonl --json      one {"input": ..., "output": ...} per line
  printf 'abc\\nba\\n' | rasp eval out/ --inputs -
  rasp eval out/ --explain                              which path each weight's product takes

--inputs reads one input string per line; --inputs-json one JSON list (or string) per line (JSON
Lines), in UTF-8.  The file is read as it runs, in batches of 512 lines, so it may be larger than
memory; a line of more than 64 MiB is refused (no model takes one).  The first line that cannot be
read or run stops the run: the outputs of the lines before it are printed, then the error names
the line, and the exit status is 1.
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
    from rasp_compiler.errors import InputError
    from rasp_compiler.runtime import RaspModel

    batch_file = args.inputs if args.inputs is not None else args.inputs_json
    if batch_file:
        # read as it runs, BATCH lines at a time: a file larger than memory is fine
        batches = _batches(read_lines(batch_file, json_lines=args.inputs_json is not None))
        first = next(batches)
        if not first[0] and first[1] is None:
            raise InputError(f"{_source_name(batch_file)} holds no inputs", hint="one input per line")
    model = RaspModel.load(args.model).to(args.device)
    model.module.paths = args.paths
    if args.explain:
        alone = args.input is None and args.input_json is None and not batch_file
        print(explain_table(model), file=sys.stdout if alone else sys.stderr)
        if alone:
            return 0
    elif args.input is None and args.input_json is None and not batch_file:
        raise InputError("rasp eval needs an input: --input, --input-json, --inputs or --inputs-json "
                         "(or --explain alone)")
    if not batch_file:
        single = list(args.input) if args.input is not None else parse_input_json(args.input_json)
        try:
            result = model.run([single])[0]
        except InputError:
            if args.input is not None:  # refused: say so where the text was split into characters
                check_characters(model, args.input, "--input", "--input-json")
            raise
        out = _tidy(result, model.config["dtype"])
        print(json.dumps({"output": out}) if args.json else _shown(out))
        return 0
    from rasp_compiler.commands.check import CheckProgress

    # a bar on stderr (a terminal only) once the run looks longer than a couple of seconds
    total = _count_lines(batch_file) if sys.stderr.isatty() else 0
    with CheckProgress(total, "evaluating") as bar:
        for chunk, unreadable in itertools.chain([first], batches):
            outputs, failure = _run_chunk(model, chunk, batch_file, words=args.inputs is not None) \
                if chunk else ([], None)
            for (_, x), out in zip(chunk, outputs, strict=False):  # outputs stop at a refused line
                out = _tidy(out, model.config["dtype"])
                print(json.dumps({"input": x, "output": out}) if args.json else _shown(out))
            failure = failure or unreadable
            if failure is not None:
                sys.stdout.flush()  # the outputs before the bad line come out before its error
                raise failure
            bar(len(chunk))
    return 0


def check_characters(model: Any, text: str, flag: str, json_flag: str) -> None:
    """``flag`` (--input, --inputs) splits its text into characters: on a model whose tokens are
    words (--vocab '["the", "cat"]'), "thecat" was refused as 6 tokens, more than max_len, with a
    hint to compile a larger --max-len.  Say that the text was split, and how to give words."""
    from rasp_compiler.errors import InputError

    if ((getattr(model, "config", None) or {}).get("input") or {}).get("kind") == "numerical":
        return  # real-valued tokens: no vocabulary of words
    vocab = getattr(model, "vocab", None) or []
    words = [t for t in vocab if isinstance(t, str) and len(t) > 1]
    if not words or all(c in vocab for c in text):
        return
    example = json.dumps(words[:2], ensure_ascii=False)
    raise InputError(f"{flag} reads its text as one token per character, and this model's tokens "
                     f"include words ({', '.join(map(repr, words[:3]))}{', …' if len(words) > 3 else ''})",
                     hint=f"give the tokens as JSON: {json_flag} '{example}'")


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


# One line of --inputs / --inputs-json, in bytes: the JSON reader's limit (bounded_json).  A model
# takes max_len tokens, so no line it can run comes near it; a file of many lines is read as it runs
# and may be of any size.
MAX_LINE = 64 * 1024 * 1024


def read_lines(path: str, json_lines: bool) -> Iterator[tuple[int, list[Any]]]:
    """(line number, input) for each line of ``path`` (``-``: stdin), read one line at a time and
    decoded as UTF-8 line by line (an undecodable byte is named by its line); a line that cannot be
    read or parsed raises an error naming it, when it is reached.  A final newline ends the last
    line rather than adding an empty input; a BOM before the first line is dropped."""
    from rasp_compiler.commands.run import parse_input_json
    from rasp_compiler.errors import InputError, UserError

    shown = _source_name(path)
    try:
        # stdin's bytes where it has them (a StringIO standing in for it has none)
        fh = getattr(sys.stdin, "buffer", sys.stdin) if path == "-" else open(path, "rb")  # noqa: SIM115
    except OSError as err:
        raise UserError(f"{path}: cannot read ({err.strerror or err})") from None
    try:
        number = 0
        while True:
            try:
                raw = fh.readline(MAX_LINE + 2)
            except OSError as err:
                raise UserError(f"{shown}:{number + 1}: cannot read ({err.strerror or err})") from None
            if not raw:
                return
            number += 1
            body = raw[:-1] if raw[-1:] in (b"\n", "\n") else raw
            if len(body) > MAX_LINE:
                raise InputError(f"{shown}:{number}: the line is longer than {MAX_LINE:,} bytes, "
                                 "more than any model's input", hint="one input per line")
            try:
                codec = "utf-8-sig" if number == 1 else "utf-8"
                text = body.decode(codec) if isinstance(body, bytes) else body
            except UnicodeDecodeError as err:
                raise InputError(f"{shown}:{number}: cannot read: byte {body[err.start]:#04x} at byte "
                                 f"{err.start} of the line is not UTF-8", hint="give UTF-8 text") from None
            line = text.removesuffix("\r")
            try:
                value = parse_input_json(line) if json_lines else list(line)
            except InputError as err:
                message = err.message.replace("--input-json position", "position")
                raise InputError(f"{shown}:{number}: {message.replace('--input-json', 'the line')}") from None
            yield number, value
    finally:
        if path != "-":
            fh.close()


def _batches(lines: Iterator[tuple[int, list[Any]]]
             ) -> Iterator[tuple[list[tuple[int, list[Any]]], Exception | None]]:
    """The lines in chunks of BATCH, each with the error of the line that ended the reading (None
    while every line reads); the chunk before that line comes with it, and nothing after.  The
    first chunk of an empty file is ([], None)."""
    from rasp_compiler.errors import UserError

    while True:
        chunk: list[tuple[int, list[Any]]] = []
        try:
            for item in lines:
                chunk.append(item)
                if len(chunk) == BATCH:
                    break
        except UserError as err:
            yield chunk, err
            return
        yield chunk, None
        if len(chunk) < BATCH:
            return


def _count_lines(path: str) -> int:
    """How many inputs a file holds (for the progress bar), counted in pieces; 0 for stdin."""
    if path == "-":
        return 0
    count, last = 0, b"\n"
    try:
        with open(path, "rb") as fh:
            while piece := fh.read(1 << 20):
                count += piece.count(b"\n")
                last = piece[-1:]
    except OSError:
        return 0
    return count + (last != b"\n")


def _run_chunk(model: Any, chunk: list[tuple[int, list[Any]]],
               path: str, words: bool = False) -> tuple[list[list[Any]], Exception | None]:
    """The outputs of a chunk of (line, input) up to its first input the model refuses, and that
    input's error naming its line (None when all run). A refused batch is re-run input by input,
    which finds the line and the outputs before it."""
    from rasp_compiler.errors import InputError, UserError

    try:
        return model.run([x for _, x in chunk]), None
    except UserError:
        pass
    outputs = []
    for number, x in chunk:
        try:
            try:
                outputs.append(model.run([x])[0])
            except InputError:
                if words:  # --inputs: each line's characters are its tokens
                    check_characters(model, "".join(x), "--inputs", "--inputs-json (one JSON list a line):")
                raise
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
