"""Numerical compilation: programs over real-valued tokens (``tokens_float``) and an input range.

``compile_program(..., input_range=(lo, hi))`` comes here.  The program graph is the same one the
interpreter reads; what differs from categorical compilation is that token values are not
enumerable, so:

* **Embedding.** The token is embedded linearly: one residual dimension holds its value
  (``embed.value``), no lookup table.  Positional s-ops (functions of ``indices``, constants and,
  at a fixed length, ``length``) are known at every position, so they are folded into the
  position embedding — they cost no layer.
* **Interval analysis.** Every numerical s-op gets an interval, propagated from ``--input-range``
  through aggregates (a mean stays in the hull of its values and default) and maps (interval
  arithmetic on their forms).  Intervals size the margins of heads and the error bounds of maps.
* **Maps** are read as forms (``real_forms``): constants, numbers, products of two numbers and
  max/min, each with a position-dependent coefficient.  Each becomes gated units
  ``relu(x W_in + b_in) * (x W_gate + b_gate)`` that are exact up to one float rounding:
  ``a * b = relu(a) * b + relu(-a) * (-b)``, ``c(p) * a`` gates by an embedded coefficient,
  ``max(a, b) = b + relu(a - b)``.  A map of one number that is no form (``e ^ x``, ``1 / x``) gets
  a piecewise-linear unit over the inferred interval and a stated error bound; a map that cannot
  be bounded (a pole or a jump in the range, several numerical inputs) is a compile error.
* **Heads.** An aggregate whose selector reads positional s-ops is a hard-attention head: the
  selector becomes additive score blocks that are exactly 0 on selected keys and <= -1 elsewhere
  (one-hot blocks, or for ``select(indices, f, ==)`` a quadratic block ``-(k - f)^2`` written
  in base-B digits so that it stays small).  ``softmax_aggregate`` is one head whose scores are the
  dot product of its query and key s-ops plus such a mask, scaled so that masked keys and the BOS
  default underflow to weight 0: the runtime's own max-subtracted softmax does the rest.

The weights use the ordinary saved-model format (``runtime.py``), plus ``embed.value`` and the
optional ``mlp.W_gate`` / ``mlp.b_gate`` of gated MLPs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rasp_compiler.compiler import selectors as sl
from rasp_compiler.compiler.real_forms import Form, Lin, NonLinear, form_of
from rasp_compiler.errors import CompileError
from rasp_compiler.graph.expr import (
    Binary,
    Contains,
    Lookup,
    PyFn,
    Ternary,
    Unary,
    Var,
    children,
    variables,
)
from rasp_compiler.graph.expr import evaluate as eval_expr
from rasp_compiler.graph.nodes import (
    Aggregate,
    Constant,
    Indices,
    Length,
    Map,
    Program,
    SelectorWidth,
    SequenceMap,
    SoftmaxAggregate,
    Tokens,
)

GAP = {"float32": 120.0, "float64": 800.0}  # score gap at which exp(-gap) underflows to 0
# interpolation error a piecewise-linear map aims for, relative to max(1, |f|): finer knots would
# cost more units than the dtype's own rounding of their sum gives back
APPROX_TARGET = {"float32": 1e-5, "float64": 1e-6}
MAX_SEGMENTS = 4096
# Rounding allowance of an "exact" unit, relative to max(1, |value|): a few ulps of a few operations.
EXACT_TOL = {"float32": 1e-5, "float64": 1e-10}
# A softmax head's scores are rounded to the dtype, and the rounding moves its weights by up to
# e^(2 * drift): past this factor - 1 the model no longer computes the program's softmax at all.
MAX_WEIGHT_DRIFT = 0.01
ONE, BOS = 0, 1


@dataclass
class Feat:
    """A residual subspace: ``dims`` columns, written in sublayer ``slot`` (-1: embedding)."""

    id: str
    size: int
    slot: int
    node: str | None = None
    kind: str = "numerical"
    start: int = -1
    pos_values: np.ndarray | None = None  # embedded positional features: [positions, size]
    labels: list[str] = field(default_factory=list)


@dataclass
class Unit:
    """One gated hidden unit: relu(sum w_in x + b_in) * (sum w_gate x + b_gate) -> out feature."""

    w_in: dict[str, float]
    b_in: float
    w_gate: dict[str, float]
    b_gate: float
    out: str
    out_w: float = 1.0


@dataclass
class HeadSpec:
    node: str
    kind: str  # "aggregate" | "softmax_aggregate"
    target: str
    blocks: list[tuple[str, str, np.ndarray]]  # (query feature, key feature, [q dim, k dim] weights)
    data: list[tuple[str, str]]  # softmax score: pairs (query feature, key feature), unscaled
    values: list[str]  # value features, one per target
    defaults: list[float]
    scale: float
    slot: int = -1
    targets: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)

    def merge_key(self) -> tuple:
        """Aggregates with the same score pattern share one head (each target is one value column)."""
        if self.kind != "aggregate":
            return (self.node,)
        return (self.slot, tuple((q, k, float(w[0, 0])) for q, k, w in self.blocks), self.scale)


@dataclass
class MLPSpec:
    node: str
    target: str
    units: list[Unit]
    kind: str  # "exact" | "approx"
    bound: float
    slot: int = -1
    inputs: list[str] = field(default_factory=list)


@dataclass
class Deferred:
    """A map that is no form and gets no unit of its own: a consumer may inline it (the condition
    of a max), and anything that needs its value gets ``message`` at ``origin``'s line."""

    fn: Any
    inputs: tuple[str, ...]
    origin: str
    message: str
    hint: str


# operators whose value can jump as a real argument moves: a piecewise-linear unit cannot follow a
# jump, and a grid of samples cannot bound the error near one (`indicator(x == 0.5)` was compiled
# as the constant 0 with a stated bound of 0)
STEP_BINARY = frozenset({"==", "!=", "<", ">", "<=", ">=", "%", "and", "or"})
STEP_UNARY = frozenset({"not", "round", "indicator"})


def step_part(expr: Any) -> Any:
    """The first sub-expression of ``expr`` that reads an input and can jump, or None."""
    if variables(expr):
        if isinstance(expr, Binary) and expr.op in STEP_BINARY:
            return expr
        if isinstance(expr, Unary) and expr.op in STEP_UNARY:
            return expr
        if isinstance(expr, (Ternary, Lookup, Contains)):
            return expr
    for c in children(expr):
        found = step_part(c)
        if found is not None:
            return found
    return None


def _step_name(step: Any) -> str:
    if isinstance(step, (Binary, Unary)):
        return f"'{step.op}'"
    return {Ternary: "a choice", Lookup: "a table lookup", Contains: "'in'"}[type(step)]


