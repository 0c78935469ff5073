"""``rasp repl``: the interactive RASP prompt.

A statement may span lines: input is collected until it parses, so an open bracket or a missing
';' simply asks for more.  After each statement the values it bound are printed the way the
original REPL prints them — s-ops and selectors together with their value on the running example
(``set example "hello"`` changes it; ``set s-op example`` / ``set selector example`` change one of
the two), lists and dicts of them element by element, ``full seq display on`` as an input/output
table.  ``draw(sop[, example]);`` is a statement (in a ``def`` or ``for`` body too): here it draws
the compiled s-op and prints its value.  ``load "file";`` runs the file as the original's load
does: statement by statement (an error is reported, the rest still binds), its REPL commands acting
here, what it bound printed when it ends.  As in the original, the built-ins' and the library's
names cannot be set at the prompt.  Errors print and the session goes on.  Works with a pipe
as stdin (no prompts are printed then), which is how the tests drive it.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, TextIO

from lark import Token
from lark.exceptions import UnexpectedCharacters, UnexpectedToken

from rasp_compiler.errors import InputError, RaspError, UserError, not_utf8
from rasp_compiler.lang.repl_commands import (
    DONE,
    EXAMPLES_SWITCH,
    EXIT,
    MISSING,
    OPEN,
    SEQ_DISPLAY,
    SET_EXAMPLE,
    SHOW_EXAMPLE,
    code_of,
    example_state,
    is_command,
    near_command,
    open_body,
    split_example,
)

HELP = """commands (besides RASP statements; each on a line of its own, a # comment may follow):
  set example "hello"        the input s-ops and selectors are shown on (also: set example [1, 2, 3]);
                             set s-op example … / set selector example … set only one of the two
  show example               print the running examples (show s-op example / show selector example)
  examples on | off          show / hide the example values after each statement
                             (s-op examples on|off, selector examples on|off: only that kind)
  full seq display on | off  show an s-op's value as an input/output table
  draw(sop[, example]);      a statement: compile the s-op over the example's tokens and length,
                             draw its layers, heads and MLPs to draw-N.png (the next N whose
                             file is not there yet), print its value
  help                       this text
  exit | quit                leave (so does end of input)"""

SET_EXAMPLE_USAGE = 'set example needs a value: set example "hello" or set example [1, 2, 3]'
NUMERIC_EXAMPLE_HINT = "this s-op reads numbers: set example [1, 2, 3]"
NUMERIC_DRAW_HINT = "this s-op reads numbers: draw(x, [1, 2, 3]), or set example [1, 2, 3]"
NUMERIC_INPUT_HINT = "this s-op reads numbers: apply it to a list of numbers, e.g. x([1, 2, 3])"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "repl", help="interactive RASP prompt",
        description="Interactive RASP: type statements, see each value on the running example. "
                    "Read from a pipe or a file, it exits with status 1 if any statement failed.",
        epilog='example session:\n  >> set example "hello"\n  >> reverse = aggregate(select(indices, '
               'length - indices - 1, ==), tokens);\n       s-op: reverse\n  \t Example: reverse("hello") = '
               '[o, l, l, e, h] (strings)\n\n' + HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--example", default="hello", metavar="TEXT",
                   help='the initial running example, as text: its characters are the tokens (default: '
                        '"hello"; for numbers, type set example [1, 2, 3] at the prompt)')
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if not args.example:  # every s-op shown on it would fail, as `set example ""` is refused
        raise UserError("--example is empty: an example is a non-empty string",
                        hint='e.g. --example hello, or set example [1, 2, 3] at the prompt')
    repl = Repl(example=args.example)
    if hasattr(sys.stdin, "reconfigure"):  # bytes that are not UTF-8 reach the loop, which names them
        sys.stdin.reconfigure(errors="surrogateescape")
    repl.loop(sys.stdin, sys.stdout)
    # A session read from a pipe or file is a script: a statement that failed makes it fail.
    return 1 if repl.errors and not sys.stdin.isatty() else 0


# Names the original's REPL refuses to set anywhere (its Environment's reserved words and constants).
ALWAYS_RESERVED = frozenset({"tokens_asis", "tokens_str", "tokens_int", "tokens_bool", "tokens_float",
                             "indices", "True", "False", "range", "zip", "len", "get"})


def _session_for(repl: Repl) -> Any:
    """An elaboration session that tells ``repl`` what it needs to print like the original: the
    input an s-op or selector was applied to, what a ``load`` runs and binds, and each ``draw``;
    and that refuses to set the names the original's REPL reserves."""
    from rasp_compiler.lang.elaborator import LIBRARY_FILE, Session

    class ReplSession(Session):
        def apply_to_input(self, value, args, tree, ctx):  # type: ignore[no-untyped-def]
            result = super().apply_to_input(value, args, tree, ctx)
            result.created_from_input = args[0]  # the grid's labels, the table's input row
            return result

        def load(self, token, env, ctx, on_result=None):  # type: ignore[no-untyped-def]
            """As the original's load: statement by statement, an error reported and the rest run,
            each public name bound in the loader at once; what it bound printed when it ends."""
            path, text, file_env = self.load_source(token, ctx)
            self._loading.append(path.resolve())
            repl.loading += 1  # the original shows no examples for what a load binds
            refused: set[str] = set()

            def export() -> None:
                # A loaded file may bind a library name for itself (its statements then read its
                # own value), but the session refuses it, once, and takes the file's other names,
                # as the original's console refuses what a load hands it.
                withheld = frozenset(v for v in file_env.vars
                                     if env is self.user and self.reserved_in_session(v))
                for name in sorted(withheld - refused):
                    refused.add(name)
                    repl.report(self.error(
                        f"cannot set reserved name '{name}' in the session: it is a built-in or library "
                        f"name ({path.name} binds it and keeps its own value)", token, ctx,
                        hint=f"rename '{name}' in {path.name}").render())
                self.import_public(file_env, env, ctx, withheld)
            try:
                repl.run_loaded_file(text, str(path), path.parent, file_env, export)
                repl.print_loaded()
            finally:
                repl.loading -= 1
                self._loading.pop()

        def describe_function(self, fn):  # type: ignore[no-untyped-def]
            return function_desc(fn)  # `g(console function: f(x))`, as the original's str(function)

        def _check_bindable(self, name, tree, ctx):  # type: ignore[no-untyped-def]
            super()._check_bindable(name, tree, ctx)
            if ctx.file == LIBRARY_FILE:
                return
            # The original's names that no statement may set; at the prompt the built-ins' and the
            # library's names too (`tokens` excepted).  A file being loaded may bind those for itself:
            # ``load`` refuses them when it hands the file's names to the session.
            at_prompt = ctx.function is None and not repl.loading
            if name in ALWAYS_RESERVED or (at_prompt and self.reserved_in_session(name)):
                raise self.error(f"cannot set reserved name '{name}': it is a built-in or library name",
                                 tree, ctx, hint="choose another name")

        def reserved_in_session(self, name: str) -> bool:
            """A built-in's or the library's name, which the session's own scope may not bind."""
            return name != "tokens" and (name in self.builtins.vars or name in self.library.vars)

    session = ReplSession()
    session.on_draw = repl.on_draw
    return session


class Repl:
    def __init__(self, example: Any = "hello") -> None:
        self.seq_example: Any = example       # what s-ops are shown on
        self.sel_example: Any = example       # what selectors are shown on
        self.show_seq_examples = True
        self.show_sel_examples = True
        self.full_seq_display = False         # `full seq display on`: the input/output table
        self.loading = 0                      # > 0 while a `load` runs
        # What the running loads bound ((name, value)) and the errors they met (str), printed when a
        # load ends: one list for nested loads too, as in the original.
        self.loaded: list[tuple[str, Any] | str] = []
        self.count = 0
        self.drawn = 0  # pictures written by draw(...): draw-1.png, draw-2.png, …
        self.errors = 0  # statements and commands that failed
        self.out: TextIO = sys.stdout
        self.session = _session_for(self)

    @property
    def example(self) -> Any:
        return self.seq_example

    # ------------------------------------------------------------------ the loop
    def loop(self, stdin: TextIO, stdout: TextIO) -> None:
        self.out = stdout
        interactive = stdin.isatty()
        if interactive:
            self.say("RASP (rasp-compiler). 'help' for commands, 'exit' to leave.")
            self.say(f"running example is: {self.seq_example}")
            try:
                import readline  # noqa: F401  (line editing and history for input())
            except ImportError:  # pragma: no cover - not on every platform
                pass
        buffer = ""
        first = True
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
                if code_of(buffer).strip():
                    self.finish(buffer)  # reports what is missing
                break
            if first and line.startswith("\ufeff"):  # a session saved with a BOM (Notepad): its
                line = line[1:]                         # first command was not recognised
            first = False
            shown = not_utf8(line.rstrip("\n"))
            if shown is not None:
                self.report(f"error: this line is not valid UTF-8 text, so it was skipped: {shown}")
                continue
            buffer = self.feed(buffer + line)
            if self.stopped:
                break
        stdout.flush()

    stopped = False

    def report(self, message: str) -> None:
        """An error of the statement or command just run (the session goes on); in a load, it is
        printed with what the load bound, when the load ends."""
        self.errors += 1
        if self.loading:
            self.loaded.append(message)
        else:
            self.say(message)

    def say(self, text: str = "", end: str = "\n") -> None:
        print(text, file=self.out, end=end)

    def feed(self, text: str, run: Callable[[str], None] | None = None) -> str:
        """Act on ``text`` (the lines read since the last statement) as far as it is whole: returns
        what still needs more lines (as the original reads on), "" when all was used up.  ``run``
        runs the statements (default: at the prompt)."""
        at_prompt = run is None
        run = run or self.run_statements
        code = code_of(text)
        if not code.strip():
            return ""
        if self.command(code):
            return ""
        m = SET_EXAMPLE.match(code)
        if m:
            first, _, rest = m.group(2).partition("\n")
            if not first.strip() and rest.strip() and is_command(rest.lstrip("\n").split("\n")[0]):
                # `set example` alone, then `show example`: the command is no example value
                self.report(f"error: {SET_EXAMPLE_USAGE}")
                return self.feed(text[text.index("\n") + 1:], run)
            part, after = split_example(m.group(2))
            expression, state = example_state(part)
            if state == OPEN:
                return text
            first_line = code.split("\n", 1)[0]
            at = first_line.find(expression.split("\n", 1)[0]) if expression else -1
            self.set_example(m.group(1), expression, state, lead=first_line[:at] if at > 0 else "")
            # `set example "ab"; x = indices;`: the statements sharing its line run too
            return self.feed(after, run) if after.strip() else ""
        meant = near_command(code) if at_prompt else None
        if meant is None and self.incomplete(text):
            return text
        if meant is not None and not self.parses(text):  # a mistyped command, not a statement
            self.count += 1
            self.report(f"error: '{' '.join(code.split())}' is neither a RASP statement nor a REPL command"
                        f"\n  hint: did you mean '{meant}'? ('help' lists the commands)")
            return ""
        run(text)
        return ""

    def finish(self, text: str, run: Callable[[str], None] | None = None) -> None:
        """The input ended in the middle of ``text``: say what is missing."""
        m = SET_EXAMPLE.match(code_of(text))
        if m:
            expression, state = example_state(m.group(2))
            self.set_example(m.group(1), expression, MISSING if not expression else DONE)
            return
        (run or self.run_statements)(text)

    # ------------------------------------------------------------------ load
    def run_loaded_file(self, text: str, file: str, directory: Path, env: Any,
                        import_public: Callable[[], Any]) -> None:
        """A loaded file, read as the original's load reads it: line by line like the prompt, each
        statement run on its own in the file's environment ``env`` (a failing one is reported, the
        rest still run) and its public names bound in the loader at once (``import_public``).  The
        file's REPL commands act here (`set example`, `full seq display on`); `exit` ends the file."""
        def runner(first_line: int) -> Callable[[str], None]:
            def run(chunk: str) -> None:
                try:  # the chunk keeps its line numbers, so errors point into the file
                    self.session.exec_source("\n" * first_line + chunk, file, env, directory,
                                             on_result=self.show)
                except InputError as err:
                    self.report(self.rehinted(err, NUMERIC_INPUT_HINT).render())
                except UserError as err:
                    self.report(err.render())
                finally:
                    self.session.sources[file] = text  # what later errors on its nodes quote
                    import_public()
            return run

        stopped, self.stopped = self.stopped, False
        buffer, first = "", 0
        for number, line in enumerate(text.splitlines(keepends=True)):
            if not buffer:
                first = number
            buffer = self.feed(buffer + line, runner(first))
            if self.stopped:  # `exit` in a file stops reading the file, not the session
                break
        else:
            if code_of(buffer).strip():
                self.finish(buffer, runner(first))
        self.stopped = stopped

    def print_loaded(self) -> None:
        """Print what the loads bound and their errors, in order.  As in the original: without an
        error, each name once, where it was last bound; with one, everything as it happened."""
        loaded, self.loaded = self.loaded, []
        if not any(isinstance(item, str) for item in loaded):
            last = {item[0]: k for k, item in enumerate(loaded)}  # type: ignore[index]
            loaded = [item for k, item in enumerate(loaded) if last[item[0]] == k]  # type: ignore[index]
        for item in loaded:
            if isinstance(item, str):
                self.say(item)
            else:
                self.print_named(*item)

    @staticmethod
    def parses(text: str) -> bool:
        from rasp_compiler.lang.parser import grammar

        try:
            grammar().parse(text)
        except (UnexpectedToken, UnexpectedCharacters):
            return False
        return True

    # the parser's state after the lines of a statement read so far (text, state), so that each new
    # line is lexed and parsed alone: parsing the whole statement again at every line took 108 s
    # for a def of 1,500 lines, and a list of 3,000 lines ran past 120 s
    _prefix: tuple[str, Any] | None = None

    def _parsed_prefix(self, text: str) -> Any:
        """The parser's state after ``text`` when ``text`` lexes and parses without an error so far
        (it may end before its statement does), else None."""
        from rasp_compiler.lang.parser import grammar

        prefix, self._prefix = self._prefix, None
        if prefix is not None and text.startswith(prefix[0]):  # lex and parse only the new lines
            parser = grammar().parse_interactive(text[len(prefix[0]):])
            parser.parser_state = prefix[1]
        else:
            parser = grammar().parse_interactive(text)
        state = parser.parser_state
        try:
            parser.exhaust_lexer()
        except (UnexpectedToken, UnexpectedCharacters):
            return None
        if text.endswith("\n"):  # a later text adds whole lines to it, so no token is cut in two
            self._prefix = (text, state)
        return state

    def incomplete(self, text: str) -> bool:
        """True when ``text`` is a prefix of a statement (more lines will complete it)."""
        from rasp_compiler.lang.parser import grammar

        state = self._parsed_prefix(text)
        if state is not None:  # no error so far: complete, or a statement that goes on
            try:
                state.copy(deepcopy_values=False).feed_token(Token("$END", ""), True)
            except UnexpectedToken:
                return True
            return False
        try:
            grammar().parse(text)
        except UnexpectedToken as err:
            return err.token.type == "$END" or open_body(code_of(text))
        except UnexpectedCharacters:
            # a mistake inside a `def` or `for` body: read the body to its '}' first, then report
            # the mistake once; reported at once, the body's other lines ran as statements of
            # their own ("'return' outside a function", "unmatched '}'")
            return open_body(code_of(text))
        return False

    # ------------------------------------------------------------------ REPL commands
    def command(self, code: str) -> bool:
        """Handle a REPL command (``code`` has no comments); False if it is not one."""
        if EXIT.match(code):
            self.stopped = True
            return True
        if code.strip() in ("help", "help()"):
            self.say(HELP)
            return True
        m = SEQ_DISPLAY.match(code)
        if m:
            self.full_seq_display = m.group(1) == "on"
            return True
        m = EXAMPLES_SWITCH.match(code)
        if m:
            subset, on = m.group(1), m.group(2) == "on"
            if subset in (None, "s-op"):
                self.show_seq_examples = on
            if subset in (None, "selector"):
                self.show_sel_examples = on
            return True
        m = SHOW_EXAMPLE.match(code)
        if m:
            subset = m.group(1)
            if subset in (None, "s-op"):
                self.say(f"\ts-op example: {formatstr(self.seq_example)}")
            if subset in (None, "selector"):
                self.say(f"\tselector example: {formatstr(self.sel_example)}")
            return True
        return False

    def set_example(self, subset: str | None, expression: str, state: str, lead: str = "") -> None:
        from rasp_compiler.lang.values import is_atom

        if state == MISSING or not expression:
            self.report(f"error: {SET_EXAMPLE_USAGE}")
            return
        self.count += 1
        try:
            value = self.session.eval_expression(expression, f"<repl:{self.count}>", usage=SET_EXAMPLE_USAGE,
                                                 lead=lead)
        except UserError as err:
            if re.fullmatch(r"[A-Za-z_]\w*", expression) and err.message.startswith("unknown name"):
                # `set example abc`: the original's example is a value, so a string needs its quotes
                quoted = f'the text itself, quote it: set example "{expression}"'
                err.hint = f"{err.hint} For {quoted}" if err.hint else f"for {quoted}"
            self.report(err.render())
            return
        def located(message: str) -> str:
            # at the value, as an error inside the expression is: `<repl:N>:1:COL:` and a caret
            text = expression.strip()
            shown = text.split("\n", 1)[0]
            return RaspError(message, f"<repl:{self.count}>", 1, len(lead) + 1, lead + text,
                             width=len(shown)).render()

        if not (isinstance(value, (str, list)) and value and all(is_atom(v) for v in value)):
            self.report(located(f"an example is a non-empty string or list of atoms, got {strdesc(value)}"))
            return
        bad = next((i for i, v in enumerate(value) if isinstance(v, float) and not math.isfinite(v)), None)
        if bad is not None:  # as `rasp run --input-json` refuses it; a model has no token for inf or NaN
            self.report(located(f"the example's position {bad} is not a finite number ({value[bad]})"))
            return
        if subset in (None, "s-op"):
            self.seq_example = value
        if subset in (None, "selector"):
            self.sel_example = value

    # ------------------------------------------------------------------ draw
    def on_draw(self, sop: Any, example: Any, text: str, shown: bool) -> None:
        """A ``draw(sop[, example]);`` statement ran: the s-op's program compiled over the
        example's tokens and length, drawn as scheduled (layers, heads, MLPs) to ``draw-N.png``;
        then, for a top-level draw, its value on the example, as the original prints it."""
        from rasp_compiler.compiler import MAX_LEN
        from rasp_compiler.interpreter import evaluate
        from rasp_compiler.lang.values import is_atom

        if example is None:
            example = self.seq_example
        if not (isinstance(example, (str, list)) and example and all(is_atom(v) for v in example)):
            raise UserError(f"the example to draw on is a non-empty string or list of atoms, "
                            f"got {strdesc(example)}")
        tokens = list(example)
        program = self.session.program_for(sop)
        try:  # an s-op that fails on the example is reported before anything is compiled
            values = evaluate(program, tokens, [program.output])[program.output]
        except InputError as err:
            raise self.rehinted(err, NUMERIC_DRAW_HINT) from None
        if len(tokens) > MAX_LEN:  # compile_program's own words name command-line options
            self.report(f"error: draw compiles over the example's length, and {len(tokens):,} tokens are "
                        f"more than the compiler takes ({MAX_LEN:,})\n  hint: draw on a shorter example: "
                        f'draw(x, "abc");')
        else:
            self.draw_plan(program, tokens, text, example)
        if shown and not self.loading:  # a draw in a loaded file draws, and prints no value
            self.print_just_val(values, example)

    def draw_plan(self, program: Any, tokens: list[Any], text: str, example: Any) -> None:
        """Compile ``program`` over the example's tokens and length and draw its plan to the next
        ``draw-N.png``; an error is reported and the session goes on."""
        from rasp_compiler.compiler import compile_program
        from rasp_compiler.viz import draw_plan

        # the next number free here: a second session in this directory overwrote the first's
        # draw-1.png, … (or the user's own) without a word
        while os.path.lexists(f"draw-{self.drawn + 1}.png"):
            self.drawn += 1
        path = f"draw-{self.drawn + 1}.png"
        try:
            vocab = sorted(set(tokens), key=lambda t: (type(t).__name__, str(t)))
            model = compile_program(program, vocab, len(tokens))
            drawn = model.compiled_program if model.compiled_program is not None else program
            draw_plan(drawn, model.plan, path, title=f"{text} on {formatstr(example)}: "
                      f"{model.n_layers} layer{'s' * (model.n_layers != 1)}, heads {model.heads_per_layer}")
        except UserError as err:
            self.report(err.render())
        except OSError as err:  # an unwritable directory: reported like any error, the session goes on
            self.report(f"error: cannot write {path}: {err.strerror or err}")
        else:
            self.drawn += 1
            self.say(f"wrote {path}: compiled over the example's tokens and length, {model.n_layers} "
                     f"layer{'s' * (model.n_layers != 1)}, heads per layer {model.heads_per_layer}")

    # ------------------------------------------------------------------ statements
    def run_statements(self, text: str) -> None:
        self.count += 1
        try:
            self.session.exec_source(text, f"<repl:{self.count}>", on_result=self.show)
        except InputError as err:
            self.report(self.rehinted(err, NUMERIC_INPUT_HINT).render())
        except UserError as err:
            self.report(err.render())

    @staticmethod
    def rehinted(err: InputError, hint: str) -> InputError:
        """The interpreter's input errors suggest `rasp run`'s --input-json; here the example is
        what to change."""
        if err.hint and "--input-json" in err.hint:
            err.hint = hint
        return err

    def show(self, name: str, value: Any) -> None:
        from rasp_compiler.lang.values import AppliedResult

        if self.loading:  # printed when the load ends; the file's `out` and private names never,
            # nor a built-in's or library name the file bound for itself (the session refuses it)
            if not name.startswith("_") and name != "out" and not self.session.reserved_in_session(name):
                self.loaded.append((name, value))
            return
        if isinstance(value, AppliedResult) and name == "out":  # `reverse("abc");`
            self.print_just_val(list(value), getattr(value, "created_from_input", None))
        else:
            self.print_named(name, value)

    def name_of(self, value: Any) -> str:
        """An s-op's or selector's name where no binding names it (in a list or dict), as the
        original's: its last assignment or the call that returned it (`checkfor("a" , "<")`), else
        the operator that made it (`( tokens + 1 )`, `tokens in vowels`), else its kind (`s-op`,
        `plain select`); a name over 30 characters falls back to `s-op` / `sel`."""
        return self.session.display_name(value)

    def evaluated(self, value: Any, example: Any) -> Any:
        from rasp_compiler.interpreter import evaluate

        program = self.session.program_for(value)
        return evaluate(program, example, [program.output])[program.output]

    def print_named(self, name: str | None, value: Any, ntabs: int = 0, first: str = "") -> None:
        """A bound value, laid out as the original's print_named_val: s-ops and selectors with
        their example (unless examples are off, or a load is running), lists and dicts holding
        them element by element, everything else on one line."""
        from rasp_compiler.lang.values import AppliedResult, Builtin, Function, Selector, SOp

        pref = "\t" * ntabs
        examples = not self.loading
        if name is None and isinstance(value, (SOp, Selector)):
            name = self.name_of(value)
        if isinstance(value, SOp):
            self.say(_line(pref, first, "   s-op:", name))
            if examples and self.show_seq_examples:
                self.print_sop_example(name or "out", value, pref)
        elif isinstance(value, Selector):
            self.say(_line(pref, first, "   selector:", name))
            if examples and self.show_sel_examples:
                try:
                    grid = self.evaluated(value, self.sel_example)
                except UserError as err:
                    self.say_failure(err, pref)
                    return
                self.say(_line(pref, "\t Example:"))
                self.print_select(self.sel_example, grid, pref)
        elif isinstance(value, (Function, Builtin)):
            self.say(_line(pref, first, "   " + function_desc(value)))
        elif isinstance(value, (list, dict)) and not isinstance(value, AppliedResult):
            is_list = isinstance(value, list)
            named = f"   {'list' if is_list else 'dict'}: " + (f"{name} = " if name is not None else "")
            items = value if is_list else list(value.values())
            if not any(isinstance(v, (list, dict, SOp, Selector)) and not isinstance(v, AppliedResult)
                       for v in items):
                self.say(_line(pref, first, named) + pyrepr(value))
                return
            self.say(_line(pref, first, named) + _line(pref, "[" if is_list else "{"))
            if is_list:
                for v in value:
                    self.print_named(None, v, ntabs + 2)
            else:
                for k, v in value.items():
                    self.print_named(None, v, ntabs + 3, first=formatstr(k) + " : ")
            self.say(_line(pref, " " * len(named), "]" if is_list else "}"))
        else:
            named = f"{name} = " if name is not None else ""
            self.say(_line(pref, *([first] if first else []), "   value:", named, formatstr(value)))

    def print_sop_example(self, name: str, value: Any, pref: str) -> None:
        from rasp_compiler.lang.format import format_sequence

        try:
            seq = self.evaluated(value, self.seq_example)
        except UserError as err:
            self.say_failure(err, pref)
            return
        desc = f"{name}({formatstr(self.seq_example)}) ="
        if self.full_seq_display:
            self.say(_line(pref, "\t Example:"), end="")
            self.print_seq(self.seq_example, seq, on_prev_line=True, extra_pref=pref, short_desc=desc)
        else:
            self.say(_line(pref, "\t Example:", desc, format_sequence(seq)))

    def say_failure(self, err: UserError, pref: str) -> None:
        if isinstance(err, InputError):
            err = self.rehinted(err, NUMERIC_EXAMPLE_HINT)
        self.say(pref + "\t !! fails on the example: " + err.render().replace("\n", "\n\t " + pref))

    def print_just_val(self, value: list, example: Any) -> None:
        """A value that is no binding (``reverse("abc")``, a draw), as the original's JustVal."""
        from rasp_compiler.lang.format import format_sequence

        if example is None:
            example = [str(i) for i in range(len(value))]
        if value and isinstance(value[0], list):  # an applied selector
            self.say("\t = ")
            self.print_select(example, value)
        elif self.full_seq_display:
            self.say("\t = ", end="")
            self.print_seq(example, value, on_prev_line=True)
        else:
            self.say(f"\t =  {format_sequence(value)}")

    def print_seq(self, example: Any, values: list, on_prev_line: bool = False, extra_pref: str = "",
                  short_desc: str = "") -> None:
        """``full seq display on``: the input and the output as two aligned rows (the original's
        print_seq); a sequence of one repeated value stays short."""
        from rasp_compiler.lang.format import all_equal, format_sequence, type_words

        if all_equal(values):
            self.say(_line("" if on_prev_line else extra_pref, short_desc, format_sequence(values)),
                     end=" ")
            self.say("[skipped full display: identical values]")
            return
        if on_prev_line:
            self.say()
        inputs = list(example)
        shown_in, shown_out = _table_cells(inputs), _table_cells(values)
        width = max(len(v) for v in shown_in + shown_out)

        def row(cells: list[str]) -> str:
            return " ".join(c.rjust(width) for c in cells)

        self.say(_line(extra_pref, "\t\tinput:  ", row(shown_in), "\t", f"({type_words(inputs)})"))
        self.say(_line(extra_pref, "\t\toutput: ", row(shown_out), "\t", f"({type_words(values)})"))

    def print_select(self, example: Any, grid: list, extra_pref: str = "") -> None:
        """A selector as the original's print_select: queries down, keys across, labelled by the
        example's tokens, a selected pair marked 1 and the rest blank."""
        tokens = [str(t) for t in example]
        width = max([1, *(len(t) for t in tokens)])
        self.say(_line(extra_pref, "\t\t\t" + " " * (width + 3), " ".join(t.rjust(width) for t in tokens)))
        for token, row in zip(tokens, grid, strict=False):
            cells = " ".join(("1" if x else " ").rjust(width) for x in row)
            self.say(_line(extra_pref, "\t\t\t", token.rjust(width), "|", cells))


# ---------------------------------------------------------------------- how values print
def _line(*parts: str) -> str:
    """The parts as Python's print joins them (the original's layout comes from its print calls)."""
    return " ".join(parts)


def _table_cells(values: list) -> list[str]:
    """A full-display row: a bool row marks only its rarer value (T or F; both when as many)."""
    from rasp_compiler.lang.format import small

    if values and all(isinstance(v, bool) for v in values):
        trues = sum(1 for v in values if v)
        falses = len(values) - trues
        t = "T" if trues <= falses else ""
        f = "F" if falses <= trues else ""
        return [t if v else f for v in values]
    return [small(v) for v in values]


def formatstr(value: Any) -> str:
    """A string in double quotes, anything else as it prints (the original's formatstr)."""
    return f'"{value}"' if isinstance(value, str) else pyrepr(value)


def strdesc(value: Any) -> str:
    """A short description of any value: strings quoted, lists and dicts element by element."""
    from rasp_compiler.lang.values import Selector, SOp, a_kind

    if isinstance(value, (SOp, Selector)):
        return a_kind(value)
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(strdesc(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{strdesc(k)}: {strdesc(v)}" for k, v in value.items()) + "}"
    return pyrepr(value)


def pyrepr(value: Any) -> str:
    """A value as the original prints a list or dict of atoms (Python's repr: ``['a', 1, True]``);
    a function inside one is described, not dumped."""
    from rasp_compiler.lang.format import format_sequence
    from rasp_compiler.lang.values import AppliedResult, Builtin, Function

    if isinstance(value, AppliedResult):  # an s-op's or selector's value on an input
        if value and isinstance(value[0], list):
            return str({q: [int(x) for x in row] for q, row in enumerate(value)})
        return format_sequence(list(value))
    if isinstance(value, list):
        return "[" + ", ".join(pyrepr(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{pyrepr(k)}: {pyrepr(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (Function, Builtin)):
        return function_desc(value)
    if isinstance(value, (bool, int, float, str)):
        return repr(value) if isinstance(value, str) else str(value)
    return str(value)


def function_desc(fn: Any) -> str:
    """``console function: f(x)`` for one defined at the prompt (the original's words), else the
    library's, a loaded file's (``paper_examples function: …``) or a built-in's."""
    from rasp_compiler.lang.elaborator import LIBRARY_FILE
    from rasp_compiler.lang.values import Builtin

    if isinstance(fn, Builtin):
        return f"built-in function: {fn.usage}"
    if fn.file.startswith("<repl"):
        creator = "console"
    elif fn.file == LIBRARY_FILE:
        creator = "library"
    else:  # a loaded file's: named as its load wrote it (`tests/rasps/rover function: …`)
        env = fn.env
        while env.parent is not None and env.parent.label != "library":
            env = env.parent
        creator = env.label
    return f"{creator} function: {fn.name}({', '.join(fn.params)})"
