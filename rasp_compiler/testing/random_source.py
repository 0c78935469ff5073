"""Random well-typed RASP programs **as source text**, for differential testing of the compiler.

A program is emitted as RASP source (one statement per line, variables ``v1, v2, …``) and parsed
by the normal front end, so a failing case can be read, minimised by hand and pasted into
tests/test_regressions.py, and the front end is tested along the way.  It covers what the compiler
must handle: maps and sequence maps on strings, ints, booleans and means; ``select`` with every
comparison, on str / int / bool / float keys and atom queries; ``and`` / ``or`` / ``not`` on
selectors; categorical aggregates with defaults (including selectors that select nothing);
numerical means followed by maps; and ``selector_width``.  ``depth`` is the length of the longest
chain of attention operations (aggregate, selector_width), at most ``max_depth`` (6).

Programs stay well-typed by construction: every variable carries its kind (``str``, ``int``,
``bool``, ``float``) and a bound on its values, so comparisons never mix kinds, lookup tables
cover every value, and value sets stay small enough to compile quickly.  Inputs where the
interpreter itself raises (a mean of strings when a selector picks several keys) are legal: the
checker skips them as outside the program's domain.
"""

from __future__ import annotations

import random
import warnings
from dataclasses import dataclass, field
from typing import Callable

from rasp_compiler.errors import CompileWarning
from rasp_compiler.graph.nodes import COMPARISONS

VOCAB = ("a", "b", "c")
MAX_INT_SPAN = 24  # an int s-op whose range is wider than this is reduced with % before reuse


@dataclass
class Var:
    name: str
    kind: str  # "str" | "int" | "bool" | "float"
    depth: int  # attention operations on the longest chain that produces it
    lo: float = 0  # int / float: value bounds (inclusive)
    hi: float = 0
    strs: tuple[str, ...] = ()  # str: the possible values


@dataclass
class Sel:
    text: str  # a selector expression
    depth: int
    at_most_one: bool = False  # selects at most one key per query (safe for a categorical aggregate)


@dataclass
class Generated:
    source: str
    depth: int
    seed: int
    output_kind: str
    causal: bool = False
    vocab: tuple[str, ...] = VOCAB  # the tokens (``generate``'s ``vocab``)


def _q(s: str) -> str:
    return f'"{s}"'


# A selector width s written by hand over a BOS at position 0 (the RASP paper's and the original
# library's idioms, which ``rewrites.bos_counts`` and ``bos_widths`` compile), and forms that only
# look like one; with how far past max_len each can reach.
_AT0 = "select(indices, 0, ==)"
_SHARE = f"aggregate({{s}} or {_AT0}, indicator(indices == 0))"
_PROBE = f"aggregate({{s}} and {_AT0}, 1, 0)"
HAND_WIDTHS: list[tuple[str, int]] = [
    # the width itself, three ways
    (f"round((1 / {_SHARE}) - 1 + {_PROBE})", 0),
    (f"round(1 / aggregate({_AT0} or {{s}}, indicator(indices == 0))) - 1"
     f" + aggregate({_AT0} and {{s}}, 1, 0)", 0),
    (f"round(length / aggregate({{s}} or {_AT0}, length * indicator(indices == 0))) - 1 + {_PROBE}", 0),
    # the keys other than 0 (the paper's form)
    (f"round(1 / {_SHARE} - 1)", 0),
    # not a width: key 0 counted twice
    (f"round(1 / {_SHARE} - 1) + 2 * {_PROBE}", 1),
]


