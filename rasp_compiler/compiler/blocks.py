"""Weights of one attention head and of one MLP op, built from index arrays.

Heads (see docs/compiler.md for the arithmetic):
* scores are ``S * sum over blocks of P_b[query value, key value]`` — a bilinear form over the
  one-hot query and key features, one block per additive conjunct of the selector;
* a BOS column gives the BOS key ``S*(m - 1/2)`` ("default": wins only when no key is selected)
  or ``S*m`` ("always": one of the selected, for selector width); a second column makes the BOS
  *query* attend only to BOS, so the BOS position's residual never depends on the input;
* the BOS rows of W_Q, W_K, W_V cancel whatever the BOS residual holds (it is known: the compiler
  simulates the BOS-only input), so the BOS key's score and value are exactly as designed.

MLPs (one hidden ReLU layer):
* categorical inputs only: one unit per occurring value combination, ``ReLU(sum of one-hots - (k-1))``;
* one numerical input x (plus categorical ones): a constant unit per combination, then for every
  consecutive pair of x values where the output changes, a step of two units whose slope comes
  from the actual gap between those two values (exact while x is within gap/8 of a listed value);
* several numerical inputs: the same steps along a projection z = coef · x that separates the
  points with different outputs (``numeric.projection``), per gate group of the categorical inputs.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np

from rasp_compiler.compiler.lowering import ONE, Feature, HeadOp, MLPOp, is_bos_weight
from rasp_compiler.compiler.numeric import (
    SharedSteps,
    StepGroup,
    group_points,
    merge_groups,
    projection,
    steps_along,
)
from rasp_compiler.compiler.tables import affine
from rasp_compiler.compiler.values import value_key


class Layout:
    """Residual stream: ``one``, ``bos``, then every feature's subspace, in schedule order."""

    def __init__(self, features: list[Feature]) -> None:
        self.start: dict[str, int] = {ONE: 0, "bos": 1}
        self.features = {f.id: f for f in features}
        self.index: dict[str, dict] = {}
        d = 2
        for f in features:
            self.start[f.id] = d
            if f.encoding == "categorical":
                self.index[f.id] = {_vk(v): j for j, v in enumerate(f.values)}
            d += f.size
        self.d_model = d

    def dim(self, fid: str, value: Any = None) -> int:
        if fid == ONE:
            return 0
        f = self.features[fid]
        if f.encoding == "numerical":
            return self.start[fid]
        return self.start[fid] + self.index[fid][_vk(value)]

    def onehot_dims(self, fid: str) -> np.ndarray:
        if fid == ONE:
            return np.array([0])
        f = self.features[fid]
        return self.start[fid] + np.arange(f.size)

    def labels(self) -> list[dict]:
        out = [{"feature": ONE, "node": None, "start": 0, "size": 1, "encoding": "constant",
                "labels": [ONE]},
               {"feature": "bos", "node": None, "start": 1, "size": 1, "encoding": "constant",
                "labels": ["bos"]}]
        from rasp_compiler.compiler.values import distinct_labels, json_value
        for fid, f in self.features.items():
            categorical = f.encoding == "categorical"
            labs = [f"{fid}:{lab}" for lab in distinct_labels(f.values)] if categorical else [fid]
            entry = {"feature": fid, "node": f.node, "start": self.start[fid], "size": f.size,
                     "encoding": f.encoding, "labels": labs}
            if f.encoding == "categorical":
                entry["values"] = [json_value(v) for v in f.values]
            out.append(entry)
        return out


def _vk(v: Any) -> tuple:
    return value_key(v)[:2] if not isinstance(v, tuple) else value_key(v)


class HeadWeights:
    def __init__(self, qk: int, ov: int, d_model: int) -> None:
        self.W_Q = np.zeros((d_model, qk))
        self.W_K = np.zeros((d_model, qk))
        self.W_V = np.zeros((d_model, ov))
        self.W_O = np.zeros((ov, d_model))


