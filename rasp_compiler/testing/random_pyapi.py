"""Random well-typed tracr-style programs built through the Python API, for differential testing.

``rasp_compiler/testing/random_source.py`` tests ``.rasp`` text; this module tests what only the
Python API builds.  A program is written as **Python source** (``v3 = rasp.Map(lambda x: x % 3,
v1)``, one statement per line) and built by executing it, so a failing case is a runnable
reproducer.  It covers:

* ``Map`` / ``SequenceMap`` with opaque Python lambdas from a fixed menu (over ints, strings,
  booleans and means), each applied only where it is well typed: the generator carries every
  s-op's value set (exact for discrete values, a grid of fractions for means) and drops a lambda
  that raises, mixes booleans with numbers, or gives too many values;
* maps of unnamed maps (tracr's ``simplify`` merges them; ``simplify=False`` and ``.named`` stop it);
* operators on s-ops (``v + 1``, ``a - b``, ``v == "a"``, ``~v``, ``a & b``, ``a | b``, ``-v``);
* ``LinearSequenceMap``, ``Full``, ``ConstantSOp`` (with and without ``check_length``);
* user annotations: ``numerical(...)`` on maps, linear maps and means, ``categorical(...)``;
* ``Select`` with every ``Comparison`` (``TRUE``/``FALSE`` too), the string form and lambda
  predicates, with ``Full`` keys or queries; ``selector_and`` / ``selector_or`` / ``selector_not``
  (which merge selects over the same keys and queries, a ``Full`` matching any) and ``&`` / ``|`` /
  ``~`` (one node each);
* ``Aggregate``: categorical over selectors that pick at most one key (any value type, typed
  defaults), categorical means of ints, numerical means of numerical 0/1 or small-int s-ops;
  ``SelectorWidth``; a few of tracr's library programs (``shift_by``, ``make_frac_prevs``,
  ``make_hist``, ``make_length``).

``depth`` counts attention layers on the longest chain (at most ``max_depth``, default 6).
``check_generated`` compiles a program and compares the model with the interpreter
(``compiler.checking.check_model``) on random inputs of every length plus the edge inputs.
"""

from __future__ import annotations

import random
import warnings
from dataclasses import dataclass, field
from typing import Any

from rasp_compiler.errors import CompileWarning

STR_VOCAB = ("a", "b", "c")
INT_VOCAB = (1, 2, 3)
MAX_LINES = 40  # statements per program at most
MAX_VALUES = 16  # a discrete s-op with more values is reduced (ints) or not built (other kinds)