def has_python_fn(expr: Any) -> bool:
    return isinstance(expr, PyFn) or any(has_python_fn(c) for c in children(expr))


class NumericCompiler:
    def __init__(self, program: Program, input_range: tuple[float, float], max_len: int, *,
                 fixed_length: int | None, dtype: str, causal: bool) -> None:
        lo, hi = float(input_range[0]), float(input_range[1])
        if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
            raise CompileError(f"--input-range needs finite LO <= HI, got {lo} {hi}")
        self.program, self.graph = program, program.graph
        self.range = (lo, hi)
        self.fixed = fixed_length
        self.n = fixed_length or max_len
        self.max_len = max_len
        self.dtype, self.causal = dtype, causal
        self.gap = GAP[dtype]
        self.pos: dict[str, Any] = {}  # positional node -> per-position values / selector matrix
        self.interval: dict[str, tuple[float, float]] = {}
        self.forms: dict[str, Form] = {}
        self.feats: dict[str, Feat] = {}
        self.heads: list[HeadSpec] = []
        self.mlps: list[MLPSpec] = []
        self.embed_cache: dict[bytes, str] = {}
        self.map_reports: list[dict[str, Any]] = []
        self.deferred: dict[str, Deferred] = {}
        self._analyse()

    # ------------------------------------------------------------------ errors
    def error(self, node_id: str, message: str, hint: str | None = None) -> CompileError:
        node = self.program.node(node_id) if node_id in self.graph else None
        pos = node.pos if node is not None else None
        source = self.program.sources.get(pos.file) if pos is not None else None
        shown = pos is not None and pos.text and pos.text != node_id
        text = f"'{node_id}'" + (f" ({pos.text})" if shown else "")
        return CompileError(message.replace("{node}", text), pos.file if pos else self.program.source_file,
                            pos.line if pos else None, pos.col if pos else None, source, hint=hint)

    # ------------------------------------------------------------------ analysis
    def _analyse(self) -> None:
        from rasp_compiler.interpreter import evaluate

        order = list(self.program.nodes())
        positional = set()
        for node in order:
            if isinstance(node, Tokens):
                if node.type not in ("float", "int", "value"):
                    raise self.error(node.id, f"numerical compilation reads real-valued tokens, but "
                                     f"the program reads tokens_{node.type}",
                                     hint="write tokens = tokens_float; or compile without --input-range")
                continue
            if isinstance(node, Length) and self.fixed is None:
                # `length` is a built-in with no line of its own: point at the first line reading it
                readers = [r for r in self.graph.successors(node.id) if self.program.node(r).pos is not None]
                raise self.error(min(readers, key=self._line_of) if readers else node.id,
                                 "a real-valued program is compiled with its positions folded "
                                 "into the embedding, so `length` needs a fixed length",
                                 hint="give --fixed-length N (the program then runs on exactly N values)")
            if isinstance(node, (Indices, Length, Constant)):
                positional.add(node.id)
            elif node.inputs and all(i in positional for i in node.inputs):
                if isinstance(node, (Aggregate, SelectorWidth, SoftmaxAggregate)) and self.fixed is None:
                    continue  # depends on which keys exist: computed by a head
                positional.add(node.id)
        if positional:
            dummy = [0.0] * self.n
            sub = self.program.graph.subgraph(positional)
            values = evaluate(Program(sub.copy(), next(iter(positional)),
                                      source_file=self.program.source_file,
                                      sources=self.program.sources), dummy)
            self.pos = {k: values[k] for k in positional}
        for node in order:
            if node.id in self.pos or node.is_selector:
                continue
            self._numeric(node)

    def _numeric(self, node: Any) -> None:
        nid = node.id
        if isinstance(node, Tokens):
            self.interval[nid] = self.range
        elif isinstance(node, (Map, SequenceMap)):
            fn, inputs = self._inline(node.fn, node.inputs)
            attempts = [
                # inlined maps' forms, positions as per-position constants
                [self.pos[i] if i in self.pos else self._form_input(i) for i in inputs],
                # materialised inputs instead of inlined maps
                [self.pos[i] if i in self.pos else Form.var(self.n, i) for i in inputs],
            ]
            if any(i in self.pos for i in inputs):
                # positions as residual features too: max(x, indices) is relu(x - indices) + indices,
                # whose relu needs the position as an input, not as a per-position constant
                # (one feature for equal position-only inputs: `indices - 1` written twice is two
                # nodes, and the max must see the same number on both sides of its comparison)
                same: dict[tuple, str] = {}
                for i in inputs:
                    if i in self.pos:
                        same.setdefault(tuple(map(repr, self.pos[i])), i)
                attempts.append([Form.var(self.n, same[tuple(map(repr, self.pos[i]))] if i in self.pos else i)
                                 for i in inputs])
            errors: list[NonLinear] = []
            for args in attempts:
                try:
                    f = form_of(fn, args, self.n)
                    if isinstance(f, list):
                        raise NonLinear("positional")
                    break
                except NonLinear as err:
                    errors.append(err)
            else:
                deferred = self._why_no_unit(node, fn, inputs, str(errors[0]))
                if deferred is not None:
                    # maybe a part of a larger expression (the condition of a max): the consumer
                    # inlines it; it is an error only if something needs its value
                    self.deferred[nid] = deferred
                    return
                self._approx_check(node, str(errors[1]))
                return
            self.forms[nid] = f
            lo, hi = self._form_interval(self.forms[nid])
            choice = self._choice_interval(fn, args, inputs)
            if choice is not None:  # both are sound: keep what both allow
                lo, hi = max(lo, choice[0]), min(hi, choice[1])
            self.interval[nid] = (lo, hi)
        elif isinstance(node, (Aggregate, SoftmaxAggregate)):
            sel, src = node.inputs[0], node.inputs[-1]
            self._check_selector(sel, nid)
            lo, hi = self._interval_any(src)
            d = _as_float(node.default, self.error, nid)
            if self._may_be_empty(sel):
                lo, hi = min(lo, d), max(hi, d)
            self.interval[nid] = (lo, hi)
        elif isinstance(node, SelectorWidth):
            if node.inputs[0] in self.pos:  # positions only: its count depends on the length
                raise self.error(nid, "{node} counts the keys its selector selects, which at a variable "
                                 "length depends on how many positions there are",
                                 hint="give --fixed-length N: the count is then folded into the embedding")
            raise self.error(nid, "selector_width of a selector that reads real numbers cannot be compiled",
                             hint="select on positions only")
        else:
            raise self.error(nid, f"numerical compilation does not handle {node.kind} nodes")

    def _inline(self, fn: Any, inputs: tuple[str, ...]) -> tuple[Any, tuple[str, ...]]:
        """``fn`` over ``inputs`` with deferred (inline-only) maps substituted by their expressions."""
        from rasp_compiler.graph.expr import Var, substitute

        if not any(i in self.deferred for i in inputs):
            return fn, tuple(inputs)
        new_inputs: list[str] = []
        bindings = {}
        for k, i in enumerate(inputs):
            if i in self.deferred:
                sub_fn, sub_inputs = self.deferred[i].fn, self.deferred[i].inputs
                inner = {}
                for j, si in enumerate(sub_inputs):
                    if si not in new_inputs:
                        new_inputs.append(si)
                    inner[j] = Var(new_inputs.index(si))
                bindings[k] = substitute(sub_fn, inner)
            else:
                if i not in new_inputs:
                    new_inputs.append(i)
                bindings[k] = Var(new_inputs.index(i))
        return substitute(fn, bindings), tuple(new_inputs)

    def _choice_interval(self, fn: Any, args: list[Any],
                         inputs: tuple[str, ...]) -> tuple[float, float] | None:
        """For ``a if cond else b`` (a max, a min or a choice by position, as form_of accepted it),
        the hull of a's and b's intervals, through nested choices.  The form's own interval adds b
        to relu(a - b) as if they were independent: min(x, y) over [1, 2] came out as [0, 2], and a
        later 1 / m was refused for a pole at 0."""
        if not isinstance(fn, Ternary):
            return None
        parts = []
        for branch in (fn.then, fn.otherwise):
            part = self._choice_interval(branch, args, inputs)
            if part is None and isinstance(branch, Var) and inputs[branch.index] in self.interval:
                part = self.interval[inputs[branch.index]]   # already tightened where it was made
            if part is None:
                try:
                    f = form_of(branch, args, self.n)
                    if isinstance(f, list):  # a positional branch: its values at each position
                        f = Form.const(self.n, np.array([float(v) for v in f]))
                except (NonLinear, TypeError, ValueError):
                    return None
                part = self._form_interval(f)
            parts.append(part)
        return min(p[0] for p in parts), max(p[1] for p in parts)

    def _line_of(self, nid: str) -> tuple[int, int]:
        pos = self.program.node(nid).pos
        return (pos.line or 0, pos.col or 0) if pos is not None else (0, 0)

    def _why_no_unit(self, node: Any, fn: Any, inputs: tuple[str, ...], why: str) -> Deferred | None:
        """Why the map ``node`` (``fn`` over ``inputs`` after inlining) gets no piecewise-linear
        unit, as a Deferred; None when it gets one (a continuous function of one number)."""
        nid = node.id
        upstream = next((self.deferred[i] for i in node.inputs if i in self.deferred), None)
        if upstream is not None:
            # the inlined map is still no form: the first map that had none is the one to change
            return Deferred(fn, inputs, upstream.origin, upstream.message, upstream.hint)
        step = step_part(fn)
        if step is not None:
            return Deferred(fn, inputs, nid,
                            f"{{node}} can jump as a real number moves ({_step_name(step)} of a real "
                            "number): no piecewise-linear unit follows a jump, and no error bound holds "
                            "near one",
                            "compare real numbers only inside a max or min (a if a > b else b), which "
                            "is exact; or select on positions")
        if sum(i not in self.pos for i in inputs) > 1:
            return Deferred(fn, inputs, nid,
                            f"{{node}} is not exactly compilable ({why}) and reads several real "
                            "numbers; only a function of one real number gets a piecewise-linear "
                            "unit with an error bound",
                            "a max or min (a if a > b else b) is exact; otherwise compute the "
                            "argument as its own s-op first")
        if has_python_fn(fn):
            return Deferred(fn, inputs, nid,
                            "{node} applies a Python function to a real number: the compiler cannot "
                            "see whether it is continuous, so no error bound can be stated",
                            "write the map as a RASP expression (+, *, ^, /, max/min as a if a > b "
                            "else b)")
        return None

    def _deferred_error(self, sid: str) -> CompileError:
        d = self.deferred[sid]
        return self.error(d.origin, d.message, hint=d.hint)

    def _form_input(self, sid: str) -> Form:
        return self.forms[sid] if sid in self.forms else Form.var(self.n, sid)

    def _interval_any(self, sid: str) -> tuple[float, float]:
        if sid in self.deferred:  # a mean of a map that has no unit: its value is needed
            raise self._deferred_error(sid)
        if sid in self.pos:
            vals = [float(v) for v in self.pos[sid] if isinstance(v, (int, float))]
            if not vals:
                raise self.error(sid, "{node} holds no numbers")
            return min(vals), max(vals)
        return self.interval[sid]

    def _atom_interval(self, atom: tuple) -> tuple[float, float]:
        if atom[0] == "one":
            return (1.0, 1.0)
        if atom[0] == "x":
            return self._interval_any(atom[1])
        if atom[0] == "xx":
            a, b = self._interval_any(atom[1]), self._interval_any(atom[2])
            if atom[1] == atom[2]:  # x * x, not x ** 2: a float ** overflowing raises OverflowError
                lo = 0.0 if a[0] <= 0 <= a[1] else min(a[0] * a[0], a[1] * a[1])
                return lo, max(a[0] * a[0], a[1] * a[1])
            ps = [x * y for x in a for y in b]
            return min(ps), max(ps)
        lin: Lin = atom[1]
        lo = hi = lin.const
        for s, w in lin.terms:
            i = self._interval_any(s)
            lo += min(w * i[0], w * i[1])
            hi += max(w * i[0], w * i[1])
        return max(0.0, lo), max(0.0, hi)

    def _form_interval(self, f: Form) -> tuple[float, float]:
        lo = np.zeros(self.n)
        hi = np.zeros(self.n)
        for atom, c in f.terms.items():
            a = self._atom_interval(atom)
            c = np.nan_to_num(c, nan=0.0)
            # a huge --input-range makes a bound overflow to inf (_check_magnitudes then refuses it
            # with one clear error): no RuntimeWarning before it, and a zero coefficient (the atom
            # is absent at that position) adds 0, not 0 * inf = NaN
            with np.errstate(over="ignore", invalid="ignore"):
                lo += np.where(c == 0, 0.0, np.minimum(c * a[0], c * a[1]))
                hi += np.where(c == 0, 0.0, np.maximum(c * a[0], c * a[1]))
        return float(lo.min()), float(hi.max())

    def _check_selector(self, sel: str, nid: str) -> None:
        if sel not in self.pos:
            raise self.error(nid, "{node} uses a selector that compares real numbers; hard attention "
                             "has no margin between arbitrarily close reals",
                             hint="select on positions (functions of indices), or use softmax_aggregate "
                                  "for a data-dependent weighting")

    def _may_be_empty(self, sel: str) -> bool:
        """Whether some query row can select no key (then the default is one of the values)."""
        m = np.asarray(self.pos[sel], dtype=bool)
        for q in range(m.shape[0]):
            keys = np.nonzero(m[q])[0]
            # at a variable length, a query at q may see only keys 0..q
            if not len(keys) or (self.fixed is None and keys.min() > q):
                return True
        return False

    def _approx_check(self, node: Any, why: str) -> None:
        nums = [i for i in node.inputs if i not in self.pos]
        if len(nums) != 1 or len(node.inputs) != 1:
            raise self.error(node.id, f"{{node}} is not exactly compilable ({why}) and reads "
                             f"{len(node.inputs)} inputs; only a function of one real number gets a "
                             "piecewise-linear unit with an error bound",
                             hint="compute the argument (e.g. tokens - m) as its own s-op first")
        lo, hi = self.interval[nums[0]]
        fn = node.fn
        # the grid holds every knot a piecewise-linear unit may use (dyadic points) and 0
        xs = np.unique(np.concatenate([np.linspace(lo, hi, 2 * MAX_SEGMENTS + 1), [lo, hi],
                                       [0.0] if lo <= 0.0 <= hi else []]))
        try:
            ys = np.array([float(eval_expr(fn, (float(x),))) for x in xs])
        except Exception:
            ys = np.array([np.nan])
        if not np.all(np.isfinite(ys)):
            raise self.error(node.id, f"{{node}} is not finite everywhere on its inferred input range "
                             f"[{lo:g}, {hi:g}], so no error bound exists",
                             hint="give a narrower --input-range")
        self._approx = getattr(self, "_approx", {})
        self._approx[node.id] = (nums[0], lo, hi)
        ymin, ymax = float(ys.min()), float(ys.max())
        self.interval[node.id] = (ymin, ymax)

    # ------------------------------------------------------------------ features
    def embed(self, values: np.ndarray, label: str) -> str:
        """A positional feature holding ``values`` [positions] (deduplicated)."""
        values = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0)
        key = values.tobytes()
        if key in self.embed_cache:
            return self.embed_cache[key]
        fid = f"pos:{label}"
        k = 2
        while fid in self.feats:
            fid, k = f"pos:{label}#{k}", k + 1
        self.feats[fid] = Feat(fid, 1, -1, None, "positional", pos_values=values[:, None], labels=[fid])
        self.embed_cache[key] = fid
        return fid

    def need(self, sid: str) -> str:
        """Make ``sid`` a residual feature; returns its id."""
        if sid in self.feats:
            return sid
        if sid in self.pos:
            vals = self.pos[sid]
            nums = np.array([float(v) if isinstance(v, (int, float)) else np.nan for v in vals])
            return self.embed(nums, sid)
        node = self.program.node(sid)
        if sid in self.deferred:
            raise self._deferred_error(sid)
        if isinstance(node, Tokens):
            self.feats[sid] = Feat(sid, 1, -1, sid, "token", labels=[sid])
        elif isinstance(node, Aggregate):
            self._head(node)
        elif isinstance(node, SoftmaxAggregate):
            self._head(node)
        else:
            self._mlp(node)
        return sid

    def slot(self, fid: str) -> int:
        return self.feats[fid].slot

    # ------------------------------------------------------------------ heads
    def _blocks(self, sel: str, nid: str, digits: bool = True) -> list[tuple[str, str, np.ndarray]]:
        """Score blocks of a positional selector: 0 on selected keys, <= -1 elsewhere.  ``digits``
        allows quadratic blocks; a softmax head must not use them: their terms cancel only in sum,
        and that cancellation would round away the low bits of the data scores added to them."""
        f = sl.formula(self.graph, sel)
        conj = sl.conjuncts(f)
        out = []
        if all(isinstance(c, sl.Atom) for c in conj):
            for a in conj:
                out.extend(self._atom_blocks(a, digits))
            return out
        return self._matrix_block(np.asarray(self.pos[sel], dtype=bool), sel)

    def _matrix_block(self, m: np.ndarray, label: str) -> list[tuple[str, str, np.ndarray]]:
        """A whole selector matrix as one block over distinct query rows x distinct key columns."""
        qrows, qidx = np.unique(m, axis=0, return_inverse=True)
        kcols, kidx = np.unique(m, axis=1, return_inverse=True)
        small = np.zeros((len(qrows), len(kcols)), dtype=bool)
        for q in range(m.shape[0]):
            for k in range(m.shape[1]):
                small[qidx[q], kidx[k]] = m[q, k]
        return self._onehot_block(qidx.ravel(), kidx.ravel(), small, label)

    def _onehot_block(self, qidx: np.ndarray, kidx: np.ndarray, small: np.ndarray,
                      label: str) -> list[tuple[str, str, np.ndarray]]:
        nq, nk = small.shape
        out = []
        if nq <= nk:  # one column per query class: Q one-hot, K = truth - 1
            for j in range(nq):
                qf = self.embed((qidx == j).astype(float), f"{label}.q{j}")
                kf = self.embed(small[j, kidx].astype(float) - 1.0, f"{label}.k{j}")
                out.append((qf, kf, np.array([[1.0]])))
        else:
            for j in range(nk):
                qf = self.embed(small[qidx, j].astype(float) - 1.0, f"{label}.q{j}")
                kf = self.embed((kidx == j).astype(float), f"{label}.k{j}")
                out.append((qf, kf, np.array([[1.0]])))
        return out

    def _atom_blocks(self, a: sl.Atom, digits: bool = True) -> list[tuple[str, str, np.ndarray]]:
        kv, qv = self.pos[a.key], self.pos[a.query]
        label = a.select
        ints = [v for v in kv if _is_int(v)]
        if (digits and a.op == "==" and not a.negated and len(ints) == len(kv) and min(ints) >= 0
                and len(set(ints)) > 8):
            return self._digit_blocks([int(v) for v in kv], qv, label)
        kvals = _distinct(kv)
        qvals = _distinct(qv)
        small = np.array([[sl.holds(a, k, q) for k in kvals] for q in qvals], dtype=bool)
        if a.negated:
            small = ~small
        kidx = np.array([_index(kvals, v) for v in kv])
        qidx = np.array([_index(qvals, v) for v in qv])
        return self._onehot_block(qidx, kidx, small, label)

    def _digit_blocks(self, keys: list[int], qv: list[Any], label: str) -> list[tuple[str, str, np.ndarray]]:
        """-(k - q)^2 summed over base-B digits of key and query values (exact small integers)."""
        base = max(2, math.isqrt(max(keys)) + 1)
        ka = np.array([k // base for k in keys], dtype=float)
        kb = np.array([k % base for k in keys], dtype=float)
        qa = np.full(len(qv), -2.0)  # a query with no valid target: digit -2 matches no key
        qb = np.zeros(len(qv))
        for p, v in enumerate(qv):
            if _is_int(v) and 0 <= int(v) < base * base:
                qa[p], qb[p] = int(v) // base, int(v) % base
        out = []
        for name, kd, qd in (("hi", ka, qa), ("lo", kb, qb)):
            # -(k - q)^2 = 2kq - q^2 - k^2 as three rank-one columns
            fk = self.embed(kd, f"{label}.key_{name}")
            fk2 = self.embed(kd * kd, f"{label}.key_{name}^2")
            fq = self.embed(qd, f"{label}.query_{name}")
            fq2 = self.embed(qd * qd, f"{label}.query_{name}^2")
            out.append((fq, fk, np.array([[2.0]])))
            out.append((fq2, "one", np.array([[-1.0]])))
            out.append(("one", fk2, np.array([[-1.0]])))
        return out

    def _head(self, node: Any) -> None:
        nid = node.id
        sel = node.inputs[0]
        self._check_selector(sel, nid)
        if self.causal and np.triu(np.asarray(self.pos[sel], dtype=bool), 1).any():
            raise self.error(nid, "{node} may select a key after its query position, which a causal "
                             "model cannot see", hint="combine the selector with select(indices, "
                             "indices, <=), or compile without --causal")
        blocks = self._blocks(sel, nid, digits=not isinstance(node, SoftmaxAggregate))
        value = self.need(node.inputs[-1])
        data: list[tuple[str, str]] = []
        bound = drift = 0.0
        if isinstance(node, SoftmaxAggregate):
            m = node.width
            qs, ks = node.inputs[1:1 + m], node.inputs[1 + m:1 + 2 * m]
            rounded = 0.0  # the part of the scores whose products the dtype rounds
            for q, k in zip(qs, ks, strict=False):
                data.append((self.need(q), self.need(k)))
                iq, ik = self._interval_any(q), self._interval_any(k)
                size = max(abs(iq[0]), abs(iq[1])) * max(abs(ik[0]), abs(ik[1]))
                bound += size
                if not (self._exact_factor(q) or self._exact_factor(k)):
                    rounded += size
            drift = self._score_drift(nid, bound, rounded, len(data))
            scale = 2.0 * (self.gap + 2.0 * bound) + 2.0
        else:
            scale = 2.0 * self.gap
        deps = [b[0] for b in blocks] + [b[1] for b in blocks] + [value] + [x for p in data for x in p]
        slot = _next(max([self.slot(f) for f in deps if f != "one"] + [-1]), 0)
        self.feats[nid] = Feat(nid, 1, slot, nid, "numerical", labels=[nid])
        self.heads.append(HeadSpec(nid, node.kind, nid, blocks, data, [value],
                                   [_as_float(node.default, self.error, nid)], scale, slot, [nid], [nid]))
        lo, hi = self._interval_any(node.inputs[-1])
        mag = max(abs(lo), abs(hi))
        # weights within a factor e^(+-2 drift): |change of weights|_1 <= 2 (e^(2 drift) - 1)
        effect = 2.0 * math.expm1(2.0 * drift) * mag
        exact = effect <= EXACT_TOL[self.dtype] * max(1.0, mag)
        self.map_reports.append({"node": nid, "kind": node.kind, "exact": exact,
                                 "bound": 0.0 if exact else effect,
                                 "interval": list(self.interval[nid]),
                                 **({"score_bound": bound, "score_rounding": drift} if data else {})})

    def _exact_factor(self, sid: str) -> bool:
        """Whether ``sid`` is a position-only s-op of zeros and powers of two (a constant 1 query):
        a product with it is exact in binary floating point."""
        if sid not in self.pos:
            return False
        vals = self.pos[sid]
        return all(isinstance(v, (int, float)) and (v == 0 or math.frexp(abs(v))[0] == 0.5) for v in vals)

    def _score_drift(self, nid: str, score_bound: float, rounded: float, pairs: int) -> float:
        """How far the dtype may round a softmax head's score: each product of ``rounded`` (the
        products of two general numbers) by an ulp, and the sum of ``pairs`` products by ``pairs - 1``
        ulps of ``score_bound``.  A CompileError when the weights could then move by more than
        MAX_WEIGHT_DRIFT: float32 rounds a score of 1e8 by 4, so near-equal scores swap weights."""
        eps = float(np.finfo(np.float32 if self.dtype == "float32" else np.float64).eps)
        drift = eps * (rounded + (pairs - 1) * score_bound)
        if 2.0 * drift > math.log1p(MAX_WEIGHT_DRIFT):
            hint = ("use --dtype float64 or a narrower --input-range" if self.dtype == "float32"
                    else "use a narrower --input-range or smaller query/key s-ops")
            raise self.error(nid, f"{{node}}'s attention scores reach {score_bound:.3g}, which "
                             f"{self.dtype} rounds by up to {drift:.3g}: its softmax weights could be off "
                             f"by a factor of e^{2 * drift:.3g}", hint=hint)
        return drift

    # ------------------------------------------------------------------ MLPs
    def _mlp(self, node: Any) -> None:
        nid = node.id
        approx = getattr(self, "_approx", {})
        if nid in approx:
            units, bound, inputs = self._approx_units(nid, *approx[nid])
            kind = "approx"
        else:
            units, inputs = self._form_units(nid, self.forms[nid])
            bound, kind = 0.0, "exact"
        slot = _next(max([self.slot(f) for f in inputs if f != "one"] + [-1]), 1)
        self.feats[nid] = Feat(nid, 1, slot, nid, "numerical", labels=[nid])
        self.mlps.append(MLPSpec(nid, nid, units, kind, bound, slot, inputs))
        rep = {"node": nid, "kind": "map", "exact": kind == "exact", "bound": bound,
               "interval": list(self.interval[nid]), "units": len(units)}
        self.map_reports.append(rep)

    def _gate(self, c: np.ndarray, label: str) -> tuple[dict[str, float], float, list[str]]:
        c = np.nan_to_num(c, nan=0.0)
        if np.all(c == c[0]):
            return {}, float(c[0]), []
        f = self.embed(c, label)
        return {f: 1.0}, 0.0, [f]

    def _form_units(self, nid: str, form: Form) -> tuple[list[Unit], list[str]]:
        units: list[Unit] = []
        inputs: list[str] = []
        for atom, c in sorted(form.terms.items(), key=lambda t: repr(t[0])):
            if atom[0] == "one":
                wg, bg, extra = self._gate(c, f"{nid}.const")
                units.append(Unit({"one": 1.0}, 0.0, wg, bg, nid))
                inputs += extra
            elif atom[0] == "x":
                x = self.need(atom[1])
                wg, bg, extra = self._gate(c, f"{nid}.coef_{atom[1]}")
                units.append(Unit({x: 1.0}, 0.0, wg, bg, nid))
                units.append(Unit({x: -1.0}, 0.0, {k: -v for k, v in wg.items()}, -bg, nid))
                inputs += [x, *extra]
            elif atom[0] == "xx":
                a, b = self.need(atom[1]), self.need(atom[2])
                inputs += [a, b]
                cc = np.nan_to_num(c, nan=0.0)
                vals = sorted({float(v) for v in cc if v != 0})
                ia = self._interval_any(atom[1])
                big = 2.0 * max(abs(ia[0]), abs(ia[1])) + 1.0
                for kappa in vals:
                    w_in: dict[str, float] = {a: 1.0}
                    w_neg: dict[str, float] = {a: -1.0}
                    if len(vals) > 1 or np.any(cc == 0):  # switch the unit off where c(p) != kappa
                        off = self.embed(np.where(cc == kappa, 0.0, -big), f"{nid}.on_{kappa:g}")
                        w_in[off] = 1.0
                        w_neg[off] = 1.0
                        inputs.append(off)
                    units.append(Unit(w_in, 0.0, {b: kappa}, 0.0, nid))
                    units.append(Unit(w_neg, 0.0, {b: -kappa}, 0.0, nid))
            else:
                lin: Lin = atom[1]
                w_in = {}
                for s, w in lin.terms:
                    feat = self.need(s)  # a position-only s-op is an embedded feature of another id
                    w_in[feat] = w_in.get(feat, 0.0) + w
                    inputs.append(feat)
                wg, bg, extra = self._gate(c, f"{nid}.coef_relu")
                units.append(Unit(w_in, lin.const, wg, bg, nid))
                inputs += extra
        return units, inputs

    def _approx_units(self, nid: str, src: str, lo: float, hi: float) -> tuple[list[Unit], float, list[str]]:
        """Piecewise-linear interpolation of a one-argument map on [lo, hi], with its error bound."""
        fn = self.program.node(nid).fn
        x = self.need(src)

        def f(v: np.ndarray) -> np.ndarray:
            return np.array([float(eval_expr(fn, (float(t),))) for t in v])
        scale = max(1.0, float(np.max(np.abs(f(np.linspace(lo, hi, 257))))))
        segs = 16
        while True:
            knots = np.linspace(lo, hi, segs + 1)
            ys = f(knots)
            err = 0.0
            for j in range(segs):  # sample the interpolation error densely inside every segment
                t = np.linspace(knots[j], knots[j + 1], 33)[1:-1]
                interp = ys[j] + (ys[j + 1] - ys[j]) * (t - knots[j]) / (knots[j + 1] - knots[j] or 1.0)
                err = max(err, float(np.max(np.abs(f(t) - interp), initial=0.0)))
            if err <= APPROX_TARGET[self.dtype] * scale or segs >= MAX_SEGMENTS or hi == lo:
                break
            segs *= 2
        slopes = np.diff(ys) / np.where(np.diff(knots) == 0, 1.0, np.diff(knots))
        units = [Unit({"one": 1.0}, 0.0, {}, float(ys[0]), nid)]
        prev = 0.0
        for j, s in enumerate(slopes):
            if s != prev:
                units.append(Unit({x: 1.0}, -float(knots[j]), {}, float(s - prev), nid))
            prev = s
        eps = float(np.finfo(np.float32 if self.dtype == "float32" else np.float64).eps)
        # stated bound: the sampled interpolation error with a 25% margin (for the unsampled points
        # between samples) plus the worst-case rounding of the units and of their sum:
        # (units + 2) * eps * sum of |unit outputs| <= (units + 2) * eps * (|f(lo)| + sum |slope
        # changes| * (hi - lo))
        mass = abs(float(ys[0])) + float(np.sum(np.abs(np.diff(np.concatenate([[0.0], slopes]))))) * (hi - lo)
        bound = 1.25 * err + (len(units) + 2) * eps * mass
        return units, bound, [x]


def integer_vocab(program: Program, input_range: tuple[float, float]) -> list[int] | None:
    """For a program that reads no real-valued tokens (tokens_int, tokens_str, ...), the integers
    of ``input_range``: such a program is compiled categorically over that vocabulary."""
    if any(isinstance(n, Tokens) and n.type in ("float", "value") for n in program.nodes()):
        return None
    lo, hi = math.ceil(input_range[0]), math.floor(input_range[1])
    if hi < lo:
        raise CompileError(f"--input-range {input_range[0]} {input_range[1]} holds no integer, and the "
                           "program reads integer (or string) tokens", program.source_file)
    if hi - lo >= 4096:
        raise CompileError(f"--input-range holds {hi - lo + 1} integers, too many tokens for a program "
                           "that reads integer tokens", program.source_file, hint="give a smaller range")
    return list(range(lo, hi + 1))


def _next(slot: int, parity: int) -> int:
    s = slot + 1
    return s if s % 2 == parity else s + 1


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer()


def _distinct(vals: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in vals:
        if _index(out, v) < 0:
            out.append(v)
    return out


def _index(vals: list[Any], v: Any) -> int:
    for i, u in enumerate(vals):
        if type(u) is type(v) and u == v or (u is None and v is None) or (
                _is_int(u) and _is_int(v) and float(u) == float(v)):
            return i
    return -1


def _as_float(v: Any, err: Any, nid: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise err(nid, f"{{node}} needs a numeric default, not {v!r}")
    return float(v)


# ====================================================================== assembly
def _check_magnitudes(nc: NumericCompiler, program: Program) -> None:
    """Refuse values so large that a product of two of them, or a squared score difference,
    overflows the dtype: the model would output inf or NaN where the program has a number.
    Below sqrt(max) / 1024 every such product and sum of up to 1,024 of them stays finite."""
    limit = math.sqrt(float(np.finfo(np.float32 if nc.dtype == "float32" else np.float64).max)) / 1024
    import networkx as nx

    needed = nx.ancestors(program.graph, program.output) | {program.output}
    # inputs before what is computed from them: name the first value that is too large (an
    # input at 1e300), not one derived from it (a product that overflowed to inf)
    order = {nid: i for i, nid in enumerate(nx.lexicographical_topological_sort(program.graph))}
    for nid, (lo, hi) in sorted(nc.interval.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])):
        if nid in needed and max(abs(lo), abs(hi)) > limit:
            raise CompileError(f"'{nid}' can reach {max(abs(lo), abs(hi)):.3g}, too large to compute "
                               f"exactly in {nc.dtype} (products and attention scores of values above "
                               f"{limit:.3g} can overflow)", program.source_file,
                               hint="narrow --input-range" + (", or use --dtype float64"
                                                              if nc.dtype == "float32" else ""))


def compile_numeric(program: Program, input_range: tuple[float, float], max_len: int, *,
                    dtype: str, causal: bool, fixed_length: int | None) -> tuple[dict, dict]:
    """(config, tensors) of the numerical program, in the runtime's saved-model format."""
    from rasp_compiler.runtime import FORMAT

    nc = NumericCompiler(program, input_range, max_len, fixed_length=fixed_length, dtype=dtype,
                         causal=causal)
    out_id = program.output
    if out_id in nc.pos:
        raise CompileError(f"the output '{out_id}' does not depend on the input", program.source_file,
                           hint="compile it without --input-range")
    _check_magnitudes(nc, program)   # before the heads: an overflow is the first thing to say
    nc.need(out_id)
    # layout: one, bos, token, then features in slot order
    order = sorted(nc.feats.values(), key=lambda f: (f.slot, f.kind != "token", f.id))
    d = 2
    for f in order:
        f.start = d
        d += f.size
    n_layers = max((f.slot // 2 for f in order if f.slot >= 0), default=-1) + 1

    def dim(fid: str) -> int:
        return ONE if fid == "one" else nc.feats[fid].start

    P = max_len
    tok = np.zeros((3, d))
    tok[0, ONE] = 1.0  # the number token
    tok[1, BOS] = 1.0
    pos = np.zeros((P + 1, d))
    val = np.zeros(d)
    for f in order:
        if f.kind == "token":
            val[f.start] = 1.0
        elif f.pos_values is not None:
            pos[1:len(f.pos_values) + 1, f.start:f.start + f.size] = f.pos_values
    tensors: dict[str, np.ndarray] = {"embed.token": tok, "embed.pos": pos, "embed.value": val}
    r_bos = tok[1] + pos[0]
    layers_cfg, plan = [], []
    for li in range(n_layers):
        heads = _merged([h for h in nc.heads if h.slot == 2 * li])
        mlps = [m for m in nc.mlps if m.slot == 2 * li + 1]
        lp: dict[str, Any] = {"layer": li, "heads": [], "mlp": None}
        hw = [_head_weights(h, dim, d, r_bos) for h in heads]
        width = max([max(w[0].shape[1], w[2].shape[1]) for w in hw], default=0)
        d_head = 1
        while d_head < width:
            d_head *= 4  # a power of 4: the runtime's 1/sqrt(d_head) is a power of 2, exact
        if heads:
            H = len(heads)
            wq = np.zeros((H, d, d_head))
            wk, wv = np.zeros_like(wq), np.zeros_like(wq)
            wo = np.zeros((H, d_head, d))
            out_bos = np.zeros(d)
            for h, (spec, (q, k, v, o)) in enumerate(zip(heads, hw, strict=False)):
                wq[h, :, :q.shape[1]] = q * math.sqrt(d_head)
                wk[h, :, :k.shape[1]] = k
                wv[h, :, :v.shape[1]] = v
                wo[h, :o.shape[0], :] = o
                out_bos += (r_bos @ v) @ o
                lp["heads"].append({"head": h, "kind": spec.kind, "node": spec.node,
                                    "writes": ", ".join(spec.targets), "nodes": spec.nodes,
                                    "value": ", ".join(spec.values), "scale": spec.scale,
                                    "blocks": [{"query": b[0], "key": b[1]} for b in spec.blocks],
                                    "score": [list(p) for p in spec.data],
                                    "source": _src(program, spec.node), "text": _text(program, spec.node)})
            tensors.update({f"layers.{li}.attn.W_Q": wq, f"layers.{li}.attn.W_K": wk,
                            f"layers.{li}.attn.W_V": wv, f"layers.{li}.attn.W_O": wo})
            r_bos = r_bos + out_bos
        units = [u for m in mlps for u in m.units]
        if units:
            m_ = len(units)
            w_in, w_g = np.zeros((d, m_)), np.zeros((d, m_))
            b_in, b_g = np.zeros(m_), np.zeros(m_)
            w_out = np.zeros((m_, d))
            for j, u in enumerate(units):
                for fid, w in u.w_in.items():
                    w_in[dim(fid), j] += w
                for fid, w in u.w_gate.items():
                    w_g[dim(fid), j] += w
                b_in[j], b_g[j] = u.b_in, u.b_gate
                w_out[j, dim(u.out)] += u.out_w
            tensors.update({f"layers.{li}.mlp.W_in": w_in, f"layers.{li}.mlp.b_in": b_in,
                            f"layers.{li}.mlp.W_gate": w_g, f"layers.{li}.mlp.b_gate": b_g,
                            f"layers.{li}.mlp.W_out": w_out, f"layers.{li}.mlp.b_out": np.zeros(d)})
            r_bos = r_bos + (np.maximum(r_bos @ w_in + b_in, 0) * (r_bos @ w_g + b_g)) @ w_out
            ops, start = [], 0
            for m in mlps:
                ops.append({"kind": m.kind, "node": m.node, "writes": m.target,
                            "inputs": sorted(set(m.inputs)),
                            "units": [start, start + len(m.units)], "error_bound": m.bound,
                            "source": _src(program, m.node), "text": _text(program, m.node)})
                start += len(m.units)
            lp["mlp"] = {"hidden": m_, "ops": ops, "gated": True}
        layers_cfg.append({"n_heads": len(heads), "d_head": d_head if heads else 0, "d_mlp": len(units)})
        plan.append(lp)
    w_u = np.zeros((d, 1))
    w_u[dim(out_id), 0] = 1.0
    tensors["unembed.W_U"], tensors["unembed.b_U"] = w_u, np.zeros(1)
    residual = [{"feature": name, "node": None, "start": k, "size": 1, "encoding": "constant",
                 "labels": [name]} for k, name in ((ONE, "one"), (BOS, "bos"))]
    for f in order:
        residual.append({"feature": f.id, "node": f.node, "start": f.start, "size": f.size,
                         "encoding": "positional" if f.kind == "positional" else "numerical",
                         "labels": f.labels})
    bounds = [r for r in nc.map_reports]
    total_bound = _output_bound(nc, out_id)
    from rasp_compiler.compiler.assemble import DTYPES

    torch_dtype = DTYPES[dtype]
    out_t = {k: torch.from_numpy(np.ascontiguousarray(v)).to(torch_dtype) for k, v in sorted(tensors.items())}
    notes = [_bound_note(r, dtype) for r in bounds if not r["exact"]]
    config = {
        "format": FORMAT, "program": program.source_file, "vocab": ["<number>"], "bos": "<BOS>",
        "pad": "<PAD>", "max_len": max_len, "fixed_length": fixed_length, "causal": causal, "dtype": dtype,
        "d_model": d, "n_layers": n_layers, "layers": layers_cfg, "attention_scale": "1/sqrt(d_head)",
        "score_gap": nc.gap, "residual": residual, "plan": plan, "critical_path": [],
        "output": {"encoding": "numerical", "integer": False, "node": out_id, "feature": out_id},
        "input": {"kind": "numerical", "range": [nc.range[0], nc.range[1]]},
        "numeric": {"maps": bounds, "output_interval": list(nc.interval[out_id]),
                    "approx_error_bound": total_bound},
        "notes": notes,
    }
    return config, out_t


def _output_bound(nc: NumericCompiler, out: str) -> float:
    """The error bound of the output: every approximate map's own bound, carried forward through
    later maps (linear terms scale it by |coefficient|, products by the other factor's magnitude,
    max/min by the ReLU's weights) and heads (a mean keeps it; a softmax head adds the effect of
    perturbed scores: |change of weights|_1 <= 2 * |change of scores|)."""
    err: dict[str, float] = {}
    own = {r["node"]: r["bound"] for r in nc.map_reports if not r["exact"]}
    approx = getattr(nc, "_approx", {})

    def mag(sid: str) -> float:
        lo, hi = nc._interval_any(sid)
        return max(abs(lo), abs(hi))

    def e(sid: str) -> float:
        return err.get(sid, 0.0)
    for node in nc.program.nodes():
        nid = node.id
        if nid in nc.pos or node.is_selector or nid not in nc.interval:
            continue
        if isinstance(node, Aggregate):
            err[nid] = e(node.inputs[-1])
        elif isinstance(node, SoftmaxAggregate):
            m = node.width
            ds = sum(mag(q) * e(k) + mag(k) * e(q) + e(q) * e(k)
                     for q, k in zip(node.inputs[1:1 + m], node.inputs[1 + m:1 + 2 * m], strict=False))
            err[nid] = e(node.inputs[-1]) + 2.0 * ds * mag(node.inputs[-1]) + own.get(nid, 0.0)
        elif nid in approx:
            src, lo, hi = approx[nid]
            xs = np.linspace(lo, hi, 4097)
            ys = np.array([float(eval_expr(nc.program.node(nid).fn, (float(t),))) for t in xs])
            lip = float(np.max(np.abs(np.diff(ys) / np.diff(xs)), initial=0.0)) * 1.1 if hi > lo else 0.0
            err[nid] = own.get(nid, 0.0) + lip * e(src)
        elif nid in nc.forms:
            total = 0.0
            for atom, c in nc.forms[nid].terms.items():
                k = float(np.max(np.abs(np.nan_to_num(c, nan=0.0))))
                if atom[0] == "x":
                    total += k * e(atom[1])
                elif atom[0] == "xx":
                    a_, b_ = atom[1], atom[2]
                    total += k * (mag(a_) * e(b_) + mag(b_) * e(a_) + e(a_) * e(b_))
                elif atom[0] == "relu":
                    total += k * sum(abs(w) * e(s_) for s_, w in atom[1].terms)
            err[nid] = total
    return float(err.get(out, 0.0))


def _bound_note(report: dict, dtype: str) -> str:
    lo, hi = report["interval"]
    if "score_rounding" in report:
        return (f"{report['node']}: {dtype} rounds its attention scores (up to "
                f"{report['score_bound']:.3g}) by up to {report['score_rounding']:.3g}, |error| <= "
                f"{report['bound']:.3g} on [{lo:.6g}, {hi:.6g}]")
    return f"{report['node']}: piecewise-linear, |error| <= {report['bound']:.3g} on [{lo:.6g}, {hi:.6g}]"


def _head_weights(h: HeadSpec, dim: Any, d: int, r_bos: np.ndarray) -> tuple[np.ndarray, ...]:
    cols = len(h.blocks) + len(h.data) + 2
    wq, wk = np.zeros((d, cols)), np.zeros((d, cols))
    for c, (qf, kf, w) in enumerate(h.blocks):
        wq[dim(qf), c] += h.scale * float(w[0, 0])
        wk[dim(kf), c] += 1.0
    for j, (qf, kf) in enumerate(h.data):
        c = len(h.blocks) + j
        wq[dim(qf), c] += 1.0
        wk[dim(kf), c] += 1.0
    c_bos, c_self = cols - 2, cols - 1
    wq[ONE, c_bos] = h.scale  # every real query scores the BOS key at -scale/2
    k = len(h.values)
    wv = np.zeros((d, k))
    wo = np.zeros((k, d))
    for j, (v, t) in enumerate(zip(h.values, h.targets, strict=False)):
        wv[dim(v), j] += 1.0
        wo[j, dim(t)] = 1.0
    # the BOS rows cancel what the BOS residual holds, then set BOS's key, query and value
    rb = r_bos.copy()
    rb[BOS] = 0.0
    k_t = np.zeros(cols)
    k_t[c_bos] = -0.5
    k_t[c_self] = 1.0
    q_t = np.zeros(cols)
    q_t[c_self] = h.scale
    wk[BOS] = k_t - rb @ wk
    wq[BOS] = q_t - rb @ wq
    wv[BOS] = np.array(h.defaults) - rb @ wv
    return wq, wk, wv, wo


def _merged(heads: list[HeadSpec]) -> list[HeadSpec]:
    groups: dict[tuple, HeadSpec] = {}
    for h in heads:
        key = h.merge_key()
        if key in groups:
            g = groups[key]
            g.values, g.targets = g.values + h.values, g.targets + h.targets
            g.defaults, g.nodes = g.defaults + h.defaults, g.nodes + h.nodes
        else:
            groups[key] = HeadSpec(h.node, h.kind, h.target, h.blocks, h.data, list(h.values),
                                   list(h.defaults), h.scale, h.slot, list(h.targets), list(h.nodes))
    return list(groups.values())


def _src(program: Program, nid: str) -> str | None:
    node = program.node(nid) if nid in program.graph else None
    return f"{node.pos.file}:{node.pos.line}" if node is not None and node.pos is not None else None


def _text(program: Program, nid: str) -> str | None:
    node = program.node(nid) if nid in program.graph else None
    return node.pos.text if node is not None and node.pos is not None and node.pos.text else None