def head_weights(op: HeadOp, layout: Layout, r_bos: np.ndarray) -> HeadWeights:
    """Unscaled Q/K (scores in units of S) and V/O of one head; BOS rows cancel ``r_bos``."""
    d = layout.d_model
    plans = []
    qk = 0
    for b in op.blocks:
        nq, nk = b.matrix.shape
        use_query_basis = nq <= nk
        width = nq if use_query_basis else nk
        if b.quad is not None:
            width = 2  # [q - c, 1] · [2(v - c), -(v - c)^2] / d2
        plans.append((b, use_query_basis, qk))
        qk += width
    c_bos, c_self = qk, qk + 1
    qk += 2
    target_fid = op.target
    tf = layout.features[target_fid]
    ov = tf.size if tf.encoding == "categorical" else 1
    hw = HeadWeights(qk, ov, d)
    for b, use_q, off in plans:
        qd, kd = layout.onehot_dims(b.query), layout.onehot_dims(b.key)
        if b.quad is not None:
            kv, c, inv_d2 = b.quad
            v = np.asarray(kv, dtype=np.float64) - c
            hw.W_Q[qd[0], off] = 1.0
            hw.W_Q[0, off] = -c
            hw.W_Q[0, off + 1] = 1.0
            hw.W_K[kd, off] = 2.0 * v * inv_d2
            hw.W_K[kd, off + 1] = -(v * v) * inv_d2
            continue
        m = b.matrix.astype(np.float64)
        if use_q:
            hw.W_Q[qd, off + np.arange(len(qd))] = 1.0
            hw.W_K[np.ix_(kd, off + np.arange(len(qd)))] = m.T
        else:
            hw.W_Q[np.ix_(qd, off + np.arange(len(kd)))] = m
            hw.W_K[kd, off + np.arange(len(kd))] = 1.0
    m_blocks = len(op.blocks)
    bos_score = m_blocks - 0.5 if op.bos == "default" else float(m_blocks)
    if op.bos_score is not None:
        bos_score = op.bos_score
    hw.W_Q[0, c_bos] = 1.0  # every query (the `one` dimension) scores the BOS key
    # Value / output.
    if op.kind in ("width", "length"):
        bos_value = np.zeros(ov)
        if op.selected_mass:
            hw.W_V[0, 0] = 1.0  # 1 at every key (the `one` dimension), 0 at BOS (its row below)
        else:
            bos_value[0] = 1.0
        hw.W_O[0, layout.dim(target_fid)] = 1.0
    elif tf.encoding == "categorical":
        vf = layout.features[op.value]  # type: ignore[index]
        dims = layout.onehot_dims(op.value)  # type: ignore[arg-type]
        cols = np.array(op.value_weights, dtype=int)
        keep = cols >= 0  # values never selected (-1) write nothing
        hw.W_V[np.asarray(dims)[keep], cols[keep]] = 1.0
        bos_value = np.zeros(ov)
        if int(op.default) >= 0:
            bos_value[int(op.default)] = 1.0
        hw.W_O[np.arange(ov), layout.onehot_dims(target_fid)] = 1.0
        del vf
    else:
        dims = layout.onehot_dims(op.value)  # type: ignore[arg-type]
        hw.W_V[dims, 0] = np.array(op.value_weights, dtype=np.float64)
        bos_value = np.array([float(op.default)])
        hw.W_O[0, layout.dim(target_fid)] = 1.0
    # BOS rows: cancel what the BOS residual holds, then set the designed BOS key / query / value.
    rb = r_bos.copy()
    rb[1] = 0.0
    k_target = np.zeros(qk)
    k_target[c_bos] = bos_score
    k_target[c_self] = 2.0 * m_blocks + 2.0
    q_target = np.zeros(qk)
    q_target[c_self] = 1.0
    hw.W_K[1] = k_target - rb @ hw.W_K
    hw.W_Q[1] = q_target - rb @ hw.W_Q
    hw.W_V[1] = bos_value - rb @ hw.W_V
    return hw


