"""The original REPL's interactive commands, and how a program file treats them.

The original grammar lets a file hold REPL commands between statements (``set example "hello"``,
``show example``, ``examples off``, ``full seq display on``, ``draw(sop)``, ``exit``), and its
``load`` runs them.  None of them changes what the program computes: they set or print the running
example, switch printing, or draw a picture; ``exit`` / ``quit`` stop reading the file.  So a file
written for the original parses here too: ``blank_repl_commands`` blanks those commands (keeping
every other character where it was, so errors still point at the right line and column) and
everything after an ``exit``.  ``rasp repl`` acts on the same commands instead of blanking them.
"""

from __future__ import annotations

import re

SET_EXAMPLE = re.compile(r"^\s*set\s+(?:(s-op|selector)\s+)?example\s+(.*?);?\s*$", re.S)
SHOW_EXAMPLE = re.compile(r"^\s*show\s+(?:(s-op|selector)\s+)?example\s*;?\s*$")
EXAMPLES_SWITCH = re.compile(r"^\s*(?:(s-op|selector)\s+)?examples\s+(on|off)\s*;?\s*$")
SEQ_DISPLAY = re.compile(r"^\s*full\s+seq\s+display\s+(on|off)\s*;?\s*$")
DRAW = re.compile(r"^\s*draw\s*\(")
EXIT = re.compile(r"^\s*(exit|quit)(\(\))?\s*;?\s*$")

_ONE_LINE = (SET_EXAMPLE, SHOW_EXAMPLE, EXAMPLES_SWITCH, SEQ_DISPLAY)


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
            if m and examples is not None and m.group(1) != "selector":
                examples.append(m.group(2).strip())
            if any(p.match(code) for p in _ONE_LINE):
                out.append(_blank(line))
                i += 1
                continue
            if DRAW.match(code):
                end = _draw_end(lines, i)
                if end is not None:
                    out.extend(_blank(part) for part in lines[i:end + 1])
                    i = end + 1
                    continue
        depth, at_start = _scan(code, depth, at_start)
        out.append(line)
        i += 1
    return "".join(out)


def _blank(line: str) -> str:
    return "".join(ch if ch in "\r\n" else " " for ch in line)


def _code_of(line: str) -> str:
    """The line without its comment (a ``#`` outside a string)."""
    quoted = False
    k = 0
    while k < len(line):
        ch = line[k]
        if quoted and ch == "\\":
            k += 2
            continue
        if ch == '"':
            quoted = not quoted
        elif ch == "#" and not quoted:
            return line[:k]
        k += 1
    return line


def _scan(code: str, depth: int, at_start: bool) -> tuple[int, bool]:
    """Bracket depth after ``code``, and whether a statement may start right after it."""
    quoted = False
    k = 0
    while k < len(code):
        ch = code[k]
        if quoted:
            if ch == "\\":
                k += 1
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted, at_start = True, False
        elif ch in "([{":
            depth, at_start = depth + 1, False
        elif ch in ")]}":
            depth = max(0, depth - 1)
            at_start = ch == "}" and depth == 0
        elif ch == ";":
            at_start = depth == 0 or at_start
        elif not ch.isspace():
            at_start = False
        k += 1
    return depth, at_start


def _draw_end(lines: list[str], first: int) -> int | None:
    """The index of the line that closes the ``draw(`` opened on line ``first`` (None: never)."""
    depth = 0
    opened = False
    for j in range(first, len(lines)):
        quoted = False
        code = _code_of(lines[j])
        for k, ch in enumerate(code):
            if quoted:
                if ch == '"' and code[k - 1] != "\\":
                    quoted = False
            elif ch == '"':
                quoted = True
            elif ch == "(":
                depth, opened = depth + 1, True
            elif ch == ")":
                depth -= 1
                if opened and depth == 0:
                    tail = code[k + 1:].strip()
                    return j if tail in ("", ";") else None
    return None
