"""Assembly: ``compile_numeric`` runs the ``NumericCompiler`` and writes its plan as weights.

Features are laid out in slot order after the ``one`` and ``bos`` dimensions; heads with the same
score pattern are merged (one value column per target); each layer's heads and gated MLP become
the runtime's tensors (``W_Q``/``W_K``/``W_V``/``W_O``, ``W_in``/``W_gate``/``W_out``), and the
config records the plan, the residual layout and the error bounds (``bounds``).
"""

from __future__ import annotations

import math
from dataclasses import replace as dc_replace
from fractions import Fraction
from typing import Any

import numpy as np

from rasp_compiler.compiler.artifact import FORMAT, as_arrays
from rasp_compiler.compiler.real.bounds import _bound_note, node_errors
from rasp_compiler.compiler.real.core import NumericCompiler
from rasp_compiler.compiler.real.divisions import split_divisions
from rasp_compiler.compiler.real.limits import GRID_SLACK_ULPS, UNIT_ROUNDOFF
from rasp_compiler.compiler.real.specs import BOS, ONE, HeadSpec
from rasp_compiler.compiler.real.uses import feature_uses
from rasp_compiler.errors import CompileError
from rasp_compiler.graph.nodes import Program


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
            # located at the value's line (a softmax listing's `e = 2.718 ^ x;`), as other refusals are
            raise nc.error(nid, f"{{node}} can reach {max(abs(lo), abs(hi)):.3g}, too large to compute "
                                f"exactly in {nc.dtype} (products and attention scores of values above "
                                f"{limit:.3g} can overflow)",
                           hint="narrow --input-range" + (", or use --dtype float64"
                                                          if nc.dtype == "float32" else ""))


def compile_numeric(program: Program, input_range: tuple[float, float], max_len: int, *,
                    dtype: str, causal: bool, fixed_length: int | None,
                    input_grid: Fraction | None = None,
                    min_denominator: float | None = None) -> tuple[dict, dict]:
    """(config, tensors) of the numerical program, in the runtime's saved-model format.  With
    ``input_grid`` every input is a multiple of it (``grids``); integer tokens are on the grid 1."""
    program = split_divisions(program)
    nc = NumericCompiler(program, input_range, max_len, fixed_length=fixed_length, dtype=dtype,
                         causal=causal, input_grid=input_grid, min_denominator=min_denominator)
    out_id = program.output
    if out_id in nc.pos:
        raise CompileError(f"the output '{out_id}' does not depend on the input", program.source_file,
                           hint="compile it without --input-range")
    _check_magnitudes(nc, program)   # before the heads: an overflow is the first thing to say
    nc.need(out_id)
    bos_columns = _narrow_layers(nc)
    # layout: one, bos, token, then features in slot order; a positional feature no sublayer
    # reads (a narrow alternative not taken) gets no column
    order = sorted(nc.feats.values(), key=lambda f: (f.slot, f.kind != "token", f.id))
    d_head_max = _power_of_4(max([len(h.blocks) + len(h.data) + 2 for h in nc.heads] + [1]))
    positional = {f.id for f in order if f.kind == "positional"}
    uses = feature_uses(nc.heads, nc.mlps, d_head_max, positional)
    order = [f for f in order if f.id in uses or f.kind != "positional"]
    d = 2
    for f in order:
        f.start = d
        d += f.size
    n_layers = max((f.slot // 2 for f in order if f.slot >= 0), default=-1) + 1

    def dim(fid: str) -> int:
        return ONE if fid == "one" else nc.feats[fid].start

    def cols(fid: str) -> list[tuple[int, float]]:  # the columns a feature is read from
        return [(dim(fid), 1.0)]

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
        bos_cols, single = bos_columns[li] if li < len(bos_columns) else (2, set())
        hw = [_head_weights(h, cols, dim, d, r_bos, 0 if h.node in single else bos_cols) for h in heads]
        d_head = _power_of_4(max([max(w[0].shape[1], w[2].shape[1]) for w in hw], default=0))
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
                                    "source": _src(program, spec.node), "text": _text(program, spec.node),
                                    **_selector_and_context(program, spec.node)})
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
                    for c, k in cols(fid):
                        w_in[c, j] += w * k
                for fid, w in u.w_gate.items():
                    for c, k in cols(fid):
                        w_g[c, j] += w * k
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
    errors = node_errors(nc)
    guards = _guards(nc, program, errors)
    # the output, then one column per guarded denominator (the runtime flags an input there)
    w_u = np.zeros((d, 1 + len(guards)))
    w_u[dim(out_id), 0] = 1.0
    for g in guards:
        w_u[dim(g["feature"]), g["column"]] = 1.0
    tensors["unembed.W_U"], tensors["unembed.b_U"] = w_u, np.zeros(1 + len(guards))
    residual = [{"feature": name, "node": None, "start": k, "size": 1, "encoding": "constant",
                 "labels": [name]} for k, name in ((ONE, "one"), (BOS, "bos"))]
    for f in order:
        residual.append({"feature": f.id, "node": f.node, "start": f.start, "size": f.size,
                         "encoding": "positional" if f.kind == "positional" else "numerical",
                         "labels": f.labels})
    bounds = [r for r in nc.map_reports]
    out_abs, out_rel = errors.get(out_id, (0.0, 0.0))
    out_mag = max(abs(v) for v in nc.interval[out_id])
    total_bound = out_abs + out_rel * out_mag if out_rel else out_abs
    out_t = as_arrays(tensors, lambda name: dtype)
    notes = [_bound_note(r, dtype) for r in bounds if not r["exact"]]
    config = {
        "format": FORMAT, "program": program.source_file, "vocab": ["<number>"], "bos": "<BOS>",
        "pad": "<PAD>", "max_len": max_len, "fixed_length": fixed_length, "causal": causal, "dtype": dtype,
        "d_model": d, "n_layers": n_layers, "layers": layers_cfg, "attention_scale": "1/sqrt(d_head)",
        "score_gap": nc.gap, "residual": residual, "plan": plan, "critical_path": [],
        "output": _output_spec(nc, out_id),
        "input": _input_spec(nc),
        "numeric": {"maps": bounds, "output_interval": list(nc.interval[out_id]),
                    "approx_error_bound": total_bound,
                    "error_bound": {"absolute": out_abs, "relative": out_rel},
                    "largest_table": _largest(nc)},
        "notes": notes,
    }
    if guards:
        config["guards"] = guards
    return config, out_t


