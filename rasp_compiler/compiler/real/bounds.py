"""Error bounds and their reports: the bound of the output, carried forward from every
approximate map and rounded softmax head, and the note each inexact one adds to the config."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rasp_compiler.graph.expr import evaluate as eval_expr
from rasp_compiler.graph.nodes import Aggregate, SoftmaxAggregate

if TYPE_CHECKING:
    from rasp_compiler.compiler.real.core import NumericCompiler


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
                elif atom[0] == "stepx":  # the step is exact (a margin on a grid): the number's error
                    total += k * e(atom[3])
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
