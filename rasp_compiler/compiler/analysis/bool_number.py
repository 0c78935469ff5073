"""Booleans against equal numbers: where an s-op may be False at one position and 0 at another.

Python holds False == 0 and True == 1, so value sets keep one of each such pair and the model holds
both as one value.  That is harmless until something tells them apart: a map that gives different
results for the two, or the output, which is printed.  ``BoolNumberChecks`` marks the s-ops where
such a clash can arise or is passed on, and refuses the program where it would change an answer
(docs/known-bugs.md #13).
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable

import networkx as nx
import numpy as np

from rasp_compiler.compiler.analysis import limits
from rasp_compiler.compiler.analysis.sinfo import convert_token
from rasp_compiler.graph.expr import evaluate as eval_expr
from rasp_compiler.graph.nodes import Aggregate, Map, SequenceMap, Tokens


def _tag(v: Any) -> Any:
    """Which values are booleans: equal values with different tags are what value sets collapse."""
    if isinstance(v, bool):
        return "b"
    if isinstance(v, tuple):
        return tuple(_tag(x) for x in v)
    return "n"


def _clash(values: Iterable[Any]) -> tuple[Any, Any] | None:
    """Two of ``values`` that are equal but a boolean where the other is a number (0 and False)."""
    seen: dict[Any, Any] = {}
    for v in values:
        first = seen.setdefault(v, v)
        if _tag(first) != _tag(v):
            return first, v
    return None


def _twin(v: Any) -> Any:
    """The value of the other type equal to ``v`` (False <-> 0, True <-> 1), or None."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    return None


