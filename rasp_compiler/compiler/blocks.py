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
* several numerical inputs: only affine functions (one unit per input).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rasp_compiler.compiler.lowering import ONE, Feature, HeadOp, MLPOp
from rasp_compiler.compiler.numeric import _same, merge_groups, projection
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
        from rasp_compiler.compiler.values import json_value, label
        for fid, f in self.features.items():
            labs = [f"{fid}:{label(v)}" for v in f.values] if f.encoding == "categorical" else [fid]
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


class MLPWeights:
    def __init__(self) -> None:
        self.rows: list[np.ndarray] = []  # per unit: (dims, weights) of W_in
        self.w_in: list[tuple[np.ndarray, np.ndarray]] = []
        self.b_in: list[float] = []
        self.w_out: list[tuple[np.ndarray, np.ndarray]] = []
        self.b_out: dict[int, float] = {}

    def unit(self, dims: np.ndarray, weights: np.ndarray, bias: float,
             out_dims: np.ndarray, out_w: np.ndarray) -> None:
        self.w_in.append((np.asarray(dims, dtype=int), np.asarray(weights, dtype=np.float64)))
        self.b_in.append(float(bias))
        self.w_out.append((np.asarray(out_dims, dtype=int), np.asarray(out_w, dtype=np.float64)))

    def bias(self, dims: np.ndarray, w: np.ndarray) -> None:
        for d_, x in zip(np.atleast_1d(dims), np.atleast_1d(w), strict=False):
            self.b_out[int(d_)] = self.b_out.get(int(d_), 0.0) + float(x)


