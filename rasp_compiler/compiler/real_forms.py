"""Symbolic forms of numerical maps: what a positionwise function of real-valued s-ops is.

A numerical map (one whose inputs include s-ops that hold real numbers) is read as a *form*:
``sum_t c_t(p) * atom_t`` where ``c_t(p)`` is a coefficient known for every position ``p``
(positional s-ops — functions of ``indices`` and constants — fold into coefficients) and an atom is

* ``("one",)``            the constant 1,
* ``("x", a)``            the numerical s-op ``a``,
* ``("xx", a, b)``        the product ``a * b`` (a <= b),
* ``("relu", D)``         ``max(0, D)`` for a linear form ``D`` with position-independent
                          coefficients (a max or a min of two numbers: ``a if a > b else b``).

Every such form has an exact unit (see ``real``).  Anything else (``e ^ x``, ``1 / x``, a comparison
of two numbers that is not a max/min) raises ``NonLinear``; a map of one numerical input then gets
a piecewise-linear unit with a stated error bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rasp_compiler.graph.expr import Binary, Const, Expr, Ternary, Unary, Var
from rasp_compiler.graph.semantics import apply_binary, apply_unary


class NonLinear(Exception):
    """The expression is not a form (the message says which part)."""


@dataclass(frozen=True)
class Lin:
    """A linear form sum_j w_j x_j + c with constant weights (the argument of a ReLU atom)."""

    terms: tuple[tuple[str, float], ...]
    const: float


class Form:
    """``{atom: coefficient array over positions}``; missing atoms have coefficient 0."""

    def __init__(self, n_pos: int, terms: dict[tuple, np.ndarray] | None = None) -> None:
        self.n = n_pos
        self.terms: dict[tuple, np.ndarray] = {}
        for atom, c in (terms or {}).items():
            self._add(atom, c)

    def _add(self, atom: tuple, c: np.ndarray) -> None:
        c = np.asarray(c, dtype=np.float64)
        if atom in self.terms:
            c = self.terms[atom] + c
        if np.any(c != 0):
            self.terms[atom] = c
        else:
            self.terms.pop(atom, None)

    @staticmethod
    def var(n: int, sid: str) -> "Form":
        return Form(n, {("x", sid): np.ones(n)})

    @staticmethod
    def const(n: int, values: np.ndarray) -> "Form":
        return Form(n, {("one",): values})

    def degree(self) -> int:
        return max((0 if a[0] == "one" else 2 if a[0] == "xx" else 1 for a in self.terms), default=0)

    def has_relu(self) -> bool:
        return any(a[0] == "relu" for a in self.terms)

    def add(self, other: "Form", sign: float = 1.0) -> "Form":
        out = Form(self.n, self.terms)
        for atom, c in other.terms.items():
            out._add(atom, sign * c)
        return out

    def scale(self, k: np.ndarray) -> "Form":
        return Form(self.n, {a: c * k for a, c in self.terms.items()})

    def mul(self, other: "Form") -> "Form":
        if self.has_relu() or other.has_relu() or self.degree() + other.degree() > 2:
            raise NonLinear("a product of degree above 2 (or of a max/min)")
        out = Form(self.n)
        for a, ca in self.terms.items():
            for b, cb in other.terms.items():
                ids = [x for x in (a[1:] + b[1:])]
                if not ids:
                    atom: tuple = ("one",)
                elif len(ids) == 1:
                    atom = ("x", ids[0])
                else:
                    atom = ("xx", *sorted(ids))
                out._add(atom, ca * cb)
        return out

    def select(self, cond: np.ndarray, other: "Form") -> "Form":
        """Per position: self where cond else other."""
        out = Form(self.n)
        for atom in set(self.terms) | set(other.terms):
            z = np.zeros(self.n)
            out._add(atom, np.where(cond, self.terms.get(atom, z), other.terms.get(atom, z)))
        return out

    def linear(self) -> Lin | None:
        """This form as a ``Lin`` if it is linear with position-independent weights."""
        if self.degree() > 1 or self.has_relu():
            return None
        terms, const = [], 0.0
        for atom, c in sorted(self.terms.items(), key=lambda t: str(t[0])):
            if not np.all(c == c[0]):
                return None
            if atom[0] == "one":
                const = float(c[0])
            else:
                terms.append((atom[1], float(c[0])))
        return Lin(tuple(terms), const)

    def equals(self, other: "Form") -> bool:
        diff = self.add(other, -1.0)
        return not diff.terms


def _is_pos(v: Any) -> bool:
    return isinstance(v, list)


def _numbers(vals: list[Any], what: str) -> np.ndarray:
    try:
        return np.array([float(v) if v is not None else np.nan for v in vals], dtype=np.float64)
    except (TypeError, ValueError):
        raise NonLinear(f"{what} mixes a number with a non-number") from None


def form_of(expr: Expr, args: list[Any], n: int) -> Any:
    """Evaluate ``expr`` with Var(i) bound to ``args[i]``: a Form (numerical) or a list of
    per-position values (positional)."""
    if isinstance(expr, Var):
        return args[expr.index]
    if isinstance(expr, Const):
        return [expr.value] * n
    if isinstance(expr, Unary):
        a = form_of(expr.arg, args, n)
        if _is_pos(a):
            return [_safe(apply_unary, expr.op, v) for v in a]
        if expr.op == "-":
            return a.scale(np.full(n, -1.0))
        if expr.op == "+":
            return a
        raise NonLinear(f"'{expr.op}' of a real number")
    if isinstance(expr, Binary):
        a, b = form_of(expr.left, args, n), form_of(expr.right, args, n)
        if _is_pos(a) and _is_pos(b):
            return [_safe(apply_binary, expr.op, x, y) for x, y in zip(a, b, strict=False)]
        if expr.op in ("+", "-"):
            fa = a if not _is_pos(a) else Form.const(n, _numbers(a, "+"))
            fb = b if not _is_pos(b) else Form.const(n, _numbers(b, "+"))
            return fa.add(fb, 1.0 if expr.op == "+" else -1.0)
        if expr.op == "*":
            if _is_pos(a):
                return b.scale(_numbers(a, "*"))
            if _is_pos(b):
                return a.scale(_numbers(b, "*"))
            return a.mul(b)
        if expr.op == "/" and _is_pos(b):
            den = _numbers(b, "/")
            with np.errstate(divide="ignore", invalid="ignore"):
                return a.scale(np.where(den != 0, 1.0 / den, np.nan))
        raise NonLinear(f"'{expr.op}' with a real-valued operand")
    if isinstance(expr, Ternary):
        t, e = form_of(expr.then, args, n), form_of(expr.otherwise, args, n)
        cond = form_of(expr.cond, args, n) if not _comparison(expr.cond) else None
        ft = t if not _is_pos(t) else Form.const(n, _numbers(t, "if"))
        fe = e if not _is_pos(e) else Form.const(n, _numbers(e, "if"))
        if cond is not None and _is_pos(cond):
            if _is_pos(t) and _is_pos(e):
                return [x if c else y for c, x, y in zip(cond, t, e, strict=False)]
            return ft.select(np.array([bool(c) for c in cond]), fe)
        return _maxmin(expr, ft, fe, args, n)
    raise NonLinear(f"{type(expr).__name__} of a real number")


def _comparison(expr: Expr) -> bool:
    return isinstance(expr, Binary) and expr.op in ("<", ">", "<=", ">=")


def _maxmin(expr: Ternary, t: Form, e: Form, args: list[Any], n: int) -> Form:
    """``t if L > R else e`` where t - e = ±(L - R): e + relu(±(L - R)) (a max or a min, exact)."""
    cond = expr.cond
    if not _comparison(cond):
        raise NonLinear("a condition on a real number that is not a comparison")
    left, right = form_of(cond.left, args, n), form_of(cond.right, args, n)  # type: ignore[attr-defined]
    fl = left if not _is_pos(left) else Form.const(n, _numbers(left, "<"))
    fr = right if not _is_pos(right) else Form.const(n, _numbers(right, "<"))
    d = fl.add(fr, -1.0) if cond.op in (">", ">=") else fr.add(fl, -1.0)  # type: ignore[attr-defined]
    lin = d.linear()
    if lin is None:
        raise NonLinear("a comparison of non-linear expressions")
    diff = t.add(e, -1.0)
    if diff.equals(d):
        return e.add(Form(n, {("relu", lin): np.ones(n)}))
    if diff.equals(d.scale(np.full(n, -1.0))):
        return e.add(Form(n, {("relu", lin): np.ones(n)}), -1.0)
    raise NonLinear("a choice between real numbers that is not their max or min (a step, which "
                    "no finite unit computes exactly)")


def _safe(fn: Any, *a: Any) -> Any:
    try:
        return fn(*a)
    except Exception:
        return None
