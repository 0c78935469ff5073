"""Selector widths and length: a head whose BOS weight 1/(w+1) an MLP decodes into the width.

A width whose selector would need a product one-hot is split into part heads instead
(``width_parts``).
"""

from __future__ import annotations

from rasp_compiler.compiler.analysis import SInfo
from rasp_compiler.compiler.lowering.ops import BOS_WEIGHT, HeadOp, MLPOp
from rasp_compiler.compiler.values import sorted_values
from rasp_compiler.graph.nodes import SelectorWidth


class Widths:
    """Part of ``Lowering`` (``core``): the heads and decoders of widths."""

    def scratch(self, sid: str) -> str:
        """The numerical s-op 1/(w+1) that the head of width ``sid`` writes (BOS's attention weight)."""
        scratch = sid + BOS_WEIGHT
        if scratch not in self.an.info:
            info = self.an.info[sid]
            values = sorted_values(1.0 / (w + 1) for w in info.values)
            self.an.info[scratch] = SInfo(scratch, "width_scratch", "numerical", values, (sid,),
                                          {(w,): 1.0 / (w + 1) for w in info.values}, pos=info.pos,
                                          inputs=(sid,))
        return scratch

    def _width_head(self, sid: str) -> None:
        """Selector width (or length): one head where BOS is always among the selected keys, so BOS
        gets weight 1/(w+1)."""
        an = self.an
        node = an.node(sid)
        sel_id = node.inputs[0] if isinstance(node, SelectorWidth) else None
        if sel_id is not None and an.causal:
            self._check_causal(sel_id, sid)
        blocks = self.blocks(sel_id) if sel_id is not None else []
        scratch = self.scratch(sid)
        self._feature(scratch, an.info[scratch], None, "width_scratch")
        self.ops[scratch] = HeadOp(scratch, sid, "length" if sel_id is None else "width", scratch, blocks,
                                   "always", None, [1.0], 1.0, True, node.pos)

    def _width(self, sid: str, sel_id: str | None, info: SInfo) -> None:
        """The width itself, decoded from the BOS weight by an MLP (only when something reads it)."""
        parts = self._width_parts(sid) if sel_id is not None else None
        if parts is not None:
            self._part_heads(sid)
            self._feature(sid, info, sid)
            rows = self._part_rows(sid, len(parts))
            self.ops[sid] = MLPOp(sid, sid, sid, list(parts), rows, self.an.node(sid).pos, "width_decode")
            sep = self._separable(list(parts), rows) if info.encoding == "numerical" else None
            if sep is not None:
                self.ops[sid].separable = sep[1]  # type: ignore[attr-defined]
            return
        scratch = self.need(self.scratch(sid))
        self._feature(sid, info, sid)
        rows = [((1.0 / (w + 1),), w) for w in sorted_values(info.values)]
        self.ops[sid] = MLPOp(sid, sid, sid, [scratch], rows, self.an.node(sid).pos, "width_decode")