@dataclass
class _Builder:
    rng: random.Random
    max_len: int
    max_depth: int
    causal: bool = False  # every selector looks only backwards, so the program compiles causally
    vocab: tuple[str, ...] = VOCAB
    repeats: float = 0.0  # the chance that a statement is written twice, under two names
    annotate: float = 0.0  # the chance that a numeric map is written numerical(...)
    hand_widths: float = 0.0  # the chance that a selector width is written by hand (``HAND_WIDTHS``)
    in_map: bool = False  # binding the statements of one positionwise map
    lines: list[str] = field(default_factory=list)
    vars: list[Var] = field(default_factory=list)
    counter: int = 0

    # -- bookkeeping -----------------------------------------------------------------------------
    def bind(self, text: str, kind: str, depth: int, *, lo: float = 0, hi: float = 0,
             strs: tuple[str, ...] = ()) -> Var:
        if self.in_map and self.annotate and kind in ("int", "float") and self.rng.random() < self.annotate:
            text = f"numerical({text})"  # the user's override: the map outputs one number
        self.counter += 1
        var = Var(f"v{self.counter}", kind, depth, lo, hi, tuple(sorted(set(strs))))
        self.lines.append(f"{var.name} = {text};")
        self.vars.append(var)
        if self.repeats and self.rng.random() < self.repeats:  # the same expression built again
            self.counter += 1
            twin = Var(f"v{self.counter}", kind, depth, lo, hi, var.strs)
            self.lines.append(f"{twin.name} = {text};")
            self.vars.append(twin)
            return twin
        return var

    def pick(self, kinds: tuple[str, ...], max_depth: int | None = None) -> Var | None:
        limit = self.max_depth if max_depth is None else max_depth
        pool = [v for v in self.vars if v.kind in kinds and v.depth <= limit]
        if not pool:
            return None
        # favour recent and deep variables so that chains of attention get long
        weights = [1 + i + 4 * v.depth for i, v in enumerate(pool)]
        return self.rng.choices(pool, weights)[0]

    def small_int(self, v: Var) -> Var:
        """``v`` itself, or ``v % k`` when its range is too wide to use as a lookup key."""
        if v.hi - v.lo <= MAX_INT_SPAN:
            return v
        k = self.rng.randint(2, 5)
        return self.bind(f"{v.name} % {k}", "int", v.depth, lo=0, hi=k - 1)

    # -- positionwise maps -----------------------------------------------------------------------
    def map_str(self, x: Var) -> Var:
        r = self.rng
        a = r.choice(x.strs)
        b = r.choice(self.vocab + ("z",))
        choice = r.randrange(5)
        if choice == 0:
            return self.bind(f"{x.name} == {_q(a)}", "bool", x.depth)
        if choice == 1:
            members = sorted(set(r.sample(x.strs, k=min(2, len(x.strs)))))
            return self.bind(f"{x.name} in [{', '.join(_q(m) for m in members)}]", "bool", x.depth)
        if choice == 2:
            return self.bind(f"{_q(b)} if {x.name} == {_q(a)} else {x.name}", "str", x.depth,
                             strs=x.strs + (b,))
        if choice == 3:
            table = {s: r.choice(self.vocab) for s in x.strs}
            body = ", ".join(f"{_q(k)}: {_q(v)}" for k, v in table.items())
            return self.bind(f"{{{body}}}[{x.name}]", "str", x.depth, strs=tuple(table.values()))
        table_i = {s: r.randint(-2, 3) for s in x.strs}
        body = ", ".join(f"{_q(k)}: {v}" for k, v in table_i.items())
        return self.bind(f"{{{body}}}[{x.name}]", "int", x.depth, lo=min(table_i.values()),
                         hi=max(table_i.values()))

    def map_int(self, x: Var) -> Var:
        r = self.rng
        x = self.small_int(x)
        k = r.randint(1, 3)
        c = r.randint(int(x.lo), int(x.hi)) if x.hi >= x.lo else 0
        choice = r.randrange(9)
        if choice == 0:
            return self.bind(f"{x.name} + {k}", "int", x.depth, lo=x.lo + k, hi=x.hi + k)
        if choice == 1:
            return self.bind(f"{x.name} - {k}", "int", x.depth, lo=x.lo - k, hi=x.hi - k)
        if choice == 2:
            return self.bind(f"{k} - {x.name}", "int", x.depth, lo=k - x.hi, hi=k - x.lo)
        if choice == 3 and x.hi - x.lo <= 8:
            lo, hi = sorted((x.lo * (k + 1), x.hi * (k + 1)))
            return self.bind(f"{x.name} * {k + 1}", "int", x.depth, lo=lo, hi=hi)
        if choice == 4:
            m = r.randint(2, 4)
            return self.bind(f"{x.name} % {m}", "int", x.depth, lo=0, hi=m - 1)
        if choice == 5:
            op = r.choice(COMPARISONS)
            return self.bind(f"{x.name} {op} {c}", "bool", x.depth)
        if choice == 6:
            return self.bind(f"{c} if {x.name} > {c} else {x.name}", "int", x.depth, lo=x.lo, hi=max(x.hi, c))
        if choice == 7:
            return self.bind(f"indicator({x.name} == {c})", "int", x.depth, lo=0, hi=1)
        return self.bind(f"-{x.name}", "int", x.depth, lo=-x.hi, hi=-x.lo)

    def map_bool(self, x: Var) -> Var:
        r = self.rng
        choice = r.randrange(4)
        if choice == 0:
            return self.bind(f"not {x.name}", "bool", x.depth)
        if choice == 1:
            return self.bind(f"indicator({x.name})", "int", x.depth, lo=0, hi=1)
        if choice == 2:
            a, b = r.sample(self.vocab, 2)
            return self.bind(f"{_q(a)} if {x.name} else {_q(b)}", "str", x.depth, strs=(a, b))
        a, b = r.randint(-2, 4), r.randint(-2, 4)
        return self.bind(f"{a} if {x.name} else {b}", "int", x.depth, lo=min(a, b), hi=max(a, b))

    def map_float(self, x: Var) -> Var:
        """Maps after a numerical mean: tracr got their value sets wrong (``x*x``, ``x == 0.4``)."""
        r = self.rng
        choice = r.randrange(6)
        if choice == 0:
            lo, hi = min(0.0, x.lo * x.hi, x.lo * x.lo), max(x.lo * x.lo, x.hi * x.hi)
            return self.bind(f"{x.name} * {x.name}", "float", x.depth, lo=lo, hi=hi)
        if choice == 1:
            c = r.choice((0.25, 0.4, 0.5, 0.6, 0.75, 1, 1.5, 2))
            return self.bind(f"{x.name} == {c}", "bool", x.depth)
        if choice == 2:
            c = r.choice((0, 0.2, 0.34, 0.5, 0.7, 1, 1.5))
            op = r.choice(("<", ">", "<=", ">="))
            return self.bind(f"{x.name} {op} {c}", "bool", x.depth)
        if choice == 3:
            k = r.choice((2, 3, 4))
            lo, hi = round(x.lo * k) - 1, round(x.hi * k) + 1
            return self.bind(f"round({x.name} * {k})", "int", x.depth, lo=lo, hi=hi)
        if choice == 4:
            return self.bind(f"{x.name} + 1", "float", x.depth, lo=x.lo + 1, hi=x.hi + 1)
        return self.bind(f"round((indices + 1) * {x.name})", "int", x.depth,
                         lo=min(0, round(x.lo * self.max_len)) - 1, hi=max(0, round(x.hi * self.max_len)) + 1)

    def sequence_map(self) -> Var | None:
        r = self.rng
        choice = r.randrange(4)
        if choice == 0:
            # with annotations, means are summed too (tracr's pair_balance: opens - closes)
            kinds = ("int", "float") if self.annotate else ("int",)
            x, y = self.pick(kinds), self.pick(kinds)
            if x is None or y is None:
                return None
            x, y = self.small_int(x), self.small_int(y)
            d = max(x.depth, y.depth)
            kind = "float" if "float" in (x.kind, y.kind) else "int"
            op = r.choice(("+", "-", "==", "<", "!=", ">="))
            if op == "+":
                return self.bind(f"{x.name} + {y.name}", kind, d, lo=x.lo + y.lo, hi=x.hi + y.hi)
            if op == "-":
                return self.bind(f"{x.name} - {y.name}", kind, d, lo=x.lo - y.hi, hi=x.hi - y.lo)
            return self.bind(f"{x.name} {op} {y.name}", "bool", d)
        if choice == 1:
            x, y = self.pick(("str",)), self.pick(("str",))
            if x is None or y is None:
                return None
            d = max(x.depth, y.depth)
            if r.random() < 0.5:
                return self.bind(f"{x.name} == {y.name}", "bool", d)
            # concatenation: a pairwise map whose values are the product of both value sets
            if len(x.strs) * len(y.strs) <= 9:
                return self.bind(f"{x.name} + {y.name}", "str", d,
                                 strs=tuple(a + b for a in x.strs for b in y.strs))
            return self.bind(f"{x.name} != {y.name}", "bool", d)
        if choice == 2:
            x, y = self.pick(("bool",)), self.pick(("bool",))
            if x is None or y is None:
                return None
            op = r.choice(("and", "or", "=="))
            return self.bind(f"{x.name} {op} {y.name}", "bool", max(x.depth, y.depth))
        cond = self.pick(("bool",))
        kind = r.choice(("int", "str"))
        x, y = self.pick((kind,)), self.pick((kind,))
        if cond is None or x is None or y is None:
            return None
        d = max(cond.depth, x.depth, y.depth)
        if kind == "int":
            return self.bind(f"{x.name} if {cond.name} else {y.name}", "int", d, lo=min(x.lo, y.lo),
                             hi=max(x.hi, y.hi))
        return self.bind(f"{x.name} if {cond.name} else {y.name}", "str", d, strs=x.strs + y.strs)

    # -- selectors and attention -----------------------------------------------------------------
    def select(self, limit: int) -> Sel | None:
        r = self.rng
        kind = r.choices(("int", "str", "bool", "float"), (5, 3, 2, 1))[0]
        k, q = self.pick((kind,), limit), self.pick((kind,), limit)
        if k is None or q is None:
            return None
        if kind == "int":
            k, q = self.small_int(k), self.small_int(q)
        op = r.choice(COMPARISONS)
        if r.random() < 0.15:  # an atom query broadcast to every position
            if kind == "int":
                atom = str(r.randint(int(k.lo), int(k.hi)) if k.hi >= k.lo else 0)
            elif kind == "str":
                atom = _q(r.choice(k.strs))
            elif kind == "bool":
                atom = r.choice(("True", "False"))
            else:
                atom = r.choice(("0", "0.5", "1"))
            return Sel(f"select({k.name}, {atom}, {op})", k.depth)
        return Sel(f"select({k.name}, {q.name}, {op})", max(k.depth, q.depth))

    def selector(self, limit: int) -> Sel | None:
        """A select, or an and/or/not combination of two or three selects."""
        r = self.rng
        first = self.select(limit)
        if first is None:
            return None
        roll = r.random()
        if roll < 0.45:
            return first
        if roll < 0.6:
            return Sel(f"not {first.text}", first.depth)
        second = self.select(limit)
        if second is None:
            return first
        op = r.choice(("and", "or"))
        sel = Sel(f"({first.text} {op} {second.text})", max(first.depth, second.depth))
        if r.random() < 0.3:
            third = self.select(limit)
            if third is not None:
                op2 = r.choice(("and", "or"))
                neg = "not " if r.random() < 0.3 else ""
                sel = Sel(f"({sel.text} {op2} {neg}{third.text})", max(sel.depth, third.depth))
        return sel

    def pointer_selector(self, limit: int) -> Sel | None:
        """``select(indices, q, ==)`` (at most one key), maybe narrowed by ``and`` another selector."""
        q = self.pick(("int",), limit)
        if q is None:
            return None
        sel = Sel(f"select(indices, {q.name}, ==)", q.depth, at_most_one=True)
        if self.rng.random() < 0.3:
            other = self.selector(limit)
            if other is not None:
                sel = Sel(f"({sel.text} and {other.text})", max(sel.depth, other.depth), True)
        return sel

    def backwards(self, sel: Sel | None) -> Sel | None:
        """``sel`` itself, or (for a causal program) ``sel`` restricted to keys at or before the query."""
        if sel is None or not self.causal:
            return sel
        return Sel(f"({sel.text} and select(indices, indices, <=))", sel.depth, sel.at_most_one)

    def attention(self) -> Var | None:
        r = self.rng
        limit = self.max_depth - 1
        choice = r.choices(("width", "cat", "mean_bool", "mean_int"), (3, 4, 2, 1))[0]
        if choice == "width":
            sel = self.backwards(self.selector(limit))
            if sel is None:
                return None
            if self.hand_widths and not self.causal and r.random() < self.hand_widths:
                form, hi = r.choice(HAND_WIDTHS)
                return self.bind(form.format(s=sel.text), "int", sel.depth + 1, lo=0, hi=self.max_len + hi)
            return self.bind(f"selector_width({sel.text})", "int", sel.depth + 1, lo=0, hi=self.max_len)
        if choice == "cat":
            sel = self.backwards(self.pointer_selector(limit) if r.random() < 0.7 else self.selector(limit))
            kind = r.choice(("str", "int", "bool"))
            x = self.pick((kind,), limit)
            if sel is None or x is None:
                return None
            d = max(sel.depth, x.depth) + 1
            if kind == "str":
                default = r.choice(("-", r.choice(x.strs)))
                return self.bind(f"aggregate({sel.text}, {x.name}, {_q(default)})", "str", d,
                                 strs=x.strs + (default,))
            if kind == "bool":
                return self.bind(f"aggregate({sel.text}, {x.name}, False)", "bool", d)
            x = self.small_int(x)
            default_i = r.randint(-1, 2)
            # several selected keys average to a float
            kind_out = "int" if sel.at_most_one else "float"
            return self.bind(f"aggregate({sel.text}, {x.name}, {default_i})", kind_out, d,
                             lo=min(x.lo, default_i), hi=max(x.hi, default_i))
        sel = self.backwards(self.selector(limit))
        if sel is None:
            return None
        if choice == "mean_bool":  # tracr's numerical mean of a boolean (frac_prevs)
            b = self.pick(("bool",), limit)
            if b is None:
                return None
            return self.bind(f"numerical(aggregate({sel.text}, numerical(indicator({b.name})), 0))",
                             "float", max(sel.depth, b.depth) + 1, lo=0, hi=1)
        x = self.pick(("int",), limit)
        if x is None:
            return None
        x = self.small_int(x)
        return self.bind(f"aggregate({sel.text}, {x.name}, 0)", "float", max(sel.depth, x.depth) + 1,
                         lo=min(0, x.lo), hi=max(0, x.hi))

    def positionwise(self) -> Var | None:
        r = self.rng
        self.in_map = True
        try:
            if r.random() < 0.25:
                return self.sequence_map()
            kind = r.choices(("str", "int", "bool", "float"), (3, 4, 3, 2))[0]
            x = self.pick((kind,))
            if x is None:
                return None
            maps: dict[str, Callable[[Var], Var]] = {"str": self.map_str, "int": self.map_int,
                                                     "bool": self.map_bool, "float": self.map_float}
            return maps[kind](x)
        finally:
            self.in_map = False


