"""Text → Lark syntax tree, with syntax errors turned into located ``RaspError``s in words."""

from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

from lark import Lark, Tree
from lark.exceptions import UnexpectedInput

from rasp_compiler.errors import UserError

# The grammar's home is grammars/rasp.lark; rasp_compiler/lang/rasp.lark links to it so that a
# non-editable install (which copies the link's target into the wheel) carries it too.
GRAMMAR_PATH = Path(__file__).with_name("rasp.lark")


@lru_cache(maxsize=1)
def grammar(strict: bool = False) -> Lark:
    """The LALR parser built from ``grammars/rasp.lark`` (built once per process)."""
    # The basic lexer keeps keywords keywords everywhere (the contextual one would read `if` as a
    # name wherever a name fits, giving odd errors); the grammar needs no context to lex.
    with _terminal_collision_check(strict):
        return Lark(GRAMMAR_PATH.read_text(encoding="utf-8"), parser="lalr", lexer="basic",
                    strict=strict, propagate_positions=True, maybe_placeholders=True)


@contextmanager
def _terminal_collision_check(wanted: bool) -> Iterator[None]:
    """Lark compares every pair of regex terminals whenever `interegular` is importable (the test
    extra installs it), which cost 0.4 s of every `rasp` start, a seventh of `rasp compile`.  The
    grammar does not change at run time, so that check is the test suite's job
    (tests/test_parser.py builds it strict); here it is switched off unless asked for.  Should a
    later lark drop the flag, setting it is harmless and the check simply runs."""
    import lark.lexer

    before = getattr(lark.lexer, "has_interegular", False)
    lark.lexer.has_interegular = before and wanted
    try:
        yield
    finally:
        lark.lexer.has_interegular = before


def parse_source(text: str, file: str = "<string>") -> Tree:
    """Parse RASP source into a Lark tree; a syntax error raises ``RaspError`` at FILE:LINE:COL.
    The original REPL's commands in the text (``set example``, ``examples off``, ``exit``…) are
    skipped, as its ``load`` skips them for the program (see ``repl_commands``); ``draw(…);`` is a
    statement of the grammar."""
    from rasp_compiler.lang.repl_commands import blank_repl_commands
    from rasp_compiler.lang.syntax_errors import translate

    check_source(text, "parse_source")
    text = blank_repl_commands(text)
    try:
        return grammar().parse(text)
    except UnexpectedInput as err:
        raise translate(err, text, file) from None


def check_source(text: Any, caller: str) -> None:
    """Refuse source text that is not a str, naming the call: None or bytes failed deep inside
    the parser with an AttributeError or TypeError."""
    if isinstance(text, str):
        return
    if isinstance(text, (bytes, bytearray)):
        raise UserError(f"{caller}'s text must be a str of RASP source, got bytes",
                        hint="decode it first: text.decode('utf-8')")
    raise UserError(f"{caller}'s text must be a str of RASP source, got "
                    f"{'None' if text is None else type(text).__name__}",
                    hint="a file: load_program(path)")
