"""Aggregates: one attention head each, scored by one-hot blocks or by one quadratic block.

A quadratic block (``_quadratic``) scores ``select(k, q, ==)`` with q a number, so the query needs
no one-hot; it is used where every query value has a matching key and the dtype's rounding stays
below the match's lead, or where the scores can be computed exactly (``_exact_quadratic``).
"""

from __future__ import annotations

import numpy as np

from rasp_compiler.compiler import selectors as sl
from rasp_compiler.compiler.analysis import SInfo, is_numeric
from rasp_compiler.compiler.lowering import limits
from rasp_compiler.compiler.lowering.ops import Block, HeadOp
from rasp_compiler.graph.nodes import Aggregate


class Aggregates:
    """Part of ``Lowering`` (``core``): the head of each aggregate."""

    def _aggregate(self, sid: str, node: Aggregate, info: SInfo) -> None:
        an = self.an
        sel_id, src = node.inputs
        if an.causal:
            self._check_causal(sel_id, sid)
        quad = self._quadratic(sel_id)
        blocks = quad if quad is not None else self.blocks(sel_id)
        target = self._feature(sid, info, sid)
        sinfo = an.info[src]
        if info.encoding == "categorical":
            vfeat = self.need_categorical(src)
            # -1: a source value the analysis proved is never selected (e.g. a selector that never
            # selects anything) has no dimension in the result
            weights = [target.values.index(v) if v in target.values else -1
                       for v in self.features[vfeat].values]
            # -1: the selection is never empty, so the default has no one-hot dimension
            default = target.values.index(node.default) if node.default in target.values else -1
            mean = False
        else:
            vfeat = self.need(src)
            if sinfo.encoding == "categorical":
                weights = [float(v) for v in self.features[vfeat].values]
            else:
                weights = [1.0]
            default = float(node.default)
            mean = not an.at_most_one(sel_id)
        self.ops[sid] = HeadOp(sid, sid, "aggregate", sid, blocks, "default", vfeat, weights, default,
                               mean, node.pos)
        if quad is not None:
            # every query has a matching key (``_always_matched``), whose score (q-c)^2/d2 >= 0;
            # BOS only has to lose to it
            self.ops[sid].bos_score = -1.0

    def _quadratic(self, sel_id: str) -> list[Block] | None:
        """``select(k, q, ==)`` with q a number and k a one-hot over numbers, as one quadratic score
        block: key v scores -(q - v)^2 / d2 up to a term of the query alone, so the matching key
        leads every other by at least 1 (d2: the smallest squared distance between key values) and
        an error e in q costs only 2e|v - v'|/d2.  The query stays one number — for a map like
        ``length - indices - 1`` an MLP of O(N) units (``separable``) instead of the N^2-unit table
        its one-hot needs.  Used only when the analysis proves that every query value occurs among
        the keys at every length: then BOS can simply score below every match."""
        an = self.an
        f = an.formula(sel_id)
        if not isinstance(f, sl.Atom) or f.op != "==" or f.negated:
            return None
        k, q = f.key, f.query
        ki, qi = an.info[k], an.info[q]
        if ki.base_kind == "const" or qi.base_kind == "const" or ki.encoding != "categorical":
            return None
        if not (is_numeric(ki.values) and is_numeric(qi.values)) or "unbounded" in qi.notes:
            return None
        if len(ki.values) < 2 or not self._always_matched(k, q):
            return None
        kv = sorted({float(v) for v in ki.values})
        d2 = min((a - b) ** 2 for a, b in zip(kv, kv[1:], strict=False))
        # Scores reach (max - min)^2 / d2 while the match leads by 1: the dtype's rounding of the
        # scores (and of q) must stay well below that lead, or another key wins without a trace
        # (keys i^3 at N = 24 gave a clean, wrong answer in float32).  Otherwise: one-hot blocks.
        eps = float(np.finfo(np.float32 if an.dtype == "float32" else np.float64).eps)
        exact = False
        if eps * (kv[-1] - kv[0]) ** 2 / d2 > limits.QUADRATIC_ROUNDING:
            if not self._exact_quadratic(kv, qi):
                return None
            exact = True
        if qi.encoding == "numerical":
            qfeat = self.need(q)
        elif q not in self.features and qi.posaff is not None and \
                qi.posaff[0] and qi.posaff[1]:
            qfeat = self._affine_number(q)  # a·index + b·length + c: O(N) units, no table
        else:
            if q in self.features or qi.base_kind is not None or qi.kind not in ("map", "sequence_map"):
                return None  # its one-hot exists already, or costs no table MLP
            front = self.frontier(q)
            if len(front) < 2 or self._separable(front, self._rows(q, front)) is None:
                return None
            qfeat = f"{q}:num"
            if qfeat not in self.features:
                an.info[qfeat] = SInfo(qfeat, qi.kind, "numerical", list(qi.values), qi.bases, qi.table,
                                       pos=qi.pos, inputs=qi.inputs, fn=qi.fn)
                self._frontiers[qfeat] = front
                self._map(qfeat, an.info[qfeat])
                self.ops[qfeat].node = q
        kfeat = self.need(k)
        kv = [float(v) for v in self.features[kfeat].values]
        c = (min(kv) + max(kv)) / 2.0
        return [Block(qfeat, kfeat, np.ones((1, len(kv)), dtype=bool), quad=(kv, c, 1.0 / d2),
                      quad_exact=exact)]

    def _exact_quadratic(self, kv: list[float], qi: SInfo) -> bool:
        """Whether a quadratic block too wide for the rounding rule (keys 0..N-1 past N ~ 1,450 in
        float32) can be scored *exactly*: integer keys one apart, and an integer query computed
        exactly (``a·index + b·length + c``: its separable MLP runs in float64 and its value rounds
        to the integer).  With a power-of-two score scale and d_head a power of 4 (``assemble``),
        every entry of Q = S'·[q - c, 1] and K = [2(v - c), -(v - c)^2], every product and every
        partial sum of the score is a multiple of S'/4 below 3R^2·S'/4 (R: the key range), all
        representable when 3R^2 <= 2^24 (float32; R <= 2,364): the score is exact and the match
        leads every other key by S."""
        pa = qi.posaff
        if not ("affine" in qi.notes or (qi.encoding != "numerical" and pa is not None and pa[0] and pa[1])):
            return False  # q is not built by ``_affine_number``
        if any(v != int(v) for v in kv) or any(b - a != 1.0 for a, b in zip(kv, kv[1:], strict=False)):
            return False
        if any(not float(v).is_integer() for v in qi.values):
            return False
        mantissa = 24 if self.an.dtype == "float32" else 53
        return 3 * (kv[-1] - kv[0]) ** 2 <= 2.0 ** mantissa

    def _always_matched(self, k: str, q: str) -> bool:
        """Whether at every (index, length) each value q can hold is held by some key position
        (k must be a function of the position: its values at each length are known)."""
        an = self.an
        if not an.positional(k):
            return False
        posaff = an.info[q].posaff
        if posaff is not None and not an.causal and an.info[k].bases and all(
                an.info[b].base_kind == "index" for b in an.info[k].bases):
            # q = a·i + b·n + c (exact integers) against a key of the index alone: per length, one
            # vectorised membership test instead of one set per (index, length)
            a, b, c = posaff
            top = max(an.lengths)
            kvals = [an._positional_value(k, j, top) for j in range(top)]
            if any(not isinstance(v, (int, float)) or isinstance(v, bool) for v in kvals):
                return False
            karr = np.array(kvals, dtype=np.float64)
            for n in an.lengths:
                qs = a * np.arange(n, dtype=np.int64) + b * n + c
                if not np.isin(qs.astype(np.float64), karr[:n]).all():
                    return False
            return True
        keysets: dict[tuple[int, int], set] = {}
        for ctx in an.ctx_all:
            i, n = ctx
            top = i + 1 if an.causal else n
            ks = keysets.get((n, top))
            if ks is None:
                ks = keysets[(n, top)] = {an._positional_value(k, j, n) for j in range(top)}
            if not set(an.ctx_values(q, ctx)) <= ks:
                return False
        return True
