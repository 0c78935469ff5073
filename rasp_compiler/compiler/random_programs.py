"""Random well-typed RASP programs, for differential testing of the compiler against the interpreter.

A program is grown node by node from ``tokens`` (strings), ``indices`` and ``length``: positionwise
maps and sequence maps (arithmetic, comparisons, lookups, conditionals), selects with every
comparison, and/or/not combinations of selects, numerical mean aggregates, categorical aggregates
(over a selector that picks at most one key, so strings never get averaged), and selector widths.
Every s-op carries its type (``str``, ``int``, ``bool``, ``float``) so that each operator gets
operands it accepts; the attention depth of every node is tracked and kept at most ``max_depth``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import networkx as nx

from rasp_compiler.graph.expr import Binary, Const, Lookup, Ternary, Unary, Var
from rasp_compiler.graph.nodes import (
    COMPARISONS,
    Aggregate,
    Constant,
    Indices,
    Length,
    Map,
    Program,
    Select,
    SelectorAnd,
    SelectorNot,
    SelectorOr,
    SelectorWidth,
    SequenceMap,
    Tokens,
    add_node,
)


@dataclass
class _SOp:
    id: str
    type: str  # str | int | bool | float
    depth: int  # attention layers on the longest path


class ProgramGenerator:
    def __init__(self, seed: int, vocab: str = "abc", max_depth: int = 6) -> None:
        self.rng = random.Random(seed)
        self.vocab = vocab
        self.max_depth = max_depth
        self.g = nx.DiGraph()
        self.sops: list[_SOp] = []
        self.n = 0

    def _id(self, kind: str) -> str:
        self.n += 1
        return f"{kind}_{self.n}"

    def _add(self, node, type_: str, depth: int) -> _SOp:
        add_node(self.g, node)
        s = _SOp(node.id, type_, depth)
        self.sops.append(s)
        return s

    def _pick(self, types: tuple[str, ...] | None = None, max_depth: int | None = None) -> _SOp | None:
        cands = [s for s in self.sops if (types is None or s.type in types)
                 and (max_depth is None or s.depth <= max_depth)]
        if not cands:
            return None
        # prefer recent s-ops so programs grow deep rather than wide
        weights = [1.0 + i for i in range(len(cands))]
        return self.rng.choices(cands, weights=weights)[0]

    # ------------------------------------------------------------------ maps
    def _map(self) -> _SOp | None:
        r = self.rng
        x = self._pick()
        if x is None:
            return None
        v = Var(0)
        if x.type == "str":
            choice = r.randrange(3)
            if choice == 0:
                fn, t = Binary("==", v, Const(r.choice(self.vocab))), "bool"
            elif choice == 1:
                table = tuple((c, r.choice(self.vocab)) for c in self.vocab)
                fn, t = Lookup(table, v, True), "str"
            else:
                table = tuple((c, r.randrange(4)) for c in self.vocab)
                fn, t = Lookup(table, v, True), "int"
        elif x.type == "bool":
            choice = r.randrange(3)
            if choice == 0:
                fn, t = Unary("not", v), "bool"
            elif choice == 1:
                fn, t = Unary("indicator", v), "int"
            else:
                fn, t = Ternary(Const(r.choice(self.vocab)), v, Const(r.choice(self.vocab))), "str"
        elif x.type == "int":
            choice = r.randrange(5)
            if choice == 0:
                fn, t = Binary("+", v, Const(r.randrange(-2, 3))), "int"
            elif choice == 1:
                fn, t = Binary("%", v, Const(r.randrange(2, 4))), "int"
            elif choice == 2:
                fn, t = Binary(r.choice(COMPARISONS), v, Const(r.randrange(0, 4))), "bool"
            elif choice == 3:
                fn, t = Binary("-", Const(r.randrange(0, 5)), v), "int"
            else:
                fn, t = Binary("*", v, Const(2)), "int"
        else:  # float (a mean)
            choice = r.randrange(3)
            if choice == 0:
                threshold = Const(r.choice((0, 0.5, 1, 0.25)))
                fn, t = Binary(r.choice((">", "<", "==", ">=")), v, threshold), "bool"
            elif choice == 1:
                fn, t = Binary("*", v, v), "float"
            else:
                fn, t = Binary("-", Const(1), v), "float"
        enc = "numerical" if t == "float" else None
        return self._add(Map(self._id("map"), (x.id,), fn=fn, encoding=enc), t, x.depth)

    def _sequence_map(self) -> _SOp | None:
        r = self.rng
        a, b = self._pick(), self._pick()
        if a is None or b is None or a.id == b.id:
            return None
        num = ("int", "float")
        if a.type in num and b.type in num and a.type == "int" and b.type == "int":
            op = r.choice(("+", "-", "==", "<", ">="))
            t = "int" if op in "+-" else "bool"
        elif a.type == b.type and a.type in ("str", "bool"):
            op = r.choice(("==", "!="))
            t = "bool"
            if a.type == "bool":
                op = r.choice(("and", "or", "=="))
        elif a.type == "bool" and b.type in ("str", "int"):
            return self._add(SequenceMap(self._id("seqmap"), (a.id, b.id),
                                         fn=Ternary(Var(1), Var(0), Const(0 if b.type == "int" else "x"))),
                             b.type, max(a.depth, b.depth))
        else:
            return None
        return self._add(SequenceMap(self._id("seqmap"), (a.id, b.id), fn=Binary(op, Var(0), Var(1))), t,
                         max(a.depth, b.depth))

    # ------------------------------------------------------------------ selectors
    def _select(self, limit: int) -> tuple[str, int] | None:
        r = self.rng
        k = self._pick(("str", "int", "bool"), limit)
        if k is None:
            return None
        same = [s for s in self.sops if s.type == k.type and s.depth <= limit]
        q = r.choice(same)
        op = r.choice(COMPARISONS) if k.type == "int" else r.choice(("==", "!="))
        if k.type == "str" and r.random() < 0.5:
            op = r.choice(COMPARISONS)
        sid = self._id("select")
        add_node(self.g, Select(sid, (k.id, q.id), op=op))
        return sid, max(k.depth, q.depth)

    def _selector(self, limit: int) -> tuple[str, int] | None:
        r = self.rng
        first = self._select(limit)
        if first is None:
            return None
        sid, d = first
        for _ in range(r.choice((0, 0, 1, 1, 2))):
            kind = r.random()
            if kind < 0.2:
                nid = self._id("not")
                add_node(self.g, SelectorNot(nid, (sid,)))
                sid = nid
                continue
            other = self._select(limit)
            if other is None:
                break
            nid = self._id("sel")
            cls = SelectorAnd if kind < 0.6 else SelectorOr
            add_node(self.g, cls(nid, (sid, other[0])))
            sid, d = nid, max(d, other[1])
        return sid, d

    def _attention(self) -> _SOp | None:
        r = self.rng
        limit = self.max_depth - 1
        kind = r.random()
        if kind < 0.3:
            sel = self._selector(limit)
            if sel is None:
                return None
            return self._add(SelectorWidth(self._id("width"), (sel[0],)), "int", sel[1] + 1)
        if kind < 0.7:
            sel = self._selector(limit)
            src = self._pick(("bool", "int", "float"), limit)
            if sel is None or src is None:
                return None
            if src.type == "bool":
                m = self._add(Map(self._id("ind"), (src.id,), fn=Unary("indicator", Var(0))), "int",
                              src.depth)
                src = m
            return self._add(Aggregate(self._id("mean"), (sel[0], src.id), default=0, encoding="numerical"),
                             "float", max(sel[1], src.depth) + 1)
        # categorical aggregate over a selector that picks at most one key: key = indices, ==
        q = self._pick(("int",), limit)
        src = self._pick(("str", "int", "bool"), limit)
        if q is None or src is None:
            return None
        sid = self._id("select")
        add_node(self.g, Select(sid, ("indices", q.id), op="=="))
        default = "-" if src.type == "str" else (False if src.type == "bool" else -1)
        return self._add(Aggregate(self._id("fetch"), (sid, src.id), default=default), src.type,
                         max(q.depth, src.depth) + 1)

    def generate(self, steps: int = 8) -> Program:
        self._add(Tokens("tokens"), "str", 0)
        self._add(Indices("indices"), "int", 0)
        if self.rng.random() < 0.3:
            self._add(Length("length"), "int", 1)
        if self.rng.random() < 0.2:
            self._add(Constant(self._id("const"), value=self.rng.randrange(3)), "int", 0)
        made = 0
        tries = 0
        while made < steps and tries < 10 * steps:
            tries += 1
            kind = self.rng.random()
            s = self._map() if kind < 0.35 else (self._sequence_map() if kind < 0.5 else self._attention())
            if s is not None:
                made += 1
        out = self.sops[-1]
        return Program(self.g, out.id).with_output(out.id)


def random_program(seed: int, vocab: str = "abc", max_depth: int = 6, steps: int = 8) -> Program:
    return ProgramGenerator(seed, vocab, max_depth).generate(steps)
