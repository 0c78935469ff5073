"""Assembly: layout + schedule + blocks → the weight tensors and the config of a model.

Layers are built in order while the residual of the BOS-only input is simulated alongside (in
float64), because each head cancels what the BOS position holds (see ``blocks``).
"""

from __future__ import annotations

import math
from typing import Any

import networkx as nx
import numpy as np

from rasp_compiler.compiler.analysis import Analysis, convert_token
from rasp_compiler.compiler.artifact import FORMAT, as_arrays
from rasp_compiler.compiler.blocks import Layout, MLPWeights, mlp_weights, shared_head_weights
from rasp_compiler.compiler.lowering import EmbedOp, Feature, HeadOp, Lowering, MLPOp
from rasp_compiler.compiler.notes import MORE_RAISING, NO_ANSWER, PAST_EXACT_INTEGERS
from rasp_compiler.compiler.schedule import Schedule
from rasp_compiler.compiler.values import json_value
from rasp_compiler.graph.nodes import Aggregate, Map, SequenceMap, Tokens
from rasp_compiler.graph.semantics import OperatorError

# Score gap (in nats) between an attended and a not-attended key: exp(-gap) underflows to exactly
# 0 in the dtype (smallest float32 subnormal ≈ exp(-103.3), float64 ≈ exp(-744.4)), so hard
# attention is exact at every length, not merely close.
GAP = {"float32": 120.0, "float64": 800.0}
# Extra nats for heads that average: e^-18 ≈ 1.5e-8 (float32), e^-37 ≈ 8.5e-17 (float64).
MEAN_GAP = {"float32": 18.0, "float64": 37.0}
LOGIT_SCALE = 10.0
DTYPES = ("float32", "float64")


def _src(pos: Any) -> str | None:
    return f"{pos.file}:{pos.line}" if pos is not None else None


def _text(pos: Any) -> str | None:
    return pos.text if pos is not None and pos.text else None


def _context(pos: Any) -> str | None:
    return getattr(pos, "context", None) or None


def _put(row: np.ndarray, layout: Layout, f: Any, value: Any) -> None:
    if f.encoding == "categorical":
        row[layout.dim(f.id, value)] = 1.0
    else:
        row[layout.dim(f.id)] = float(value)


def _scatter_units(shape: tuple[int, int], blocks: list[tuple[np.ndarray, np.ndarray]],
                   unit_axis: int) -> np.ndarray:
    """A zero matrix of ``shape`` plus every unit's (dims, weights) in its column (``unit_axis`` 1)
    or row (0), units numbered in block order.  ``np.bincount`` adds the weights into a zeroed
    array one by one in input order, as ``np.add.at`` into ``np.zeros`` does (the same bytes,
    repeated entries included), and builds the matrix in the same pass."""
    n_dims, n_units = (shape[0], shape[1]) if unit_axis == 1 else (shape[1], shape[0])
    flat_dims, flat_units, flat_w = [], [], []
    start = 0
    for dims, w in blocks:
        u, k = dims.shape
        flat_dims.append(dims.ravel())
        flat_units.append(np.repeat(np.arange(start, start + u), k))
        flat_w.append(w.ravel())
        start += u
    if not blocks:
        return np.zeros(shape)
    dims_ = np.concatenate(flat_dims).astype(np.intp, copy=False)
    units = np.concatenate(flat_units).astype(np.intp, copy=False)
    w_ = np.concatenate(flat_w).astype(np.float64, copy=False)
    index = dims_ * n_units + units if unit_axis == 1 else units * n_dims + dims_
    return np.bincount(index, weights=w_, minlength=n_dims * n_units).reshape(shape)