# Lambdas by input kind.  Output kinds are inferred from the values they give.
MAPS = {
    "int": ("lambda x: x + 1", "lambda x: x - 1", "lambda x: x % 3", "lambda x: x * 2", "lambda x: 3 - x",
            "lambda x: abs(x - 2)", "lambda x: min(x, 2)", "lambda x: x // 2", "lambda x: x == 2",
            "lambda x: x > 1", "lambda x: x % 2 == 0", "lambda x: 'a' if x > 1 else 'b'",
            "lambda x: str(x % 3)"),
    "str": ("lambda x: x == 'a'", "lambda x: x in 'ab'", "lambda x: x.upper()", "lambda x: ord(x[0]) % 4",
            "lambda x: x + x", "lambda x: len(x)", "lambda x: {'a': 'b', 'b': 'c'}.get(x, x)",
            "lambda x: x < 'b'"),
    "bool": ("lambda x: not x", "lambda x: int(x)", "lambda x: 'y' if x else 'n'",
             "lambda x: 2 if x else -1"),
    "float": ("lambda x: x > 0.5", "lambda x: x <= 0.25", "lambda x: round(x * 2)", "lambda x: 1 - x",
              "lambda x: x * x", "lambda x: x == 0", "lambda x: int(x * 3)"),
}
SEQUENCE_MAPS = {
    ("int", "int"): ("lambda x, y: x + y", "lambda x, y: x * y", "lambda x, y: min(x, y)",
                     "lambda x, y: max(x, y)", "lambda x, y: x - y", "lambda x, y: x == y",
                     "lambda x, y: x < y", "lambda x, y: (x + y) % 3"),
    ("str", "str"): ("lambda x, y: x == y", "lambda x, y: x + y", "lambda x, y: min(x, y)"),
    ("bool", "bool"): ("lambda x, y: x and y", "lambda x, y: x or y", "lambda x, y: x != y"),
    ("bool", "int"): ("lambda x, y: y if x else 0", "lambda x, y: x + y"),
    ("bool", "str"): ("lambda x, y: y if x else 'z'",),
    ("int", "str"): ("lambda x, y: x % 2 == 0 or y == 'a'", "lambda x, y: y * (x % 3)"),
    ("float", "int"): ("lambda x, y: x * y", "lambda x, y: x < y"),
    ("float", "float"): ("lambda x, y: x + y", "lambda x, y: x > y"),
}
# Operators on s-ops: the text (``{0}``, ``{1}`` the operands) and the same function, for values.
OPERATORS = {
    "int": (("{0} + 1", "lambda x: x + 1"), ("{0} - 2", "lambda x: x - 2"), ("-{0}", "lambda x: -x"),
            ("{0} * 3", "lambda x: x * 3"), ("{0} % 2", "lambda x: x % 2"), ("{0} == 1", "lambda x: x == 1"),
            ("{0} < 2", "lambda x: x < 2"), ("{0} >= 1", "lambda x: x >= 1")),
    "str": (("{0} == 'a'", "lambda x: x == 'a'"), ("{0} != 'b'", "lambda x: x != 'b'"),
            ("{0} + '!'", "lambda x: x + '!'")),
    "bool": (("~{0}", "lambda x: not x"), ("{0} == True", "lambda x: x == True")),
}
OPERATORS2 = {
    ("int", "int"): (("{0} + {1}", "lambda x, y: x + y"), ("{0} - {1}", "lambda x, y: x - y"),
                     ("{0} == {1}", "lambda x, y: x == y"), ("{0} < {1}", "lambda x, y: x < y")),
    ("str", "str"): (("{0} == {1}", "lambda x, y: x == y"), ("{0} != {1}", "lambda x, y: x != y")),
    ("bool", "bool"): (("{0} & {1}", "lambda x, y: x and y"), ("{0} | {1}", "lambda x, y: x or y"),
                       ("{0} == {1}", "lambda x, y: x == y")),
}
PREDICATES = {
    "int": ("lambda k, q: k == q + 1", "lambda k, q: (k + q) % 2 == 0", "lambda k, q: abs(k - q) <= 1",
            "lambda k, q: k < q or k == 0"),
    "str": ("lambda k, q: k != q", "lambda k, q: k <= q", "lambda k, q: k[0] == q[0]"),
    "bool": ("lambda k, q: k or q", "lambda k, q: k != q"),
    "float": ("lambda k, q: k < q - 0.2", "lambda k, q: abs(k - q) < 0.3"),
}
COMPARISONS = ("EQ", "NEQ", "LT", "LEQ", "GT", "GEQ", "TRUE", "FALSE")
LINEAR_FACTORS = ((1, 1), (1, -1), (2, -1), (0.5, 0.5), (1, 0), (-1, 3))
NUMBER = ("int", "float")


@dataclass
class V:
    """A variable of the generated source: an s-op with its kind and (approximate) values."""

    name: str
    kind: str  # int | str | bool | float
    vals: tuple
    depth: int
    boolean: bool = False  # built as a boolean (comparison, ~, & / | of those): the API's None is False


@dataclass
class Sel:
    name: str
    depth: int
    keys: V | None  # a Select's keys and queries (None for combinations)
    queries: V | None
    at_most_one: bool = False


