"""Analysis: what every s-op can hold, how it is encoded, and which values occur together.

Each s-op gets an ``SInfo``: its encoding (one-hot ``categorical`` or one-dimensional
``numerical``), its sorted value set, and a *table*: its value as a function of a few **base**
s-ops.  Bases are the s-ops whose values the compiler treats as free: the token, the index, the
length, and the outputs of attention (aggregates, selector widths).  Index and length are tied
(index < length), and an attention output whose selector only reads positions (a prefix mean, a
full selector) is a *conditional* base: its possible values are enumerated for each
(index, length) pair, so ``(indices + 1) * prefix_mean`` knows the mean's denominator.

The joint value tuples of any set of s-ops are then read off by enumerating their bases: this is
what lets a fused MLP use hidden units only for value combinations that can occur, and it keeps
every value set an over-approximation (never an under-approximation) of what the interpreter can
produce.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import networkx as nx
import numpy as np

from rasp_compiler.compiler import selectors as sl
from rasp_compiler.compiler.forms import linear_form
from rasp_compiler.compiler.values import MAX_VALUES, means, sorted_values, value_key
from rasp_compiler.errors import CompileError
from rasp_compiler.graph.expr import Binary, Const, Unary, Var
from rasp_compiler.graph.expr import evaluate as eval_expr
from rasp_compiler.graph.nodes import (
    Aggregate,
    Constant,
    Indices,
    Length,
    Map,
    Node,
    Program,
    SelectorWidth,
    SequenceMap,
    SourcePos,
    Tokens,
)
from rasp_compiler.graph.semantics import exact_means

# The largest joint domain enumerated for one s-op; beyond it the s-op becomes a base of its own.
DOMAIN_CAP = 120_000
# A numerical map over more joint assignments than this keeps only its per-position value sets
# (a categorical one from DOMAIN_CAP on, see ``map_info``).
REBASE_SIZE = 40_000
# The most evaluations of one map on the twins (0 <-> False, 1 <-> True) of its inputs' values
# (``_propagate_bool_number``); past it the map is taken to pass the clash on.
TWIN_CAP = 20_000



def _is_value(v: Any) -> bool:
    """An atom, tracr's None, or a tuple of such (tracr's n-ary sequence maps pass tuples on)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return True
    return isinstance(v, tuple) and all(_is_value(x) for x in v)


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


class _NotAnAtom(Exception):
    """A map gave a value that is not an atom (recorded in ``Analysis.non_atoms``)."""

@dataclass
class SInfo:
    id: str
    kind: str  # node kind, or "convert" / "tuple" / "width_scratch"
    encoding: str  # "categorical" | "numerical"
    values: list[Any]
    bases: tuple[str, ...]
    table: dict[tuple, Any]
    base_kind: str | None = None  # "index" "length" "token" "free" "cond" for bases
    cond: dict[tuple[int, int], list[Any]] | None = None  # for "cond" bases: (i, n) -> values
    pos: SourcePos | None = None
    inputs: tuple[str, ...] = ()
    fn: Callable[..., Any] | None = None  # for virtual maps
    notes: list[str] = field(default_factory=list)
    # (a, b, c) for a map that is a·index + b·length + c in integers (``_positional_affine``)
    posaff: tuple[int, int, int] | None = None

    @property
    def cond_by_index(self) -> bool:
        """Whether a conditional base's values depend on the index only, not on the length."""
        if self.cond is None:
            return False
        if not hasattr(self, "_cond_by_index"):
            by_i: dict[int, list] = {}
            ok = True
            for (i, _n), vals in self.cond.items():
                if by_i.setdefault(i, vals) != vals:
                    ok = False
                    break
            self._cond_by_index = ok
        return self._cond_by_index

    @property
    def numeric(self) -> bool:
        return is_numeric(self.values)


def is_numeric(values: list[Any]) -> bool:
    """Values the interpreter will average: ints/floats, not only booleans."""
    return bool(values) and all(isinstance(v, (int, float)) for v in values) and \
        not all(isinstance(v, bool) for v in values)


def convert_token(v: Any, type_name: str) -> Any:
    """A vocabulary entry read as ``tokens_<type>`` (as the interpreter's ``convert_input``)."""
    try:
        return {"str": str, "int": int, "float": float, "bool": bool, "value": lambda x: x}[type_name](v)
    except (TypeError, ValueError) as err:
        raise CompileError(f"vocabulary entry {v!r} cannot be read as {type_name} (tokens_{type_name})",
                           hint="give the vocabulary as a JSON list of numbers") from err


