"""Split widths: ``width(A or B) = width(A) + width(B)`` for disjuncts that never hold together.

Such a width would need a product one-hot before its head (an MLP layer); its parts need none, so
their heads run in the first layer and an MLP decodes the sum jointly from the weights of their
selected keys (parts that weigh BOS as (N+1)^2 keys).  A map of the width can read those weights
directly (``_through_parts``).
"""

from __future__ import annotations

import math
from typing import Any

from rasp_compiler.compiler import selectors as sl
from rasp_compiler.compiler.analysis import SInfo
from rasp_compiler.compiler.lowering import limits
from rasp_compiler.compiler.lowering.ops import HeadOp
from rasp_compiler.compiler.values import sorted_values, value_key
from rasp_compiler.graph.nodes import SelectorWidth


class WidthParts:
    """Part of ``Lowering`` (``core``): widths split into part heads."""

    def _needs_tuple(self, f: sl.Formula) -> bool:
        """Whether some conjunct of ``f`` reads several key (or query) s-ops (a product one-hot)."""
        an = self.an
        for c in sl.conjuncts(f):
            ats = sl.atoms(c)
            if len({a.key for a in ats if an.info[a.key].base_kind != "const"}) > 1 or \
                    len({a.query for a in ats if an.info[a.query].base_kind != "const"}) > 1:
                return True
        return False

    def _disjoint(self, f1: sl.Formula, f2: sl.Formula) -> bool:
        """Whether no (query, key) pair satisfies both: some key/query s-op pair alone rules it out
        (atoms on other pairs count as unknown, so this never claims too much)."""
        an = self.an
        both = sl.All((f1, f2))
        pairs = sorted({(a.key, a.query) for a in sl.atoms(both)})
        for k, q in pairs:
            kv, qv = an.info[k].values, an.info[q].values
            if len(kv) * len(qv) > 1_000_000:
                continue
            known = {a: an.atom_rows(a, qv, kv) for a in sl.atoms(both) if (a.key, a.query) == (k, q)}
            can_true, _ = sl.tri_evaluate(both, known, (len(qv), len(kv)))
            if not can_true.any():
                return True
        return False

    def _width_parts(self, sid: str) -> list[str] | None:
        """Scratch ids of the heads of ``width(A or B or …) = width(A) + width(B) + …``, for a
        selector that would need a product one-hot (an MLP layer before its head) while each of its
        disjuncts needs none and no two disjuncts can hold at once.

        One head cannot compute such a width from additive token + position embeddings: for
        ``t_k < t_q or (t_k == t_q and k < q)`` its score would be f(t_q, t_k) + g(q, k) +
        f'(t_q, k) + g'(q, t_k) (bilinear in the two one-hot sums); selected keys must tie and
        unselected ones lose, but for keys k1 < q < k2 the score difference
        g(q,k1) - g(q,k2) + f'(t_q,k1) - f'(t_q,k2) is the same whether t_k equals t_q (must be
        large) or is below it (must be 0).  Two heads whose outputs an MLP decodes jointly
        (two numbers -> the sum, by steps along a separating projection) keep the width in the
        first layer."""
        if not hasattr(self, "_parts_cache"):
            self._parts_cache: dict[str, list[str] | None] = {}
            self._part_formulas: dict[str, list[sl.Formula]] = {}
        if sid in self._parts_cache:
            return self._parts_cache[sid]
        an = self.an
        result = None
        node = an.node(sid) if sid in an.graph else None
        f = an.formula(node.inputs[0]) if isinstance(node, SelectorWidth) else None
        if isinstance(f, sl.All) and sum(isinstance(p, sl.Any_) for p in f.parts) == 1:
            # X and (A or B): width(X and A) + width(X and B) when A and B never hold together
            either = next(p for p in f.parts if isinstance(p, sl.Any_))
            rest = tuple(p for p in f.parts if p is not either)
            f = sl.Any_(tuple(sl.All((d, *rest)) for d in either.parts))
        if isinstance(f, sl.Any_) and self._needs_tuple(f) and not an.causal:
            flat: list[sl.Formula] = []
            todo = list(f.parts)
            while todo:
                p = todo.pop(0)
                if isinstance(p, sl.Any_):
                    todo[:0] = list(p.parts)
                else:
                    flat.append(p)
            small = 2 <= len(flat) <= 3 and (max(an.lengths) + 1) ** len(flat) <= 200_000
            if small and not any(self._needs_tuple(p) for p in flat) and all(
                    self._disjoint(a, b) for i, a in enumerate(flat) for b in flat[i + 1:]):
                top = max(an.lengths)
                ids = [f"{sid}.part{j}.mass" for j in range(len(flat))]
                for pid in ids:
                    self._part_owner[pid] = sid
                boost = float(top + 1) ** 2  # c = (N+1)^2: see _part_rows
                values = sorted_values(w / (w + boost) for w in range(top + 1))
                rows = self._part_rows(sid, len(flat))
                for pid in ids:
                    an.info[pid] = SInfo(pid, "width_scratch", "numerical", values, (pid,),
                                         {(v,): v for v in values}, pos=an.info[sid].pos, inputs=(sid,))
                units = self._units(ids, rows, False)
                # Past float32's resolution (not reached up to N = 446, where the splits stop
                # being enumerated) the width stays whole: one head over the product one-hot.
                if units is not None and units <= limits.UNIT_CAP:
                    result = ids
                    self._part_formulas[sid] = flat
                else:
                    for pid in ids:
                        del an.info[pid], self._part_owner[pid]
        self._parts_cache[sid] = result
        return result

    def _part_heads(self, sid: str) -> None:
        """The heads of a width split into parts (``_width_parts``), each writing the weight of its
        selected keys."""
        node = self.an.node(sid)
        for pid, part in zip(self._width_parts(sid) or [], self._part_formulas[sid], strict=True):
            if pid in self.features:
                continue
            self._feature(pid, self.an.info[pid], None, "width_scratch")
            self.ops[pid] = HeadOp(pid, sid, "width", pid, self.blocks(node.inputs[0], part),
                                   "always", None, [1.0], 1.0, True, node.pos,
                                   bos_log=2 * math.log(max(self.an.lengths) + 1.0), selected_mass=True)

    def _through_parts(self, sid: str, front: list[str], out_numeric: bool
                       ) -> tuple[list[str], list[tuple[tuple, Any]], Any] | None:
        """A map of a width split into part heads (and of embeddings or other features),
        tabulated on the parts' outputs instead of the decoded width: it then runs in the
        MLP of the heads' own layer, where reading the decoded width costs one more.  The
        original paper's sort computes ``-1 if indices == 0 else num_before`` this way."""
        an = self.an
        widths = [u for u in front if an.info[u].kind == "selector_width"
                  and self._width_parts(u) is not None]
        if len(widths) != 1:
            return None
        u = widths[0]
        k = front.index(u)
        by_width: dict[tuple, list[tuple[tuple, Any]]] = {}
        for args, y in self._rows(sid, front):
            by_width.setdefault(value_key(args[k]), []).append((args[:k] + args[k + 1:], y))
        parts = self._width_parts(u) or []
        rows = []
        for weights, w in self._part_rows(u, len(parts)):
            rows.extend((tuple(weights) + rest, y) for rest, y in by_width.get(value_key(w), []))
            if len(rows) > limits.THROUGH_PARTS_CAP:
                return None
        inputs = parts + front[:k] + front[k + 1:]
        for pid in parts:
            self._part_owner[pid] = u
        units = self._units(inputs, rows, out_numeric)
        if units is None or units > limits.UNIT_CAP:
            return None
        return inputs, rows, None

    def _part_rows(self, sid: str, k: int) -> list[tuple[tuple, Any]]:
        """(weights of the parts' selected keys, total width) for every split of a possible width.
        The part heads weigh BOS as c = (N+1)^2 keys (``bos_log``), so the w selected keys weigh
        w/(w+c) ~ w/c in all, and the sum of two such weights orders the splits by w1 + w2 (gaps
        ~1/c, the second-order terms stay below them): the decode is 2N steps along z = m1 + m2.
        Each weight is a sum of w small ones, rounded relative to its own size (at most N/c):
        BOS's weight c/(w+c) ~ 1 - w/c carries rounding relative to 1, and separated the splits
        at float32 only to N ~ 175."""
        import itertools
        widths = [w for w in self.an.info[sid].values if isinstance(w, int)]
        top = max(widths, default=0)
        boost = float(max(self.an.lengths) + 1) ** 2
        ok = set(widths)
        rows = []
        for ws in itertools.product(range(top + 1), repeat=k):
            if sum(ws) in ok:
                rows.append((tuple(w / (w + boost) for w in ws), sum(ws)))
        return rows