def _guards(nc: NumericCompiler, program: Program, errors: dict) -> list[dict[str, Any]]:
    """The denominators compiled on |x| >= EPS (``--min-denominator``): the model writes each to
    an extra unembedding column and the runtime flags an input where |x| < EPS there.  The
    reciprocal's knots start at EPS/2, so the guarantee needs x's own drift below EPS/4: then a
    flagged input has |x| < EPS + drift, and an unflagged one |x| >= 3 EPS / 4."""
    out = []
    for k, g in enumerate(nc.guards):
        den, eps = g["node"], g["eps"]
        a, r = errors.get(den, (0.0, 0.0))
        drift = a + r * eps + min(nc._delta_of(den), 64 * UNIT_ROUNDOFF[nc.dtype] *
                                  max(abs(v) for v in nc._interval_any(den)))
        if not drift < eps / 4:
            raise nc.error(g["reciprocal"], f"{{node}} divides by '{den}', which the model computes "
                           f"to within {drift:.3g}: too coarse to tell |{den}| >= {eps:g} from values "
                           "nearer 0", hint="give a larger --min-denominator")
        out.append({"column": k + 1, "min_abs": eps, "eps": eps, "node": den, "feature": nc.need(den),
                    "source": _src(program, g["reciprocal"]), "text": _text(program, g["reciprocal"])})
    return out


def _largest(nc: NumericCompiler) -> dict[str, Any]:
    node, rows = nc.largest_table()
    return {"node": node, "rows": rows if math.isfinite(rows) else None}


def _input_spec(nc: NumericCompiler) -> dict[str, Any]:
    """The input's range and, where the compiler relied on one, its grid: the runtime refuses an
    input off it (beyond GRID_SLACK_ULPS units of roundoff)."""
    spec: dict[str, Any] = {"kind": "numerical", "range": [nc.range[0], nc.range[1]]}
    if nc.token_grid is not None:
        spec["grid"] = float(nc.token_grid)
        spec["grid_slack"] = GRID_SLACK_ULPS * UNIT_ROUNDOFF[nc.dtype]
    return spec


def _output_spec(nc: NumericCompiler, out_id: str) -> dict[str, Any]:
    """A numerical output; an integer one (on the grid 1, its float drift under 1/4) is rounded by
    the runtime to the integer it stands for, exactly."""
    drift = nc._integer_output(out_id)
    spec: dict[str, Any] = {"encoding": "numerical", "integer": drift is not None, "node": out_id,
                            "feature": out_id}
    if drift is not None:
        spec["integer_tolerance"] = max(1e-3, min(0.25, 2.0 * drift))
    return spec