@dataclass
class Generated:
    source: str  # Python source; executing it leaves the program in ``out``
    depth: int
    seed: int
    vocab: tuple
    max_len: int
    output_kind: str
    fixed_len: int | None = None  # a length-checked ConstantSOp's length: other lengths have no answer

    def build(self) -> Any:
        """The program's output s-op, built by running ``source``."""
        return self.namespace()["out"]

    def namespace(self) -> dict[str, Any]:
        """Every variable of ``source`` (``v1``, ``s2`` …, ``out``) after running it."""
        from rasp_compiler import pyapi as rasp
        from rasp_compiler.pyapi import lib

        namespace: dict[str, Any] = {"rasp": rasp, "lib": lib, "Comparison": rasp.Comparison}
        exec(compile(self.source, f"<pyapi random {self.seed}>", "exec"), namespace)  # noqa: S102
        return namespace

    def script(self) -> str:
        """A runnable reproducer: the program, then model and interpreter on the failing inputs."""
        return ("from rasp_compiler import pyapi as rasp\nfrom rasp_compiler.pyapi import lib\n"
                "Comparison = rasp.Comparison\n\n" + self.source +
                f"\nmodel = rasp.compile_program(out, {list(self.vocab)!r}, {self.max_len})\n")


def _kind(vals: Any) -> str | None:
    """The kind of a value set, or None when it mixes kinds (booleans with numbers included)."""
    if not vals:
        return None
    if all(isinstance(v, bool) for v in vals):
        return "bool"
    if all(isinstance(v, str) for v in vals):
        return "str"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        return "int"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return "float"
    return None


def _means(lo: float, hi: float, max_len: int) -> tuple:
    """A grid standing for the means of values in [lo, hi] over at most ``max_len`` keys."""
    return tuple(sorted({lo + (hi - lo) * i / n for n in range(1, max_len + 1) for i in range(n + 1)}))


