"""Symbolic forms of numerical maps: what a positionwise function of real-valued s-ops is.

A numerical map (one whose inputs include s-ops that hold real numbers) is read as a *form*:
``sum_t c_t(p) * atom_t`` where ``c_t(p)`` is a coefficient known for every position ``p``
(positional s-ops — functions of ``indices`` and constants — fold into coefficients) and an atom is

* ``("one",)``            the constant 1,
* ``("x", a)``            the numerical s-op ``a``,
* ``("xx", a, b)``        the product ``a * b`` (a <= b),
* ``("relu", D)``         ``max(0, D)`` for a linear form ``D`` with position-independent
                          coefficients (a max or a min of two numbers: ``a if a > b else b``),
* ``("step", D, strict)`` the comparison ``D > 0`` (``D >= 0`` when not strict) as 0 or 1,
* ``("stepx", D, strict, a)`` that comparison times the numerical s-op ``a`` (a choice
                          ``a if D > 0 else 0``, a step gating a number).

A comparison of real numbers becomes step atoms (``a == b`` is ``1 - [a > b] - [b > a]``,
``indicator``, ``not``, ``and``/``or`` with a position and a choice ``t if c else e`` are
``e + [c] (t - e)``).  A step times the very difference it compares is continuous and is folded
into a ReLU (``indicator(x > 0) * x`` is ``relu(x)``, MaxMin's ``s x + (1 - s) y`` is
``y + relu(x - y)``): exact at every real.  Other steps are exact only with a margin, which values
on a known grid have (``real.grids``: ``--input-grid``, integer tokens); without one the compiler
refuses them.  Every form has an exact unit (see ``real``).  Anything else (``e ^ x``, ``1 / x``)
raises ``NonLinear``; a map of one numerical input then gets a piecewise-linear unit with a
stated error bound.
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

    def __init__(self, n_pos: int, terms: dict[tuple, np.ndarray] | None = None,
                 boolean: bool = False) -> None:
        self.n = n_pos
        self.boolean = boolean  # every value is 0 or 1 (a comparison): `indicator` keeps it
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
        return max((0 if a[0] == "one" else 2 if a[0] in ("xx", "stepx") else 1 for a in self.terms),
                   default=0)

    def has_step(self) -> bool:
        return any(a[0] in ("step", "stepx") for a in self.terms)

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
        if self.has_relu() or other.has_relu():
            raise NonLinear("a product of a max/min")
        if self.degree() + other.degree() > 2 and not (self.boolean and other.boolean):
            raise NonLinear("a product of degree above 2")
        out = Form(self.n, boolean=self.boolean and other.boolean)
        for a, ca in self.terms.items():
            for b, cb in other.terms.items():
                out._add(_atom_product(a, b), ca * cb)
        return out

    def select(self, cond: np.ndarray, other: "Form") -> "Form":
        """Per position: self where cond else other."""
        out = Form(self.n, boolean=self.boolean and other.boolean)
        for atom in set(self.terms) | set(other.terms):
            z = np.zeros(self.n)
            out._add(atom, np.where(cond, self.terms.get(atom, z), other.terms.get(atom, z)))
        return out

    def linear(self) -> Lin | None:
        """This form as a ``Lin`` if it is linear with position-independent weights."""
        if self.degree() > 1 or self.has_relu() or self.has_step():
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
    per-position values (positional).  Steps gating the very difference they compare are folded
    into ReLUs (``_fold_steps``)."""
    out = _form(expr, args, n)
    return out if _is_pos(out) else _fold_steps(out)


def _form(expr: Expr, args: list[Any], n: int) -> Any:
    if isinstance(expr, Var):
        return args[expr.index]
    if isinstance(expr, Const):
        return [expr.value] * n
    if isinstance(expr, Unary):
        a = _form(expr.arg, args, n)
        if _is_pos(a):
            return [_safe(apply_unary, expr.op, v) for v in a]
        if expr.op == "-":
            return a.scale(np.full(n, -1.0))
        if expr.op == "+":
            return a
        if expr.op == "indicator":
            return _truth(a, n)
        if expr.op == "not":
            return _negation(_truth(a, n), n)
        raise NonLinear(f"'{expr.op}' of a real number")
    if isinstance(expr, Binary):
        a, b = _form(expr.left, args, n), _form(expr.right, args, n)
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
        if expr.op in COMPARISONS:
            fa = a if not _is_pos(a) else Form.const(n, _numbers(a, expr.op))
            fb = b if not _is_pos(b) else Form.const(n, _numbers(b, expr.op))
            return _compare(expr.op, fa, fb, n)
        if expr.op in ("and", "or"):
            fa = _truth(a if not _is_pos(a) else Form.const(n, _bools(a)), n)
            fb = _truth(b if not _is_pos(b) else Form.const(n, _bools(b)), n)
            both = fa.mul(fb)
            if expr.op == "and":
                return both
            out = fa.add(fb).add(both, -1.0)
            out.boolean = True
            return out
        raise NonLinear(f"'{expr.op}' with a real-valued operand")
    if isinstance(expr, Ternary):
        t, e = _form(expr.then, args, n), _form(expr.otherwise, args, n)
        cond = _form(expr.cond, args, n) if not _comparison(expr.cond) else None
        ft = t if not _is_pos(t) else Form.const(n, _numbers(t, "if"))
        fe = e if not _is_pos(e) else Form.const(n, _numbers(e, "if"))
        if cond is not None and _is_pos(cond):
            if _is_pos(t) and _is_pos(e):
                return [x if c else y for c, x, y in zip(cond, t, e, strict=False)]
            return ft.select(np.array([bool(c) for c in cond]), fe)
        try:
            return _maxmin(expr, ft, fe, args, n)
        except NonLinear as err:
            # a step: e + [cond] (t - e), exact where the condition's values have a margin
            truth = _truth(cond if cond is not None else _form(expr.cond, args, n), n)
            try:
                return fe.add(truth.mul(ft.add(fe, -1.0)))
            except NonLinear:
                raise err from None
    raise NonLinear(f"{type(expr).__name__} of a real number")


