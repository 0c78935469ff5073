"""``rasp compile``: compile a RASP program into model.safetensors + config.json."""

from __future__ import annotations

import argparse
import json
import re
import time
from typing import TYPE_CHECKING, Any

from rasp_compiler.errors import UserError

if TYPE_CHECKING:
    from rasp_compiler.compiler import CompiledModel, CompiledWeights

EPILOG = """examples:
  rasp compile programs/reverse.rasp --vocab abc --max-len 16 -o out/
  rasp compile prog.rasp --vocab '["1","2","3"]' --max-len 8 -o out/ --output hist --dtype float64
  rasp compile programs/matmul.rasp --input-range -1 1 -o mm/           # real inputs, numerically
  rasp compile maxmin.rasp --input-range -5 5 --input-grid 0.001 --max-len 8 --fixed-length 8 -o m/
  rasp compile inverse3.rasp --input-range -9 9 --min-denominator 0.5 --max-len 9 --fixed-length 9 -o inv/

--vocab is a string of one-character tokens or a JSON list of tokens.  The model reads a BOS
token, then up to --max-len tokens; `rasp eval out/ --input abca` runs it.  On a terminal, a
compile that takes more than a second names its stage on stderr."""


def parse_vocab(text: str) -> list[Any]:
    text = text.strip() if text.strip().startswith("[") else text
    if text.startswith("["):
        # a vocabulary of characters that starts with "[" ('[]', '[](){}' for Dyck) reads as JSON:
        # say how to give those characters, rather than only that the JSON is bad or empty
        as_chars = f"for the characters themselves, give a JSON list: --vocab '{json.dumps(list(text))}'"
        from rasp_compiler.bounded_json import load_json_text

        try:
            value = json.loads(text)
        except json.JSONDecodeError as err:
            raise UserError(f"--vocab looks like JSON but is not valid: {err.msg}", hint=as_chars) from None
        except (ValueError, RecursionError):  # an int of over 4,300 digits; nesting too deep:
            value = load_json_text(text, "--vocab")  # it says which, as every bounded read does
        if not isinstance(value, list) or not all(isinstance(v, (str, int, float, bool)) for v in value):
            raise UserError("--vocab as JSON must be a list of strings, numbers or booleans")
        if not value:
            raise UserError("--vocab is an empty JSON list", hint=as_chars)
        vocab = value
    else:
        vocab = list(text)
    if not vocab:
        raise UserError("--vocab is empty", hint="give the tokens, e.g. --vocab abc")
    seen: set = set()
    for token in vocab:  # a repeat was dropped without a word, and `check` then counted inputs twice
        key = (type(token), token)
        if key in seen:
            hint = "list each token once"
            if not text.startswith("["):
                hint = _characters_hint(text) or hint
            raise UserError(f"--vocab repeats the token {json.dumps(token, ensure_ascii=False)}", hint=hint)
        seen.add(key)
    return vocab


