"""What each elementwise operator means, on Python values (the original RASP REPL's behaviour).

One definition, read by the interpreter and by the compiler when it tabulates a map.
"""

from __future__ import annotations

import operator
from typing import Any

_BINARY = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "%": operator.mod,
    "^": operator.pow,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
    "<=": operator.le,
    ">=": operator.ge,
    "and": lambda a, b: a and b,
    "or": lambda a, b: a or b,
}


def apply_binary(op: str, a: Any, b: Any) -> Any:
    return _BINARY[op](a, b)


def apply_unary(op: str, a: Any) -> Any:
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
    raise KeyError(op)


def lookup(table: Any, key: Any, is_dict: bool) -> Any:
    if is_dict:
        return dict(table)[key]
    return table[key]