def mlp_weights(op: MLPOp, layout: Layout, acc: MLPWeights, dtype: str) -> None:
    """Append the hidden units of ``op`` to ``acc``."""
    if getattr(op, "separable", None) is not None:
        separable_weights(op, layout, acc)
        return
    for part in getattr(op, "parts", None) or []:  # a priority output (``Lowering._priority``)
        mlp_weights(part, layout, acc, dtype)
    if getattr(op, "parts", None):
        return
    out_f = layout.features[op.target]
    # ``override``: a number written into one value's dimension of a categorical output
    override = getattr(op, "override", None)
    out_cat = out_f.encoding == "categorical" and override is None

    def tdim() -> int:
        return layout.dim(op.target, override) if override is not None else layout.dim(op.target)

    def enc(y: Any) -> tuple[np.ndarray, np.ndarray]:
        if out_cat:
            return np.array([layout.dim(op.target, y)]), np.array([1.0])
        return np.array([tdim()]), np.array([float(y)])

    def diff(y1: Any, y0: Any) -> tuple[np.ndarray, np.ndarray]:
        if out_cat:
            return (np.array([layout.dim(op.target, y1), layout.dim(op.target, y0)]), np.array([1.0, -1.0]))
        return np.array([tdim()]), np.array([float(y1) - float(y0)])

    ins = [layout.features[f] for f in op.inputs]
    num = [j for j, f in enumerate(ins) if f.encoding == "numerical"]
    cat = [j for j, f in enumerate(ins) if f.encoding == "categorical"]
    rows = sorted(op.rows, key=lambda r: tuple(value_key(a) for a in r[0]))
    fit = affine(rows) if len(num) >= 2 and not out_cat and not cat and rows else None
    if getattr(op, "linear", None) is not None:
        fit = (np.array(op.linear[0]), op.linear[1])  # type: ignore[attr-defined]
    if fit is not None:
        w, c = fit
        total = c
        for j, wj in zip(num, w, strict=False):
            if wj == 0.0:
                continue
            xs = np.array([float(v) for v in ins[j].values])
            lo = float(np.min(wj * xs))
            acc.unit(np.array([layout.dim(op.inputs[j])]), np.array([wj]), -lo,
                     np.array([tdim()]), np.array([1.0]))
            total += lo
        acc.bias(np.array([tdim()]), np.array([total]))
        return

    def set_gate(sets: tuple[tuple, ...]) -> tuple[np.ndarray, np.ndarray, float]:
        """1 when every categorical input holds a value of its set, else <= 0 (see merge_groups)."""
        dims = np.array([layout.dim(op.inputs[j], v) for j, vs in zip(cat, sets, strict=True) for v in vs],
                        dtype=int)
        return dims, np.ones(len(dims)), -(len(sets) - 1.0)

    def gate(combo: tuple) -> tuple[np.ndarray, np.ndarray, float]:
        dims = np.array([layout.dim(op.inputs[j], v) for j, v in zip(cat, combo, strict=False)], dtype=int)
        return dims, np.ones(len(dims)), -(len(dims) - 1.0)

    if not num:
        for args, y in rows:
            if not out_cat and float(y) == 0.0:
                continue
            combo = tuple(args[j] for j in cat)
            if not cat:
                acc.bias(*enc(y))
                continue
            dims, w, b = gate(combo)
            acc.unit(dims, w, b, *enc(y))
        return
    xs_all = [np.array([float(v) for v in ins[j].values], dtype=np.float64) for j in num]
    mags = [float(np.max(np.abs(x))) if len(x) else 0.0 for x in xs_all]
    ranges = [float(x.max() - x.min()) if len(x) else 0.0 for x in xs_all]
    xdims = np.array([layout.dim(op.inputs[j]) for j in num], dtype=int)
    groups: dict[tuple, list[tuple[tuple[float, ...], Any]]] = {}
    for args, y in rows:
        groups.setdefault(tuple(args[k] for k in cat), []).append((tuple(float(args[j]) for j in num), y))
    # A single numerical input with a numerical output that is affine: one unit.
    if len(num) == 1 and not cat and not out_cat and len(groups) == 1:
        fit = affine([(x, y) for x, y in groups[()]])
        if fit is not None:
            w, c = float(fit[0][0]) if len(fit[0]) else 0.0, fit[1]
            lo = float(np.min(w * xs_all[0])) if len(xs_all[0]) else 0.0
            if w != 0.0:
                acc.unit(xdims, np.array([w]), -lo, np.array([tdim()]), np.array([1.0]))
            acc.bias(np.array([tdim()]), np.array([c + lo]))
            return
    for sets, pts in merge_groups(groups):
        coef = projection(pts, mags, dtype)
        if coef is None:
            # Only a width decode gets here (lowering checked every other op): its input, BOS's
            # attention weight 1/(w+1), is a correctly rounded quotient of exact integers, far more
            # precise than the generic noise bound that ``projection`` assumes.
            assert len(num) == 1 and op.kind == "width_decode", op.id
            coef = np.ones(1)
        span = float(np.sum(np.abs(coef) * np.asarray(ranges)))
        zpts = sorted(((float(np.dot(coef, x)), y) for x, y in pts), key=lambda p: p[0])
        if cat:
            gdims, gw, gb = set_gate(sets)
            if out_cat or float(zpts[0][1]) != 0.0:
                acc.unit(gdims, gw, gb, *enc(zpts[0][1]))
        else:
            gdims, gw, gb = np.zeros(0, dtype=int), np.zeros(0), 0.0
            acc.bias(*enc(zpts[0][1]))
        for (z0, y0), (z1, y1) in zip(zpts, zpts[1:], strict=False):
            if _same(y1, y0):
                continue
            gap = z1 - z0
            t = (z0 + z1) / 2.0
            a = 2.0 / gap
            big = float(np.ceil(a * (span + gap))) + 1.0 if cat else 0.0
            # pre = a(z - t) ± 0.5 - big*(k - sum of the combo's one-hots), z = coef · x.
            # The base is rounded to a multiple of 1/2 (moving the ramp by at most gap/8): then
            # base ± 0.5 are exact in float32, so a saturated pair differs by exactly 1 instead of
            # 1 ± ulp(base) (ulp(1e5) = 2^-7 in float32 — enough to tilt an averaging head).
            dims = np.concatenate([xdims, gdims])
            weights = np.concatenate([a * coef, gw * big])
            base = float(np.round(2.0 * (-a * t - big * len(cat)))) / 2.0
            odims, ow = diff(y1, y0)
            acc.unit(dims, weights, base + 0.5, odims, ow)
            acc.unit(dims, weights, base - 0.5, odims, -ow)


def separable_weights(op: MLPOp, layout: Layout, acc: MLPWeights) -> None:
    """y = c + sum_j g_j(x_j) (``lowering.separable``) into one numerical output dimension.

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
