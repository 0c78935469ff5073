"""``rasp run``: run a RASP program on one input with the reference interpreter."""

from __future__ import annotations

import argparse
import json
import math
import re
import warnings
from pathlib import Path
from typing import Any

from rasp_compiler.errors import InputError, UserError

EPILOG = """examples:
  rasp run programs/reverse.rasp --input hello
      [o, l, l, e, h] (strings)
  rasp run programs/sort.rasp --input-json '[3, 1, 2]' --json
      {"output": ["1", "2", "3"]}          (`tokens` reads the input as strings)
  rasp run programs/matmul.rasp --input-json '[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]' --json
      {"output": [21.0, 24.0, 27.0, 47.0, 54.0, 61.0, 0.0, 0.0, 0.0, 0.0]}
  rasp run prog.rasp --input abc --output hist     (print another named s-op)
  rasp run session.rasp     (a file that sets `set example "hello"`, as the original REPL's do)

The input is one list: --input gives a string's characters, --input-json a JSON list of
strings / numbers / booleans.  tokens_str, tokens_int, tokens_float and tokens_bool read it
converted to their type; `tokens` starts as tokens_str.  The printed s-op is `out` (the value of the
last expression or assignment, as in the original) unless --output names another.  Without
--input, a file written for the original REPL runs on the example it sets (`set example "hello"`)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run", help="run a RASP program on an input (reference interpreter)",
        description="Run a RASP program (written for the original RASP REPL or for this project) "
                    "on one input and print the resulting s-op.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FILE", help="the .rasp program")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--input", metavar="TEXT", help="input string; its characters are the tokens")
    src.add_argument("--input-json", metavar="JSON", help="input as a JSON list, e.g. '[1, 2.5, -3]'")
    p.add_argument("--output", metavar="NAME", default=None,
                   help="the s-op or selector to print "
                        "(default: out, the value of the last expression or assignment)")
    p.add_argument("--json", action="store_true", help='print {"output": [...]} as JSON')
    p.set_defaults(func=main)


def parse_input_json(text: str) -> list[Any]:
    from rasp_compiler.bounded_json import load_json_text

    value = load_json_text(text, "--input-json", error=InputError)
    if isinstance(value, str):
        return list(value)
    if not isinstance(value, list):
        raise InputError(f"--input-json must be a JSON list, got {type(value).__name__}")
    for i, v in enumerate(value):
        if v is None or isinstance(v, (list, dict)):
            raise InputError(f"--input-json position {i} is {json.dumps(v)[:40]}: tokens must be strings, "
                             "numbers or booleans")
        if isinstance(v, float) and not math.isfinite(v):
            raise InputError(f"--input-json position {i} is not a finite number")
        if isinstance(v, str) and not_text(v):  # "\ud800": no file or terminal can take it
            raise InputError(f"--input-json position {i} holds a lone surrogate ({not_text(v)}), "
                             "not a character", hint="give UTF-8 text: tokens are characters")
    return value


def not_text(value: str) -> str | None:
    """``value`` escaped when it holds a lone surrogate (JSON's "\\ud800" decodes to one), else None."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("ascii", "backslashreplace").decode("ascii")[:40]
    return None


FIXED_LENGTH = re.compile(r"^# fixed-length:\s*(\d+)\s*$", re.M)


def fixed_length(path: str) -> int | None:
    """The input length a program file states with a ``# fixed-length: N`` line (matmul's shape:
    r*k + k*c entries), or None.  ``rasp run`` refuses other lengths, as the compiled model does."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as fh:  # a BOM hid a first line
            head = fh.read(1 << 16)  # the line is among the file's leading comments
    except OSError:
        return None
    digits = [m.group(1) for m in FIXED_LENGTH.finditer(head)]
    huge = next((d for d in digits if len(d.lstrip("0")) > 12), None)
    if huge is not None:  # int() of over 4,300 digits raised ValueError: a traceback
        raise UserError(f"{path}'s '# fixed-length' line states a number of {len(huge):,} digits, "
                        "past any input length",
                        hint="state the one input length, e.g. '# fixed-length: 4'")
    stated = {int(d) for d in digits}
    if len(stated) > 1:  # the first one won without a word
        raise UserError(f"{path} states {len(stated)} input lengths: "
                        + " and ".join(f"'# fixed-length: {n}'" for n in sorted(stated)),
                        hint="keep one '# fixed-length: N' line")
    if stated == {0}:  # "takes inputs of exactly 0 tokens", and no input has none
        raise UserError(f"{path}'s '# fixed-length: 0' line states no input length: an input has "
                        "at least one token", hint="state the one input length, e.g. '# fixed-length: 4'")
    return stated.pop() if stated else None


COMMENTED_EXAMPLE = re.compile(r"^# example(-json)?:\s*(.+?)\s*->", re.M)


def _commented_example(text: str, path: str) -> str | None:
    """The command that runs the first ``# example: hello -> olleh`` (or ``# example-json:``) of a
    file's comments, as every shipped program states its examples; ``rasp run`` does not read
    them as its input, so it says how."""
    import shlex

    m = COMMENTED_EXAMPLE.search(text)
    if m is None:
        return None
    option = "--input-json" if m.group(1) else "--input"
    return f"its comments show one: rasp run {shlex.quote(path)} {option} {shlex.quote(m.group(2))}"


def file_example_input(path: str) -> list[Any]:
    """The input a file sets with the original REPL's ``set example …`` (refused if none)."""
    import sys

    from rasp_compiler.lang.elaborator import Session
    from rasp_compiler.lang.repl_commands import file_example

    with open(path, encoding="utf-8-sig") as fh:   # load_program has read it already
        text = fh.read()
    example = file_example(text)
    if example is None:
        raise InputError("no input: give --input TEXT or --input-json JSON",
                         hint=_commented_example(text, path)
                         or 'a file written for the original REPL may set one: set example "hello"')
    # the example may name the file's own values (`set example example2`), as in the original REPL
    session = Session()
    session.exec_source(text, path, directory=Path(path).resolve().parent)
    value = session.eval_expression(example, f"{path} (set example)",
                                    usage='set example "hello" or set example [1, 2, 3]')
    if not (isinstance(value, str) or isinstance(value, list)) or not value:
        raise InputError(f"the file's example {' '.join(example.split())} is not a non-empty string or list")
    shown = " ".join(example.split())  # an example over several lines, on one
    print(f"(input: the file's example {shown})", file=sys.stderr)
    return list(value)


def main(args: argparse.Namespace) -> int:
    from rasp_compiler.commands.options import check_not_empty
    from rasp_compiler.interpreter import run
    from rasp_compiler.lang.elaborator import load_program
    from rasp_compiler.lang.format import format_value, json_value

    check_not_empty(args, "output")
    output = args.output or "out"
    program = load_program(args.file, output=output)
    if args.input is not None:
        inputs = list(args.input)
    elif args.input_json is not None:
        inputs = parse_input_json(args.input_json)
    else:
        inputs = file_example_input(args.file)
    fixed = fixed_length(args.file)
    if fixed is not None and len(inputs) != fixed:
        raise InputError(f"{args.file} takes inputs of exactly {fixed} tokens (its '# fixed-length: "
                         f"{fixed}' line), got {len(inputs)}",
                         hint="the compiled model refuses other lengths too")
    with warnings.catch_warnings():  # NumPy's RuntimeWarning is no message for a user: see below
        warnings.simplefilter("ignore", RuntimeWarning)
        value = run(program, inputs)
    bad = next((i for i, v in enumerate(value) if isinstance(v, float) and not math.isfinite(v)), None) \
        if isinstance(value, list) else None
    if bad is not None:
        raise InputError(f"the result at position {bad} is {value[bad]}: the input's numbers are past "
                         "what this program's arithmetic can hold (about 1.8e308)")
    if args.json:
        print(json.dumps({"output": json_value(value)}))
    else:
        print(format_value(value))
    return 0