def _layer_d_head(heads: list[HeadSpec], bos_columns: int, single: set[str] = frozenset()) -> int:
    merged = _merged(heads)
    return _power_of_4(max([max(1 if h.node in single else len(h.blocks) + len(h.data) + bos_columns,
                                len(h.values)) for h in merged], default=0))


def _single_column(nc: NumericCompiler, h: HeadSpec) -> bool:
    """Whether a hard head fits one score column with BOS folded in: one block whose query is an
    indicator q (0/1) of the one query class that selects, whose key is 0 on selected keys and -1
    elsewhere, and BOS scored +-scale/2 by that indicator (``blocks_and_bos``).  One column
    Q = scale (2q - 1), K = key (BOS: -2) then ranks every key as before, with margins of scale:
    q = 1: selected 0, others -scale, BOS -2 scale; q = 0: BOS 2 scale, others scale, selected 0;
    BOS's query -scale: BOS 2 scale, real keys 0 or scale."""
    if h.kind != "aggregate" or h.data or len(h.blocks) != 1:
        return False
    qf, kf, w = h.blocks[0]
    if float(w[0, 0]) != 1.0 or h.bos_query != (("one", -1.0), (qf, 2.0)):
        return False
    fq, fk = nc.feats.get(qf), nc.feats.get(kf)
    if fq is None or fk is None or fq.pos_values is None or fk.pos_values is None:
        return False
    return bool(np.isin(fq.pos_values, (0.0, 1.0)).all() and np.isin(fk.pos_values, (0.0, -1.0)).all())


