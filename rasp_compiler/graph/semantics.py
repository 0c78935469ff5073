"""What each elementwise operator means, on Python values (the original RASP REPL's behaviour).

One definition, read by the interpreter and by the compiler when it tabulates a map.  The original
REPL evaluates operators with Python's own operators, with these RASP-specific points:

* ``/`` is true division (``5 / 2 == 2.5``, also on ints); ``^`` is ``pow``; ``%`` is Python's
  modulo (the sign follows the divisor).
* ``and`` / ``or`` / ``not`` on s-ops give booleans (``bool(a) and bool(b)``), not Python's
  operand-returning ``and``.
* ``round`` is Python's ``round`` (ties to even: ``round(2.5) == 2``); ``indicator(x)`` is 1 if x
  is truthy else 0.
* ``==`` / ``!=`` between different types is simply False / True; ordering comparisons between a
  string and a number are an error.

Failures raise ``OperatorError`` whose message says what went wrong in words; the interpreter adds
the position and the source line.
"""

from __future__ import annotations

import operator
from fractions import Fraction
from typing import Any

import numpy as np


class OperatorError(Exception):
    """An operator applied to values it does not accept (the message is for the user)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def _show(v: Any) -> str:
    kind = type(v).__name__
    kind = {"str": "string"}.get(kind, kind)
    return f"{kind} {v!r}"


def _truediv(a: Any, b: Any) -> Any:
    if b == 0 and not isinstance(b, str):
        raise OperatorError(f"division by zero ({a!r} / {b!r})")
    return a / b


def _mod(a: Any, b: Any) -> Any:
    if b == 0 and not isinstance(b, str):
        raise OperatorError(f"modulo by zero ({a!r} % {b!r})")
    return a % b


def _pow(a: Any, b: Any) -> Any:
    if a == 0 and isinstance(b, (int, float)) and not isinstance(b, bool) and b < 0:
        raise OperatorError(f"zero to a negative power ({a!r} ^ {b!r})")
    result = pow(a, b)
    if isinstance(result, complex):
        raise OperatorError(f"{a!r} ^ {b!r} is not a real number")
    return result


_BINARY = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": _truediv,
    "%": _mod,
    "^": _pow,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
    "<=": operator.le,
    ">=": operator.ge,
    "and": lambda a, b: bool(a) and bool(b),
    "or": lambda a, b: bool(a) or bool(b),
}


def apply_binary(op: str, a: Any, b: Any) -> Any:
    try:
        return _BINARY[op](a, b)
    except OperatorError:
        raise
    except (TypeError, ValueError) as err:
        raise OperatorError(f"cannot apply '{op}' to {_show(a)} and {_show(b)}") from err
    except OverflowError as err:
        raise OperatorError(f"'{op}' overflows on {a!r} and {b!r}") from err
    except ZeroDivisionError as err:
        raise OperatorError(f"division by zero ({a!r} {op} {b!r})") from err


def apply_unary(op: str, a: Any) -> Any:
    try:
        if op == "not":
            return not a
        if op == "-":
            return -a
        if op == "+":
            return +a
        if op == "round":
            return round(a)
        if op == "indicator":
            return 1 if a else 0
    except (TypeError, ValueError, OverflowError) as err:
        raise OperatorError(f"cannot apply '{op}' to {_show(a)}") from err
    raise KeyError(op)


def lookup(table: Any, key: Any, is_dict: bool) -> Any:
    """``table[key]``: a dict (given as a tuple of pairs), list/tuple or string."""
    if is_dict:
        mapping = dict(table)
        try:
            return mapping[key]
        except KeyError:
            raise OperatorError(f"key {key!r} is not in the dict") from None
        except TypeError:
            raise OperatorError(f"{_show(key)} cannot be a dict key") from None
    if not isinstance(key, int):
        raise OperatorError(f"an index into a list or string must be an int, got {_show(key)}")
    if key >= len(table) or -key > len(table):
        raise OperatorError(f"index {key} is out of range for a table of length {len(table)}")
    return table[key]


MEAN_SLICE_ELEMENTS = 1 << 20  # selection entries exact_means turns into floats at once (8 MB)


def exact_means(values: list[Any], rows: np.ndarray) -> list[float]:
    """The mean of the values each row of ``rows`` selects, exactly rounded: the exact sum divided
    by the count, rounded once.  Whole numbers add exactly in floats, so they take the fast path;
    other values are added as fractions.  (The original adds floats key by key, and (0.1 + 0.1 +
    0.1) / 3 is 0.10000000000000002 there, a last-bit difference that no compiled model can follow:
    it averages in attention and reads the mean back from the exact value set.)"""
    nums = np.array(values, dtype=np.float64)
    counts = rows.sum(axis=1)
    with np.errstate(over="ignore"):  # a sum past 1e308 only sends these values to the exact path
        small = np.abs(nums).sum() < 2.0 ** 52
    if np.all(np.isfinite(nums) & (nums == np.round(nums))) and small:
        # every partial sum is an exact integer, so any order of addition gives the same sums; the
        # rows go to float64 a slice at a time (all at once is 8 bytes a pair: 12.8 GB at 40,000)
        step = max(1, MEAN_SLICE_ELEMENTS // max(1, rows.shape[1]))
        sums = np.concatenate([rows[s:s + step].astype(np.float64) @ nums
                               for s in range(0, rows.shape[0], step)]) if len(rows) else np.zeros(0)
        return [float(s) / int(c) for s, c in zip(sums, counts, strict=True)]
    fracs = [Fraction(float(v)) for v in nums]
    return [float(sum((fracs[k] for k in np.nonzero(row)[0]), Fraction(0)) / int(c))
            for row, c in zip(rows, counts, strict=True)]
