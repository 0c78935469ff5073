"""``rasp repl``: the interactive RASP prompt.

A statement may span lines: input is collected until it parses, so an open bracket or a missing
';' simply asks for more.  After each statement the values it bound are printed the way the
original REPL prints them — s-ops and selectors together with their value on the running example
(``set example "hello"`` changes it).  Errors print and the session goes on.  Works with a pipe as
stdin (no prompts are printed then), which is how the tests drive it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from lark.exceptions import UnexpectedCharacters, UnexpectedToken

from rasp_compiler.errors import UserError
from rasp_compiler.lang.repl_commands import (
    DRAW,
    EXAMPLES_SWITCH,
    EXIT,
    SEQ_DISPLAY,
    SET_EXAMPLE,
    SHOW_EXAMPLE,
)

HELP = """commands (besides RASP statements):
  set example "hello"     the input s-ops and selectors are shown on (also: set example [1, 2, 3])
  show example            print the running example
  examples on | off       show / hide the example values after each statement
  draw(sop[, example])    compile the s-op over the example's tokens and length and draw its
                          layers, heads and MLPs to draw-N.png
  help                    this text
  exit | quit             leave (so does end of input)"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "repl", help="interactive RASP prompt",
        description="Interactive RASP: type statements, see each value on the running example.",
        epilog='example session:\n  >> set example "hello"\n  >> reverse = aggregate(select(indices, '
               'length - indices - 1, ==), tokens);\n       s-op: reverse\n  \t Example: reverse("hello") = '
               '[o, l, l, e, h] (strings)\n\n' + HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--example", default="hello", help='the initial running example (default: "hello")')
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    Repl(example=args.example).loop(sys.stdin, sys.stdout)
    return 0


