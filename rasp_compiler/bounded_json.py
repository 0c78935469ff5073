"""Reading JSON that a user (or a file a user handed us) wrote, within stated bounds.

``json.loads`` trusts its input: a 200 MB file is parsed whole before anyone looks at it, a line of
100,000 ``[`` raises ``RecursionError`` (a traceback, not an error message), and an integer of over
4,300 digits raises a bare ``ValueError``.  Every JSON that comes from outside the program (an
``--input-json`` argument, a ``# example-json:`` line, a model's ``config.json``, a safetensors
header's metadata, an experiment's files) goes through ``load_json_text`` or ``load_json_file``,
which check the size and the nesting depth *before* parsing and turn every failure into one
``UserError`` (or the subclass the caller names) that says which input is wrong and why.
"""

from __future__ import annotations

import json
import os
from typing import Any

from rasp_compiler.errors import UserError

MAX_BYTES = 64 * 1024 * 1024  # no file of ours comes near it; a model's config.json is kilobytes
MAX_DEPTH = 200  # far past any file of ours (depth < 10), far below Python's recursion limit
MAX_INT_DIGITS = 4300  # Python's own limit on int(str) (sys.get_int_max_str_digits' default)

# every byte but the brackets and the quote: deleted (bytes.translate, in C) before counting depth
_NOT_STRUCTURE = bytes(sorted(set(range(256)) - set(b'[]{}"')))
_CHUNK = 1 << 22  # NumPy works through a long text in pieces of this many bytes (bounded memory)


def nesting_depth(text: str | bytes) -> int:
    """The deepest nesting of ``[`` / ``{`` in ``text``, brackets inside strings not counted.

    Linear and in C: escaped backslashes and quotes are removed, then every byte but brackets and
    quotes; a bracket is inside a string when an odd number of quotes precede it.  (A regex, or a
    Python loop over each bracket, took seconds on a 40 MB file.)  Text that is not JSON gets some
    number, and json.loads then reports the real fault."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    # JSON escapes pair up from the left, so removing every \\ first leaves \" as the escaped quotes
    data = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    if b"[" not in data and b"{" not in data:
        return 0
    import numpy as np

    step = np.zeros(256, dtype=np.int8)
    step[list(b"[{")], step[list(b"]}")] = 1, -1
    depth = deepest = quotes = 0
    for at in range(0, len(data), _CHUNK):
        codes = np.frombuffer(data, dtype=np.uint8, count=min(_CHUNK, len(data) - at), offset=at)
        steps = step[codes]
        is_quote = codes == ord('"')
        if quotes % 2 or is_quote.any():  # brackets inside strings do not count
            steps = steps * ((np.cumsum(is_quote, dtype=np.int64) + quotes) % 2 == 0)
            quotes += int(is_quote.sum())
        levels = np.cumsum(steps, dtype=np.int64) + depth
        deepest, depth = max(deepest, int(levels.max())), int(levels[-1])
    return deepest


def _parse_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"a number in it has more than {MAX_INT_DIGITS:,} digits "
                         f"({len(digits.lstrip('-')):,})")
    return int(digits)


def load_json_text(text: str | bytes, what: str, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH,
                   error: type[UserError] = UserError) -> Any:
    """The JSON value of ``text``; ``error`` (a UserError) naming ``what`` ("--input-json",
    "programs/x.rasp:3 (# example-json)") when it is longer than ``max_bytes``, nests deeper than
    ``max_depth``, holds an integer of over 4,300 digits, or is not JSON."""
    size = len(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
    if size > max_bytes:
        raise error(f"{what} is too large to read: {size:,} bytes (at most {max_bytes:,})")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise error(f"{what} is not UTF-8 text (byte {err.start})") from None
    depth = nesting_depth(text)
    if depth > max_depth:
        raise error(f"{what} cannot be read: it nests too deeply ({depth:,} levels of [ or {{, "
                    f"at most {max_depth})")
    try:
        return json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as err:
        raise error(f"{what} is not valid JSON: {err.msg} (line {err.lineno}, column {err.colno})") from None
    except (ValueError, RecursionError) as err:  # _parse_int's refusal; RecursionError cannot pass
        raise error(f"{what} cannot be read: {err}") from None    # the depth check, kept as a net


def load_json_file(path: str | os.PathLike, what: str | None = None, max_bytes: int = MAX_BYTES,
                   max_depth: int = MAX_DEPTH, error: type[UserError] = UserError) -> Any:
    """The JSON value in the file ``path`` (``what`` names it in errors, the path by default); its
    size is checked before a byte is read, so a 10 GB file costs nothing."""
    what = what or str(path)
    try:
        size = os.path.getsize(path)
        if size > max_bytes:
            raise error(f"{what} is too large to read: {size:,} bytes (at most {max_bytes:,})")
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)  # the file may grow between the stat and the read
    except OSError as err:
        raise error(f"{what} cannot be read: {err.strerror or err}") from None
    return load_json_text(data, what, max_bytes=max_bytes, max_depth=max_depth, error=error)
