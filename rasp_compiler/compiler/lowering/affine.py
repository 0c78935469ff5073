"""Positional affine maps: ``a·index + b·length + c`` built from the index and the length, no table.

The analysis keeps such a map past its DOMAIN_CAP as an opaque conditional base with ``posaff``
(``analysis.affine``); here it becomes one separable MLP over the index one-hot and the length
head's BOS weight: 2N - 1 units, where a table over (index, length) pairs needs N(N+1)/2.
"""

from __future__ import annotations

from rasp_compiler.compiler.analysis import Analysis, SInfo
from rasp_compiler.compiler.lowering import limits
from rasp_compiler.compiler.lowering.ops import MLPOp
from rasp_compiler.compiler.values import value_key
from rasp_compiler.graph.nodes import Indices


class AffineNumbers:
    """Part of ``Lowering`` (``core``): features of positional affine maps."""

    def _affine_number(self, sid: str) -> str:
        """The numerical feature of ``a·index + b·length + c`` (an opaque map of the analysis's
        ``_affine_base``): one separable MLP, a unit on the index's one-hot and one step per length
        on the length head's BOS weight 1/(n+1) — 2N - 1 units, where a table over the (index,
        length) pairs would need N(N+1)/2.  ``sid`` itself when numerical, else ``sid:num``."""
        an = self.an
        info = an.info[sid]
        fid = sid if info.encoding == "numerical" else f"{sid}:num"
        if fid in self.features:
            return fid
        a, b, c = info.posaff  # type: ignore[misc]
        up = _ancestors_of(an, sid)
        idx = next(u for u in sorted(up) if u in an.graph and isinstance(an.node(u), Indices))
        # the length's source: the built-in length, else a width that equals it (tracr's)
        length = min((u for u in up if an.length_like(u)),
                     key=lambda u: (an.info[u].base_kind != "length", u))
        scratch = self.scratch(length)
        feats = [self.need(idx), self.need(scratch)]
        g_idx = {value_key(v): (v, float(a * v)) for v in an.info[idx].values}
        g_len = {value_key(1.0 / (n + 1)): (1.0 / (n + 1), float(b * n)) for n in an.info[length].values}
        if fid != sid:
            an.info[fid] = SInfo(fid, info.kind, "numerical", list(info.values), info.bases, info.table,
                                 base_kind=info.base_kind, cond=info.cond, pos=info.pos,
                                 inputs=info.inputs, fn=info.fn, notes=list(info.notes))
            an.info[fid].posaff = info.posaff
        self._feature(fid, an.info[fid], sid if sid in an.graph else None)
        op = MLPOp(fid, sid if sid in an.graph else info.inputs[0], fid, feats, [], info.pos, "map")
        op.separable = ([g_idx, g_len], float(c))  # type: ignore[attr-defined]
        self.ops[fid] = op
        return fid

    def _affine_map(self, sid: str, info: SInfo) -> None:
        """An opaque ``a·index + b·length + c`` read as itself: its number (``_affine_number``),
        and when it is categorical, that number's one-hot (steps of gap 1) one MLP later."""
        num = self._affine_number(sid)
        if num == sid:
            return
        rows = [((v,), v) for v in info.values]
        units = self._units([num], rows, False)
        if units is None or units > limits.UNIT_CAP:
            raise self.an.error(sid, f"{self.an.describe(sid)} needs {units or 'unboundedly many'} "
                                "hidden units", hint="compare it with == against indices (one "
                                "number, no one-hot), or use a smaller --max-len", too_large=True)
        self._feature(sid, info, sid if sid in self.an.graph else None)
        self.ops[sid] = self._with_shared(MLPOp(sid, sid if sid in self.an.graph else info.inputs[0],
                                                sid, [num], rows, info.pos, "map"))


def _ancestors_of(an: Analysis, sid: str) -> set[str]:
    """The s-ops ``sid`` is computed from (through the analysis's inputs)."""
    out: set[str] = set()
    todo = list(an.info[sid].inputs)
    while todo:
        u = todo.pop()
        if u not in out and u in an.info:
            out.add(u)
            todo.extend(an.info[u].inputs)
    return out