def shared_head_weights(ops: list[HeadOp], layout: Layout, r_bos: np.ndarray) -> HeadWeights:
    """One head computing several aggregates with the same attention pattern (``schedule.
    shared_heads``): the first op's Q/K, and each op's V/O columns side by side."""
    parts = [head_weights(op, layout, r_bos) for op in ops]
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    for p in parts[1:]:
        assert np.array_equal(p.W_Q, first.W_Q) and np.array_equal(p.W_K, first.W_K)
    hw = HeadWeights(first.W_Q.shape[1], sum(p.W_V.shape[1] for p in parts), layout.d_model)
    hw.W_Q, hw.W_K = first.W_Q, first.W_K
    hw.W_V = np.concatenate([p.W_V for p in parts], axis=1)
    hw.W_O = np.concatenate([p.W_O for p in parts], axis=0)
    return hw


class MLPWeights:
    """The hidden units of one MLP layer, in blocks: a block holds u units that read (and write)
    the same number of residual dimensions, so a step MLP's thousands of units are a few arrays
    (``assemble`` scatters them all at once)."""

    def __init__(self) -> None:
        self.w_in: list[tuple[np.ndarray, np.ndarray]] = []  # per block: dims [u, k] and weights [u, k]
        self.b_in: list[np.ndarray] = []  # per block: [u]
        self.w_out: list[tuple[np.ndarray, np.ndarray]] = []  # per block: dims [u, k'] and weights [u, k']
        self.b_out: dict[int, float] = {}
        self.n_units = 0
        # some units are step pairs along a number: ``assemble`` then keeps this MLP in float64
        # inside a float32 model (see ``_steps``)
        self.wide = False

    def unit(self, dims: np.ndarray, weights: np.ndarray, bias: float,
             out_dims: np.ndarray, out_w: np.ndarray) -> None:
        dims, out_dims = np.asarray(dims, dtype=int), np.asarray(out_dims, dtype=int)
        weights = np.broadcast_to(np.asarray(weights, dtype=np.float64), dims.shape)
        out_w = np.broadcast_to(np.asarray(out_w, dtype=np.float64), out_dims.shape)
        self.units(dims[None, :], weights[None, :], np.array([float(bias)]), out_dims[None, :],
                   out_w[None, :])

    def units(self, dims: np.ndarray, weights: np.ndarray, biases: np.ndarray,
              out_dims: np.ndarray, out_w: np.ndarray) -> None:
        """Append ``len(biases)`` units; row i of each 2-D array belongs to unit i."""
        self.w_in.append((dims, weights))
        self.b_in.append(np.asarray(biases, dtype=np.float64))
        self.w_out.append((out_dims, out_w))
        self.n_units += len(biases)

    def bias(self, dims: np.ndarray, w: np.ndarray) -> None:
        for d_, x in zip(np.atleast_1d(dims), np.atleast_1d(w), strict=False):
            self.b_out[int(d_)] = self.b_out.get(int(d_), 0.0) + float(x)


def _row_key(r: tuple[tuple, Any]) -> tuple:
    return tuple(value_key(a) for a in r[0])


def _has_nan(key: tuple) -> bool:
    """Whether a ``value_key`` holds a NaN (then keys have no consistent order to rank)."""
    if key[0] == 0:
        return key[1] != key[1]
    return key[0] == 3 and any(_has_nan(k) for k in key[1])


_SCALARS = {str, int, float, bool, type(None)}


def _column_ranks(col: tuple) -> tuple[np.ndarray, int] | None:
    """Each entry's rank among the column's distinct ``value_key``s (equal keys, equal ranks) and
    the number of ranks; None when a key holds a NaN.  ``value_key`` runs once per distinct value:
    scalars are told apart by (type, value), which keeps 1, 1.0 and True apart; tuples (where (1,)
    and (True,) would collide) by their value_key itself."""
    if set(map(type, col)) <= _SCALARS:
        cks = list(zip(map(type, col), col, strict=True))
        key_of = {ck: value_key(ck[1]) for ck in dict.fromkeys(cks)}
    else:
        cks = list(map(value_key, col))
        key_of = {ck: ck for ck in dict.fromkeys(cks)}
    distinct = sorted(set(key_of.values()))
    if any(_has_nan(k) for k in distinct):
        return None
    rank = {k: r for r, k in enumerate(distinct)}
    rank_of = {ck: rank[k] for ck, k in key_of.items()}
    return np.fromiter(map(rank_of.__getitem__, cks), dtype=np.int64, count=len(cks)), len(distinct)