COMPARISONS = ("<", ">", "<=", ">=", "==", "!=")


def _bools(vals: list[Any]) -> np.ndarray:
    return np.array([1.0 if v else 0.0 for v in vals])


def _step(lin: Lin, strict: bool, n: int) -> Form:
    return Form(n, {("step", lin, strict): np.ones(n)}, boolean=True)


def _negated(lin: Lin) -> Lin:
    return Lin(tuple((s, -w) for s, w in lin.terms), -lin.const)


def _compare(op: str, a: Form, b: Form, n: int) -> Form:
    """``a op b`` as step atoms (0 or 1): ``D > 0`` or ``D >= 0`` for the difference D."""
    d = a.add(b, -1.0)
    lin = d.linear()
    if lin is None:
        raise NonLinear("a comparison of non-linear expressions")
    if not lin.terms:  # the real numbers cancel: a constant comparison
        return Form.const(n, np.full(n, 1.0 if apply_binary(op, lin.const, 0.0) else 0.0))
    neg = _negated(lin)
    if op in (">", ">="):
        return _step(lin, op == ">", n)
    if op in ("<", "<="):
        return _step(neg, op == "<", n)
    either = _step(lin, True, n).add(_step(neg, True, n))
    if op == "!=":
        either.boolean = True
        return either
    return _negation(either, n)


def _negation(b: Form, n: int) -> Form:
    out = Form.const(n, np.ones(n)).add(b, -1.0)
    out.boolean = True
    return out


def _truth(a: Form, n: int) -> Form:
    """``indicator(a)``: a itself when it is 0 or 1, else the step ``a != 0``."""
    return a if a.boolean else _compare("!=", a, Form(n), n)


def _atom_product(a: tuple, b: tuple) -> tuple:
    """The atom of the product of atoms ``a`` and ``b`` (NonLinear where no unit computes it)."""
    if a[0] == "one":
        return b
    if b[0] == "one":
        return a
    if a[0] == "x" and b[0] == "x":
        return ("xx", *sorted((a[1], b[1])))
    if b[0] in ("step", "stepx"):
        a, b = b, a
    if a[0] == "step" and b[0] == "x":
        return ("stepx", a[1], a[2], b[1])
    if a[0] == "step" and b[0] in ("step", "stepx") and b[1:3] == a[1:3]:
        return b  # [c] [c] = [c]
    if a[0] in ("step", "stepx") and b[0] in ("step", "stepx"):
        raise NonLinear("a product of two different comparisons of real numbers")
    raise NonLinear("a product of degree above 2")


def _fold_steps(form: Form) -> Form:
    """Steps that gate the difference they compare, as ReLUs: [D > 0] * k D = k relu(D) (also for
    D >= 0), exact at every real; the other steps are kept."""
    groups: dict[tuple, list[tuple]] = {}
    for atom in form.terms:
        if atom[0] in ("step", "stepx"):
            groups.setdefault(atom[1:3], []).append(atom)
    if not groups:
        return form
    out = Form(form.n, form.terms, boolean=form.boolean)
    for (lin, _), atoms in groups.items():
        coef: dict[str | None, np.ndarray] = {}  # the gated number: its s-ops' coefficients, None: 1
        for atom in atoms:
            coef[None if atom[0] == "step" else atom[3]] = form.terms[atom]
        weights = dict(lin.terms)
        lead, w0 = lin.terms[0]
        lam = coef.get(lead, np.zeros(form.n)) / w0
        z = np.zeros(form.n)
        same = all(np.allclose(coef.get(s, z), lam * w, rtol=1e-12, atol=0.0) for s, w in weights.items())
        same = same and all(s in weights for s in coef if s is not None)
        same = same and np.allclose(coef.get(None, z), lam * lin.const, rtol=1e-12, atol=0.0)
        if same:
            for atom in atoms:
                out.terms.pop(atom, None)
            out._add(("relu", lin), lam)
    return out


def _comparison(expr: Expr) -> bool:
    return isinstance(expr, Binary) and expr.op in ("<", ">", "<=", ">=")


def _maxmin(expr: Ternary, t: Form, e: Form, args: list[Any], n: int) -> Form:
    """``t if L > R else e`` where t - e = ±(L - R): e + relu(±(L - R)) (a max or a min, exact)."""
    cond = expr.cond
    if not _comparison(cond):
        raise NonLinear("a condition on a real number that is not a comparison")
    left, right = _form(cond.left, args, n), _form(cond.right, args, n)  # type: ignore[attr-defined]
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
