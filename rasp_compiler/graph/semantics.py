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

import math
import operator
from fractions import Fraction
from typing import Any

import numpy as np

# The largest integer a program may compute (the interpreter, the REPL and the compiler's analysis
# alike): 10,000 bits, about 3,010 decimal digits.  Python computes `10 ^ 100000000` exactly, for
# minutes; past the limit the result is refused before it is computed (``_pow``'s estimate) or
# right after (``_checked``, for + - * % on operands that are at most this size, so cheap).  It is
# below Python's 4,300-digit limit on printing an int, so every result prints.
MAX_INT_BITS = 10_000
# The longest string or list ``*`` may repeat into (``"ab" * 1000000000`` is a 2 GB string).
MAX_REPEAT = 1_000_000


class OperatorError(Exception):
    """An operator applied to values it does not accept (the message is for the user)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def _show(v: Any) -> str:
    kind = type(v).__name__
    kind = {"str": "string"}.get(kind, kind)
    return f"{kind} {short(v)}"


def _truediv(a: Any, b: Any) -> Any:
    if b == 0 and not isinstance(b, str):
        raise OperatorError(f"division by zero ({short(a)} / {short(b)})")
    return a / b


def _mod(a: Any, b: Any) -> Any:
    if b == 0 and not isinstance(b, str):
        raise OperatorError(f"modulo by zero ({short(a)} % {short(b)})")
    return a % b


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def short(v: Any) -> str:
    """``repr(v)``, or for an int of more than 30 digits a description of it: printing an int past
    4,300 digits raises ValueError, and a message need not quote 3,000 digits."""
    if _is_int(v) and v.bit_length() > 100:
        return f"an int of {v.bit_length():,} bits"
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def too_large(what: str) -> OperatorError:
    return OperatorError(f"{what} is too large: integers are limited to {MAX_INT_BITS:,} bits "
                         f"(about {int(MAX_INT_BITS * math.log10(2)):,} decimal digits)")


def _pow(a: Any, b: Any) -> Any:
    if a == 0 and isinstance(b, (int, float)) and not isinstance(b, bool) and b < 0:
        raise OperatorError(f"zero to a negative power ({short(a)} ^ {short(b)})")
    if _is_int(a) and _is_int(b) and b > 0 and abs(a) > 1 and b * math.log2(abs(a)) > MAX_INT_BITS:
        # estimated before computing: 10 ^ 100000000 is exact in Python, and takes minutes
        raise too_large(f"{short(a)} ^ {short(b)}")
    result = pow(a, b)
    if isinstance(result, complex):
        raise OperatorError(f"{short(a)} ^ {short(b)} is not a real number")
    return result


def _checked(op: str, a: Any, b: Any, result: Any) -> Any:
    """``result`` of ``a op b``, refused when it is an int past MAX_INT_BITS, a float past the float
    range (inf from finite operands: `1e308 * 10`), or a string or list past MAX_REPEAT items."""
    if _is_int(result):
        if result.bit_length() > MAX_INT_BITS:
            raise too_large(f"{short(a)} {op} {short(b)}")
    elif isinstance(result, float):
        if not math.isfinite(result) and all(not isinstance(v, float) or math.isfinite(v) for v in (a, b)):
            raise OperatorError(f"{short(a)} {op} {short(b)} is past the float range (about 1.8e308)")
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


def _repeat_length(a: Any, b: Any) -> int:
    """How long ``a * b`` is when it repeats a string or list (0 when it does not)."""
    for seq, n in ((a, b), (b, a)):
        if isinstance(seq, (str, list, tuple)) and isinstance(n, int):
            return len(seq) * max(n, 0)
    return 0


def apply_binary(op: str, a: Any, b: Any) -> Any:
    if op == "*" and _repeat_length(a, b) > MAX_REPEAT:
        raise OperatorError(f"'*' would repeat {short(a)} into {_repeat_length(a, b):,} items "
                            f"(at most {MAX_REPEAT:,})")
    try:
        return _checked(op, a, b, _BINARY[op](a, b))
    except OperatorError:
        raise
    except (TypeError, ValueError) as err:
        hint = None
        if any(isinstance(v, str) for v in (a, b)) and any(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b)):
            hint = ("a string meets a number: `tokens` holds the input as strings; read numbers with "
                    "tokens_int or tokens_float (--input-json '[1, 2]', or set example [1, 2] in the REPL)")
        raise OperatorError(f"cannot apply '{op}' to {_show(a)} and {_show(b)}", hint) from err
    except MemoryError as err:  # a repetition MAX_REPEAT does not see (a bool count, a nested list)
        raise OperatorError(f"'{op}' on {short(a)} and {short(b)} runs out of memory") from err
    except OverflowError as err:
        raise OperatorError(f"'{op}' overflows on {short(a)} and {short(b)}") from err
    except ZeroDivisionError as err:
        raise OperatorError(f"division by zero ({short(a)} {op} {short(b)})") from err


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
            hint = "a dict looked up by an s-op needs a key for every value it can hold"
            raise OperatorError(f"key {key!r} is not in the dict", hint) from None
        except TypeError:
            raise OperatorError(f"{_show(key)} cannot be a dict key") from None
    if not isinstance(key, int):
        raise OperatorError(f"an index into a list or string must be an int, got {_show(key)}")
    if key >= len(table) or -key > len(table):
        raise OperatorError(f"index {key} is out of range for a table of length {len(table)}",
                            "a table indexed by an s-op needs an entry for every value it can hold")
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
