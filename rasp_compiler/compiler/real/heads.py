"""Heads: an aggregate is a hard-attention head over its selector's score blocks; a
``softmax_aggregate`` is one head whose scores add the dot product of its query and key s-ops.

The scale makes masked keys and the BOS default underflow to weight 0.  A softmax head's scores
are rounded to the dtype: ``_score_drift`` bounds how far that moves its weights (refused past
``MAX_WEIGHT_DRIFT``), and the head's report states the resulting error.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rasp_compiler.compiler.real.intervals import _as_float
from rasp_compiler.compiler.real.limits import EXACT_TOL, MAX_WEIGHT_DRIFT
from rasp_compiler.compiler.real.specs import Feat, HeadSpec, _next
from rasp_compiler.graph.nodes import SoftmaxAggregate


class Heads:
    """Part of ``NumericCompiler`` (``core``): the head of each aggregate and softmax_aggregate."""

    def _head(self, node: Any, target: str | None = None, weight: float = 1.0) -> int:
        """Plan ``node``'s head; its slot.  With ``target``, the head writes ``weight`` times its
        mean into that feature (a sum of aggregates folded into their heads: ``_folded``) and
        ``node`` gets no feature of its own."""
        nid = node.id
        sel = node.inputs[0]
        self._check_selector(sel, nid)
        if self.causal and np.triu(self._selector_matrix(sel), 1).any():
            raise self.error(nid, "{node} may select a key after its query position, which a causal "
                             "model cannot see", hint="combine the selector with select(indices, "
                             "indices, <=), or compile without causal=True (--causal)")
        narrow = None
        if isinstance(node, SoftmaxAggregate):
            blocks, bos = self._blocks(sel, nid, digits=False), (("one", 1.0),)
        else:
            blocks, bos = self.blocks_and_bos(sel, nid)
            self.narrowing = True
            try:
                narrow = self.blocks_and_bos(sel, nid, narrow=True)
            finally:
                self.narrowing = False
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
        deps = [b[0] for b in blocks] + [b[1] for b in blocks] + [value] + [x for p in data for x in p] \
            + [f for f, _ in bos]
        slot = _next(max([self.slot(f) for f in deps if f != "one"] + [-1]), 0)
        if target is None:
            self.feats[nid] = Feat(nid, 1, slot, nid, "numerical", labels=[nid])
        self.heads.append(HeadSpec(nid, node.kind, target or nid, blocks, data, [value],
                                   [_as_float(node.default, self.error, nid)], scale, slot,
                                   [target or nid], [nid], bos_query=bos, weights=[weight],
                                   narrow=narrow if narrow is not None and len(narrow[0]) < len(blocks)
                                   else None))
        if self._reported(nid):
            return slot
        lo, hi = self._interval_any(node.inputs[-1])
        mag = max(abs(lo), abs(hi))
        # weights within a factor e^(+-2 drift): |change of weights|_1 <= 2 (e^(2 drift) - 1)
        effect = 2.0 * math.expm1(2.0 * drift) * mag
        exact = effect <= EXACT_TOL[self.dtype] * max(1.0, mag)
        self.map_reports.append({"node": nid, "kind": node.kind, "exact": exact,
                                 "bound": 0.0 if exact else effect,
                                 "interval": list(self.interval[nid]),
                                 **({"score_bound": bound, "score_rounding": drift} if data else {})})
        return slot

    def _reported(self, nid: str) -> bool:
        """Whether ``map_reports`` has a report of ``nid`` (its reports are only ever appended:
        the set of their nodes grows with them, where a scan of the list per head was quadratic)."""
        seen = self._report_nodes
        for r in self.map_reports[seen[0]:]:
            seen[1].add(r["node"])
        seen[0] = len(self.map_reports)
        return nid in seen[1]

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
