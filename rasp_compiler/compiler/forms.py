"""Recognising simple forms of map expressions (so they need no tabulation).

``linear_form(expr, arity)`` returns (w, c) when ``expr`` is w·x + c in its inputs (sums,
differences, products and quotients by constants), else None.
"""

from __future__ import annotations

import numpy as np

from rasp_compiler.graph.expr import Binary, Const, Expr, Unary, Var


def linear_form(expr: Expr | None, arity: int) -> tuple[np.ndarray, float] | None:
    if expr is None:
        return None
    if isinstance(expr, Var):
        w = np.zeros(arity)
        w[expr.index] = 1.0
        return w, 0.0
    if isinstance(expr, Const):
        v = expr.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        return np.zeros(arity), float(v)
    if isinstance(expr, Unary) and expr.op in ("-", "+"):
        inner = linear_form(expr.arg, arity)
        if inner is None:
            return None
        return (-inner[0], -inner[1]) if expr.op == "-" else inner
    if isinstance(expr, Binary) and expr.op in ("+", "-", "*", "/"):
        left, right = linear_form(expr.left, arity), linear_form(expr.right, arity)
        if left is None or right is None:
            return None
        if expr.op == "+":
            return left[0] + right[0], left[1] + right[1]
        if expr.op == "-":
            return left[0] - right[0], left[1] - right[1]
        if expr.op == "*":
            if not right[0].any():
                return left[0] * right[1], left[1] * right[1]
            if not left[0].any():
                return right[0] * left[1], right[1] * left[1]
            return None
        if not right[0].any() and right[1] != 0:
            return left[0] / right[1], left[1] / right[1]
    return None
