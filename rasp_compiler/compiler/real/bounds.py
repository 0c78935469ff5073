"""Error bounds and their reports: the bound of the output, carried forward from every
approximate map, reciprocal and rounded softmax head, and the note each inexact one adds to the
config.

Each s-op's error is bounded as |computed - exact| <= A + R |exact|: an absolute part A and a
relative part R.  A relative bound is what survives a division: a softmax's e^x / sum e^x has a
relative error of about twice the exponential's plus the reciprocal's, whatever the size of the
entries, where an absolute bound multiplied by the largest 1/sum would be useless.  Products add
relative errors; a sum keeps the largest relative error where all its terms have one sign (else
the relative parts become absolute, times each term's magnitude); a mean keeps its values' bound;
an exponential turns an absolute error of its argument into a relative one; a reciprocal turns a
relative error into about the same relative error.  Rounding is not part of the stated bound:
``rasp check`` allows for it separately (``real_check.rounding_allowance``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from rasp_compiler.compiler.real.grids import coefficients, remember, resume
from rasp_compiler.graph.expr import Binary, Const, Var
from rasp_compiler.graph.expr import evaluate as eval_expr
from rasp_compiler.graph.nodes import Aggregate, SoftmaxAggregate

if TYPE_CHECKING:
    from rasp_compiler.compiler.real.core import NumericCompiler

Bound = tuple[float, float]  # (absolute, relative)
EXACT: Bound = (0.0, 0.0)


def node_errors(nc: NumericCompiler) -> dict[str, Bound]:
    """The (absolute, relative) error bound of every numerical s-op (see the module docstring)."""
    err: dict[str, Bound] = {}
    own = {r["node"]: r["bound"] for r in nc.map_reports if not r["exact"]}
    approx = getattr(nc, "_approx", {})
    states: dict = {}  # the last forms' loops in this call (``grids.resume``)

    def mag(sid: str) -> float:
        lo, hi = nc._interval_any(sid)
        return max(abs(lo), abs(hi))

    def one_signed(sid: str) -> bool:
        lo, hi = nc._interval_any(sid)
        return lo >= 0 or hi <= 0

    def e(sid: str) -> Bound:
        return err.get(sid, EXACT)

    def absolute(sid: str) -> float:
        a, r = e(sid)
        return a + r * mag(sid)

    for node in nc.program.nodes():
        nid = node.id
        if nid in nc.pos or node.is_selector or nid not in nc.interval:
            continue
        if nid in nc._rows:  # a mean over compared keys: exact steps, the values' own error
            value = nc._rows[nid]["value"]
            err[nid] = EXACT if value is None else (absolute(value), 0.0)
        elif isinstance(node, Aggregate):
            src = node.inputs[-1]
            err[nid] = e(src) if one_signed(src) else (absolute(src), 0.0)
        elif isinstance(node, SoftmaxAggregate):
            m = node.width
            ds = sum(mag(q) * absolute(k) + mag(k) * absolute(q) + absolute(q) * absolute(k)
                     for q, k in zip(node.inputs[1:1 + m], node.inputs[1 + m:1 + 2 * m], strict=False))
            src = node.inputs[-1]
            err[nid] = (absolute(src) + 2.0 * ds * mag(src) + own.get(nid, 0.0), 0.0)
        elif nid in nc._recips:
            err[nid] = _reciprocal_error(nc, nid, e(nc._recips[nid]["src"]))
        elif nid in approx:
            err[nid] = _approx_error(nc, nid, approx[nid], own.get(nid, 0.0), absolute(approx[nid][0]))
        elif nid in nc.forms:
            err[nid] = _form_error(nc, nid, e, mag, states)
    return err


def _reciprocal_error(nc: NumericCompiler, nid: str, x_err: Bound) -> Bound:
    """scale / x: x computed as x (1 + eps) with |eps| <= R_x + A_x / min |x|, so 1 / x is off by
    eps / (1 - eps) relative, on top of the reciprocal's own relative error."""
    spec = nc._recips[nid]
    least = min(s[0] for s in spec["pos"] + spec["neg"])
    if spec["guard"] is None:
        lo, hi = nc._interval_any(spec["src"])
        least = min(abs(lo), abs(hi))
    eps = x_err[1] + x_err[0] / least
    if eps >= 1.0:
        return (math.inf, math.inf)
    r = spec["rel"]
    return (0.0, eps / (1.0 - eps) * (1.0 + r) + r)


def _approx_error(nc: NumericCompiler, nid: str, spec: tuple, own: float, x_abs: float) -> Bound:
    """A piecewise map of one number: its own bound, plus its input's error carried through it:
    an exponential b ^ x relatively (e^(|ln b| dx) - 1), any other map by its Lipschitz constant."""
    src, lo, hi = spec
    fn = nc.program.node(nid).fn
    rel = nc.relative_bounds.get(nid)
    if _is_exponential(fn):
        grow = math.expm1(abs(math.log(float(fn.left.value))) * x_abs)
        if rel is not None:
            return (0.0, (1.0 + rel) * (1.0 + grow) - 1.0)
        return (own * (1.0 + grow), grow)
    if x_abs == 0.0 and rel is not None:
        return (0.0, rel)
    xs = np.linspace(lo, hi, 4097)
    ys = np.array([float(eval_expr(fn, (float(t),))) for t in xs])
    lip = float(np.max(np.abs(np.diff(ys) / np.diff(xs)), initial=0.0)) * 1.1 if hi > lo else 0.0
    return (own + lip * x_abs, 0.0)