class Analysis:
    """Value sets, encodings and joint domains of every s-op of ``program``."""

    def __init__(self, program: Program, vocab: list[Any], max_len: int, *,
                 fixed_length: int | None = None, causal: bool = False, dtype: str = "float32",
                 whole_program: bool = False) -> None:
        """Analyses the s-ops the output depends on (a file may define several programs: the
        others are not compiled, so their value sets, size limits and notes do not matter), or
        every s-op with ``whole_program``."""
        self.program = program
        self.dtype = dtype
        self.graph = program.graph
        self.vocab = list(vocab)
        self.max_len = max_len
        self.fixed_length = fixed_length
        self.causal = causal
        self.info: dict[str, SInfo] = {}
        if fixed_length is not None:
            self.lengths = [fixed_length]
        else:
            self.lengths = list(range(1, max_len + 1))
        self.ctx_all = [(i, n) for n in self.lengths for i in range(n)]
        self._sum_cache: dict = {}
        self._ctx_cache: dict[str, dict] = {}
        self._ctx_memo: dict[str, dict] = {}  # ctx_values by the identity of each base's choices
        self._formulas: dict[str, sl.Formula] = {}
        # s-op -> ({(index, length): values there}, keyed by index?, keyed by length?) (``_values_at``)
        self._at_cache: dict[str, tuple[dict | None, bool, bool]] = {}
        self._uniform_cache: dict[str, bool] = {}
        self._lex_cache: dict[str, tuple[str, str, bool, bool] | None] = {}
        self._width_cache: dict[str, dict[tuple[int, int], int] | None] = {}
        self.partial: set[str] = set()  # maps whose function raised on some value (``undefined``)
        self.failures: dict[str, tuple[tuple, Exception]] = {}  # each one's first failure
        self.non_atoms: dict[str, tuple[tuple, Any]] = {}  # maps that gave a list, None, …
        # A map's results equal to 0 or 1 (or tuples), by value, and the first pair of them that
        # are equal but of different types (False and 0): value sets collapse such pairs.
        self._zero_one: dict[str, dict[Any, Any]] = {}
        self._own_clash: dict[str, tuple[Any, Any]] = {}
        # s-op -> the s-op where its clash arises: it may hold a boolean at one position and an
        # equal number at another (``_propagate_bool_number``, docs/known-bugs.md #13)
        self.marked: dict[str, str] = {}
        self._length_like: dict[str, bool] = {}  # cache of ``length_like``
        wanted = None
        if not whole_program and program.output in self.graph:
            wanted = nx.ancestors(self.graph, program.output) | {program.output}
        for node in program.nodes():
            if not node.is_selector and (wanted is None or node.id in wanted):
                self.info[node.id] = self._analyse(node)
        self._propagate_bool_number()
        if program.output in self.info:
            self._check_bool_number_output(program.output)

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
            values += list(self.info[node.inputs[1]].values) + [node.default]
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

    def _never_empty(self, sel_id: str) -> bool:
        """Whether the selector provably selects some key for every query: its widths (a
        positional selector) are never 0, or it is ``select(indices, q, ==)`` with q a valid index
        at every position (tracr's ``select(indices, length - 1, ==)``), or a disjunction with
        such a part.  Otherwise an aggregate's default is taken to occur."""
        w = self.widths(sel_id)
        if w is not None:
            return min(w.values(), default=0) > 0

        def covered(f: sl.Formula) -> bool:
            if isinstance(f, sl.Any_):
                return any(covered(p) for p in f.parts)
            if not isinstance(f, sl.Atom) or f.op != "==" or f.negated \
                    or self.info[f.key].base_kind != "index":
                return False
            for ctx in self.ctx_all:
                for v in self.ctx_values(f.query, ctx):
                    if not (isinstance(v, (int, float)) and float(v).is_integer() and 0 <= v < ctx[1]):
                        return False
            return True
        return covered(self.formula(sel_id))

    def _twin_map(self, node: Map | SequenceMap, refuse: bool) -> None:
        """The map rule of ``_propagate_bool_number``."""
        sid = node.id
        flip = [i in self.marked for i in node.inputs]
        sets = [[v for v in self.info[i].values if _twin(v) is not None] if f else self.info[i].values
                for i, f in zip(node.inputs, flip, strict=True)]
        cost = 2 ** sum(flip)
        for vs in sets:
            cost *= len(vs)
        if cost > TWIN_CAP:  # too many to try: assume it passes the clash on (never refused)
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

    # ------------------------------------------------------------------ helpers
    def node(self, node_id: str) -> Node:
        return self.graph.nodes[node_id]["node"]

    def error(self, node_id: str | None, message: str, hint: str | None = None,
              pos: SourcePos | None = None) -> CompileError:
        if pos is None and node_id is not None and node_id in self.graph:
            pos = self.node(node_id).pos
            # a built-in (length, tokens) has no position: point at the first node that reads it
            todo, seen = [node_id], {node_id}
            while pos is None and todo:
                cur = todo.pop(0)
                for nxt in sorted(self.graph.successors(cur)):
                    if nxt not in seen:
                        seen.add(nxt)
                        todo.append(nxt)
                        if pos is None and self.node(nxt).pos is not None:
                            pos = self.node(nxt).pos
        if pos is None and node_id in self.info:
            pos = self.info[node_id].pos
        source = None
        if pos is not None:
            source = getattr(self.program, "sources", {}).get(pos.file)
            return CompileError(message, pos.file, pos.line, pos.col, source=source, hint=hint,
                                width=max(1, len(pos.text.splitlines()[0]) if pos.text else 1))
        return CompileError(message, self.program.source_file, hint=hint)

    def describe(self, node_id: str) -> str:
        self.info.get(node_id)
        node = self.node(node_id) if node_id in self.graph else None
        text = node.pos.text if node is not None and node.pos is not None and node.pos.text else ""
        return f"'{node_id}'" + (f" ({text})" if text and text != node_id else "")

    # ------------------------------------------------------------------ domains
    def _ctx_list(self, kinds: set[str], bases: tuple[str, ...] = ()) -> list[tuple[int | None, int | None]]:
        if "cond" in kinds and "length" not in kinds and all(
                self.info[b].cond_by_index for b in bases if self.info[b].base_kind == "cond"):
            # conditional bases that depend on the index only (prefix means): one length per index
            top = max(self.lengths)
            return [(i, top) for i in range(top)]
        if "cond" in kinds or ("index" in kinds and "length" in kinds):
            return list(self.ctx_all)
        if "index" in kinds:
            return [(i, None) for i in range(max(self.lengths))]
        if "length" in kinds:
            return [(None, n) for n in self.lengths]
        return [(None, None)]

    def _choices(self, bases: tuple[str, ...], ctx: tuple) -> list[list[Any]]:
        out = []
        for b in bases:
            info = self.info[b]
            if info.base_kind == "index":
                out.append([ctx[0]])
            elif info.base_kind == "length":
                out.append([ctx[1]])
            elif info.base_kind == "cond":
                out.append(info.cond[ctx])  # type: ignore[index]
            else:
                out.append(info.values)
        return out

    def domain_size(self, bases: tuple[str, ...]) -> int:
        kinds = {self.info[b].base_kind for b in bases}
        total = 0
        for ctx in self._ctx_list(kinds, bases):  # type: ignore[arg-type]
            total += int(np.prod([len(c) for c in self._choices(bases, ctx)], dtype=np.float64))
            if total > 10 * DOMAIN_CAP:
                break
        return total

    def domain(self, bases: tuple[str, ...]) -> list[tuple]:
        """Every assignment of values to ``bases`` that can occur at one position."""
        kinds = {self.info[b].base_kind for b in bases}
        out: dict[tuple, None] = {}
        for ctx in self._ctx_list(kinds, bases):  # type: ignore[arg-type]
            for combo in itertools.product(*self._choices(bases, ctx)):
                out[combo] = None
        return list(out)

    def value_of(self, sid: str, bases: tuple[str, ...], assignment: tuple) -> Any:
        info = self.info[sid]
        key = tuple(assignment[bases.index(b)] for b in info.bases)
        return info.table[key]

    def joint(self, sids: list[str], extra: str | None = None) -> list[tuple]:
        """Distinct tuples of values of ``sids`` (then ``extra``) that can occur at one position."""
        allsids = list(sids) + ([extra] if extra else [])
        bases = tuple(sorted({b for s in allsids for b in self.info[s].bases}))
        pairs = [(_key_getter([bases.index(b) for b in self.info[s].bases], len(bases)),
                  self.info[s].table) for s in allsids]
        out: dict[tuple, None] = {}
        # every assignment of every context, as ``domain`` lists them (an assignment seen in an
        # earlier context gives a row already there, so the rows' order is the same; a context
        # whose choices repeat an earlier one's is skipped whole)
        for _ctx, choices, first in self._contexts(bases):
            if first is None:
                out.update(dict.fromkeys(row for _, row in _lookup(pairs, itertools.product(*choices))))
        return list(out)

    def _contexts(self, bases: tuple[str, ...]) -> Iterator[tuple[tuple, list[list[Any]], tuple | None]]:
        """(context, each base's choices, the earlier context with the same choices or None), in
        ``domain``'s order.  Choices are the same when each base's list is the same
        object (or the same index / length): then so are the context's assignments."""
        kinds = {self.info[b].base_kind for b in bases}
        by_value = [self.info[b].base_kind in ("index", "length") for b in bases]
        seen: dict[tuple, tuple] = {}
        for ctx in self._ctx_list(kinds, bases):  # type: ignore[arg-type]
            choices = self._choices(bases, ctx)
            # the lists are held by the bases' SInfo (values / cond), so their ids stay unique
            key = tuple(c[0] if v else id(c) for v, c in zip(by_value, choices, strict=True))
            first = seen.setdefault(key, ctx)
            yield ctx, choices, (None if first is ctx else first)

    # ------------------------------------------------------------------ node kinds
    def _base(self, node: Node, kind: str, values: list[Any], encoding: str, *,
              cond: dict | None = None) -> SInfo:
        values = sorted_values(values)
        return SInfo(node.id, node.kind, encoding, values, (node.id,), {(v,): v for v in values},
                     base_kind=kind, cond=cond, pos=node.pos, inputs=node.inputs)

    def _const(self, node_id: str, kind: str, value: Any, pos: SourcePos | None, encoding: str) -> SInfo:
        return SInfo(node_id, kind, encoding, [value], (), {(): value}, base_kind="const", pos=pos)

    def _analyse(self, node: Node) -> SInfo:
        enc = getattr(node, "encoding", None)
        if isinstance(node, Tokens):
            values = [convert_token(v, node.type) for v in self.vocab]
            info = self._base(node, "token", values, enc or "categorical")
        elif isinstance(node, Indices):
            info = self._base(node, "index", list(range(max(self.lengths))), enc or "categorical")
        elif isinstance(node, Length):
            if self.fixed_length is not None:
                info = self._const(node.id, node.kind, self.fixed_length, node.pos, enc or "categorical")
            else:
                if self.causal:
                    raise self.error(node.id, "length needs the whole input, which a causal model "
                                     "cannot see", hint="compile without --causal")
                info = self._base(node, "length", list(self.lengths), enc or "categorical")
        elif isinstance(node, Constant):
            info = self._const(node.id, node.kind, node.value, node.pos, enc or "categorical")
        elif isinstance(node, (Map, SequenceMap)):
            fn = node.fn

            def call(*args: Any, _fn=fn, _id=node.id) -> Any:
                try:
                    value = eval_expr(_fn, args)
                except Exception as err:
                    self.partial.add(_id)
                    self.failures.setdefault(_id, (args, err))
                    raise
                if isinstance(value, np.generic):  # a NumPy scalar from a Python function: its number
                    value = value.item()
                if not _is_value(value):
                    self.non_atoms.setdefault(_id, (args, value))
                    raise _NotAnAtom
                if isinstance(value, tuple) or (isinstance(value, (int, float)) and value in (0, 1)):
                    # the table keeps each result, but value sets (and so the model) keep one of
                    # False/0: note a map whose own results bring both
                    first = self._zero_one.setdefault(_id, {}).setdefault(value, value)
                    if _tag(first) != _tag(value):
                        self._own_clash.setdefault(_id, (first, value))
                return value
            info = None
            if enc == "numerical":
                info = self._linear_map(node, call)
            posaff = self._positional_affine(node, call) if info is None else None
            if posaff is not None and posaff[0] and posaff[1] and len(self.ctx_all) > DOMAIN_CAP:
                info = self._affine_base(node, call, enc or "categorical", posaff)
            if info is None:
                info = self.map_info(node.id, node.kind, node.inputs, call, enc or "categorical", node.pos)
            if posaff is not None:
                info.posaff = posaff
            if node.id in self.non_atoms:
                args, value = self.non_atoms[node.id]
                shown = repr(args[0]) if len(args) == 1 else "(" + ", ".join(map(repr, args)) + ")"
                raise self.error(node.id, f"{self.describe(node.id)} gives {value!r} for {shown}: the "
                                 "value of an s-op at a position is a string, a number or a boolean "
                                 "(or a tuple of them)",
                                 hint="return an atom (a tuple or list can be joined into a string)")
        elif isinstance(node, Aggregate):
            info = self._aggregate(node)
        elif isinstance(node, SelectorWidth):
            info = self._selector_width(node)
        elif node.kind == "softmax_aggregate":
            raise self.error(node.id, f"{self.describe(node.id)} is a soft attention over real-valued "
                             "scores: it compiles only in a real-valued program",
                             hint="read the input as tokens_float and compile with --input-range LO HI")
        else:
            raise self.error(node.id, f"the compiler does not know the node kind {node.kind!r}")
        if info.encoding == "numerical" and not info.numeric and info.kind not in ("aggregate",) \
                and not all(isinstance(v, bool) for v in info.values):  # booleans are held as 0/1
            raise self.error(node.id, f"{self.describe(node.id)} is marked numerical but holds "
                             f"non-numbers ({_preview(info.values)})",
                             hint="remove numerical(...) or make the values numbers (indicator(...))")
        return info

    def ctx_values(self, sid: str, ctx: tuple[int, int]) -> list[Any]:
        """The values ``sid`` can hold at index ctx[0] of an input of length ctx[1]."""
        info = self.info[sid]
        kind = info.base_kind
        if kind == "index":
            return [ctx[0]]
        if kind == "length":
            return [ctx[1]]
        if kind == "cond":
            return info.cond[ctx]  # type: ignore[index]
        if kind is not None:
            return info.values
        cache = self._ctx_cache.setdefault(sid, {})
        if not cache:
            bkinds = {self.info[b].base_kind for b in info.bases}
            for c in self.ctx_all:
                cache[c] = None  # filled lazily below
            if not bkinds & {"index", "length", "cond"}:
                for c in self.ctx_all:
                    cache[c] = info.values
        if cache.get(ctx) is None:
            choices = self._choices(info.bases, ctx)
            # contexts with the same choices per base (e.g. a prefix mean's values depend on the
            # index only) have the same values: enumerate each distinct set of choices once
            key = tuple(c[0] if self.info[b].base_kind in ("index", "length") else id(c)
                        for b, c in zip(info.bases, choices, strict=True))
            memo = self._ctx_memo.setdefault(sid, {})
            if key not in memo:
                vals = set()
                for combo in itertools.product(*choices):
                    if combo in info.table:
                        vals.add(info.table[combo])
                memo[key] = (choices, sorted_values(vals))  # holding choices keeps their ids unique
            cache[ctx] = memo[key][1]
        return cache[ctx]

    def _independent_map(self, sid: str, kind: str, inputs: tuple[str, ...], fn: Callable[..., Any],
                         encoding: str, pos: SourcePos | None) -> SInfo | None:
        """A map whose inputs share no bases: its values per position context are f over the
        product of its inputs' values there (no enumeration of their bases' joint domain)."""
        seen: set[str] = set()
        for i in inputs:
            bs = set(self.info[i].bases)
            if bs & seen:
                return None
            seen |= bs
        cond: dict[tuple[int, int], list[Any]] = {}
        memo: dict[tuple, Any] = {}
        failed = object()
        cache: dict[tuple, list[Any]] = {}
        for ctx in self.ctx_all:
            sets = tuple(tuple(self.ctx_values(i, ctx)) for i in inputs)
            if sets not in cache:
                vals = []
                for args in itertools.product(*sets):
                    mkey = args + tuple(type(a) for a in args)
                    v = memo.get(mkey, failed)
                    if v is failed and mkey not in memo:
                        try:
                            v = fn(*args)
                        except Exception:
                            v = failed
                        memo[mkey] = v
                    if v is not failed:
                        vals.append(v)
                cache[sets] = sorted_values(vals)
            cond[ctx] = cache[sets]
        values = sorted_values(v for vs in cache.values() for v in vs)
        return SInfo(sid, kind, encoding, values, (sid,), {(v,): v for v in values}, base_kind="cond",
                     cond=cond, pos=pos, inputs=inputs, fn=fn, notes=["opaque", "independent"])

    def map_info(self, sid: str, kind: str, inputs: tuple[str, ...], fn: Callable[..., Any],
                 encoding: str, pos: SourcePos | None) -> SInfo:
        """Tabulate a positionwise function of ``inputs`` over the joint domain of their bases."""
        for i in inputs:
            self.require_values(i, sid)
        bases = tuple(sorted({b for i in inputs for b in self.info[i].bases}))
        size = self.domain_size(bases)
        # An opaque (per-position value sets only) map cannot be fused into the maps that read it:
        # each such map costs a layer of its own.  So a categorical map is tabulated up to
        # DOMAIN_CAP (dyck2's `bad` at max_len 64 has 42,880 assignments: tabulated, it fuses into
        # indicator(bad) and the program keeps 5 layers instead of 7); only a numerical map is
        # rebased from REBASE_SIZE on.
        if size > (REBASE_SIZE if encoding == "numerical" else DOMAIN_CAP):
            got = self._independent_map(sid, kind, inputs, fn, encoding, pos)
            if got is not None:
                return got
        if size <= DOMAIN_CAP:
            pairs = [(_key_getter([bases.index(b) for b in self.info[i].bases], len(bases)),
                      self.info[i].table) for i in inputs]
            table: dict[tuple, Any] = {}
            memo: dict[tuple, Any] = {}
            failed = object()
            rebase = (encoding == "numerical" and size > REBASE_SIZE
                      and sum(self.info[b].base_kind not in ("index", "length") for b in bases) >= 2)
            per_ctx: dict[tuple, set] = {}
            for ctx, choices, first in self._contexts(bases):
                if first is not None:  # an earlier context's assignments: its table rows and values
                    if rebase:
                        per_ctx[ctx] = per_ctx[first]
                    continue
                seen = per_ctx.setdefault(ctx, set()) if rebase else None
                for a, args in _lookup(pairs, itertools.product(*choices)):
                    mkey = (*args, *map(type, args))
                    value = memo.get(mkey, failed)
                    if value is failed and mkey not in memo:
                        try:
                            value = fn(*args)
                        except Exception:  # the interpreter raises here, if this occurs
                            value = failed
                        memo[mkey] = value
                    if value is failed:
                        continue
                    table[a] = value
                    if seen is not None:
                        seen.add(value)
            values = sorted_values(table.values())
            if rebase and all(self.info[b].base_kind in ("index", "length", "cond") for b in bases):
                # A numerical combination of several attention outputs (e.g. opens - closes): keep
                # only its values per position context, so later maps enumerate its values, not
                # the product of its inputs'.  Maps reading it then read it from the residual.
                cond: dict[tuple[int, int], list[Any]] = {}
                for (i, n), vals in per_ctx.items():
                    ordered = sorted_values(vals)
                    if i is None:
                        continue
                    if n == max(self.lengths) and self._ctx_list({"cond"}, ()) != self.ctx_all:
                        pass
                    cond[(i, n)] = ordered
                if any(n is None for (_, n) in per_ctx):
                    cond = {}
                by_index = (all(ctx[1] == max(self.lengths) for ctx in per_ctx)
                            and len(per_ctx) < len(self.ctx_all))
                if by_index:
                    cond = {(i, n): cond[(i, max(self.lengths))] for (i, n) in self.ctx_all}
                if cond and len(cond) == len(self.ctx_all):
                    return SInfo(sid, kind, encoding, values, (sid,), {(v,): v for v in values},
                                 base_kind="cond", cond=cond, pos=pos, inputs=inputs, fn=fn,
                                 notes=["opaque"])
            return SInfo(sid, kind, encoding, values, bases, table, pos=pos, inputs=inputs, fn=fn)
        # Too many joint assignments: the map becomes a base, tabulated on its inputs' value sets.
        combos = 1
        for i in inputs:
            combos *= max(1, len(self.info[i].values))
        if combos > DOMAIN_CAP:
            raise self.error(sid, f"{self.describe(sid)} combines inputs with {combos} value "
                             "combinations, too many to tabulate",
                             hint="give its inputs smaller value sets (fewer tokens, a smaller "
                                  "--max-len), or split the expression")
        vals = []
        for args in itertools.product(*(self.info[i].values for i in inputs)):
            try:
                vals.append(fn(*args))
            except Exception:
                continue
        values = sorted_values(vals)
        return SInfo(sid, kind, encoding, values, (sid,), {(v,): v for v in values}, base_kind="free",
                     pos=pos, inputs=inputs, fn=fn, notes=["opaque"])

    def _positional_affine(self, node: Node, call: Callable[..., Any]) -> tuple[int, int, int] | None:
        """(a, b, c) when the map is ``a·index + b·length + c`` with integers a, b and c: its
        expression is a sum of integer multiples of the index, the length, integer constants and
        maps of that form (``length - indices - 1``).  Python's integer arithmetic is exact, so
        this is the value the interpreter computes at every position (checked here on a few
        positions too).  Only a map of both (a and b nonzero) past DOMAIN_CAP skips the table."""
        form = _int_affine(getattr(node, "fn", None), len(node.inputs))
        if form is None:
            return None
        w, c = form
        a = b = 0
        for u, wu in zip(node.inputs, w, strict=True):
            ui = self.info[u]
            if ui.base_kind == "index":
                pa = (1, 0, 0)
            elif self.length_like(u):
                pa = (0, 1, 0)
            elif ui.base_kind == "const" and type(ui.values[0]) is int:
                pa = (0, 0, ui.values[0])
            else:
                pa = ui.posaff
                if pa is None:
                    return None
            a, b, c = a + wu * pa[0], b + wu * pa[1], c + wu * pa[2]
        top = max(self.lengths)
        for i, n in ((0, 1), (1, 2), (0, top), (top // 2, top), (top - 1, top)):
            if not (0 <= i < n and n in self.lengths):
                continue
            args = []
            for u in node.inputs:
                ui = self.info[u]
                pa = (1, 0, 0) if ui.base_kind == "index" else (0, 1, 0) if self.length_like(u) else \
                    ((0, 0, ui.values[0]) if ui.base_kind == "const" else ui.posaff)  # type: ignore[misc]
                args.append(pa[0] * i + pa[1] * n + pa[2])
            try:
                got = call(*args)
            except Exception:
                return None
            if type(got) is not int or got != a * i + b * n + c:
                return None
        return a, b, c

    def length_like(self, sid: str) -> bool:
        """Whether ``sid`` is the length: the built-in one, or the width of a selector that selects
        every key for every query (tracr's ``selector_width(select(1, 1, ==))``)."""
        info = self.info[sid]
        if info.base_kind == "length":
            return True
        if info.base_kind != "cond" or sid not in self.graph or not isinstance(self.node(sid), SelectorWidth):
            return False
        if sid not in self._length_like:
            w = self.widths(self.node(sid).inputs[0])
            self._length_like[sid] = w is not None and len(w) == len(self.ctx_all) and all(
                v == n for (_, n), v in w.items())
        return self._length_like[sid]

    def pair_table_hint(self, sid: str) -> str | None:
        """What to change when ``sid`` is a map of both the index and the length that was too large
        to tabulate (more (index, length) pairs than DOMAIN_CAP), so that it costs a table (or a
        one-hot of the length) per pair; None for any other s-op."""
        info = self.info.get(sid)
        if info is None or "opaque" not in info.notes or "affine" in info.notes or \
                info.kind not in ("map", "sequence_map"):
            return None
        kinds: set[str] = set()
        todo, seen = list(info.inputs), set()
        while todo:
            u = todo.pop()
            if u in seen or u not in self.info:
                continue
            seen.add(u)
            ui = self.info[u]
            if ui.posaff is not None:
                kinds |= {"index", "length"}
            elif ui.base_kind == "index" or self.length_like(u):
                kinds.add(ui.base_kind if ui.base_kind == "index" else "length")
            elif ui.base_kind is None:  # tabulated over its bases
                kinds |= {self.info[b].base_kind for b in ui.bases} & {"index", "length"}
            elif "opaque" in ui.notes and ui.kind in ("map", "sequence_map"):
                todo.extend(ui.inputs)
        if kinds != {"index", "length"}:
            return None
        top = int((np.sqrt(1 + 8 * DOMAIN_CAP) - 1) // 2)
        return (f"{self.describe(sid)} is a function of the index and the length, and --max-len "
                f"{max(self.lengths)} has {len(self.ctx_all):,} (index, length) pairs, more than the "
                f"{DOMAIN_CAP:,} the compiler tabulates (up to --max-len {top}): use a smaller "
                "--max-len, or write it as a sum of integer multiples of indices and length plus a "
                "constant (such as length - indices - 1), which needs no table at any length")

    def _ctx_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The index and the length of every context of ``ctx_all``, as arrays."""
        if not hasattr(self, "_ctx_arr"):
            arr = np.array(self.ctx_all, dtype=np.int64).reshape(-1, 2)
            self._ctx_arr = (arr[:, 0], arr[:, 1])
        return self._ctx_arr

    def _affine_base(self, node: Node, call: Callable[..., Any], encoding: str,
                     posaff: tuple[int, int, int]) -> SInfo:
        """A map ``a·index + b·length + c`` over more (index, length) pairs than DOMAIN_CAP: a
        conditional base whose value at each pair is computed on demand (no table), with
        ``posaff`` for the lowering, which builds it from the length head's BOS weight and the
        index without a table (``Lowering._affine_number``)."""
        a, b, c = posaff
        ii, nn = self._ctx_arrays()
        values = sorted_values(int(v) for v in np.unique(a * ii + b * nn + c))
        return SInfo(node.id, node.kind, encoding, values, (node.id,), {(v,): v for v in values},
                     base_kind="cond", cond=_AffineCond(posaff, self.ctx_all), pos=node.pos,
                     inputs=node.inputs, fn=call, notes=["opaque", "affine"])

    def _linear_map(self, node: Node, call: Callable[..., Any]) -> SInfo | None:
        """A numerical w·x + c over attention outputs that only read positions (e.g. opens -
        closes of two prefix means): its values per position context, from sums of value sets,
        without enumerating the joint assignments one by one."""
        form = linear_form(node.fn, len(node.inputs))  # type: ignore[attr-defined]
        if form is None or len(set(node.inputs)) != len(node.inputs):
            return None
        infos = [self.info[i] for i in node.inputs]
        if not all(i.base_kind in ("cond", "const") and i.numeric for i in infos):
            return None
        if sum(i.base_kind == "cond" for i in infos) < 2:
            return None
        w, c = form
        cond: dict[tuple[int, int], list[Any]] = {}
        cache: dict[tuple, list[Any]] = {}
        for ctx in self.ctx_all:
            sets = [np.array([float(v) for v in (i.cond[ctx] if i.base_kind == "cond" else i.values)])
                    for i in infos]
            key = tuple(tuple(x) for x in sets)
            if key not in cache:
                acc = np.array([c])
                for wj, xs in zip(w, sets, strict=False):
                    if wj != 0.0:
                        acc = np.add.outer(acc, wj * xs).ravel()
                vals = np.unique(np.round(acc, 12))
                cache[key] = sorted_values(float(v) for v in vals)
            cond[ctx] = cache[key]
        values = sorted_values(v for vs in cache.values() for v in vs)
        info = SInfo(node.id, node.kind, "numerical", values, (node.id,), {(v,): v for v in values},
                     base_kind="cond", cond=cond, pos=node.pos, inputs=node.inputs, fn=call,
                     notes=["opaque"])
        info.linear = (w, c)  # type: ignore[attr-defined]
        return info

    # ------------------------------------------------------------------ selectors
    def formula(self, sel_id: str) -> sl.Formula:
        """The selector's formula in negation normal form, with every order comparison of a
        lexicographic key with itself (``lexicographic_key``) rewritten over its two parts: the
        same selection on every input, without a one-hot over the key's (X, index) pairs."""
        if sel_id not in self._formulas:
            f = sl.substitute(sl.formula(self.graph, sel_id), self._lex_atom)
            self._formulas[sel_id] = self._absorbed(f)
        return self._formulas[sel_id]

    def _absorbed(self, f: sl.Formula) -> sl.Formula:
        """``A or B`` as ``A`` where B, a test of positions alone, never holds without A.  The
        original paper's sort lets the BOS query grab itself with ``select(num_before, indices - 1,
        ==) or (select(indices, 0, ==) and select(indices, indices, ==))``, where num_before is
        -1 at index 0: the second disjunct adds nothing, but its indices would need a one-hot of
        (num_before, indices) on the key side, an MLP layer before the head."""
        if not isinstance(f, sl.Any_) or len(f.parts) < 2:
            return f
        parts = list(f.parts)
        for b in list(parts):
            rest = [p for p in parts if p is not b]
            if rest and self._implies(b, rest[0] if len(rest) == 1 else sl.Any_(tuple(rest))):
                parts = rest
        return parts[0] if len(parts) == 1 else sl.Any_(tuple(parts))

    def _implies(self, b: sl.Formula, a: sl.Formula, max_pairs: int = 200_000) -> bool:
        """Whether ``a`` holds at every (query, key) position pair, on every input, where the
        positional formula ``b`` holds (``a``'s s-ops judged by the values they can take at the
        two positions)."""
        if not all(self.positional(x.key) and self.positional(x.query) for x in sl.atoms(b)):
            return False
        pairs = 0
        for n in self.lengths:
            for i, j in zip(*np.nonzero(self._selection(b, n)), strict=True):
                pairs += 1
                if pairs > max_pairs:
                    return False
                known = {}
                for x in sl.atoms(a):
                    kv, qv = self._values_at(x.key, int(j), n), self._values_at(x.query, int(i), n)
                    if kv is None or qv is None:
                        continue
                    known[x] = sl.atom_matrix(x, qv, kv)
                can_true, can_false = _pair_truth(a, known)
                if can_false:
                    return False
        return True

    def undefined(self) -> dict[int, tuple[str, int]]:
        """Input length -> (an s-op, a position) where that s-op has no value for any input of that
        length (``6 / indices`` at 0).  The interpreter evaluates every s-op at every position, so
        it raises on every input of those lengths."""
        out: dict[int, tuple[str, int]] = {}
        for sid in sorted(self.partial):
            for i, n in self.ctx_all:
                if n not in out and not self.ctx_values(sid, (i, n)):
                    out[n] = (sid, i)
        return dict(sorted(out.items()))

    def _values_at(self, sid: str, i: int, n: int) -> list[Any] | None:
        """The values ``sid`` can take at position ``i`` of a length-``n`` input (None: unknown)."""
        cache = self._at_cache
        if sid not in cache:
            info = self.info[sid]
            kinds = [self.info[b].base_kind for b in info.bases]
            by_pos: dict[tuple[int, int], set] | None = None
            if info.table and ("index" in kinds or "length" in kinds) and len(info.table) <= 200_000:
                ii = kinds.index("index") if "index" in kinds else None
                nn = kinds.index("length") if "length" in kinds else None
                by_pos = {}
                for key, v in info.table.items():
                    by_pos.setdefault((key[ii] if ii is not None else -1, key[nn] if nn is not None else -1),
                                      set()).add(v)
                cache[sid] = (by_pos, ii is not None, nn is not None)
            else:
                cache[sid] = (None, False, False)
        by_pos, has_i, has_n = cache[sid]
        if by_pos is None:
            return list(self.info[sid].values) or None
        found = by_pos.get((i if has_i else -1, n if has_n else -1))
        return sorted_values(found) if found else None

    def _lex_atom(self, atom: sl.Atom) -> sl.Formula:
        if atom.key != atom.query or atom.op not in ("<", "<=", ">", ">="):
            return atom
        found = self.lexicographic_key(atom.key)
        if found is None:
            return atom
        return sl.lexicographic(atom, *found) or atom

    def lexicographic_key(self, sid: str) -> tuple[str, str, bool, bool] | None:
        """(X, indices, X increasing, index increasing) when the numbers ``sid`` holds order the
        positions by X first and by the index among positions of equal X, as tracr's unique sort
        keys ``x + i / max_seq_len`` do (x integer, i < max_seq_len): ``sid`` is a map whose table
        is over exactly two bases, X and the index, and on that table (every pair of its rows,
        which covers every pair of positions of every input)

        * along the rows of each X value, the key strictly increases with the index (or strictly
          decreases, the same direction for every X value), and
        * the ranges of the key over the rows of different X values do not overlap, and are
          ordered as the X values are (or in reverse).

        Then ``K_k < K_q`` holds exactly when X_k comes first, or X_k == X_q and i_k comes first
        — for K = a(X) + b(i) this is: the whole range of b is smaller than the smallest gap
        between distinct values of a (checked here on the values the interpreter computes, so
        float rounding is accounted for)."""
        if sid not in self._lex_cache:
            self._lex_cache[sid] = self._find_lexicographic(sid)
        return self._lex_cache[sid]

    def _find_lexicographic(self, sid: str) -> tuple[str, str, bool, bool] | None:
        info = self.info.get(sid)
        if info is None or info.base_kind is not None or len(info.bases) != 2 or not info.table:
            return None
        kinds = [self.info[b].base_kind for b in info.bases]
        if sorted(k == "index" for k in kinds) != [False, True]:
            return None
        j = kinds.index("index")
        i_id, x_id = info.bases[j], info.bases[1 - j]
        if kinds[1 - j] not in ("token", "free", "cond"):
            return None
        xvals = self.info[x_id].values
        # X's values are compared by the rewritten atoms: they must be totally ordered by Python
        # and pairwise unequal (1, 1.0 and True would be one value to ``==`` but two rows here)
        if not xvals or not sl._comparable(xvals) or len(set(xvals)) != len(xvals) or \
                any(isinstance(v, bool) for v in xvals):
            return None
        groups: dict[Any, list[tuple[int, float]]] = {}
        for key, k in info.table.items():
            if isinstance(k, bool) or not isinstance(k, (int, float)) or k != k or \
                    k in (float("inf"), float("-inf")):
                return None
            groups.setdefault(key[1 - j], []).append((key[j], k))
        if len(groups) < 2:
            return None
        i_dir = 0
        spans: dict[Any, tuple[float, float]] = {}
        for x, rows in groups.items():
            rows.sort()
            ks = [k for _, k in rows]
            for a, b in zip(ks, ks[1:], strict=False):
                d = 1 if b > a else -1 if b < a else 0
                if d == 0 or (i_dir and d != i_dir):
                    return None
                i_dir = d
            spans[x] = (min(ks), max(ks))
        if i_dir == 0:  # no X value occurs at two indices: the index never matters
            return None
        order = sorted(spans)
        lows = [spans[x][0] for x in order]
        highs = [spans[x][1] for x in order]
        if all(h < lo for h, lo in zip(highs, lows[1:], strict=False)):
            return x_id, i_id, True, i_dir > 0
        if all(lo > h for lo, h in zip(lows, highs[1:], strict=False)):
            return x_id, i_id, False, i_dir > 0
        return None

    def positional(self, sid: str) -> bool:
        """Whether ``sid`` is a function of the index and the length only."""
        return all(self.info[b].base_kind in ("index", "length") for b in self.info[sid].bases)

    def widths(self, sel_id: str) -> dict[tuple[int, int], int] | None:
        """For a selector that reads only positional s-ops: its width at each (index, length)."""
        if sel_id in self._width_cache:
            return self._width_cache[sel_id]
        f = self.formula(sel_id)
        result: dict[tuple[int, int], int] | None = None
        if all(self.positional(a.key) and self.positional(a.query) for a in sl.atoms(f)):
            result = {}
            for n in self.lengths:
                sel = self._selection(f, n)
                for i, w in enumerate(sel.sum(axis=1).tolist()):
                    result[(i, n)] = int(w)
        self._width_cache[sel_id] = result
        return result

    def _selection(self, f: sl.Formula, n: int) -> np.ndarray:
        """The selection matrix [query, key] at length ``n`` of a selector whose atoms read
        positional s-ops only."""
        pos_n = list(range(n))
        mats = {}
        for a in sl.atoms(f):
            kv = [self._positional_value(a.key, j, n) for j in pos_n]
            qv = [self._positional_value(a.query, i, n) for i in pos_n]
            # compare distinct values once, then index (n² Python comparisons is slow)
            kd, qd = list(dict.fromkeys(kv)), list(dict.fromkeys(qv))
            small = sl.atom_matrix(a, qd, kd)
            kpos = {v: j for j, v in enumerate(kd)}
            qpos = {v: j for j, v in enumerate(qd)}
            mats[a] = small[np.array([qpos[v] for v in qv], dtype=np.intp)[:, None],
                            np.array([kpos[v] for v in kv], dtype=np.intp)[None, :]]
        return sl.evaluate(f, mats)

    def _positional_means(self, sel_id: str, src: str, default: Any) -> dict | None:
        """A mean of a positional s-op under a positional selector (``1 / mean(indices == 0)`` over
        every position, a prefix mean of a function of the index): one value per (index, length),
        computed as the interpreter computes it (``exact_means``: the exact mean, rounded once).
        Without this its value set is every k/w of the value set's sums, e.g. all ~3N²/π²
        fractions k/n for ``length``.  None when some value is not known at some position."""
        f = self.formula(sel_id)
        cond: dict[tuple[int, int], list[Any]] = {}
        for n in self.lengths:
            vals = [self._positional_value(src, j, n) for j in range(n)]
            if any(v is None or not isinstance(v, (int, float)) for v in vals):
                return None
            sel = self._selection(f, n)
            counts = sel.sum(axis=1)
            mean_of = dict(zip(np.nonzero(counts > 1)[0].tolist(), exact_means(vals, sel[counts > 1]),
                               strict=True))   # as the interpreter computes them
            for i in range(n):
                c = int(counts[i])
                if c == 0:
                    cond[(i, n)] = [default]
                elif c == 1:
                    cond[(i, n)] = [vals[int(sel[i].argmax())]]
                else:
                    cond[(i, n)] = [mean_of[i]]
        return cond

    def _positional_value(self, sid: str, i: int, n: int) -> Any:
        info = self.info[sid]
        key = tuple(i if self.info[b].base_kind == "index" else n for b in info.bases)
        return info.table.get(key)

    def injective(self, sid: str) -> bool:
        """Whether ``sid`` holds a different value at every position of every input: a positional
        s-op checked at every length, or a function of the index and of s-ops that hold one value
        across an input (``uniform``) that differs at every index for each of their values, such
        as ``indices + length - add_index`` with ``add_index`` the position of the "+" token."""
        if self.info[sid].base_kind == "index":
            return True
        posaff = self.info[sid].posaff
        if posaff is not None and posaff[0] != 0:  # a·index + b·length + c, a != 0: i -> value is 1-1
            return True
        if not self.positional(sid):
            return self._injective_given_uniform(sid)
        for n in self.lengths:
            vals = [self._positional_value(sid, i, n) for i in range(n)]
            if None in vals or len(set(vals)) != n:
                return False
        return True

    def _injective_given_uniform(self, sid: str) -> bool:
        info = self.info[sid]
        kinds = [self.info[b].base_kind for b in info.bases]
        if kinds.count("index") != 1 or not info.table:
            return False
        if not all(k == "index" or self.uniform(b) for b, k in zip(info.bases, kinds, strict=True)):
            return False
        at = kinds.index("index")
        seen: dict[tuple, dict[tuple, Any]] = {}
        for key, v in info.table.items():
            held = seen.setdefault(key[:at] + key[at + 1:], {})
            if held.setdefault(value_key(v), key[at]) != key[at]:
                return False
        return True

    def uniform(self, sid: str) -> bool:
        """Whether ``sid`` holds one value at every position of an input: the length, constants,
        and attention outputs whose selector gives every query the same keys (each atom's query
        side is itself uniform), and maps of those."""
        cache = self._uniform_cache
        if sid in cache:
            return cache[sid]
        cache[sid] = False  # no cycles in a DAG; guards the recursion
        info = self.info[sid]
        if info.bases != (sid,):
            result = all(self.uniform(b) for b in info.bases)
        elif info.base_kind in ("length", "const"):
            result = True
        elif info.base_kind in ("free", "cond") and sid in self.graph:
            node = self.node(sid)
            result = isinstance(node, (Aggregate, SelectorWidth)) and all(
                self.uniform(a.query) for a in sl.atoms(self.formula(node.inputs[0])))
        else:
            result = False
        cache[sid] = result
        return result

    def rank_of(self, sid: str) -> str | None:
        """X when ``sid`` is ``selector_width(select(X, X, ==) and select(indices, indices, op))``
        with op one of < <= > >=: the number of earlier (or later) positions holding the same X.
        It strictly increases (decreases) along the positions of equal X, so the pair (X, sid)
        differs at every position."""
        node = self.node(sid) if sid in self.graph else None
        if not isinstance(node, SelectorWidth):
            return None
        parts = sl.conjuncts(self.formula(node.inputs[0]))
        if len(parts) != 2 or not all(isinstance(p, sl.Atom) and not p.negated for p in parts):
            return None
        same = [p for p in parts if p.op == "==" and p.key == p.query]
        order = [p for p in parts if p.op in ("<", "<=", ">", ">=") and p.key == p.query
                 and self.info[p.key].base_kind == "index"]
        if len(same) == 1 and len(order) == 1:
            return same[0].key
        return None

    def at_most_one(self, sel_id: str) -> bool:
        """Whether the selector provably selects at most one key for every query: some conjunct
        is an atom that matches at most one value of an injective key, or the conjunction's ``==``
        atoms pin the key's (X, rank of X) pair, which differs at every position."""
        w = self.widths(sel_id)
        if w is not None:
            return max(w.values(), default=0) <= 1
        pinned = set()
        for c in sl.conjuncts(self.formula(sel_id)):
            if not isinstance(c, sl.Atom):
                continue
            kv, qv = self.info[c.key].values, self.info[c.query].values
            if sl.atom_matrix(c, qv, kv).sum(axis=1).max(initial=0) > 1:
                continue
            if self.injective(c.key):
                return True
            pinned.add(c.key)
        return any(self.rank_of(k) in pinned for k in pinned)

    # ------------------------------------------------------------------ attention outputs
    def _aggregate(self, node: Aggregate) -> SInfo:
        sel_id, src = node.inputs
        sinfo = self.info[src]
        enc = node.encoding
        if "unbounded" in sinfo.notes and enc != "categorical":
            nums = [float(v) for v in sinfo.values] + [float(node.default)] \
                if isinstance(node.default, (int, float)) else None
            if nums is None:
                self.require_values(src, node.id)
            info = self._base(node, "free", [min(nums), max(nums)], "numerical")  # type: ignore[arg-type]
            info.notes.append("unbounded")
            return info
        unique = self.at_most_one(sel_id)
        # tracr's numerical mean of booleans (``numerical(tokens == "a")``) averages them as 0/1, and
        # so does the interpreter for an aggregate marked numerical
        booleans = bool(sinfo.values) and all(isinstance(v, bool) for v in sinfo.values)
        numeric = is_numeric(sinfo.values) or (node.encoding == "numerical" and booleans)
        if enc is None:
            if numeric and not unique:
                enc = "numerical"
            elif sinfo.encoding == "numerical" and not (unique and _one_hot_ok(sinfo.values, self.dtype)):
                enc = "numerical"
            else:
                # at most one key: moving a one-hot is exact, and the result can be compared,
                # looked up or decoded without any further conversion
                enc = "categorical"
        if enc == "numerical" and not isinstance(node.default, (int, float)):
            raise self.error(node.id, f"{self.describe(node.id)} is a numerical mean, so its default "
                             f"must be a number, not {node.default!r}",
                             hint="give a numeric default, or select at most one key")
        if enc == "numerical" and not numeric:
            raise self.error(node.id, f"{self.describe(node.id)} averages {self.describe(src)}, "
                             f"which holds non-numbers ({_preview(sinfo.values)})",
                             hint="a numerical aggregate needs numbers; use indicator(...) on booleans")
        if enc == "categorical" and not unique and numeric:
            raise self.error(node.id, f"{self.describe(node.id)} is categorical, but its selector may "
                             "pick several keys, and the mean of several numbers has no categorical "
                             "encoding", hint="remove categorical(...) so it compiles as a numerical "
                             "mean, or select at most one key (compare against indices with ==)")
        widths = self.widths(sel_id)
        default = node.default
        if enc == "categorical":
            values = list(sinfo.values) + [default]
            info = self._base(node, "free", values, enc)
            if widths is not None:  # the selector reads positions only: is it ever empty?
                empty, full = sorted_values([default]), sorted_values(sinfo.values)
                info.base_kind = "cond"
                info.cond = {ctx: (empty if w == 0 else full) for ctx, w in widths.items()}
                info.values = sorted_values(v for vs in info.cond.values() for v in vs)
                info.table = {(v,): v for v in info.values}
            if not unique:
                info.notes.append("several keys may be selected: the interpreter rejects such inputs "
                                  "(a mean of non-numbers)")
            return info
        if widths is not None and self.positional(src):
            exact = self._positional_means(sel_id, src, default)
            if exact is not None:
                allv = sorted_values(v for vs in exact.values() for v in vs)
                return self._base(node, "cond", allv, enc, cond=exact)
        per_width: dict[int, list[Any] | None] = {}

        def mean_set(w: int) -> list[Any]:
            if w not in per_width:
                if w == 0:
                    per_width[w] = [default]
                elif unique:  # never more than one key: the values themselves
                    per_width[w] = list(sinfo.values)
                else:
                    per_width[w] = means(sinfo.values, w, self._sum_cache)
            got = per_width[w]
            if got is None:
                raise _Unbounded()
            return got
        try:
            return self._mean_info(node, sinfo, widths, mean_set, enc, unique)
        except _Unbounded:
            # Too many possible means to list: fine as an output or as a mean's value; a map or a
            # select reading it is refused (see ``require_values``).
            nums = [float(v) for v in sinfo.values] + [float(default)]
            info = self._base(node, "free", [min(nums), max(nums)], enc)
            info.notes.append("unbounded")
            return info

    def _mean_info(self, node: Aggregate, sinfo: SInfo, widths: Any, mean_set: Callable[[int], list],
                   enc: str, unique: bool) -> SInfo:
        default = node.default
        if widths is not None:
            by_width = {w: sorted_values(mean_set(w)) for w in sorted(set(widths.values()))}
            cond = {ctx: by_width[w] for ctx, w in widths.items()}
            allv = sorted_values(v for vs in cond.values() for v in vs)
            info = self._base(node, "cond", allv, enc, cond=cond)
        else:
            allv = [default]
            for w in range(1, max(self.lengths) + 1):
                allv.extend(mean_set(w))
                if len(allv) > 4 * MAX_VALUES:
                    raise _Unbounded()
            info = self._base(node, "free", allv, enc)
        return info

    def require_values(self, sid: str, reader: str) -> None:
        """Refuse to tabulate a function of an s-op whose values could not be enumerated."""
        if "unbounded" in self.info[sid].notes:
            raise self.error(reader, f"{self.describe(reader)} reads {self.describe(sid)}, a mean with "
                             "too many possible values to enumerate",
                             hint="average fewer distinct values (e.g. 0/1 indicators), or compile "
                                  "with a smaller --max-len")

    def _selector_width(self, node: SelectorWidth) -> SInfo:
        enc = node.encoding or "categorical"
        widths = self.widths(node.inputs[0])
        if widths is not None:
            cond = {ctx: [w] for ctx, w in widths.items()}
            return self._base(node, "cond", sorted({w for w in widths.values()}), enc, cond=cond)
        return self._base(node, "free", list(range(0, max(self.lengths) + 1)), enc)


class _Unbounded(Exception):
    pass


class _AffineCond(Mapping):
    """The per-(index, length) values of ``a·index + b·length + c`` (``Analysis._affine_base``),
    computed on lookup.  A value's list is one object wherever it occurs, so contexts with the
    same value have the same choices (``Analysis._contexts`` compares the lists by identity)."""

    def __init__(self, posaff: tuple[int, int, int], ctx_all: list[tuple[int, int]]) -> None:
        self.posaff = posaff
        self._ctx_all = ctx_all
        self._lists: dict[int, list[int]] = {}

    def __getitem__(self, ctx: tuple[int, int]) -> list[int]:
        i, n = ctx
        if not (isinstance(i, int) and isinstance(n, int) and 0 <= i < n):
            raise KeyError(ctx)
        a, b, c = self.posaff
        v = a * i + b * n + c
        got = self._lists.get(v)
        if got is None:
            got = self._lists[v] = [v]
        return got

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(self._ctx_all)

    def __len__(self) -> int:
        return len(self._ctx_all)


def _int_affine(expr: Any, arity: int) -> tuple[list[int], int] | None:
    """(w, c) with ``expr`` = sum_j w_j·x_j + c, all integers, built from inputs, integer constants
    (not booleans), unary + and -, + and -, and * by a constant; else None (division, floats,
    comparisons, lookups)."""
    if isinstance(expr, Var):
        w = [0] * arity
        w[expr.index] = 1
        return w, 0
    if isinstance(expr, Const):
        return ([0] * arity, expr.value) if type(expr.value) is int else None
    if isinstance(expr, Unary) and expr.op in ("-", "+"):
        inner = _int_affine(expr.arg, arity)
        if inner is None or expr.op == "+":
            return inner
        return [-x for x in inner[0]], -inner[1]
    if isinstance(expr, Binary) and expr.op in ("+", "-", "*"):
        left, right = _int_affine(expr.left, arity), _int_affine(expr.right, arity)
        if left is None or right is None:
            return None
        if expr.op == "+":
            return [x + y for x, y in zip(left[0], right[0], strict=True)], left[1] + right[1]
        if expr.op == "-":
            return [x - y for x, y in zip(left[0], right[0], strict=True)], left[1] - right[1]
        if not any(right[0]):
            return [x * right[1] for x in left[0]], left[1] * right[1]
        if not any(left[0]):
            return [x * left[1] for x in right[0]], right[1] * left[1]
    return None


_MISSING = object()


def _lookup(pairs: list[tuple[Callable[[tuple], tuple], dict]], assignments: Iterable[tuple]
            ) -> Iterator[tuple[tuple, tuple]]:
    """(assignment, the value of each (key getter, table) pair) for every assignment that every
    table holds.  One and two tables (most maps and joints) are unrolled: this runs once per
    joint assignment, tens of thousands of times per map."""
    missing = _MISSING
    if len(pairs) == 1:
        (g0, t0), = pairs
        for a in assignments:
            v0 = t0.get(g0(a), missing)
            if v0 is not missing:
                yield a, (v0,)
    elif len(pairs) == 2:
        (g0, t0), (g1, t1) = pairs
        for a in assignments:
            v0 = t0.get(g0(a), missing)
            if v0 is missing:
                continue
            v1 = t1.get(g1(a), missing)
            if v1 is not missing:
                yield a, (v0, v1)
    else:
        for a in assignments:
            row = []
            for get, table in pairs:
                v = table.get(get(a), missing)
                if v is missing:
                    break
                row.append(v)
            else:
                yield a, tuple(row)


def _key_getter(proj: list[int], width: int) -> Callable[[tuple], tuple]:
    """``lambda a: tuple(a[j] for j in proj)``, without a generator per call."""
    if proj == list(range(width)):
        return lambda a: a
    if not proj:
        return lambda a: ()
    if len(proj) == 1:
        j = proj[0]
        return lambda a: (a[j],)
    return operator.itemgetter(*proj)


def _one_hot_ok(values: list[Any], dtype: str, limit: int = 512) -> bool:
    """Whether a numerical s-op with these values can be turned into a one-hot exactly."""
    from rasp_compiler.compiler.numeric import projection

    if len(values) > limit:
        return False
    return projection([((float(v),), v) for v in values], [max(abs(float(v)) for v in values)],
                      dtype) is not None


def _preview(values: list[Any], k: int = 4) -> str:
    shown = ", ".join(repr(v) for v in values[:k])
    return shown + (", …" if len(values) > k else "")


def _pair_truth(f: sl.Formula, known: dict[sl.Atom, np.ndarray]) -> tuple[bool, bool]:
    """(can be true, can be false) of ``f`` at one position pair, from each known atom's truth
    table over the values its s-ops can take there (other atoms: unknown)."""
    if isinstance(f, sl.Atom):
        m = known.get(f)
        return (True, True) if m is None else (bool(m.any()), bool((~m).any()))
    parts = [_pair_truth(p, known) for p in f.parts]
    if isinstance(f, sl.All):
        return all(t for t, _ in parts), any(fl for _, fl in parts)
    return any(t for t, _ in parts), all(fl for _, fl in parts)