def _head_plan(an: Analysis, ops: list[HeadOp], h: int) -> dict[str, Any]:
    """The plan entry of head ``h``: what it computes and from which source line.  A head shared
    by several aggregates names the first in ``node`` / ``source`` and lists all in ``nodes``."""
    places = []
    for op in ops:
        node = an.node(op.node) if op.node in an.graph else None
        places.append(node.pos if node else op.pos)
    first = ops[0]
    entry: dict[str, Any] = {
        "head": h, "kind": first.kind, "node": first.node, "writes": ", ".join(op.target for op in ops),
        "blocks": [{"query": b.query, "key": b.key, "shape": list(b.matrix.shape)} for b in first.blocks],
        "value": ", ".join(str(op.value) for op in ops) if len(ops) > 1 else first.value,
        "source": _src(places[0]), "text": _text(places[0])}
    node = an.node(first.node) if first.node in an.graph else None
    sel = node.inputs[0] if node is not None and node.inputs else None
    if sel is not None and (sel not in an.graph or not an.node(sel).is_selector):
        sel = None
    if sel is not None:
        # the selector's own text, kept here so that pictures of a saved model never read a
        # source file that may have changed since
        entry["selector"] = _text(an.node(sel).pos) or sel
    context = _context(places[0]) or (_context(an.node(sel).pos) if sel is not None else None)
    if context:
        # which call of a function (and which pass of a loop) made it: heads made by one line of a
        # function body share their text and selector, e.g. `entry_at(t * k + m), m = 0`
        entry["context"] = context
    if len(ops) > 1:
        entry["nodes"] = [op.node for op in ops]
        entry["sources"] = [_src(p) for p in places]
    return entry


def _single_key_is_integer(an: Analysis, plan: list[dict[str, Any]]) -> bool:
    """Whether the output is a numerical aggregate, computed by a head of its own, whose value
    s-op and default are ints: where it selects at most one key the interpreter's answer is an int
    (that key's value, or the default), and a mean of several keys is a float, even one of equal
    ints (docs/known-bugs.md #19).  The runtime then types each position by the keys the head
    read, whether or not every value of the output's set is an int (``integer``)."""
    node = an.node(an.program.output)
    if not isinstance(node, Aggregate) or type(node.default) is not int:
        return False
    values = an.info[node.inputs[1]].values if node.inputs[1] in an.info else None
    if not values or not all(type(v) is int for v in values):
        return False
    return any(h["kind"] == "aggregate" and node.id in (h.get("nodes") or [h["node"]])
               for lp in plan for h in lp["heads"])


# The most dense weights one model may have (about 2 GiB while it is built in float64): beyond it
# compilation stops with the s-ops to blame instead of exhausting the machine's memory.
MAX_PARAMS = 1 << 28
# A one-hot this large is named as the cause when a model is too big; below it, the program is.
LARGE_ONE_HOT = 256


def _large_hint(an: Analysis, largest: list[Feature]) -> str:
    """What to change when one-hot encodings make the model too large (``largest``, the largest
    first): it depends on why the s-op has so many values."""
    feature = largest[0]
    if feature.kind == "tuple":
        return ("a selector that combines several s-ops with `or` needs a one-hot over their joint "
                "values: compare fewer s-ops at once, give them fewer possible values, or use a "
                "smaller --max-len")
    for f in largest:  # a number that needs no one-hot at all, if its readers take numbers
        # (not the output: the compiler tries it as a number itself, ``compiler.plans``)
        node = an.program.node(f.id) if f.id in an.graph and f.id != an.program.output else None
        if isinstance(node, (Map, SequenceMap)) and node.encoding is None and f.id in an.info \
                and an.info[f.id].values and all(type(v) in (int, float) for v in an.info[f.id].values) \
                and any(an.info[i].encoding == "numerical" for i in node.inputs):
            return (f"{an.describe(f.id)} is a number computed from numerical s-ops: written "
                    f"numerical(...), it takes one dimension instead of a one-hot of its "
                    f"{len(an.info[f.id].values):,} values, if what reads it can take a number (an "
                    "aggregate, a sum, a comparison, the output)")
    sid = feature.id.split(":")[0]
    upstream = nx.ancestors(an.graph, sid) | {sid} if sid in an.graph else set()
    means = [u for u in upstream
             if isinstance(an.program.node(u), Aggregate) and u in an.info
             and an.info[u].encoding == "numerical" and len(an.info[u].values) > 1
             and not an.at_most_one(an.program.node(u).inputs[0])]
    if means:
        return (f"{', '.join(sorted(means)[:3])} may average several keys, so it holds one value "
                "per possible mean, and whatever reads it needs a one-hot over them. If the selector "
                "picks at most one key, let the compiler see it (select against indices, or make "
                "the keys unique with the position); otherwise use a smaller --max-len or vocabulary")
    return ("a map or a selector that reads it needs a one-hot over all its values: give it fewer "
            "possible values (a smaller vocabulary or --max-len), or split the computation")


