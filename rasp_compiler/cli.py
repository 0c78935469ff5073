"""The ``rasp`` command line: one sub-command per module in ``rasp_compiler.commands``.

Each command module exposes ``register(subparsers)``, which adds its parser and sets
``func(args) -> int``.  User mistakes arrive as ``UserError`` and are printed without a traceback.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import importlib
import os
import re
import sys
import warnings

from rasp_compiler import __version__
from rasp_compiler.errors import CompileWarning, UserError, not_utf8

COMMANDS = ("run", "repl", "compile", "verify", "eval", "check", "show", "export", "simulate", "universal",
            "experiment")


class Parser(argparse.ArgumentParser):
    """argparse, reading ``-1e6`` as a number: Python 3.11's own test knows only ``-1`` and ``-1.5``,
    so ``--input-range -1e6 1e6`` stopped with "expected 2 arguments".  ``-inf`` and ``-nan`` (which
    float() reads) too, so that they reach the option's own check ("finite LO <= HI")."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(
            r"^-((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|inf|infinity|nan)$", re.IGNORECASE)

    words: list[str] = []   # the command line being parsed (set by ``main``), for ``error``'s hint

    def error(self, message: str):  # type: ignore[override]
        """argparse's error, with a hint where the value begins with '-': `rasp eval M --input -ab`
        said only "argument --input: expected one argument"."""
        found = re.match(r"argument (--[\w-]+)(?:/\S+)?: expected one argument$", message)
        if found:
            words = Parser.words
            after = [words[k + 1] for k, w in enumerate(words[:-1]) if w == found.group(1)]
            if after and after[0].startswith("-") and not after[0].startswith("--"):
                message += (f"\n  hint: a value that begins with '-' is written after '=': "
                            f"{found.group(1)}={after[0]}")
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="rasp",
        description="RASP programs to exact transformer weights: run them, compile them, check the "
                    "weights against the interpreter, and build universal simulators.",
        epilog="Run 'rasp COMMAND --help' for the options of each command.",
    )
    parser.add_argument("--version", action="version", version=f"rasp-compiler {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"rasp_compiler.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    bad = next(filter(None, map(not_utf8, sys.argv[1:] if argv is None else argv)), None)
    if bad is not None:
        print(f"error: the argument '{bad}' is not valid UTF-8 text\n"
              "  hint: give tokens, inputs and names in UTF-8", file=sys.stderr)
        return 1
    words = sys.argv[1:] if argv is None else argv
    Parser.words = list(words)
    if words and words[0] == "help" and len(words) <= 2:  # `rasp help compile`, as git's: it said
        if len(words) == 1 or words[1] not in COMMANDS:  # "invalid choice: 'help'" and listed them
            if len(words) == 2:
                print(f"error: unknown command '{words[1]}'", file=sys.stderr)
            parser.print_help(sys.stdout if len(words) == 1 else sys.stderr)
            return 0 if len(words) == 1 else 2
        words = [words[1], "--help"]
        argv = words
    if words and not words[0].startswith("-") and words[0] not in COMMANDS:
        close = difflib.get_close_matches(words[0], COMMANDS, n=1, cutoff=0.6)
        if close:  # argparse lists the commands, but does not say which one was meant
            parser.error(f"unknown command '{words[0]}'\n  hint: did you mean '{close[0]}'? "
                         f"(rasp {close[0]} --help)")
    args, extras = parser.parse_known_args(argv)
    if extras:
        _unrecognized(parser, args, extras, words)
    empty = _empty_positional(_chosen(parser, args), args)
    if empty is not None:  # `rasp run "$F"` with F unset read '' as the current directory
        print(f"error: {empty} is empty\n  hint: give {empty} a value (an unset shell variable?)",
              file=sys.stderr)
        return 1
    if sys.stdin is None:  # started with stdin closed (`<&-`): read it as empty, like </dev/null
        sys.stdin = open(os.devnull, encoding="utf-8")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with warnings.catch_warnings():  # the summary prints every note where a command shows them
            warnings.simplefilter("ignore", CompileWarning)
            code = int(args.func(args) or 0)
        if sys.stdout is not None:
            sys.stdout.flush()  # a failed write of buffered output surfaces here, not at exit
        return code
    except UserError as err:
        print(err.render(), file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        return _out_of_memory(args)
    except RuntimeError as err:  # torch reports a failed allocation this way
        if "allocate" not in str(err):
            raise
        return _out_of_memory(args)
    except BrokenPipeError:  # the reader went away (`rasp ... | head`): not an error
        # Python would complain again when it flushes stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as err:
        if err.filename is None and err.errno in WRITE_ERRORS:  # stdout on a full disk, `>/dev/full`
            # Python would fail again when it flushes the rest of stdout at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            print(f"error: cannot write the output: {err.strerror or err}", file=sys.stderr)
            return 1
        if err.filename is None:  # not about a file the user named: a bug, shown in full
            raise
        print(f"error: {err.filename}: {err.strerror or err}", file=sys.stderr)
        return 1


def _chosen(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost sub-command's parser that ``args`` came from (`rasp experiment khop`)."""
    target = parser
    while True:
        subs = [a for a in target._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = subs and getattr(args, subs[0].dest, None)
        if not chosen or chosen not in subs[0].choices:
            return target
        target = subs[0].choices[chosen]


def _empty_positional(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    """The name (as --help shows it) of a positional argument given as an empty string, or None."""
    for action in parser._actions:
        if action.option_strings or isinstance(action, argparse._SubParsersAction):
            continue
        value = getattr(args, action.dest, None)
        if isinstance(value, str) and not value.strip():
            return str(action.metavar or action.dest.upper())
    return None


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, extras: list[str],
                  words: list[str]) -> None:
    """Refuse arguments no parser took, in the words of the sub-command they were given to (its
    usage, and the option meant when one is a near miss: `--maxlen` -> `--max-len`; words left
    over after a one-value option, `--vocab a b c`; an input given as a word, `rasp run F hello`).
    argparse's own parse_args reports them from the top-level parser, with `rasp`'s usage and no
    hint."""
    target = _chosen(parser, args)
    options = [s for a in target._actions for s in a.option_strings if s.startswith("--")]
    hints = []
    loose = [e for e in extras if not e.startswith("-")]
    after = _one_value_option_before(target, words, loose[0]) if loose else None
    if after is not None:
        hints.append(f"{after} takes one value" + (
            ": the tokens as one string (--vocab abc) or a JSON list (--vocab '[\"ab\", \"c\"]')"
            if after == "--vocab" else " (quote a value that holds spaces)"))
    elif extras == loose and len(loose) == 1 and "--input" in options \
            and getattr(args, "input", None) is None:
        hints.append(f"an input is given with --input: --input {loose[0]}")
    for extra in extras:
        name = extra.split("=", 1)[0]
        if name.startswith("-") and not parser._negative_number_matcher.match(name):
            close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
            if close:
                hints.append(f"did you mean {close[0]} (for {name})?")
        elif target.prog.endswith(" repl") and not hints:  # `rasp repl prog.rasp`, as `rasp run` takes it
            hints.append(f'the REPL takes no file: type load "{extra}"; at its prompt, or run the file '
                         f"as a session: rasp repl < {extra}")
    message = f"unrecognized arguments: {' '.join(extras)}"
    if hints:
        message += "\n  hint: " + "; ".join(hints)
    target.error(message)


def _one_value_option_before(parser: argparse.ArgumentParser, words: list[str], word: str) -> str | None:
    """The option taking one value that ``word`` directly follows the value of, if any."""
    takes_one = {s: a for a in parser._actions for s in a.option_strings if a.nargs is None
                 and not isinstance(a, (argparse._StoreConstAction, argparse._CountAction,
                                        argparse._HelpAction, argparse._VersionAction))}
    for i in range(1, len(words) - 1):
        if words[i + 1] == word and words[i - 1] in takes_one:
            return words[i - 1]
    return None


# errors of writing to a full or failing device, which the output stream reports without a file name
WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG}


# what makes each command's run smaller, in its own options (a hint naming --max-len to
# `rasp universal --construction sparse --dim 6666`, which has none that applies, was no help)
MEMORY_HINTS = {
    "simulate": "a smaller U: smaller --n, --d or --heads (or fewer --trials at once)",
    "experiment": "a smaller run: smaller --width, fewer --layers or --heads, a smaller --batch",
    "universal": "a smaller class: smaller --dim, fewer --layers or --heads, shorter --lengths",
    "universal-program": "a smaller compiled model: a smaller --max-len or vocabulary, or a smaller --class",
    "repl": "a shorter example (set example ...)",
}
MEMORY_HINT = "a smaller model (--max-len, vocabulary) or fewer inputs at once"


def _out_of_memory(args: argparse.Namespace) -> int:
    command = getattr(args, "command", None)
    if command == "universal" and (getattr(args, "program", None) or getattr(args, "programs", None)):
        command = "universal-program"
    if command == "simulate" and getattr(args, "model", None):  # running a saved U on one input
        command = None
    print("error: out of memory", file=sys.stderr)
    print(f"  hint: {MEMORY_HINTS.get(command, MEMORY_HINT)}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
