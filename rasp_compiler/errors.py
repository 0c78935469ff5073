"""User-facing errors: one clear message, a source location where there is one, never a traceback.

Everything a user can get wrong (a program, a token, an input length, a weights file, an option)
raises a subclass of ``UserError``; the command line prints ``err.render()`` and exits non-zero.
"""

from __future__ import annotations

import os
from pathlib import Path


class UserError(Exception):
    """A mistake in what the user gave us. ``render()`` is what the command line prints."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        # a Python API user who prints or logs the exception sees what the command line shows,
        # less the "error:" prefix and the source excerpt
        return self.message + (f"\n  hint: {self.hint}" if self.hint else "")

    def render(self) -> str:
        text = f"error: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class CompileWarning(UserWarning):
    """A compile note that concerns the answers (``warnings.warn`` by ``compile_program``): a
    numerical output past the integers its dtype holds, inputs that have no answer (the
    interpreter raises there).  The note is also in ``config["notes"]`` and ``summary()``.
    Silence it with ``warnings.filterwarnings("ignore", category=CompileWarning)``, or turn it
    into an error with ``"error"``."""


class RaspError(UserError):
    """An error in a RASP program, located at FILE:LINE:COL (1-based)."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None,
                 col: int | None = None, source: str | None = None, hint: str | None = None,
                 width: int = 1) -> None:
        super().__init__(message, hint)
        self.file, self.line, self.col = file, line, col
        self.source = source  # the whole source text, to show the offending line
        self.width = max(1, width)

    def __str__(self) -> str:
        located = self.file is not None or self.line is not None
        return f"{self._where()}: {super().__str__()}" if located else super().__str__()

    def _where(self) -> str:
        where = f"{self.file or '<input>'}"
        if self.line is not None:
            where += f":{self.line}"
            if self.col is not None:
                where += f":{self.col}"
        return where

    def render(self) -> str:
        if self.file is None and self.line is None:  # not about a place in a program (a --vocab
            return super().render()                   # entry): no made-up "<input>:" before it
        text = f"{self._where()}: error: {self.message}"
        line_text = self._line_text()
        if line_text is not None:
            shown, col = _window(line_text, self.col)
            text += f"\n    {shown}"
            if col is not None:
                width = min(self.width, len(shown) - col + 1)
                text += "\n    " + " " * (col - 1) + "^" + "~" * (width - 1)
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text

    def _line_text(self) -> str | None:
        if self.line is None:
            return None
        source = self.source
        if source is None and self.file and Path(self.file).is_file():
            source = Path(self.file).read_text(encoding="utf-8", errors="replace")
        if source is None:
            return None
        # the parser counts lines by "\n" only; splitlines() also splits at \f, \v and U+2028,
        # and showed another line than the one the error is on
        lines = source.split("\n")
        if 1 <= self.line <= len(lines):
            return lines[self.line - 1].rstrip("\r").replace("\t", " ")
        return None


SHOWN_WIDTH = 120  # a longer source line is shown as this much of it around the column


def _window(line: str, col: int | None) -> tuple[str, int | None]:
    """``line`` cut to SHOWN_WIDTH characters around ``col`` (1-based), marked with "…" where cut,
    and the column within what is shown: an error at column 20,005 printed the whole line and
    20,004 spaces before its caret."""
    if len(line) <= SHOWN_WIDTH:
        return line, col
    at = (col or 1) - 1
    start = max(0, min(at - SHOWN_WIDTH // 2, len(line) - SHOWN_WIDTH))
    shown = line[start:start + SHOWN_WIDTH]
    prefix = "…" if start > 0 else ""
    suffix = "…" if start + SHOWN_WIDTH < len(line) else ""
    return prefix + shown + suffix, (None if col is None else at - start + 1 + len(prefix))


class InputError(UserError):
    """A bad input sequence: unknown token, too long, non-finite, wrong layout."""


class ArtifactError(UserError):
    """A missing, truncated, corrupt or tampered model directory."""


class CompileError(RaspError):
    """A program (or node of it) the compiler cannot turn into weights; says what to change."""


class ModelTooLargeError(CompileError):
    """A program whose model would be past the compiler's size guard (a one-hot, a table or the
    whole model too large); the compiler may try another encoding before it reports it."""


def file_in_the_way(directory: str | os.PathLike) -> str | None:
    """The file (``directory`` itself or one of its parents, as the user wrote it) that stops
    ``directory`` from being created, or None.  ``os.makedirs`` reports one only as "File exists"
    or "Not a directory", which does not say which path is the file."""
    path = Path(directory)
    for p in (path, *path.parents):
        if os.path.exists(p):  # the nearest existing path decides
            return None if os.path.isdir(p) else str(p)
    return None


def not_utf8(text: str) -> str | None:
    """``text`` with its bytes escaped (``a\\xff``) when it is not UTF-8 (Python keeps such bytes
    of arguments and of streams read with ``surrogateescape`` as lone surrogates, which no file,
    JSON or strict terminal can take), else None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")
    return None
