"""The original REPL's interactive commands, and how a program file treats them.

The original grammar lets a file hold REPL commands between statements (``set example "hello"``,
``show example``, ``examples off``, ``full seq display on``, ``exit``), each optionally followed by
a ``# comment``, and its ``load`` runs them.  None of them changes what the program computes: they
set or print the running example or switch printing; ``exit`` / ``quit`` stop reading the file.  So
a file written for the original parses here too: ``blank_repl_commands`` blanks those commands
(keeping every other character where it was, so errors still point at the right line and column)
and everything after an ``exit``.  ``rasp repl`` acts on the same commands instead of blanking them.

``set example`` reads an expression, which may go on over the next lines as any expression may
(``set example [1,`` then ``2, 3]``), as in the original.  A ``;`` ends it, and statements after that
``;`` on the same line are statements (several statements may share a line here).
``draw(sop[, example]);`` is a statement of the grammar (``grammars/rasp.lark``), not a command: it
is legal wherever a statement is, and in a program file it draws nothing.
"""

from __future__ import annotations

import difflib
import re
from typing import Iterator

_SUBSET = r"(?:(s-op|selector)\s+)?"
# `set [s-op|selector] example EXPR` (EXPR possibly empty or unfinished: see example_state)
SET_EXAMPLE = re.compile(r"^\s*set\s+" + _SUBSET + r"example(?![A-Za-z0-9_])(.*)$", re.S)
SHOW_EXAMPLE = re.compile(r"^\s*show\s+" + _SUBSET + r"example\s*;?\s*$")
EXAMPLES_SWITCH = re.compile(r"^\s*" + _SUBSET + r"examples\s+(on|off)\s*;?\s*$")
SEQ_DISPLAY = re.compile(r"^\s*full\s+seq\s+display\s+(on|off)\s*;?\s*$")
EXIT = re.compile(r"^\s*(exit|quit)(\s*\(\s*\))?\s*;?\s*$")

_ONE_LINE = (SHOW_EXAMPLE, EXAMPLES_SWITCH, SEQ_DISPLAY)

MISSING, OPEN, DONE = "missing", "open", "done"

# the commands' words, for near_command
_FIXED = ("show example", "show s-op example", "show selector example", "exit", "quit", "help")
_SWITCHES = ("examples", "s-op examples", "selector examples", "full seq display")


def _near(word: str, target: str, cutoff: float = 0.6) -> bool:
    return difflib.SequenceMatcher(None, word.lower(), target).ratio() >= cutoff


def is_command(code: str) -> bool:
    """Whether the line ``code`` (comments removed) is a REPL command."""
    return (code.strip() in ("help", "help()") or bool(EXIT.match(code) or SET_EXAMPLE.match(code))
            or any(p.match(code) for p in _ONE_LINE))


def near_command(code: str) -> str | None:
    """The REPL command ``code`` (a line that is no statement) likely meant, or None: a typo of
    one (`shwo example`, `set exmple "abc"`, `exampels off`), or a switch given neither on nor off
    (`full seq display yes`).  The parser alone reads such a line as a statement missing a ';'."""
    words = code.split()
    if not words or len(words) > 5:
        return None
    m = re.match(r"\s*(\S+)\s+(?:(s-op|selector)\s+)?(\S+?)(?=[\s\"\[(]|$)(.*)$", code, re.S)
    if m and _near(m.group(1), "set") and _near(m.group(3), "example", 0.7):
        subset = f"{m.group(2)} " if m.group(2) else ""
        return f"set {subset}example {m.group(4).strip()}".rstrip()
    for command in _FIXED:
        wanted = command.split()
        # one word (`exitt`, `hlep`) must be closer: a name typed alone may go on over the next line
        cutoff = 0.75 if len(wanted) == 1 else 0.6
        if len(wanted) == 1 and not words[0].isalpha():  # `help(x` is a call going on
            continue
        if len(words) == len(wanted) and all(_near(w, c, cutoff) for w, c in zip(words, wanted, strict=True)):
            return command
    for switch in _SWITCHES:
        wanted = switch.split()
        if len(words) == len(wanted) + 1 and \
                all(_near(w, c) for w, c in zip(words[:-1], wanted, strict=True)):
            value = words[-1].lower()
            state = "on" if _near(value, "on", 0.8) else "off" if _near(value, "off", 0.8) else "on | off"
            return f"{switch} {state}"
    return None


def example_state(rest: str) -> tuple[str, str]:
    """What follows ``set example`` (comments already removed): the expression, and whether it is
    ``MISSING`` (nothing, then a ';'), ``OPEN`` (nothing yet, or an unfinished expression: the
    original reads on) or ``DONE`` (complete, or wrong in a way more text cannot fix)."""
    from lark.exceptions import UnexpectedCharacters, UnexpectedToken

    from rasp_compiler.lang.parser import grammar

    text = rest.strip()
    ended = text.endswith(";")
    if ended:
        text = text[:-1].rstrip()
    if not text:
        return "", MISSING if ended else OPEN
    try:
        grammar().parse(text)
    except UnexpectedToken as err:
        if err.token.type == "$END" and not ended:
            from rasp_compiler.lang.syntax_errors import scan_brackets

            # Lark's expected set may hold ';' inside a list too (`[1, 2`): an open bracket reads on
            if "SEMICOLON" not in (err.expected or ()) or scan_brackets(text)[0]:
                return text, OPEN
    except UnexpectedCharacters:
        pass
    return text, DONE