def _check_size(an: Analysis, low: Lowering, sched: Schedule, layout: Layout) -> None:
    d = layout.d_model

    def estimate(units_of) -> int:
        # the embeddings and the unembedding: at max_len 2,048 they were the 25M weights that let
        # a 277M-weight model past the guard
        out_f = low.features[low.output]
        outputs = out_f.size if out_f.encoding == "categorical" else 1
        total = d * (len(an.vocab) + 2 + an.max_len + 1 + outputs)
        for li in range(sched.n_layers):
            widths = [sum(min(b.matrix.shape) for b in low.ops[h[0]].blocks) + 2  # type: ignore[union-attr]
                      for h in sched.heads[li]]
            total += 4 * len(widths) * d * max(widths, default=0)
            total += 2 * d * sum(units_of(low.ops[m]) for m in sched.mlps[li])
        return total

    def rows_bound(op) -> int:   # at most two units per table row: cheap, and an upper bound
        sep = getattr(op, "separable", None)
        if sep is not None:  # one unit per categorical part, a step pair per change of a numerical one
            units = 0
            for fid, g in zip(op.inputs, sep[0], strict=False):
                if layout.features[fid].encoding == "categorical":
                    units += 1
                else:
                    ys = [y for _, y in sorted((float(x), y) for x, y in g.values())]
                    units += 2 * sum(a != b for a, b in zip(ys, ys[1:], strict=False))
            return units + 1
        return 2 * max(len(op.rows), 1)

    def counted(op) -> int:
        """The step MLP's own count where it reads a number: a 1-D table of 30,000 means (a
        running balance at max length 256) needs a few steps, not a unit per row."""
        special = any(getattr(op, a, None) for a in ("separable", "parts", "linear"))
        if special or not any(an.info[f].encoding == "numerical" for f in op.inputs if f in an.info):
            return rows_bound(op)
        out_numeric = layout.features[op.target].encoding == "numerical"
        units = low.mlp_units(op.inputs, op.rows, out_numeric)
        return rows_bound(op) if units is None else units + 1

    total = estimate(rows_bound)
    if total > MAX_PARAMS:
        total = estimate(counted)
    if total <= MAX_PARAMS:
        return
    big = sorted(low.features.values(), key=lambda f: -f.size)[:3]
    listing = ", ".join(f"{f.id} ({f.size:,} values)" for f in big)
    heads = sum(len(h) for h in sched.heads)
    shape = f"{sched.n_layers} layers, {heads} heads, residual width {d:,}"
    # a map of the index and the length past the analysis's tabulation cap: the usual cause
    pairs = [(sid, h) for sid in sorted(low.features) if (h := an.pair_table_hint(sid))]
    if pairs:
        raise an.error(pairs[0][0], f"the model would need about {total:,} weights ({shape}); the "
                       f"largest one-hot encodings are {listing}", hint=pairs[0][1], too_large=True)
    if big and big[0].size >= LARGE_ONE_HOT:
        raise an.error(big[0].id, f"the model would need about {total:,} weights ({shape}); "
                       f"the largest one-hot encodings are {listing}",
                       hint=_large_hint(an, big), too_large=True)
    # no s-op stands out: the program itself is large (many layers of many features)
    raise an.error(an.program.output, f"the model would need about {total:,} weights ({shape}); no "
                   f"single s-op dominates (the largest one-hot encodings are {listing})",
                   hint="compile a part of the program with --output NAME, or use a smaller --max-len "
                        "or vocabulary", too_large=True)