class _Builder:
    def __init__(self, rng: random.Random, vocab: tuple, max_len: int, max_depth: int) -> None:
        self.rng, self.vocab, self.max_len, self.max_depth = rng, vocab, max_len, max_depth
        self.const_len = rng.randint(2, max_len)
        self.fixed_len: int | None = None
        self.lines: list[str] = []
        self.vars: list[V] = []
        self.n = 0

    # -- bookkeeping ------------------------------------------------------------------------------
    def bind(self, text: str, vals: Any, depth: int, *, kind: str | None = None,
             boolean: bool = False) -> V | None:
        vals = list(vals)
        kind = kind or _kind(vals)
        if kind is None or (kind != "float" and len(set(vals)) > MAX_VALUES):
            return None
        if self.rng.random() < 0.1:  # a named node is never merged into a later map
            text = f"({text}).named('n{self.n + 1}')"
        self.n += 1
        var = V(f"v{self.n}", kind, tuple(sorted(set(vals), key=repr)), depth, boolean)
        self.lines.append(f"{var.name} = {text}")
        self.vars.append(var)
        return var

    def bind_sel(self, text: str, depth: int, keys: V | None = None, queries: V | None = None,
                 at_most_one: bool = False) -> Sel:
        self.n += 1
        sel = Sel(f"s{self.n}", depth, keys, queries, at_most_one)
        self.lines.append(f"{sel.name} = {text}")
        return sel

    def pick(self, kinds: tuple[str, ...], limit: int | None = None) -> V | None:
        limit = self.max_depth if limit is None else limit
        pool = [v for v in self.vars if v.kind in kinds and v.depth <= limit]
        if not pool:
            return None
        weights = [1 + i + 4 * v.depth for i, v in enumerate(pool)]  # recent and deep: long chains
        return self.rng.choices(pool, weights)[0]

    def image(self, fn_text: str, *args: V) -> list:
        """The values ``fn`` gives over its inputs' values (a list: a set would merge 0 and False);
        raises where ``fn`` raises on one."""
        fn = eval(fn_text)  # noqa: S307 - the fixed menu above
        return [fn(*xs) for xs in _product(*(a.vals for a in args))]

    def small(self, v: V) -> V:
        """``v``, or ``v % k`` when its values are too many for a lookup."""
        if v.kind != "int" or len(v.vals) <= 8:
            return v
        return self.bind(f"rasp.Map(lambda x: x % 4, {v.name})", [x % 4 for x in v.vals], v.depth) or v

    # -- positionwise -----------------------------------------------------------------------------
    def annotate(self, text: str, kind: str) -> str:
        """``text``, sometimes wrapped in ``numerical`` (numbers, booleans) or ``categorical``."""
        roll = self.rng.random()
        if kind in ("int", "bool", "float") and roll < 0.2:
            return f"rasp.numerical({text})"
        if roll > 0.93:
            return f"rasp.categorical({text})"
        return text

    def map(self) -> V | None:
        r = self.rng
        x = self.pick(("int", "str", "bool", "float"))
        if x is None:
            return None
        if r.random() < 0.3 and x.kind in OPERATORS:
            text, fn = r.choice(OPERATORS[x.kind])
            boolean = "==" in text or "<" in text or "~" in text or "!=" in text or ">" in text
            return self.bind(text.format(x.name), self.image(fn, x), x.depth, boolean=boolean)
        fn = r.choice(MAPS[x.kind])
        try:
            vals = self.image(fn, x)
        except Exception:  # noqa: BLE001 - not well typed for these values: try another
            return None
        kind = _kind(vals)
        if kind is None:
            return None
        simplify = ", simplify=False" if r.random() < 0.1 else ""
        return self.bind(self.annotate(f"rasp.Map({fn}, {x.name}{simplify})", kind), vals, x.depth)

    def sequence_map(self) -> V | None:
        r = self.rng
        a, b = self.pick(("int", "str", "bool", "float")), self.pick(("int", "str", "bool", "float"))
        if a is None or b is None:
            return None
        if a is b and r.random() < 0.9:  # SequenceMap(f, x, x) is one Map: now and then
            return None
        if (a.kind, b.kind) not in SEQUENCE_MAPS:
            a, b = b, a
        if (a.kind, b.kind) not in SEQUENCE_MAPS:
            return None
        a, b = self.small(a), self.small(b)
        depth = max(a.depth, b.depth)
        if r.random() < 0.3 and (a.kind, b.kind) in OPERATORS2:
            text, fn = r.choice(OPERATORS2[(a.kind, b.kind)])
            boolean = "=" in text or "<" in text or (a.boolean and b.boolean)
            return self.bind(text.format(a.name, b.name), self.image(fn, a, b), depth, boolean=boolean)
        if r.random() < 0.2 and a.kind in NUMBER and b.kind in NUMBER:
            fa, fb = r.choice(LINEAR_FACTORS)
            vals = self.image(f"lambda x, y: {fa} * x + {fb} * y", a, b)
            kind = "float" if "float" in (a.kind, b.kind) or isinstance(fa, float) else "int"
            text = self.annotate(f"rasp.LinearSequenceMap({a.name}, {b.name}, {fa}, {fb})", kind)
            return self.bind(text, vals, depth, kind=kind)
        fn = r.choice(SEQUENCE_MAPS[(a.kind, b.kind)])
        try:
            vals = self.image(fn, a, b)
        except Exception:  # noqa: BLE001
            return None
        kind = _kind(vals)
        if kind is None:
            return None
        if "float" in (a.kind, b.kind) and kind == "int":
            kind = "float"
        return self.bind(self.annotate(f"rasp.SequenceMap({fn}, {a.name}, {b.name})", kind), vals, depth,
                         kind=kind)

    def constant(self) -> V | None:
        r = self.rng
        if r.random() < 0.5:
            value = r.choice(self.vocab + (0, 2, "z"))
            return self.bind(f"rasp.Full({value!r})", [value], 0)
        if isinstance(self.vocab[0], str):
            values = [r.choice(self.vocab) for _ in range(self.max_len)]
        else:
            values = [r.randint(0, 3) for _ in range(self.max_len)]
        if r.random() < 0.2:  # tracr's length check: only inputs of this length have an answer
            values = values[:self.const_len]  # one length per program, or no input would have an answer
            self.fixed_len = self.const_len
            return self.bind(f"rasp.ConstantSOp({values!r})", values, 0)
        return self.bind(f"rasp.ConstantSOp({values!r}, check_length=False)", values + [0], 0)

    def positionwise(self) -> V | None:
        roll = self.rng.random()
        if roll < 0.55:
            return self.map()
        if roll < 0.9:
            return self.sequence_map()
        return self.constant()

    # -- selectors --------------------------------------------------------------------------------
    def full_like(self, v: V) -> str:
        return f"rasp.Full({self.rng.choice(v.vals)!r})"

    def select(self, limit: int, keys: V | None = None, queries: V | None = None) -> Sel | None:
        r = self.rng
        if keys is None:
            keys = self.pick(("int", "str", "bool", "float"), limit)
            if keys is None:
                return None
            keys = self.small(keys)
        if queries is None:
            ok = NUMBER if keys.kind in NUMBER else (keys.kind,)
            queries = self.pick(ok, limit)
            if queries is None:
                return None
            queries = self.small(queries)
        k_text, q_text = keys.name, queries.name
        roll = r.random()
        if roll < 0.12:
            k_text = self.full_like(keys)
        elif roll < 0.24:
            q_text = self.full_like(queries)
        kind = "float" if keys.kind == "float" or queries.kind == "float" else keys.kind
        roll = r.random()
        if roll < 0.25 and kind in PREDICATES:
            pred = r.choice(PREDICATES[kind])
            try:
                self.image(pred, keys, queries)
            except Exception:  # noqa: BLE001 - not defined on these values (k[0] of "")
                return None
        elif roll < 0.3 and kind != "float":
            pred = repr(r.choice(("==", "!=", "<", "<=", ">", ">=")))
        else:
            pred = "Comparison." + r.choice(COMPARISONS)
        call = "rasp.select" if pred.startswith("'") else "rasp.Select"
        return self.bind_sel(f"{call}({k_text}, {q_text}, {pred})", max(keys.depth, queries.depth), keys,
                             queries)

    def selector(self, limit: int) -> Sel | None:
        """A select, or selects combined by selector_and/or/not (merging) or &, |, ~ (not)."""
        r = self.rng
        first = self.select(limit)
        if first is None:
            return None
        roll = r.random()
        if roll < 0.35:
            return first
        if roll < 0.5:
            op = r.choice(("rasp.selector_not({})", "~{}", "rasp.selector_not({}, simplify=False)"))
            return self.bind_sel(op.format(first.name), first.depth)
        # the second select shares keys and queries half the time, so that selector_and/or merge
        if r.random() < 0.5 and first.keys is not None:
            second = self.select(limit, first.keys, first.queries)
        else:
            second = self.select(limit)
        if second is None:
            return first
        op = r.choice(("rasp.selector_and({}, {})", "rasp.selector_or({}, {})", "{} & {}", "{} | {}",
                       "rasp.selector_and({}, {}, simplify=False)"))
        return self.bind_sel(op.format(first.name, second.name), max(first.depth, second.depth))

    def pointer(self, limit: int) -> Sel | None:
        """A selector that picks at most one key: ``indices == q``, maybe narrowed by another."""
        r = self.rng
        q = self.pick(("int",), limit)
        if q is None:
            return None
        indices = V("rasp.indices", "int", tuple(range(self.max_len)), 0)
        q_text = q.name if r.random() < 0.85 else self.full_like(q)
        sel = self.bind_sel(f"rasp.Select(rasp.indices, {q_text}, Comparison.EQ)", q.depth, indices, q,
                            at_most_one=True)
        if r.random() < 0.3:
            other = self.select(limit, indices, q) if r.random() < 0.5 else self.selector(limit)
            if other is not None:
                op = r.choice(("rasp.selector_and({}, {})", "{} & {}"))
                sel = self.bind_sel(op.format(sel.name, other.name), max(sel.depth, other.depth),
                                    at_most_one=True)
        return sel

    # -- attention --------------------------------------------------------------------------------
    def attention(self) -> V | None:
        r = self.rng
        limit = self.max_depth - 1
        choice = r.choices(("width", "cat", "mean_int", "mean_num", "lib"), (3, 4, 1, 3, 1))[0]
        if choice == "width":
            sel = self.selector(limit)
            if sel is None:
                return None
            return self.bind(self.annotate(f"rasp.SelectorWidth({sel.name})", "int"), range(self.max_len + 1),
                             sel.depth + 1)
        if choice == "cat":
            x = self.pick(("str", "int", "bool"), limit)
            sel = self.pointer(limit)
            if x is None or sel is None:
                return None
            default = {"str": r.choice(("'-'", repr(r.choice(x.vals)))), "int": str(r.randint(-1, 2)),
                       "bool": "False"}[x.kind]
            if r.random() < 0.3 and (x.kind == "int" or x.boolean):  # tracr's None: 0, or False
                default = "None"
            vals = list(x.vals) + [eval(default) if default != "None" else (False if x.boolean else 0)]  # noqa: S307
            text = f"rasp.Aggregate({sel.name}, {x.name}, default={default})"
            if r.random() < 0.15:
                text = f"rasp.categorical({text})"
            return self.bind(text, vals, max(sel.depth, x.depth) + 1, boolean=x.boolean)
        if choice == "lib":
            x = self.pick(("str", "int", "bool"), limit)
            if x is None:
                return None
            which = r.randrange(3)
            if which == 0:  # pads with 0, or False for an s-op built as a boolean
                offset = r.choice((1, 2, -1))
                vals = list(x.vals) + [False if x.boolean else 0]
                return self.bind(f"lib.shift_by({offset}, {x.name})", vals, x.depth + 1, boolean=x.boolean)
            if which == 1 and x.kind == "bool":
                return self.bind(f"lib.make_frac_prevs({x.name})", _means(0, 1, self.max_len), x.depth + 1,
                                 kind="float")
            make = r.choice(("lib.make_hist()", "lib.make_length()"))
            return self.bind(make, range(self.max_len + 1), 1)
        sel = self.selector(limit)
        if sel is None:
            return None
        if choice == "mean_int":  # a categorical mean of ints: a float
            x = self.pick(("int",), limit)
            if x is None:
                return None
            x = self.small(x)
            lo, hi = min(x.vals + (0,)), max(x.vals + (0,))
            return self.bind(f"rasp.Aggregate({sel.name}, {x.name}, default=0)", _means(lo, hi, self.max_len),
                             max(sel.depth, x.depth) + 1, kind="float")
        # a numerical mean of a numerical 0/1 or small-int s-op (tracr's frac_prevs)
        x = self.pick(("bool", "int"), limit)
        if x is None or (x.kind == "int" and not all(-2 <= v <= 3 for v in x.vals)):
            return None
        lo, hi = (0, 1) if x.kind == "bool" else (min(x.vals + (0,)), max(x.vals + (0,)))
        default = r.choice(("0", "0", "None"))
        return self.bind(f"rasp.numerical(rasp.Aggregate({sel.name}, rasp.numerical({x.name}), "
                         f"default={default}))", _means(lo, hi, self.max_len), max(sel.depth, x.depth) + 1,
                         kind="float")