def _is_exponential(fn: object) -> bool:
    return (isinstance(fn, Binary) and fn.op == "^" and isinstance(fn.left, Const)
            and isinstance(fn.left.value, (int, float)) and not isinstance(fn.left.value, bool)
            and fn.left.value > 0 and isinstance(fn.right, Var))


def _form_error(nc: NumericCompiler, nid: str, e: object, mag: object, states: dict | None = None) -> Bound:
    """A sum of atoms with per-position coefficients: relative where every term at a position has
    one sign (or there is one term), absolute otherwise."""
    items = list(nc.forms[nid].terms.items())
    node = nc.program.node(nid)
    states = {} if states is None else states
    start, state = resume(states, items, node.inputs)
    terms = [] if state is None else list(state[0])
    signs = _Signs(nc.n) if state is None else state[1].copy()
    for atom, c in items[start:]:
        c = coefficients(c)
        k = float(np.max(np.abs(c)))
        if atom[0] in ("one", "step"):
            a, r = EXACT
        elif atom[0] == "x":
            a, r = e(atom[1])  # type: ignore[operator]
        elif atom[0] == "stepx":  # the step is exact (a margin on a grid): the number's error
            a, r = e(atom[3])  # type: ignore[operator]
        elif atom[0] == "xx":
            (aa, ra), (ab, rb) = e(atom[1]), e(atom[2])  # type: ignore[operator]
            ma, mb = mag(atom[1]), mag(atom[2])  # type: ignore[operator]
            a, r = aa * mb * (1 + rb) + ab * ma * (1 + ra) + aa * ab, ra + rb + ra * rb
        else:  # relu of a linear form: 1-Lipschitz, absolute
            a = sum(abs(w) * (e(s)[0] + e(s)[1] * mag(s)) for s, w in atom[1].terms)  # type: ignore[operator]
            r = 0.0
        lo, hi = nc._atom_interval(atom)
        terms.append((c, lo, hi, a, r, k))
        signs.add(c, lo, hi)
    remember(states, nid, items, (terms, signs.copy()))
    if signs.one_sign():
        return (sum(k * a for *_, a, r, k in terms), max((r for *_, a, r, k in terms), default=0.0))
    return (sum(k * (a + r * max(abs(lo), abs(hi))) for _, lo, hi, a, r, k in terms), 0.0)


class _Signs:
    """Per position, how many terms a form has there and which signs their ranges c(p) x [lo, hi]
    take ("+" where the range is >= 0, else "-" where it is <= 0, else "±"), term by term."""

    def __init__(self, n: int) -> None:
        self.count = np.zeros(n, dtype=np.int64)
        self.plus = np.zeros(n, dtype=bool)
        self.minus = np.zeros(n, dtype=bool)
        self.both = np.zeros(n, dtype=bool)

    def copy(self) -> _Signs:
        out = _Signs(0)
        out.count, out.plus, out.minus, out.both = (a.copy() for a in (self.count, self.plus, self.minus,
                                                                       self.both))
        return out

    def add(self, c: np.ndarray, lo: float, hi: float) -> None:
        on = c != 0
        with np.errstate(over="ignore", invalid="ignore"):  # 0 x inf where the term is absent
            x, y = c * lo, c * hi
        swap = y < x  # sorted((x, y)), NaNs included
        tlo, thi = np.where(swap, y, x), np.where(swap, x, y)
        pos = tlo >= 0
        neg = ~pos & (thi <= 0)
        self.count += on
        self.plus |= on & pos
        self.minus |= on & neg
        self.both |= on & ~pos & ~neg

    def one_sign(self) -> bool:
        """Whether at every position with more than one term, all of them have one sign, the
        same ("±" is none)."""
        mixed = self.both | (self.plus & self.minus)
        return not bool(np.any((self.count > 1) & mixed))


def _one_sign(terms: list[tuple], n: int) -> bool:
    """``_Signs.one_sign`` of ``terms`` ((c, lo, hi, ...) each), over every position at once."""
    signs = _Signs(n)
    for c, lo, hi, *_ in terms:
        signs.add(c, lo, hi)
    return signs.one_sign()


def output_bound(nc: NumericCompiler, out: str) -> Bound:
    """The (absolute, relative) error bound of the output."""
    return node_errors(nc).get(out, EXACT)


def _bound_note(report: dict, dtype: str) -> str:
    lo, hi = report["interval"]
    if "score_rounding" in report:
        return (f"{report['node']}: {dtype} rounds its attention scores (up to "
                f"{report['score_bound']:.3g}) by up to {report['score_rounding']:.3g}, |error| <= "
                f"{report['bound']:.3g} on [{lo:.6g}, {hi:.6g}]")
    if report["kind"] == "reciprocal":
        excl = (f", for |denominator| >= {report['min_denominator']:g} (inputs nearer 0 are flagged)"
                if "min_denominator" in report else "")
        return (f"{report['node']}: reciprocal ({report['newton_steps']} Newton steps), relative error "
                f"<= {report['relative_bound']:.3g} on [{lo:.6g}, {hi:.6g}]{excl}")
    rel = f" (relative {report['relative_bound']:.3g})" if "relative_bound" in report else ""
    return (f"{report['node']}: piecewise, |error| <= {report['bound']:.3g}{rel} on "
            f"[{lo:.6g}, {hi:.6g}]")