class BoolNumberChecks:
    """Part of ``Analysis`` (``core``): the 0 / False clash checks, run once every s-op is analysed."""

    def _check_bool_number_output(self, out: str) -> None:
        """Refuse a categorical output that may be False at one position and 0 at another (or True
        and 1).  Python holds them equal, so value sets (``sorted_values``) keep one of each pair
        and the model would print 0 where the interpreter prints False.  Seen where a row of the
        output's own table or an aggregate's default brings the other type: the common case is
        ``aggregate(sel, tokens == "a")``, whose default is 0.  A clash passed on from an input
        further up is seen by ``_propagate_bool_number`` (docs/known-bugs.md #13).  A numerical
        output is a number by declaration and is not refused."""
        info = self.info[out]
        if info.encoding != "categorical":
            return
        node = self.node(out)
        values = list(info.values) + list(info.table.values())
        if isinstance(node, Aggregate):
            values += list(self.info[node.inputs[1]].values)
            # the default only where the selector may select nothing, as _propagate_bool_number
            # reads it (load_from_location(b, 0) over booleans never takes its default 0)
            if not self._never_empty(node.inputs[0]):
                values.append(node.default)
        bools = {v for v in values if isinstance(v, bool)}
        for v in values:
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v in bools:
                hint = ("give the aggregate a default of the values' type, e.g. aggregate(sel, x, False)"
                        if isinstance(node, Aggregate) else "keep the output's values all booleans or "
                        "all numbers (indicator(x) turns a boolean into 0/1)")
                raise self.error(out, f"{self.describe(out)} may be {v!r} at one position and "
                                 f"{bool(v)!r} at another: they are equal in Python, and the model "
                                 "could not tell them apart in its output", hint=hint)
        origin = self.marked.get(out)
        if origin is not None:
            onode = self.node(origin)
            hint = (f"give {self.describe(origin)} a default of its values' type, e.g. "
                    "aggregate(sel, x, False)" if isinstance(onode, Aggregate) else
                    f"keep {self.describe(origin)}'s values all booleans or all numbers "
                    "(indicator(x) turns a boolean into 0/1)")
            raise self.error(out, f"{self.describe(out)} may be a boolean at one position and an equal "
                             f"number at another (False and 0, or True and 1), passed on from "
                             f"{self.describe(origin)}: they are equal in Python, and the model could "
                             "not tell them apart in its output", hint=hint)

    def _propagate_bool_number(self) -> None:
        """Mark each s-op that may hold a boolean at one position and an equal number at another
        (False and 0, True and 1).  Value sets keep one of each such pair, so the model holds
        both as one value; that is harmless as long as nothing downstream tells them apart.
        In topological order (``self.info`` is filled in it):

        * tokens: the vocabulary (as read) holds both;
        * a map with no marked input: its own results bring both (``_own_clash``);
        * a map with a marked input: it is evaluated on the twin (False <-> 0, True <-> 1) of
          each 0/1 value of its marked inputs, the other inputs over their value sets.  A twin
          with a different result means the map tells 0 from False, which the model cannot: the
          program is refused there.  An equal result of the other type (``x if c else y``) passes
          the clash on; the same result (``indicator(x)``, ``x == 0``) does not;
        * an aggregate: its input is marked, or its input's values and its default (when the
          selector may be empty) bring both.

        Selectors compare with ==, <, … on which twins agree, and selector widths are numbers."""
        out = self.program.output
        # only the compiled program is refused (``whole_program`` analyses other s-ops too)
        needed = nx.ancestors(self.graph, out) | {out} if out in self.graph else set()
        for sid in self.info:
            node = self.node(sid)
            if isinstance(node, Tokens):
                if _clash(convert_token(v, node.type) for v in self.vocab) is not None:
                    self.marked[sid] = sid
            elif isinstance(node, (Map, SequenceMap)):
                if sid in self._own_clash:
                    self.marked[sid] = sid
                if any(i in self.marked for i in node.inputs):
                    self._twin_map(node, sid in needed)
            elif isinstance(node, Aggregate):
                sel_id, src = node.inputs
                if src in self.marked:
                    self.marked[sid] = self.marked[src]
                    continue
                # the default counts when the selector may select nothing (checked last: costly)
                if _clash([*self.info[src].values, node.default]) is not None \
                        and not self._never_empty(sel_id):
                    self.marked[sid] = sid

    def _twin_map(self, node: Map | SequenceMap, refuse: bool) -> None:
        """The map rule of ``_propagate_bool_number``."""
        sid = node.id
        flip = [i in self.marked for i in node.inputs]
        sets = [[v for v in self.info[i].values if _twin(v) is not None] if f else self.info[i].values
                for i, f in zip(node.inputs, flip, strict=True)]
        cost = 2 ** sum(flip)
        for vs in sets:
            cost *= len(vs)
        if cost > limits.TWIN_CAP:  # too many to try: assume it passes the clash on (never refused)
            first = next(i for i, f in zip(node.inputs, flip, strict=True) if f)
            self.marked.setdefault(sid, self.marked[first])
            return
        fails = object()

        def apply(args: tuple) -> Any:
            try:
                value = eval_expr(node.fn, args)
            except Exception:  # the interpreter raises there (``undefined``), if it occurs
                return fails
            return value.item() if isinstance(value, np.generic) else value

        for args in itertools.product(*sets):
            base = apply(args)
            if base is fails:
                continue
            for mask in itertools.product((False, True), repeat=len(args)):
                if not any(mask) or any(m and not f for m, f in zip(mask, flip, strict=True)):
                    continue
                twin = tuple(_twin(a) if m else a for a, m in zip(args, mask, strict=True))
                got = apply(twin)
                if got is fails:
                    continue
                try:
                    same = bool(got == base)
                except Exception:
                    same = False
                k = mask.index(True)
                src = node.inputs[k]
                if not same and refuse:
                    origin = self.marked[src]
                    raise self.error(sid, f"{self.describe(sid)} gives {base!r} for {args[k]!r} but "
                                     f"{got!r} for {twin[k]!r}: {self.describe(src)} may be either "
                                     "(they are equal in Python, and the compiled model holds them as "
                                     "one value), so the model could not tell which to give",
                                     hint=f"keep {self.describe(origin)}'s values all booleans or all "
                                          "numbers (give an aggregate a default of its values' type, "
                                          "e.g. False; indicator(x) turns a boolean into 0/1)")
                if not same or _tag(got) != _tag(base):
                    self.marked.setdefault(sid, self.marked[src])
                    if not refuse:
                        return