def _product(*sets: tuple) -> list[tuple]:
    out: list[tuple] = [()]
    for s in sets:
        out = [p + (v,) for p in out for v in s]
    return out


def generate(seed: int, *, max_len: int = 6, max_depth: int = 6, vocab: tuple | None = None) -> Generated:
    """One random program, deterministic in ``seed``.  The vocabulary is ``vocab``, or (by seed)
    tracr's ``{1, 2, 3}`` read through ``rasp.tokens`` or the letters ``a b c``."""
    rng = random.Random(seed)
    vocab = tuple(vocab) if vocab is not None else rng.choice((STR_VOCAB, INT_VOCAB))
    b = _Builder(rng, vocab, max_len, max_depth)
    tokens_kind = _kind(set(vocab))
    assert tokens_kind is not None
    b.vars = [V("rasp.tokens", tokens_kind, vocab, 0), V("rasp.indices", "int", tuple(range(max_len)), 0)]
    if rng.random() < 0.4:
        b.vars.append(V("rasp.length", "int", tuple(range(1, max_len + 1)), 0))
    target = rng.randint(1, max_depth)
    count = rng.randint(3, 4 + 2 * target)
    for _ in range(300):
        deepest = max(v.depth for v in b.vars)
        if (len(b.vars) >= count and deepest >= target) or len(b.lines) >= MAX_LINES:
            break
        if deepest < target and rng.random() < 0.55:
            b.attention()
        else:
            b.positionwise()
    deepest = max(v.depth for v in b.vars)
    out = [v for v in b.vars if v.depth == deepest][-1]
    source = "\n".join(b.lines + [f"out = {out.name}", ""])
    return Generated(source, deepest, seed, vocab, max_len, out.kind, b.fixed_len)