def split_example(rest: str) -> tuple[str, str]:
    """``rest`` (what follows ``set example``, comments removed) cut after its first ``;`` outside
    brackets and strings: the example's part (with the ``;``) and what follows it, which is
    statements sharing the line ("" when there is no such ``;``)."""
    for k, ch, depth in _unquoted(rest):
        if ch == ";" and depth == 0:
            return rest[:k + 1], rest[k + 1:]
    return rest, ""


def _unquoted(text: str, depth: int = 0) -> Iterator[tuple[int, str, int]]:
    """(index, character, bracket depth before it) of every character of ``text`` outside string
    literals (an opening quote is yielded; a string ends at its closing quote or the line's end)."""
    quoted = False
    k = 0
    while k < len(text):
        ch = text[k]
        if quoted:
            if ch == "\\":
                k += 1
            elif ch in '"\n':
                quoted = False
        else:
            yield k, ch, depth
            if ch == '"':
                quoted = True
            elif ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth = max(0, depth - 1)
        k += 1


def open_body(code: str) -> bool:
    """Whether ``code`` (comments removed) starts a ``def`` or ``for`` whose body's ``{`` is still
    open, so that more lines will close it (a dict's ``{`` in other statements does not count)."""
    if not re.match(r"\s*(def|for)\b", code):
        return False
    depth = 0
    for _, ch, _ in _unquoted(code):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
    return depth > 0


def code_of(text: str) -> str:
    """``text`` without its comments (a ``#`` outside a string, to the end of its line)."""
    return "".join(_code_of(line) for line in text.splitlines(keepends=True))


def file_example(text: str) -> str | None:
    """The expression of the file's last ``set example …`` (or ``set s-op example …``) before any
    ``exit``: the input the original REPL would show the file's s-ops on."""
    examples: list[str] = []
    blank_repl_commands(text, examples)
    return examples[-1] if examples else None


def blank_repl_commands(text: str, examples: list[str] | None = None) -> str:
    """``text`` with every top-level REPL command replaced by spaces, and everything after an
    ``exit`` / ``quit`` line too.  A command is recognised only where a statement may start (at
    bracket depth 0, after a ``;`` or ``}``), so the same words inside an expression are left for
    the parser to judge.  The expressions of s-op examples set on the way go to ``examples``."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    depth, at_start = 0, True
    i = 0
    while i < len(lines):
        line = lines[i]
        code = _code_of(line)
        if depth == 0 and at_start:
            if EXIT.match(code):
                out.extend(_blank(rest) for rest in lines[i:])
                break
            m = SET_EXAMPLE.match(code)
            if m:
                end, expression, after = _example_end(lines, i, m.group(2))
                if examples is not None and m.group(1) != "selector" and expression:
                    examples.append(expression)
                out.extend(_blank(part) for part in lines[i:end])
                cut = len(lines[end])
                if after.strip():  # statements after the example's ';' stay, at their columns
                    cut = len(_code_of(lines[end])) - len(after)
                out.append(_blank(lines[end][:cut]) + lines[end][cut:])
                depth, at_start = _scan(after, 0, True)
                i = end + 1
                continue
            if any(p.match(code) for p in _ONE_LINE):
                out.append(_blank(line))
                i += 1
                continue
        depth, at_start = _scan(code, depth, at_start)
        out.append(line)
        i += 1
    return "".join(out)


def _example_end(lines: list[str], first: int, rest: str) -> tuple[int, str, str]:
    """The last line of the ``set example`` that starts on line ``first`` (its expression may go on
    over the next lines), the expression it sets ("" when there is none) and the code after its
    ``;`` on that last line (statements sharing the line)."""
    j = first
    while True:
        part, after = split_example(rest)
        expression, state = example_state(part)
        if after.strip() or state != OPEN or j + 1 >= len(lines):
            return j, expression, after
        j += 1
        rest += _code_of(lines[j])


def _blank(line: str) -> str:
    return "".join(ch if ch in "\r\n" else " " for ch in line)


def _code_of(line: str) -> str:
    """The line without its comment (a ``#`` outside a string); the line break stays."""
    quoted = False
    k = 0
    while k < len(line):
        ch = line[k]
        if quoted and ch == "\\":
            k += 2
            continue
        if ch == '"':
            quoted = not quoted
        elif ch == "\n":
            quoted = False
        elif ch == "#" and not quoted:
            return line[:k] + ("\n" if line.endswith("\n") else "")
        k += 1
    return line


def _scan(code: str, depth: int, at_start: bool) -> tuple[int, bool]:
    """Bracket depth after ``code``, and whether a statement may start right after it."""
    for _, ch, before in _unquoted(code, depth):
        if ch in "([{":
            depth, at_start = before + 1, False
        elif ch in ")]}":
            depth = max(0, before - 1)
            at_start = ch == "}" and depth == 0
        elif ch == ";":
            at_start = before == 0 or at_start
        elif not ch.isspace():   # an opening quote too
            at_start = False
    return depth, at_start