def generate(seed: int, *, max_len: int = 5, max_depth: int = 6, statements: int | None = None,
             causal: bool = False, vocab: tuple[str, ...] = VOCAB, repeats: float = 0.0,
             annotate: float = 0.0, hand_widths: float = 0.0) -> Generated:
    """One random program (deterministic in ``seed``) as RASP source text.  ``causal`` programs
    select only keys at or before their query and never read ``length``, so a causal model can
    compute them.  ``vocab`` (at least two tokens, no quotes or backslashes; several characters
    each allowed) replaces a, b, c in the program's literals and in the inputs.  With ``repeats``
    > 0 each statement is written twice, under two names, with that chance, so the compiler's
    merging of alike nodes (``rewrites.shared_subexpressions``) is exercised; at 0 the programs
    are those of every earlier run.  With ``annotate`` > 0 each map with a numeric result is
    written ``numerical(...)`` with that chance (the user's override of the encoding) and
    sequence maps also add and subtract means; at 0 the programs are again those of earlier runs.
    With ``hand_widths`` > 0 (not causal) each ``selector_width`` is written by hand over a BOS at
    position 0 with that chance, in one of the forms of ``HAND_WIDTHS``."""
    rng = random.Random(seed)
    vocab = tuple(vocab)
    b = _Builder(rng, max_len, max_depth, causal, vocab, repeats, annotate, hand_widths)
    b.vars = [Var("tokens", "str", 0, strs=vocab), Var("indices", "int", 0, lo=0, hi=max_len - 1)]
    if not causal:
        b.vars.append(Var("length", "int", 0, lo=1, hi=max_len))
    target = rng.randint(1, max_depth)  # the attention depth this program aims for
    count = statements if statements is not None else rng.randint(3, 4 + 2 * target)
    for _ in range(200):
        deepest = max(v.depth for v in b.vars)
        if len(b.lines) >= count and deepest >= target:
            break
        want_attention = deepest < target and rng.random() < 0.55
        var = b.attention() if want_attention else b.positionwise()
        if var is None:
            b.positionwise()
    # the output is the latest of the deepest variables, so that the whole chain is compiled
    deepest = max(v.depth for v in b.vars)
    out = [v for v in b.vars if v.depth == deepest][-1]
    if out.name in ("tokens", "indices", "length"):
        out = b.bind(out.name, out.kind, out.depth, lo=out.lo, hi=out.hi, strs=out.strs)
    source = "\n".join(b.lines + [f"{out.name};", ""])
    return Generated(source, deepest, seed, out.kind, causal, vocab)


