"""The causal check: a causal model's head may not select a key after its query position.

Checked per head from what the analysis knows of the selector's atoms at each position pair: a
pair it cannot rule out is refused, so a compiled causal model never needs a masked key.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rasp_compiler.compiler import selectors as sl
from rasp_compiler.compiler.values import sorted_values


class CausalCheck:
    """Part of ``Lowering`` (``core``): refusing selectors that may look ahead."""

    def _check_causal(self, sel_id: str, node_id: str) -> None:
        an = self.an
        f = an.formula(sel_id)
        n = max(an.lengths)
        known = {}
        for a in sl.atoms(f):
            if all(an.positional(s) and all(an.info[b].base_kind == "index" for b in an.info[s].bases)
                   for s in (a.key, a.query)):
                known[a] = an.positional_rows(a, n)
            else:
                possible = self._possible(a, n)
                if possible is not None:
                    known[a] = possible[::-1] if a.negated else possible
        can_true, _ = sl.tri_evaluate(f, known, (n, n))
        if np.triu(can_true, 1).any():
            ats = sl.atoms(f)
            where = next((a.select for a in ats if a not in known), ats[0].select if ats else sel_id)
            raise an.error(where, f"{an.describe(node_id)} may select a key after its query position, "
                           "which a causal model cannot see",
                           hint="combine the selector with select(indices, indices, <=), or compile "
                                "without --causal")

    def _possible(self, atom: sl.Atom, n: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(can hold, can fail) for the atom's predicate at each (query, key) position pair, from
        the values its two s-ops can take at each position.  A key that is its own index or -1
        (``i if t == "a" else -1``) is then never selected by a later query: ``k == q`` fails for
        every key after the query.  None when the value sets are too large to pair up."""
        an = self.an

        def at(sid: str, j: int) -> list[Any]:
            return sorted_values({v for m in an.lengths if m > j for v in an.ctx_values(sid, (j, m))})
        keys = [at(atom.key, j) for j in range(n)]
        queries = [at(atom.query, i) for i in range(n)]
        if sum(map(len, keys)) * sum(map(len, queries)) > 1_000_000:
            return None
        can_hold = np.zeros((n, n), dtype=bool)
        can_fail = np.zeros((n, n), dtype=bool)
        for q, qvals in enumerate(queries):
            for k, kvals in enumerate(keys):
                truths = {an.holds(atom, kv, qv) for kv in kvals for qv in qvals}
                can_hold[q, k], can_fail[q, k] = True in truths, False in truths
        return can_hold, can_fail