def _sorted_rows(rows: list[tuple[tuple, Any]]) -> list[tuple[tuple, Any]]:
    """``sorted(rows, key=_row_key)``: the same order, from one rank per distinct value of each
    argument and a stable sort on the combined rank, instead of comparing tuples of key tuples
    (tens of thousands of rows in a step MLP)."""
    args = [r[0] for r in rows]
    if len(rows) < 64 or set(map(type, args)) != {tuple} or len(set(map(len, args))) != 1:
        return sorted(rows, key=_row_key)
    combined = np.zeros(len(rows), dtype=np.int64)
    scale = 1
    for col in reversed(list(zip(*args, strict=True))):  # least significant argument first
        got = _column_ranks(col)
        if got is None or scale * got[1] >= 1 << 62:
            return sorted(rows, key=_row_key)  # no consistent order to rank (or too many ranks)
        combined += scale * got[0]
        scale *= got[1]
    return [rows[i] for i in np.argsort(combined, kind="stable").tolist()]


class _Output:
    """How an MLP op writes its output: a one-hot entry per value, or one number (``override``: a
    number written into one value's dimension of a categorical output)."""

    def __init__(self, op: MLPOp, layout: Layout) -> None:
        self.layout, self.target = layout, op.target
        self.override = getattr(op, "override", None)
        self.categorical = layout.features[op.target].encoding == "categorical" and self.override is None

    def tdim(self) -> int:
        if self.override is not None:
            return self.layout.dim(self.target, self.override)
        return self.layout.dim(self.target)

    def enc(self, y: Any) -> tuple[np.ndarray, np.ndarray]:
        if self.categorical:
            return np.array([self.layout.dim(self.target, y)]), np.array([1.0])
        return np.array([self.tdim()]), np.array([float(y)])

    def steps(self, ys: list[Any], at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Output dims and weights [len(at), k] of the steps from ys[i] to ys[i + 1], i in ``at``:
        +1 / -1 on the two one-hot entries, or the difference of the two numbers."""
        idx = at.tolist()
        if self.categorical:
            # ``layout.dim`` of the target's values, its feature looked up once (not per step)
            start, index = self.layout.start[self.target], self.layout.index[self.target]
            dims = np.array([[start + index[_vk(ys[i + 1])], start + index[_vk(ys[i])]] for i in idx],
                            dtype=int).reshape(len(idx), 2)
            return dims, np.repeat(np.array([[1.0, -1.0]]), len(idx), axis=0)
        # the outputs on either side of each step only: the points far outnumber the steps
        before = np.array([float(ys[i]) for i in idx], dtype=np.float64)
        after = np.array([float(ys[i + 1]) for i in idx], dtype=np.float64)
        dims = np.full((len(idx), 1), self.tdim(), dtype=int)
        return dims, (after - before)[:, None]


def mlp_weights(op: MLPOp, layout: Layout, acc: MLPWeights, dtype: str) -> None:
    """Append the hidden units of ``op`` to ``acc``."""
    if getattr(op, "separable", None) is not None:
        separable_weights(op, layout, acc)
        return
    for part in getattr(op, "parts", None) or []:  # a priority output (``Lowering._priority``)
        mlp_weights(part, layout, acc, dtype)
    if getattr(op, "parts", None):
        return
    out = _Output(op, layout)
    ins = [layout.features[f] for f in op.inputs]
    num = [j for j, f in enumerate(ins) if f.encoding == "numerical"]
    cat = [j for j, f in enumerate(ins) if f.encoding == "categorical"]
    shared = getattr(op, "shared_steps", None)   # lowering found shared steps cheaper
    coef = getattr(shared, "coef", None)
    if shared is not None and coef is None and len(num) == 1 and cat and out.categorical:
        xs = np.array([float(v) for v in ins[num[0]].values], dtype=np.float64)
        _shared_step_units(op, layout, acc, out, cat, shared,
                           np.array([layout.dim(op.inputs[num[0]])], dtype=int), xs)
        return
    held: list = []

    def sorted_rows() -> list[tuple[tuple, Any]]:  # ``_sorted_rows`` once, where it is read
        if not held:
            held.append(_sorted_rows(op.rows))
        return held[0]

    if shared is not None and coef is not None and cat and out.categorical:
        # steps shared along z = coef · x (``numeric.shared_projected_steps``); z ranges over the
        # box of the inputs' values, and the groups it does not separate are stepped one by one
        vals = [np.array([float(v) for v in ins[j].values], dtype=np.float64) for j in num]
        lo = sum(float(np.min(c * v)) for c, v in zip(coef, vals, strict=True))
        hi = sum(float(np.max(c * v)) for c, v in zip(coef, vals, strict=True))
        _shared_step_units(op, layout, acc, out, cat, shared,
                           np.array([layout.dim(op.inputs[j]) for j in num], dtype=int),
                           np.array([lo, hi]), coef=np.asarray(coef, dtype=np.float64))
        rest = shared.rest
        rows = [r for r in sorted_rows() if tuple(r[0][j] for j in cat) in rest]
        if rows:
            _step_mlp(op, layout, acc, out, ins, num, cat, lambda: rows, dtype)
        return
    # (not where the lowering found these rows not affine: fitting them again would sort them)
    fit = affine(sorted_rows()) if len(num) >= 2 and not out.categorical and not cat and op.rows \
        and not getattr(op, "not_affine", False) else None
    if getattr(op, "linear", None) is not None:
        fit = (np.array(op.linear[0]), op.linear[1])  # type: ignore[attr-defined]
    if fit is not None:
        _affine_units(op, layout, acc, out, ins, num, fit)
    elif not num:
        _table_units(op, layout, acc, out, cat, sorted_rows())
    else:
        plan = getattr(op, "step_plan", None)   # (numerical positions, groups) from the lowering
        _step_mlp(op, layout, acc, out, ins, num, cat, sorted_rows, dtype,
                  plan[1] if plan is not None and plan[0] == num else None)


def _affine_units(op: MLPOp, layout: Layout, acc: MLPWeights, out: _Output, ins: list[Feature],
                  num: list[int], fit: tuple[np.ndarray, float]) -> None:
    """y = w·x + c of numerical inputs: one unit per input (shifted to be >= 0) and a bias."""
    w, c = fit
    total = c
    for j, wj in zip(num, w, strict=False):
        if wj == 0.0:
            continue
        xs = np.array([float(v) for v in ins[j].values])
        lo = float(np.min(wj * xs))
        acc.unit(np.array([layout.dim(op.inputs[j])]), np.array([wj]), -lo,
                 np.array([out.tdim()]), np.array([1.0]))
        total += lo
    acc.bias(np.array([out.tdim()]), np.array([total]))


def _table_units(op: MLPOp, layout: Layout, acc: MLPWeights, out: _Output, cat: list[int],
                 rows: list[tuple[tuple, Any]]) -> None:
    """Categorical inputs only: one unit ``ReLU(sum of the combination's one-hots - (k-1))`` per
    row (none for a numerical 0), as one block."""
    if not cat:
        for _, y in rows:
            if out.categorical or float(y) != 0.0:
                acc.bias(*out.enc(y))
        return
    keep = [(args, y) for args, y in rows if out.categorical or float(y) != 0.0]
    if not keep:
        return
    dim = layout.dim
    dims = np.array([[dim(op.inputs[j], args[j]) for j in cat] for args, _ in keep], dtype=int)
    if out.categorical:
        odims = np.array([[dim(op.target, y)] for _, y in keep], dtype=int)
        ow = np.ones((len(keep), 1))
    else:
        odims = np.full((len(keep), 1), out.tdim(), dtype=int)
        ow = np.array([[float(y)] for _, y in keep], dtype=np.float64)
    acc.units(dims, np.ones(dims.shape), np.full(len(keep), -(len(cat) - 1.0)), odims, ow)


def _step_mlp(op: MLPOp, layout: Layout, acc: MLPWeights, out: _Output, ins: list[Feature],
              num: list[int], cat: list[int], rows: Callable[[], list[tuple[tuple, Any]]], dtype: str,
              plan: list[StepGroup] | None = None) -> None:
    """Numerical inputs (plus categorical ones): per gate group, a constant unit and a step of two
    units wherever the output changes along the group's projection z = coef · x.  ``rows`` gives
    the op's rows in ``_sorted_rows``' order; ``plan``, where the lowering found the groups and
    their projections already (``numeric.step_groups``), is used instead of finding them again:
    each group's outputs along z do not depend on the order of its points (a projection keeps
    points with different outputs apart, so only points with the same output can tie)."""
    xs_all = [np.array([float(v) for v in ins[j].values], dtype=np.float64) for j in num]
    mags = [float(np.max(np.abs(x))) if len(x) else 0.0 for x in xs_all]
    ranges = [float(x.max() - x.min()) if len(x) else 0.0 for x in xs_all]
    xdims = np.array([layout.dim(op.inputs[j]) for j in num], dtype=int)
    one_number = len(num) == 1 and not cat and not out.categorical
    groups = group_points(rows(), num) if plan is None or one_number else None
    # A single numerical input with a numerical output that is affine: one unit.
    if groups is not None and one_number and len(groups) == 1:
        fit = affine([(x, y) for x, y in groups[()]])
        if fit is not None:
            w, c = float(fit[0][0]) if len(fit[0]) else 0.0, fit[1]
            lo = float(np.min(w * xs_all[0])) if len(xs_all[0]) else 0.0
            if w != 0.0:
                acc.unit(xdims, np.array([w]), -lo, np.array([out.tdim()]), np.array([1.0]))
            acc.bias(np.array([out.tdim()]), np.array([c + lo]))
            return


    def set_gate(sets: tuple[tuple, ...]) -> np.ndarray:
        """Dims whose sum is 1 when every categorical input holds a value of its set, else 0."""
        return np.array([layout.dim(op.inputs[j], v) for j, vs in zip(cat, sets, strict=True) for v in vs],
                        dtype=int)

    relative = [is_bos_weight(ins[j].id) for j in num]
    found = plan if plan is not None else _found_groups(groups or {}, mags, dtype, relative, op, num)
    for sets, coef, ys, at, z0, z1 in found:
        span = float(np.sum(np.abs(coef) * np.asarray(ranges)))
        # gate: 1 when every categorical input holds a value of its set, else <= 0 (merge_groups)
        gdims = set_gate(sets) if cat else np.zeros(0, dtype=int)
        if cat:
            if out.categorical or float(ys[0]) != 0.0:
                acc.unit(gdims, np.ones(len(gdims)), -(len(sets) - 1.0), *out.enc(ys[0]))
        else:
            acc.bias(*out.enc(ys[0]))
        if len(at):
            _steps(acc, out, z0, z1, ys, at, coef, span, xdims, gdims, len(cat))


def _found_groups(groups: dict, mags: list[float], dtype: str, relative: list[bool], op: MLPOp,
                  num: list[int]) -> Iterator[StepGroup]:
    """``numeric.step_groups`` for an op the lowering did not plan (a width decode may have no
    projection: then the plain one)."""
    for sets, pts in merge_groups(groups):
        coef = projection(pts, mags, dtype, relative)
        if coef is None:
            # Only a width decode gets here (lowering checked every other op): its input, BOS's
            # attention weight 1/(w+1), is a correctly rounded quotient of exact integers, far more
            # precise than the generic noise bound that ``projection`` assumes.
            assert len(num) == 1 and op.kind == "width_decode", op.id
            coef = np.ones(1)
        yield (sets, coef, *steps_along(coef, pts))


def _shared_step_units(op: MLPOp, layout: Layout, acc: MLPWeights, out: _Output, cat: list[int],
                       shared: SharedSteps, xdims: np.ndarray, xs: np.ndarray,
                       coef: np.ndarray | None = None) -> None:
    """The units of ``numeric.SharedSteps``: per combination a constant unit, and per event a
    step pair whose threshold each free value sets through its one-hot weight.

    pre = s·x + W[v] + big·(gate one-hots − gates) ± ½, with s = 2 / (the event's smallest gap),
    W[v] = −s·t_v rounded to a multiple of ½ (moving the threshold by at most gap/8, as in
    ``_steps``), and t_v beyond every x (2/s past the largest) for a free value without the event."""
    free_in = cat[shared.free]
    gates = [j for j in cat if j != free_in]
    free_values = list(layout.features[op.inputs[free_in]].values)
    free_dims = np.array([layout.dim(op.inputs[free_in], v) for v in free_values], dtype=int)
    lo, hi = float(xs.min()), float(xs.max())
    for rest, (members, events) in shared.partitions.items():
        gdims = np.array([layout.dim(op.inputs[j], v) for j, v in zip(gates, rest, strict=True)], dtype=int)
        for v, y0 in members.items():      # the output at the smallest x
            acc.unit(np.concatenate([[layout.dim(op.inputs[free_in], v)], gdims]),
                     np.ones(1 + len(gdims)), -float(len(gdims)), *out.enc(y0))
        for at in events.values():
            s = max(2.0 / gap for _, gap, _, _ in at.values())
            far = hi + 2.0 / s
            t = np.array([at[v][0] if v in at else far for v in free_values], dtype=np.float64)
            w_free = np.round(2.0 * (-s * t)) / 2.0
            big = float(np.ceil(s * (far - lo) + 2.0)) + 1.0 if len(gdims) else 0.0
            a, b = next(iter(at.values()))[2:]
            odims, ow = out.steps([a, b], np.array([0], dtype=np.intp))
            dims = np.concatenate([xdims, free_dims, gdims])
            slope = [s] if coef is None else s * coef   # x, or the projection of several numbers
            weights = np.concatenate([slope, w_free, np.full(len(gdims), big)])
            base = -big * len(gdims)
            acc.units(np.broadcast_to(dims, (2, len(dims))), np.broadcast_to(weights, (2, len(dims))),
                      np.array([base + 0.5, base - 0.5]), np.repeat(odims, 2, axis=0),
                      np.array([ow[0], -ow[0]]))
            acc.wide = True   # float32 would blur the pair (see ``_steps``)


def _steps(acc: MLPWeights, out: _Output, z0: np.ndarray, z1: np.ndarray, ys: list[Any], at: np.ndarray,
           coef: np.ndarray, span: float, xdims: np.ndarray, gdims: np.ndarray, n_cat: int) -> None:
    """The two units of each step from z0 to z1 (z just before and after the change from ys[i] to
    ys[i + 1], i in ``at``), as one block (unit pairs in step order).  Elementwise NumPy float64
    arithmetic, in the order the scalar formulas use it: the same weights as computing each step
    on its own.

    A saturated pair ReLU(p + ½) − ReLU(p − ½) is 1 only up to the rounding of p ± ½, about ulp(p),
    and p reaches slope × (distance to the threshold): 2·span/gap, often 10^2 to 10^4.  In float32
    that leaves 2^-17 to 2^-10 on one-hot entries, and an averaging head that reads them as key or
    query turns it into unequal weights: 1.3e-4 off a mean at max_len 16 from one number's steps
    (tests/test_regressions.py::test_mean_over_a_one_hot_stepped_from_one_number), 1 % from a
    two-number projection (known-bugs #9).  So ``assemble`` runs every MLP with step pairs in
    float64 inside a float32 model: the pairs are then exact to ~1e-13."""
    gap = z1 - z0
    t = (z0 + z1) / 2.0
    a = 2.0 / gap
    big = np.ceil(a * (span + gap)) + 1.0 if n_cat else np.zeros(len(at))
    # pre = a(z - t) ± 0.5 - big*(k - sum of the combo's one-hots), z = coef · x.
    # The base is rounded to a multiple of 1/2 (moving the ramp by at most gap/8): then
    # base ± 0.5 are exact in float32, so a saturated pair differs by exactly 1 instead of
    # 1 ± ulp(base) (ulp(1e5) = 2^-7 in float32 — enough to tilt an averaging head).
    base = np.round(2.0 * (-a * t - big * n_cat)) / 2.0
    dims = np.concatenate([xdims, gdims])
    gate_w = np.repeat(big[:, None], len(gdims), axis=1)  # big on every gate dim (1.0 * big)
    weights = np.concatenate([a[:, None] * coef[None, :], gate_w], axis=1)
    odims, ow = out.steps(ys, at)
    pair = np.repeat  # each step's two units are adjacent: (base + 1/2, +out), (base - 1/2, -out)
    acc.units(np.broadcast_to(dims, (2 * len(at), len(dims))), pair(weights, 2, axis=0),
              _interleaved(base + 0.5, base - 0.5), pair(odims, 2, axis=0), _interleaved(ow, -ow))
    acc.wide = True


def _interleaved(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rows a[0], b[0], a[1], b[1], …: ``np.stack([a, b], axis=1)`` with its two rows per entry
    made rows of their own (``reshape(2 * len(a), ...)``), without ``np.stack``'s checks (a few
    microseconds per call, twice per step MLP)."""
    out = np.empty((len(a), 2, *a.shape[1:]), dtype=np.result_type(a, b))
    out[:, 0], out[:, 1] = a, b
    return out.reshape(2 * len(a), *a.shape[1:])


def separable_weights(op: MLPOp, layout: Layout, acc: MLPWeights) -> None:
    """y = c + sum_j g_j(x_j) (``tables.separable``) into one numerical output dimension.

    * a categorical input: one unit ``ReLU(sum_v (g(v) - lo) * onehot_v)`` — exactly one one-hot
      entry is 1, so the pre-activation is g(v) - lo >= 0 and the ReLU passes it through;
    * a numerical input: one step (two units) per consecutive pair of its values where g changes,
      slope 2/gap, exact while x is within gap/4 of a listed value.

    Each step ramps *up from the low end* (0 below the threshold t, 1 above) or *down from the high
    end* (1 below, 0 above, plus the step's rise in the output bias), whichever keeps the
    pre-activations smaller: a saturated pair ReLU(p + 1/2) - ReLU(p - 1/2) is 1 only up to the
    float32 rounding of p (about ulp(p)), and p reaches slope * (distance from t to the far end of
    the values).  For a width decode the smallest gaps (1/((w+1)(w+2)), slope ~2N^2) lie at the
    low end of the BOS weights, so ramping down keeps p ~N instead of ~N^2."""
    parts, const = op.separable  # type: ignore[attr-defined]
    out = np.array([layout.dim(op.target)])
    bias = float(const)
    for fid, g in zip(op.inputs, parts, strict=True):
        f = layout.features[fid]
        if f.encoding == "categorical":
            vals = {vk: v for vk, (_, v) in g.items()}
            lo = min(vals.values())
            dims, ws = [], []
            for x in f.values:
                w = vals.get(value_key(x), lo) - lo  # a value no row holds cannot occur
                if w != 0.0:
                    dims.append(layout.dim(fid, x))
                    ws.append(w)
            if dims:
                acc.unit(np.array(dims), np.array(ws), 0.0, out, np.array([1.0]))
            bias += lo
            continue
        pts = sorted((float(a), v) for a, v in g.values())
        xdim = np.array([layout.dim(fid)])
        lo_x, hi_x = pts[0][0], pts[-1][0]
        bias += pts[0][1]
        for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
            if y1 == y0:
                continue
            acc.wide = True   # a step pair: float32 would blur it (see ``_steps``)
            gap = x1 - x0
            t = (x0 + x1) / 2.0
            a = 2.0 / gap
            d = y1 - y0
            if a * (hi_x - t) <= a * (t - lo_x):  # up: p = a(x - t)
                # base rounded to a multiple of 1/2 (moves t by at most gap/8): base ± 1/2 exact
                base = float(np.round(-2.0 * a * t)) / 2.0
                acc.unit(xdim, np.array([a]), base + 0.5, out, np.array([d]))
                acc.unit(xdim, np.array([a]), base - 0.5, out, np.array([-d]))
            else:  # down: p = a(t - x), contributes d * (1 - ramp)
                base = float(np.round(2.0 * a * t)) / 2.0
                acc.unit(xdim, np.array([-a]), base + 0.5, out, np.array([-d]))
                acc.unit(xdim, np.array([-a]), base - 0.5, out, np.array([d]))
                bias += d
    acc.bias(out, np.array([bias]))