def _characters_hint(text: str) -> str | None:
    """What a --vocab read as characters that repeats one was likely meant to say: tokens
    separated by commas or blanks (`a,b,c`, `ab cd`), or JSON that is not a list (`"abc"`,
    `{"a": 1}`).  Told only "repeats the token ','", the user was sent to remove a comma."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, str):
        return f"the quotes are characters too: --vocab {value}, or a JSON list of tokens"
    if isinstance(value, dict):
        return f"a JSON --vocab is a list of tokens: --vocab '{json.dumps(list(value), ensure_ascii=False)}'"
    parts = [part for part in re.split(r"[,\s]+", text) if part]
    if re.search(r"[,\s]", text) and len(parts) >= 2 and len(set(parts)) == len(parts):
        return ("each character of --vocab is a token; for tokens separated by commas or blanks, "
                f"give a JSON list: --vocab '{json.dumps(parts, ensure_ascii=False)}'")
    return None


def add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the .rasp program")
    p.add_argument("--vocab", help="tokens: a string of characters or a JSON list (not with --input-range)")
    p.add_argument("--max-len", type=int, default=None,
                   help="longest input the model accepts (required, except with --input-range: then "
                        "the length of the file's first '# example-json' input, as a fixed length)")
    p.add_argument("--output", metavar="NAME", default=None, help="the s-op to compile (default: out)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="the weights' float type (default float32; an MLP with step pairs is "
                        "float64 in either)")
    p.add_argument("--causal", action="store_true", help="causal attention (refuses look-ahead selects)")
    p.add_argument("--input-range", nargs=2, type=float, metavar=("LO", "HI"), default=None,
                   help="real-valued tokens in [LO, HI] (tokens_float): numerical compilation")
    p.add_argument("--fixed-length", type=int, metavar="N", default=None,
                   help="compile for inputs of exactly N tokens (folds `length` to a constant)")
    p.add_argument("--input-grid", metavar="G", default=None,
                   help="with --input-range: every input is a multiple of G (e.g. 0.001), so "
                        "comparisons of values on that grid compile exactly; the model refuses "
                        "inputs off it (integer tokens are on the grid 1 without this)")
    p.add_argument("--min-denominator", metavar="EPS", type=float, default=None,
                   help="with --input-range: compile a division whose denominator's range holds 0 "
                        "for |denominator| >= EPS; the model flags (rasp eval refuses) every input "
                        "nearer 0")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("compile", help="compile a RASP program to transformer weights",
                              description="Compile a RASP program to an exact transformer: writes "
                              "model.safetensors and config.json, prints a summary.",
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_options(p)
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="directory to write the model to")
    p.add_argument("--force", action="store_true",
                   help="write into DIR even when it is a non-empty directory that holds no model "
                        "(its config.json and model.safetensors are replaced; other files are kept)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=main)


class CompileStatus:
    """On a terminal, the stage of a compile that has run for more than a second, on one line of
    stderr, its seconds counted every second, and cleared when the compile ends; nothing at all
    for a fast compile or off a terminal."""

    def __init__(self, delay: float = 1.0, doing: str = "compiling", every: float = 1.0) -> None:
        import sys
        import threading

        self.doing = doing
        self.stream = sys.stderr
        self.stage = "starting"
        self.shown = False
        self.start = time.monotonic()
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.delay, self.every = delay, every
        # a thread of its own: a long stage (a large table) never returns to the caller to redraw
        self.ticker = threading.Thread(target=self._tick, daemon=True)
        if self.stream.isatty():
            self.ticker.start()

    def __call__(self, stage: str) -> None:
        with self.lock:
            self.stage = stage
            if self.shown:
                self._write()

    def _tick(self) -> None:
        wait = self.delay
        while not self.done.wait(wait):
            with self.lock:
                if self.done.is_set():
                    return
                self.shown = True
                self._write()
            wait = self.every

    def _write(self) -> None:
        self.stream.write(f"\r\033[K{self.doing}: {self.stage} ({time.monotonic() - self.start:.0f} s)")
        self.stream.flush()

    def close(self) -> None:
        self.done.set()
        with self.lock:
            if self.shown:
                self.stream.write("\r\033[K")
                self.stream.flush()
            self.shown = False


def compile_from_args(args: argparse.Namespace) -> CompiledModel:
    """The torch model of the program and options ``args`` name (``check``, ``show``, ``eval``)."""
    return weights_from_args(args).model()


def weights_from_args(args: argparse.Namespace) -> CompiledWeights:
    """The weights of the program and options ``args`` name, compiled without torch."""
    from rasp_compiler.commands.options import check_not_empty, check_tokens_or_range
    from rasp_compiler.commands.run import fixed_length
    from rasp_compiler.compiler import compile_weights
    from rasp_compiler.lang import load_program

    check_not_empty(args, "output")
    check_tokens_or_range(args)
    longest = "--max-len"  # what the longest input length is called in messages
    if args.max_len is None and getattr(args, "input_range", None) is not None:
        # a matrix listing states its shape by its example: use that length, fixed
        longest = "the example's length"
        from rasp_compiler.commands.real_options import example_length
        args.max_len = example_length(args.file)
        if args.fixed_length is None and fixed_length(args.file) is None:
            args.fixed_length = args.max_len
    if args.max_len is None:
        raise UserError("--max-len is required",
                        hint="the longest input the model accepts, e.g. --max-len 16")
    if args.max_len < 1:
        raise UserError(f"--max-len must be at least 1, got {args.max_len}")
    fixed, from_file = _fixed_length(args)
    args.fixed_length = fixed
    if fixed is not None and not 1 <= fixed <= args.max_len:  # compile_program names its keywords
        stated = f" ({args.file}'s '# fixed-length' line)" if from_file else ""
        raise UserError(f"--fixed-length {fixed}{stated} is not between 1 and {longest} ({args.max_len})",
                        hint="the one input length the model takes, 1 to the longest"
                             + ("" if longest == "--max-len" else "; give --max-len for longer inputs"))
    program = load_program(args.file, output=args.output or "out")
    if getattr(args, "input_range", None) is not None:  # real-valued tokens (compiler/real/)
        from rasp_compiler.commands.real_options import range_from_args
        return compile_weights(program, None, args.max_len, dtype=args.dtype, causal=args.causal,
                               fixed_length=args.fixed_length, input_range=range_from_args(args),
                               input_grid=getattr(args, "input_grid", None),
                               min_denominator=getattr(args, "min_denominator", None))
    if args.vocab is None:
        raise UserError("--vocab is required (or --input-range LO HI for real-valued tokens)")
    status = CompileStatus()
    try:
        return compile_weights(program, parse_vocab(args.vocab), args.max_len, dtype=args.dtype,
                               causal=args.causal, fixed_length=getattr(args, "fixed_length", None),
                               progress=status)
    finally:
        status.close()


def _fixed_length(args: argparse.Namespace) -> tuple[int | None, bool]:
    """The one input length to compile for, and whether it comes from the file: --fixed-length,
    else the file's ``# fixed-length: N`` line (a matrix program's shape; ``rasp run`` refuses
    other lengths, so the model must too).  A --fixed-length that contradicts the line is refused."""
    from rasp_compiler.commands.run import fixed_length

    given = getattr(args, "fixed_length", None)
    stated = fixed_length(args.file)
    if stated is not None and given is not None and given != stated:
        raise UserError(f"--fixed-length {given} contradicts {args.file}'s '# fixed-length: {stated}' line",
                        hint="the program's shape fixes its input length: change the shape and that "
                             "line in the file, or drop --fixed-length")
    return (stated, True) if given is None else (given, False)


def main(args: argparse.Namespace) -> int:
    from rasp_compiler.commands.options import check_not_empty
    from rasp_compiler.compiler.artifact import check_model_destination

    check_not_empty(args, "out")  # before the compile, which may take a while
    check_model_destination(args.out, force=args.force)
    # the weights, not the torch model: importing torch would be most of the command's time
    model = weights_from_args(args)
    model.save(args.out, force=args.force)
    if args.json:
        print(json.dumps(model.stats()))
    else:
        print(model.summary())
        if "numeric" in model.config:
            from rasp_compiler.compiler.real_check import describe_maps
            print("numerical maps and heads (error bounds over the inferred ranges):")
            print("\n".join(describe_maps(model)))
        out = str(args.out).rstrip("/") or "/"
        print(f"wrote {out}/model.safetensors and {out}/config.json")
    return 0