def assemble(an: Analysis, low: Lowering, sched: Schedule, *, dtype: str, causal: bool) -> tuple[dict, dict]:
    feats = sorted(low.features.values(), key=lambda f: (sched.slot[f.id], f.id))
    layout = Layout(feats)
    _check_size(an, low, sched, layout)
    d = layout.d_model
    vocab = an.vocab
    tensors: dict[str, np.ndarray] = {}

    # ---------------------------------------------------------------- embeddings
    tok = np.zeros((len(vocab) + 2, d))
    pos = np.zeros((an.max_len + 1, d))
    tok[: len(vocab) + 1, 0] = 1.0  # `one` at every real token and at BOS (not at PAD)
    tok[len(vocab), 1] = 1.0  # `bos`
    for f in feats:
        op = low.ops[f.id]
        if not isinstance(op, EmbedOp):
            continue
        if op.kind == "token":
            for t, v in enumerate(vocab):
                val = convert_token(v, op.token_type)
                if f.encoding == "categorical":
                    tok[t, layout.dim(f.id, val)] = 1.0
                else:
                    tok[t, layout.dim(f.id)] = float(val)
        elif op.kind == "token_fn":
            for t, v in enumerate(vocab):
                key = convert_token(v, op.token_type)
                if key in op.value:
                    _put(tok[t], layout, f, op.value[key])
        elif op.kind == "index_fn":
            for p in range(1, an.max_len + 1):
                if p - 1 in op.value:
                    _put(pos[p], layout, f, op.value[p - 1])
        elif op.kind == "index":
            for p in range(1, an.max_len + 1):
                if f.encoding == "categorical":
                    if p - 1 < len(f.values):
                        pos[p, layout.dim(f.id, p - 1)] = 1.0
                else:
                    pos[p, layout.dim(f.id)] = float(p - 1)
        else:
            col = layout.dim(f.id, op.value) if f.encoding == "categorical" else layout.dim(f.id)
            pos[1:, col] = 1.0 if f.encoding == "categorical" else float(op.value)
    tensors["embed.token"], tensors["embed.pos"] = tok, pos
    r_bos = tok[len(vocab)] + pos[0]

    # ---------------------------------------------------------------- layers
    gap = GAP[dtype]
    layers_cfg, plan = [], []
    for li in range(sched.n_layers):
        groups = sched.heads[li]
        hws = [shared_head_weights([low.ops[h] for h in g], layout, r_bos)  # type: ignore[misc]
               for g in groups]
        d_head = max([max(hw.W_Q.shape[1], hw.W_V.shape[1]) for hw in hws], default=0)
        exact = [any(b.quad_exact for b in low.ops[g[0]].blocks) for g in groups]  # type: ignore[union-attr]
        if any(exact):  # sqrt(d_head) a power of 2: the exact quadratic scores stay exact
            d_head = 4 ** math.ceil(math.log(d_head, 4) - 1e-9)
        n_heads = len(hws)
        layer_plan: dict[str, Any] = {"layer": li, "heads": [], "mlp": None}
        if n_heads:
            wq = np.zeros((n_heads, d, d_head))
            wk, wv = np.zeros_like(wq), np.zeros_like(wq)
            wo = np.zeros((n_heads, d_head, d))
            out_bos = np.zeros(d)
            for h, (group, hw) in enumerate(zip(groups, hws, strict=True)):
                op: HeadOp = low.ops[group[0]]  # type: ignore[assignment]
                # Hard heads (at most one key, or BOS) get the underflow gap: their off-target
                # weights are exactly 0.  Heads that average several keys (means, widths) get the
                # smallest gap that makes off-target weight negligible (N·e^-gap below the dtype's
                # resolution), because every unit of gap also multiplies the rounding noise of the
                # one-hot key/query values into unequal weights among the selected keys.
                g = min(gap, math.log(an.max_len + 1) + MEAN_GAP[dtype]) if op.mean else gap
                if exact[h]:  # a power of two (``Lowering._exact_quadratic``)
                    g = 2.0 ** math.ceil(math.log2(gap))
                scale = (g if op.bos == "always" else 2.0 * g) * math.sqrt(d_head)
                if op.bos_log:  # BOS key's score column (c_bos, see ``head_weights``): + bos_log nats
                    hw.W_K[1, hw.W_Q.shape[1] - 2] += op.bos_log / (scale / math.sqrt(d_head))
                wq[h, :, : hw.W_Q.shape[1]] = hw.W_Q * scale
                wk[h, :, : hw.W_K.shape[1]] = hw.W_K
                wv[h, :, : hw.W_V.shape[1]] = hw.W_V
                wo[h, : hw.W_O.shape[0], :] = hw.W_O
                out_bos += (r_bos @ hw.W_V) @ hw.W_O
                layer_plan["heads"].append(_head_plan(an, [low.ops[f] for f in group], h))  # type: ignore[misc]
            tensors[f"layers.{li}.attn.W_Q"] = wq
            tensors[f"layers.{li}.attn.W_K"] = wk
            tensors[f"layers.{li}.attn.W_V"] = wv
            tensors[f"layers.{li}.attn.W_O"] = wo
            r_bos = r_bos + out_bos
        acc = MLPWeights()
        mlp_ops = []
        for mid in sched.mlps[li]:
            op_m: MLPOp = low.ops[mid]  # type: ignore[assignment]
            before = acc.n_units
            mlp_weights(op_m, layout, acc, dtype)
            node = an.node(op_m.node) if op_m.node in an.graph else None
            mlp_ops.append({"kind": op_m.kind, "node": op_m.node, "writes": op_m.target,
                            "inputs": list(op_m.inputs), "units": [before, acc.n_units],
                            "source": _src(node.pos if node else op_m.pos),
                            "text": _text(node.pos if node else op_m.pos)})
        m = acc.n_units
        if m or acc.b_out:
            m = max(m, 1)
            w_in = _scatter_units((d, m), acc.w_in, unit_axis=1)
            w_out = _scatter_units((m, d), acc.w_out, unit_axis=0)
            b_in = np.zeros(m)
            if acc.b_in:
                b_in[: acc.n_units] = np.concatenate(acc.b_in)
            b_out = np.zeros(d)
            for k, v in acc.b_out.items():
                b_out[k] += v
            tensors[f"layers.{li}.mlp.W_in"] = w_in
            tensors[f"layers.{li}.mlp.b_in"] = b_in
            tensors[f"layers.{li}.mlp.W_out"] = w_out
            tensors[f"layers.{li}.mlp.b_out"] = b_out
            r_bos = r_bos + np.maximum(r_bos @ w_in + b_in, 0.0) @ w_out + b_out
            layer_plan["mlp"] = {"hidden": m, "ops": mlp_ops}
        else:
            m = 0
        layers_cfg.append({"n_heads": n_heads, "d_head": d_head, "d_mlp": m})
        if m and acc.wide and dtype == "float32":
            layers_cfg[-1]["mlp_dtype"] = "float64"   # step pairs: see blocks._steps
        plan.append(layer_plan)

    # ---------------------------------------------------------------- unembedding
    out_f = low.features[low.output]
    if out_f.encoding == "categorical":
        w_u = np.zeros((d, len(out_f.values)))
        w_u[layout.onehot_dims(out_f.id), np.arange(len(out_f.values))] = LOGIT_SCALE
        out_cfg = {"encoding": "categorical", "values": [json_value(v) for v in out_f.values],
                   "logit_scale": LOGIT_SCALE}
    else:
        w_u = np.zeros((d, 1))
        w_u[layout.dim(out_f.id), 0] = 1.0
        integer = bool(out_f.values) and all(isinstance(v, int) for v in out_f.values)
        out_cfg = {"encoding": "numerical", "integer": integer}
        if _single_key_is_integer(an, plan):
            out_cfg["integer_single_key"] = True
    out_cfg.update({"node": an.program.output, "feature": out_f.id})
    tensors["unembed.W_U"], tensors["unembed.b_U"] = w_u, np.zeros(w_u.shape[1])

    def tensor_dtype(name: str) -> str:
        if name.startswith("layers.") and ".mlp." in name:
            return layers_cfg[int(name.split(".")[1])].get("mlp_dtype", dtype)
        return dtype

    out_tensors = as_arrays(tensors, tensor_dtype)
    notes = []
    for sid in sorted(an.info):
        for note in an.info[sid].notes:
            if note in ("opaque", "affine", "independent"):  # the analysis's markers
                continue
            if note == "unbounded":
                values = an.info[sid].values
                note = ("a mean with too many possible values to list, kept as a number in "
                        f"[{min(values):g}, {max(values):g}]") if values else "a mean of unlisted values"
            notes.append(f"{sid}: {note}")
    if out_cfg["encoding"] == "numerical" and out_f.values:
        exact = 2 ** 24 if dtype == "float32" else 2 ** 53  # the largest run of exact integers
        largest = max(abs(float(v)) for v in out_f.values if isinstance(v, (int, float)))
        if largest > exact:
            # not "exact to the tolerance": a mean over such values leaks their rounding into the
            # small outputs of other positions (10 ^ indices averaged: 1.00089 for 1 in float32)
            notes.append(f"the numerical output reaches {largest:.6g}, past {exact:,} where {dtype} "
                         f"{PAST_EXACT_INTEGERS}: outputs may differ from the interpreter by more "
                         "than the numerical tolerance, small ones too where a mean takes in large "
                         "values (rasp check measures it; compile with --dtype float64, or keep the "
                         "output categorical)")
    undefined = an.undefined()
    raising = sorted(set(an.failures) - {sid for sid, _ in undefined.values()})  # not noted below
    for sid in raising[:3]:
        # the function raised on values the analysis says it may receive: the interpreter raises on
        # any input that reaches them, and the model cannot tell such inputs from others
        args, err = an.failures[sid]
        if an.node(sid).is_selector:
            shown_args = f"key {args[0]!r} and query {args[1]!r}"
        else:
            shown_args = repr(args[0]) if len(args) == 1 else "(" + ", ".join(map(repr, args)) + ")"
        # an operator's own failure in the language's words; a user function's as Python raised it
        what = f"fails ({err})" if isinstance(err, OperatorError) else f"raises {type(err).__name__}: {err}"
        notes.append(f"{sid} {what} for {shown_args}: inputs that reach "
                     f"such values {NO_ANSWER} (the interpreter raises; the model's output there "
                     "is not checked)")
    if len(raising) > 3:
        notes.append(f"… and {len(raising) - 3} {MORE_RAISING}")
    if undefined:
        lengths = list(undefined)
        sid, i = undefined[lengths[0]]
        shown = ", ".join(map(str, lengths[:8])) + (", …" if len(lengths) > 8 else "")
        notes.append(f"inputs of length {shown} {NO_ANSWER}: {sid} has no value at position {i} "
                     f"of length {lengths[0]} (the interpreter raises there; so does the model)")
    config = {
        "format": FORMAT,
        "program": an.program.source_file,
        "vocab": [json_value(v) for v in vocab],
        "bos": "<BOS>", "pad": "<PAD>",
        "max_len": an.max_len,
        "fixed_length": an.fixed_length,
        "causal": causal,
        "dtype": dtype,
        "d_model": d,
        "n_layers": sched.n_layers,
        "layers": layers_cfg,
        "attention_scale": "1/sqrt(d_head)",
        "score_gap": gap,
        "residual": layout.labels(),
        "plan": plan,
        "critical_path": sched.critical_path(),
        "output": out_cfg,
        "notes": notes,
    }
    if undefined:  # only then: every other config stays byte-identical
        config["output"]["undefined"] = {str(n): [sid, i] for n, (sid, i) in undefined.items()}
    if any(isinstance(node, Tokens) and node.type == "value" for node in an.program.nodes()):
        # the program reads the input as given (tracr's tokens, tokens_asis): a number typed for a
        # vocabulary of strings is another value there, so the runtime must not read 1 as "1"
        config["tokens_as_given"] = True
    elif any(isinstance(node, Tokens) and node.type == "str" for node in an.program.nodes()) \
            and any(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vocab):
        # the program reads a vocabulary of numbers as strings: the input 3.0 is "3.0" there, not
        # the "3" of the token 3, so the runtime must not take a whole float for the int
        config["tokens_as_strings"] = True
    return config, out_tensors