def random_input(rng: random.Random, max_len: int, vocab: tuple[str, ...] = VOCAB) -> list[str]:
    return [rng.choice(vocab) for _ in range(rng.randint(1, max_len))]


@dataclass
class Outcome:
    """What happened to one generated program: compiled and checked, or refused by the compiler."""

    generated: Generated
    status: str  # "agree" | "disagree" | "refused" | "crash" | "undefined"
    detail: str = ""
    inputs_checked: int = 0
    failures: list[dict] = field(default_factory=list)


def check_generated(gen: Generated, *, max_len: int = 5, inputs: int = 20, dtype: str = "float32") -> Outcome:
    """Compile ``gen`` and compare it with the interpreter on ``inputs`` random inputs (plus the
    all-equal edge inputs).  A ``CompileError`` is a refusal (reported, not a disagreement); any
    other exception from the compiler or the model is a crash."""
    from rasp_compiler.compiler import compile_program
    from rasp_compiler.compiler.checking import check_model
    from rasp_compiler.errors import UserError
    from rasp_compiler.lang import program_from_source

    program = program_from_source(gen.source, f"<random {gen.seed}>")
    try:
        with warnings.catch_warnings():  # the check compares every input: notes are expected
            warnings.simplefilter("ignore", CompileWarning)
            model = compile_program(program, list(gen.vocab), max_len, dtype=dtype, causal=gen.causal)
    except UserError as err:  # CompileError included: a clear refusal
        return Outcome(gen, "refused", str(err).splitlines()[0])
    except Exception as err:  # noqa: BLE001 - any other exception is a compiler bug to report
        return Outcome(gen, "crash", f"{type(err).__name__}: {err}")
    rng = random.Random(gen.seed * 7919 + 1)
    batch = [random_input(rng, max_len, gen.vocab) for _ in range(inputs)]
    batch += [[t] * n for t in gen.vocab for n in (1, max_len)]
    try:
        res = check_model(model, program, batch)
    except Exception as err:  # noqa: BLE001
        return Outcome(gen, "crash", f"{type(err).__name__}: {err}")
    if res.inputs_checked == 0:
        return Outcome(gen, "undefined", "the interpreter raises on every input")
    return Outcome(gen, "agree" if res.ok else "disagree", "", res.inputs_checked, res.failures)


__all__ = ["COMPARISONS", "VOCAB", "Generated", "Outcome", "check_generated", "generate", "random_input"]