@dataclass
class Outcome:
    generated: Generated
    status: str  # agree | disagree | refused | crash | undefined
    detail: str = ""
    inputs_checked: int = 0
    failures: list[dict] = field(default_factory=list)


def check_generated(gen: Generated, *, inputs: int = 12, dtype: str = "float32") -> Outcome:
    """Build and compile ``gen`` and compare the model with the interpreter on ``inputs`` random
    inputs of every length plus the edge inputs.  A ``UserError`` while compiling is a refusal;
    any other exception (building, compiling, running) is a crash."""
    from rasp_compiler import pyapi as rasp
    from rasp_compiler.compiler.checking import check_model, edge_inputs, random_inputs
    from rasp_compiler.errors import UserError

    try:
        program = gen.build().program()
    except Exception as err:  # noqa: BLE001 - the API must build every generated program
        return Outcome(gen, "crash", f"building: {type(err).__name__}: {err}")
    try:
        with warnings.catch_warnings():  # the check compares every input: notes are expected
            warnings.simplefilter("ignore", CompileWarning)
            model = rasp.compile_program(program, list(gen.vocab), gen.max_len, dtype=dtype)
    except UserError as err:
        return Outcome(gen, "refused", str(err).splitlines()[0])
    except Exception as err:  # noqa: BLE001
        return Outcome(gen, "crash", f"compiling: {type(err).__name__}: {err}")
    vocab = list(gen.vocab)
    batch = random_inputs(vocab, gen.max_len, inputs, gen.seed) + edge_inputs(vocab, gen.max_len)
    if gen.fixed_len:  # inputs of the one length a length-checked constant answers
        more = random_inputs(vocab, gen.max_len, 20 * inputs, gen.seed + 1)
        batch += [x for x in more if len(x) == gen.fixed_len]
    try:
        res = check_model(model, program, batch)
    except Exception as err:  # noqa: BLE001
        return Outcome(gen, "crash", f"running: {type(err).__name__}: {err}")
    if res.inputs_checked == 0:
        return Outcome(gen, "undefined", "the interpreter raises on every input")
    return Outcome(gen, "agree" if res.ok else "disagree", "", res.inputs_checked, res.failures)


__all__ = ["Generated", "Outcome", "check_generated", "generate"]
