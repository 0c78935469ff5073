"""Positional folding: s-ops that depend only on positions are computed once and embedded.

``_analyse`` finds the positional s-ops (functions of ``indices``, constants and, at a fixed length,
``length`` and the heads over them), evaluates them with the interpreter on a dummy input, and then
gives every other s-op its interval (``intervals``).  ``embed`` writes a positional value vector
into the position embedding as a feature of its own (one per distinct vector): it costs no layer.
"""

from __future__ import annotations

import numpy as np

from rasp_compiler.compiler.real.specs import Feat
from rasp_compiler.graph.nodes import (
    Aggregate,
    Constant,
    Indices,
    Length,
    Program,
    SelectorWidth,
    SoftmaxAggregate,
    Tokens,
)


class PositionalFolding:
    """Part of ``NumericCompiler`` (``core``): positional s-ops, folded into the embedding."""

    def _analyse(self) -> None:
        from rasp_compiler.interpreter import evaluate

        order = list(self.program.nodes())
        positional = set()
        for node in order:
            if isinstance(node, Tokens):
                if node.type not in ("float", "int", "value"):
                    raise self.error(node.id, f"numerical compilation reads real-valued tokens, but "
                                     f"the program reads tokens_{node.type}",
                                     hint="write tokens = tokens_float; or compile without --input-range")
                continue
            if isinstance(node, Length) and self.fixed is None:
                # `length` is a built-in with no line of its own: point at the first line reading it
                readers = [r for r in self.graph.successors(node.id) if self.program.node(r).pos is not None]
                raise self.error(min(readers, key=self._line_of) if readers else node.id,
                                 "a real-valued program is compiled with its positions folded "
                                 "into the embedding, so `length` needs a fixed length",
                                 hint="give --fixed-length N (the program then runs on exactly N values)")
            if isinstance(node, (Indices, Length, Constant)):
                positional.add(node.id)
            elif node.inputs and all(i in positional for i in node.inputs):
                if isinstance(node, (Aggregate, SelectorWidth, SoftmaxAggregate)) and self.fixed is None:
                    continue  # depends on which keys exist: computed by a head
                positional.add(node.id)
        if positional:
            dummy = [0.0] * self.n
            sub = self.program.graph.subgraph(positional)
            values = evaluate(Program(sub.copy(), next(iter(positional)),
                                      source_file=self.program.source_file,
                                      sources=self.program.sources), dummy)
            self.pos = {k: values[k] for k in positional}
        for node in order:
            if node.id in self.pos or node.is_selector:
                continue
            self._numeric(node)

    def _line_of(self, nid: str) -> tuple[int, int]:
        pos = self.program.node(nid).pos
        return (pos.line or 0, pos.col or 0) if pos is not None else (0, 0)

    def embed(self, values: np.ndarray, label: str) -> str:
        """A positional feature holding ``values`` [positions] (deduplicated)."""
        values = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0)
        key = values.tobytes()
        if key in self.embed_cache:
            return self.embed_cache[key]
        # a narrow alternative's features (``HeadSpec.narrow``) reuse the others but are kept
        # apart from them: unless assembly takes the alternative, they are dropped, and the model
        # is the one without them
        narrow = getattr(self, "narrowing", False)
        cache = self.narrow_cache if narrow else self.embed_cache
        if key in cache:
            return cache[key]
        fid = f"pos:narrow:{label}" if narrow else f"pos:{label}"
        k = 2
        while fid in self.feats:
            fid, k = f"pos:{label}#{k}", k + 1
        self.feats[fid] = Feat(fid, 1, -1, None, "positional", pos_values=values[:, None], labels=[fid])
        cache[key] = fid
        return fid