class Repl:
    def __init__(self, example: Any = "hello") -> None:
        from rasp_compiler.lang.elaborator import Session

        self.session = Session()
        self.example: Any = example
        self.show_examples = True
        self.count = 0
        self.drawn = 0  # pictures written by draw(...): draw-1.png, draw-2.png, …
        self.out: TextIO = sys.stdout

    # ------------------------------------------------------------------ the loop
    def loop(self, stdin: TextIO, stdout: TextIO) -> None:
        self.out = stdout
        interactive = stdin.isatty()
        if interactive:
            self.say("RASP (rasp-compiler). 'help' for commands, 'exit' to leave.")
            self.say(f"running example is: {self.example}")
        if interactive:
            try:
                import readline  # noqa: F401  (line editing and history for input())
            except ImportError:  # pragma: no cover - not on every platform
                pass
        buffer = ""
        while True:
            try:
                if interactive and stdin is sys.stdin:
                    try:
                        line = input(".. " if buffer else ">> ") + "\n"
                    except EOFError:
                        line = ""
                else:
                    line = stdin.readline()
            except KeyboardInterrupt:  # Ctrl-C drops the statement being typed, as in the original
                self.say()
                buffer = ""
                continue
            if not line:  # end of input
                if buffer.strip():
                    self.run_statements(buffer)  # reports what is missing
                break
            if not buffer and self.command(line):
                if self.stopped:
                    break
                continue
            buffer += line
            if self.incomplete(buffer):
                continue
            self.run_statements(buffer)
            buffer = ""
        stdout.flush()

    stopped = False

    def say(self, text: str = "") -> None:
        print(text, file=self.out)

    def incomplete(self, text: str) -> bool:
        """True when ``text`` is a prefix of a statement (more lines will complete it)."""
        from rasp_compiler.lang.parser import grammar

        try:
            grammar().parse(text)
        except UnexpectedToken as err:
            return err.token.type == "$END"
        except UnexpectedCharacters:
            return False
        return False

    # ------------------------------------------------------------------ REPL commands
    def command(self, line: str) -> bool:
        """Handle a REPL-only command; False if ``line`` is RASP text."""
        if not line.strip():
            return True
        if EXIT.match(line):
            self.stopped = True
            return True
        if line.strip() in ("help", "help()"):
            self.say(HELP)
            return True
        if DRAW.match(line):
            self.draw(line)
            return True
        if SEQ_DISPLAY.match(line):  # the original's long/short s-op display: one display here
            return True
        m = EXAMPLES_SWITCH.match(line)
        if m:
            self.show_examples = m.group(2) == "on"
            return True
        if SHOW_EXAMPLE.match(line):
            self.say(f"\t s-op example: {self.quoted(self.example)}")
            return True
        m = SET_EXAMPLE.match(line)
        if m:
            try:
                value = self.session.eval_expression(m.group(2), f"<repl:{self.count + 1}>")
            except UserError as err:
                self.say(err.render())
                return True
            if not (isinstance(value, str) or (isinstance(value, list) and value)):
                self.say(f"error: an example is a string or a non-empty list of atoms, got {value!r}")
                return True
            self.example = value
            return True
        return False

    def draw(self, line: str) -> None:
        """``draw(sop)`` or ``draw(sop, example)``: the s-op's program compiled over the example's
        tokens and length, drawn as scheduled (layers, heads, MLPs) to ``draw-N.png``."""
        from rasp_compiler.compiler import compile_program
        from rasp_compiler.lang.values import SOp
        from rasp_compiler.viz import draw_plan

        text = line.strip().rstrip(";").strip()
        inner = text[text.index("(") + 1: text.rindex(")")] if text.endswith(")") else ""
        try:
            args = self.session.eval_expression(f"[{inner}]", f"<repl:{self.count + 1}>")
        except UserError as err:
            self.say(err.render())
            return
        if not 1 <= len(args) <= 2 or not isinstance(args[0], SOp):
            self.say("error: draw takes an s-op and, optionally, an example: draw(reverse) or "
                     'draw(reverse, "abc")')
            return
        example = args[1] if len(args) == 2 else self.example
        tokens = list(example) if isinstance(example, (str, list)) else []
        if not tokens:
            self.say("error: the example to draw on is a string or a non-empty list of atoms")
            return
        self.drawn += 1
        path = f"draw-{self.drawn}.png"
        try:
            program = self.session.program_for(args[0])
            vocab = sorted(set(tokens), key=lambda t: (type(t).__name__, str(t)))
            model = compile_program(program, vocab, len(tokens))
            draw_plan(program, model.plan, path, title=f"{inner} on {self.quoted(example)}: "
                      f"{model.n_layers} layers, heads {model.heads_per_layer}")
        except UserError as err:
            self.say(err.render())
            return
        self.say(f"wrote {path}: compiled over the example's tokens and length, {model.n_layers} layers, "
                 f"heads per layer {model.heads_per_layer}")

    # ------------------------------------------------------------------ statements
    def run_statements(self, text: str) -> None:
        self.count += 1
        try:
            self.session.exec_source(text, f"<repl:{self.count}>", on_result=self.show)
        except UserError as err:
            self.say(err.render())

    def quoted(self, value: Any) -> str:
        return f'"{value}"' if isinstance(value, str) else str(value)

    def show(self, name: str, value: Any) -> None:
        from rasp_compiler.interpreter import evaluate
        from rasp_compiler.lang.format import format_selector, format_sequence
        from rasp_compiler.lang.values import AppliedResult, Builtin, Function, Selector, SOp

        if isinstance(value, SOp):
            self.say(f"     s-op: {name}")
            if self.show_examples:
                try:
                    program = self.session.program_for(value)
                    seq = evaluate(program, self.example, [program.output])[program.output]
                    self.say(f' \t Example: {name}({self.quoted(self.example)}) = {format_sequence(seq)}')
                except UserError as err:
                    self.say("\t !! fails on the example: " + err.render().replace("\n", "\n\t "))
        elif isinstance(value, Selector):
            self.say(f"     selector: {name}")
            if self.show_examples:
                try:
                    program = self.session.program_for(value)
                    sel = evaluate(program, self.example, [program.output])[program.output]
                    self.say(" \t Example:")
                    self.say(selector_grid(self.example, sel))
                except UserError as err:
                    self.say("\t !! fails on the example: " + err.render().replace("\n", "\n\t "))
        elif isinstance(value, AppliedResult):
            if value and isinstance(value[0], list):
                self.say(" \t = ")
                self.say(format_selector(value))
            else:
                self.say(f" \t =  {format_sequence(value)}")
        elif isinstance(value, (Function, Builtin)):
            self.say(f"     {value}")
        elif isinstance(value, list):
            self.say(f"     list: {name} = {value}")
        elif isinstance(value, dict):
            self.say(f"     dict: {name} = {value}")
        else:
            self.say(f"     value: {name} = {self.quoted(value)}")


def selector_grid(example: Any, sel: Any) -> str:
    """Rows = queries, columns = keys, labelled by the example's tokens (1 = selected)."""
    tokens = [str(t) for t in (list(example) if isinstance(example, str) else example)]
    width = max(1, *(len(t) for t in tokens))
    head = " " * (width + 4) + " ".join(t.rjust(width) for t in tokens)
    rows = [f"\t {tokens[q].rjust(width)} | " + " ".join(("1" if x else "0").rjust(width) for x in row)
            for q, row in enumerate(sel)]
    return "\t" + head + "\n" + "\n".join(rows)
