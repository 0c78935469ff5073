"""How values print: the original REPL's look for s-ops (``[o, l, l, e, h] (strings)``, floats to 3
places, bools as T/F, ``[5]*5`` when all equal) and plain JSON values for ``--json``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

_CHUNK_DIGITS = 4000  # below Python's 4,300-digit limit on str(int)


def int_text(v: int) -> str:
    """All the digits of ``v``: str(int) refuses more than 4,300 digits (ValueError), and an input
    token or a Python API value may have more; the digits are produced 4,000 at a time."""
    if abs(v) < 10 ** _CHUNK_DIGITS:
        return str(v)
    chunks, rest = [], abs(v)
    while rest:
        rest, low = divmod(rest, 10 ** _CHUNK_DIGITS)
        chunks.append(low)
    text = str(chunks[-1]) + "".join(str(c).zfill(_CHUNK_DIGITS) for c in reversed(chunks[:-1]))
    return ("-" if v < 0 else "") + text


def small(v: Any) -> str:
    if isinstance(v, bool):
        return "T" if v else "F"
    if isinstance(v, float):
        return str(round(v, 3))
    if v is None:
        return "None"
    if isinstance(v, int):
        return int_text(v)
    return str(v)


def type_words(values: list[Any]) -> str:
    if all(isinstance(v, bool) for v in values):
        return "bools"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "ints"
    if all(isinstance(v, str) for v in values):
        return "strings"
    if all(isinstance(v, (int, float)) for v in values):
        return "floats"
    return "mixed"


def format_sequence(values: list[Any]) -> str:
    """One s-op's values as the original REPL prints them."""
    if len(values) > 1 and all_equal(values):
        body = f"[{small(values[0])}]*{len(values)}"
    else:
        body = "[" + ", ".join(small(v) for v in values) + "]"
    return f"{body} ({type_words(values)})"


def all_equal(values: list[Any]) -> bool:
    """All values equal, as the original's ``len(set(vals)) == 1`` judges it (so ``[2, 2.0, 2.0]``
    folds to ``[2]*3``), except that a bool never equals a number here (``[1, T]`` stays)."""
    try:
        return len({(isinstance(v, bool), v) for v in values}) == 1
    except TypeError:  # an unhashable value: nothing to fold
        return False


def format_selector(rows: Any) -> str:
    """A selector as rows of 0/1, one query per line (``q: [1, 0, …]``)."""
    return "\n".join(f"{q}: [" + ", ".join("1" if x else "0" for x in row) + "]"
                     for q, row in enumerate(rows))


def format_value(value: Any) -> str:
    if isinstance(value, np.ndarray) or (isinstance(value, list) and value and isinstance(value[0], list)):
        return format_selector(value)
    if isinstance(value, list):
        return format_sequence(value)
    if isinstance(value, str):
        return f'"{value}"'
    return small(value) if isinstance(value, int) and not isinstance(value, bool) else str(value)


def json_value(value: Any) -> Any:
    """Plain JSON values: lists, strings, numbers, booleans; None / NaN / infinities become null."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