def _narrow_layers(nc: NumericCompiler) -> list[tuple[int, set[str]]]:
    """Per layer, how many columns score BOS (``_head_weights``) and which heads take one column
    in all (``_single_column``), after taking the heads' narrow alternatives (``HeadSpec.narrow``)
    where that makes the layer's d_head smaller.  A layer
    whose d_head would not shrink keeps its heads as they were, so its weights do not change."""
    n_layers = max((h.slot // 2 for h in nc.heads), default=-1) + 1
    out = []
    for li in range(n_layers):
        heads = [h for h in nc.heads if h.slot == 2 * li]
        narrowed = [dc_replace(h, blocks=h.narrow[0], bos_query=h.narrow[1]) if h.narrow else h
                    for h in heads]
        single = {h.node for h in narrowed if _single_column(nc, h)}
        options = [(_layer_d_head(heads, 2), 0, heads, 2, set()),
                   (_layer_d_head(heads, 1), 1, heads, 1, set()),
                   (_layer_d_head(narrowed, 1), 2, narrowed, 1, set()),
                   (_layer_d_head(narrowed, 1, single), 3, narrowed, 1, single)]
        _, _, chosen, bos, ones = min(options, key=lambda o: (o[0], o[1]))
        for h, c in zip(heads, chosen, strict=True):
            if c is not h:
                nc.heads[nc.heads.index(h)] = c
        out.append((bos, ones))
    return out


def _power_of_4(width: int) -> int:
    """The smallest power of 4 >= width: the runtime's 1/sqrt(d_head) is then a power of 2, exact."""
    d_head = 1
    while d_head < width:
        d_head *= 4
    return d_head


def _head_weights(h: HeadSpec, cols_of: Any, dim: Any, d: int, r_bos: np.ndarray,
                  bos_columns: int = 2) -> tuple[np.ndarray, ...]:
    """A head's W_Q, W_K, W_V, W_O; ``cols_of`` gives the columns a feature is read from.

    Two columns score the BOS key: ``c_bos`` (a real query's score of BOS, -scale/2 per
    ``bos_query``) and ``c_self`` (BOS's query scores itself at +scale).  Both key sides are
    multiples of BOS's indicator, so with ``bos_columns=1`` they are one column: key 1 at BOS,
    query -scale/2 x bos_query at a real query and +scale at BOS; every score is the same."""
    if bos_columns == 0:  # one column, BOS folded into the block's (``_single_column``)
        return _single_column_weights(h, cols_of, dim, d, r_bos)
    cols = len(h.blocks) + len(h.data) + bos_columns
    wq, wk = np.zeros((d, cols)), np.zeros((d, cols))

    def add(m: np.ndarray, fid: str, c: int, w: float) -> None:
        for r, k in cols_of(fid):
            m[r, c] += w * k

    for c, (qf, kf, w) in enumerate(h.blocks):
        add(wq, qf, c, h.scale * float(w[0, 0]))
        add(wk, kf, c, 1.0)
    for j, (qf, kf) in enumerate(h.data):
        c = len(h.blocks) + j
        add(wq, qf, c, 1.0)
        add(wk, kf, c, 1.0)
    c_bos, c_self = cols - bos_columns, cols - 1
    bos_key = -0.5 if bos_columns == 2 else 1.0  # BOS's key on c_bos
    for f, w in h.bos_query:  # a real query scores the BOS key at -scale/2 (+scale/2: HeadSpec)
        add(wq, f, c_bos, h.scale * w * (-0.5 / bos_key))
    k = len(h.values)
    wv = np.zeros((d, k))
    wo = np.zeros((k, d))
    weights = h.weights or [1.0] * len(h.targets)
    for j, (v, t, w) in enumerate(zip(h.values, h.targets, weights, strict=False)):
        add(wv, v, j, 1.0)
        wo[j, dim(t)] = w
    # the BOS rows cancel what the BOS residual holds, then set BOS's key, query and value
    rb = r_bos.copy()
    rb[BOS] = 0.0
    k_t = np.zeros(cols)
    k_t[c_bos] = bos_key
    k_t[c_self] = 1.0
    q_t = np.zeros(cols)
    q_t[c_self] = h.scale
    wk[BOS] = k_t - rb @ wk
    wq[BOS] = q_t - rb @ wq
    wv[BOS] = np.array(h.defaults) - rb @ wv
    return wq, wk, wv, wo


def _single_column_weights(h: HeadSpec, cols_of: Any, dim: Any, d: int,
                           r_bos: np.ndarray) -> tuple[np.ndarray, ...]:
    """W_Q, W_K, W_V, W_O of a ``_single_column`` head: Q = scale (2q - 1), K = key, BOS's key
    -2 and query -scale."""
    qf, kf, _ = h.blocks[0]
    wq, wk = np.zeros((d, 1)), np.zeros((d, 1))
    for r, k in cols_of(qf):
        wq[r, 0] += 2.0 * h.scale * k
    wq[ONE, 0] -= h.scale
    for r, k in cols_of(kf):
        wk[r, 0] += k
    n = len(h.values)
    wv, wo = np.zeros((d, n)), np.zeros((n, d))
    for j, (v, t, w) in enumerate(zip(h.values, h.targets, h.weights or [1.0] * n, strict=False)):
        for r, k in cols_of(v):
            wv[r, j] += k
        wo[j, dim(t)] = w
    rb = r_bos.copy()
    rb[BOS] = 0.0
    wk[BOS] = np.array([-2.0]) - rb @ wk
    wq[BOS] = np.array([-h.scale]) - rb @ wq
    wv[BOS] = np.array(h.defaults) - rb @ wv
    return wq, wk, wv, wo


def _merged(heads: list[HeadSpec]) -> list[HeadSpec]:
    groups: dict[tuple, HeadSpec] = {}
    for h in heads:
        key = h.merge_key()
        if key in groups:
            g = groups[key]
            g.values, g.targets = g.values + h.values, g.targets + h.targets
            g.weights = g.weights + list(h.weights or [1.0] * len(h.targets))
            g.defaults, g.nodes = g.defaults + h.defaults, g.nodes + h.nodes
        else:
            groups[key] = HeadSpec(h.node, h.kind, h.target, h.blocks, h.data, list(h.values),
                                   list(h.defaults), h.scale, h.slot, list(h.targets), list(h.nodes),
                                   h.bos_query, list(h.weights or [1.0] * len(h.targets)))
    return list(groups.values())


def _src(program: Program, nid: str) -> str | None:
    node = program.node(nid) if nid in program.graph else None
    return f"{node.pos.file}:{node.pos.line}" if node is not None and node.pos is not None else None


def _text(program: Program, nid: str) -> str | None:
    node = program.node(nid) if nid in program.graph else None
    return node.pos.text if node is not None and node.pos is not None and node.pos.text else None


def _selector_and_context(program: Program, nid: str) -> dict[str, str]:
    """A head's ``selector`` (the source text of the selector its node reads, so a picture of the
    saved model need not read the program file) and ``context`` (which call of a function, which
    pass of a loop made the node: SourcePos.context), where the program has them."""
    out: dict[str, str] = {}
    node = program.node(nid) if nid in program.graph else None
    if node is None:
        return out
    sel = program.node(node.inputs[0]) if node.inputs and node.inputs[0] in program.graph else None
    if sel is not None and sel.is_selector:
        out["selector"] = _text(program, sel.id) or sel.id
    context = (node.pos.context if node.pos is not None else "") or \
        (sel.pos.context if sel is not None and sel.is_selector and sel.pos is not None else "")
    if context:
        out["context"] = context
    return out
