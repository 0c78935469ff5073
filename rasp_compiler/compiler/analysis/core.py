"""The ``Analysis`` class: its state, the pass over the program's nodes, and error messages.

Each node kind is analysed by a part of its own, mixed in here: maps (``maps``, ``affine``),
attention outputs (``aggregates``), and what they read (``domains``, ``selector_formulas``,
``selector_facts``); ``bool_number`` then checks the finished value sets for 0 / False clashes.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import networkx as nx

from rasp_compiler.compiler import selectors as sl
from rasp_compiler.compiler.analysis.affine import PositionalAffine
from rasp_compiler.compiler.analysis.aggregates import AttentionOutputs
from rasp_compiler.compiler.analysis.bool_number import BoolNumberChecks
from rasp_compiler.compiler.analysis.domains import Domains
from rasp_compiler.compiler.analysis.maps import MapTables
from rasp_compiler.compiler.analysis.selector_facts import SelectorFacts
from rasp_compiler.compiler.analysis.selector_formulas import SelectorFormulas
from rasp_compiler.compiler.analysis.sinfo import SInfo, _preview, convert_token
from rasp_compiler.compiler.values import sorted_values
from rasp_compiler.errors import CompileError, ModelTooLargeError
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


class Analysis(Domains, MapTables, PositionalAffine, SelectorFormulas, SelectorFacts, AttentionOutputs,
               BoolNumberChecks):
    """Value sets, encodings and joint domains of every s-op of ``program``."""

    def __init__(self, program: Program, vocab: list[Any], max_len: int, *,
                 fixed_length: int | None = None, causal: bool = False, dtype: str = "float32",
                 whole_program: bool = False, tabulate_up_to: int | None = None,
                 domain_cap: int | None = None, defer_from: int | None = None,
                 resume: Analysis | None = None) -> None:
        """Analyses the s-ops the output depends on (a file may define several programs: the
        others are not compiled, so their value sets, size limits and notes do not matter), or
        every s-op with ``whole_program``.  ``tabulate_up_to`` (default DOMAIN_CAP) is the largest
        joint domain over which a categorical map of independent inputs is tabulated (and so
        fusable) rather than kept opaque (see ``map_info``).  ``domain_cap`` (default
        limits.DOMAIN_CAP) is the largest joint domain any map is tabulated over.  A map of
        independent inputs past ``defer_from`` joint assignments (and within the caps) is kept
        opaque too, and listed in ``deferred``.  ``resume``: an analysis of the same program and
        options but a ``defer_from`` no larger, whose ``resume_point`` this one starts from (its
        s-ops before the first one it deferred, which this one would analyse alike)."""
        self.program = program
        self.tabulate_up_to = tabulate_up_to
        self.domain_cap = domain_cap
        self.defer_from = defer_from
        # maps kept opaque from ``defer_from`` on: the compiler defers fewer or tabulates them in
        # a second plan where the first has more layers than its heads need (``compiler.plans``)
        self.deferred: list[tuple[str, int]] = []  # (map, joint assignments)
        self.rows_tabulated = 0  # joint assignments of every map tabulated so far
        # maps kept opaque because their joint domain was past the domain cap: the compiler may
        # weigh a plan with a larger one (``compiler.plans``)
        self.capped: list[tuple[str, int]] = []  # (map, joint assignments)
        # categorical maps tabulated over more than limits.LARGE_TABLE joint assignments where the
        # opaque plan was open to them: the compiler then weighs both plans
        self.large_tables: list[tuple[str, int]] = []  # (map, joint assignments)
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
        self._checked_selects: set[str] = set()  # ``check_predicates``
        self._atom_tables: dict[tuple, sl.PredicateTable | None] = {}  # ``predicate_table``
        # s-op -> ({(index, length): values there}, keyed by index?, keyed by length?) (``_values_at``)
        self._at_cache: dict[str, tuple[dict | None, bool, bool]] = {}
        self._uniform_cache: dict[str, bool] = {}
        self._lex_cache: dict[str, tuple[str, str, bool, bool] | None] = {}
        # by selector, and by the shape of its formula (``SelectorFacts.widths``)
        self._width_cache: dict[str | tuple, dict[tuple[int, int], int] | None] = {}
        self.partial: set[str] = set()  # maps whose function raised on some value (``undefined``)
        # maps that raised on some value, and selects whose predicate did: each one's first failure
        self.failures: dict[str, tuple[tuple, Exception]] = {}
        self.non_atoms: dict[str, tuple[tuple, Any]] = {}  # maps that gave a list, None, …
        # A map's results equal to 0 or 1 (or tuples), by value, and the first pair of them that
        # are equal but of different types (False and 0): value sets collapse such pairs.
        self._zero_one: dict[str, dict[Any, Any]] = {}
        self._own_clash: dict[str, tuple[Any, Any]] = {}
        # s-op -> the s-op where its clash arises: it may hold a boolean at one position and an
        # equal number at another (``_propagate_bool_number``, docs/known-bugs.md #13)
        self.marked: dict[str, str] = {}
        self._length_like: dict[str, bool] = {}  # cache of ``length_like``
        self.whole_program = whole_program
        # (k, state): this analysis's state before it analysed its k-th s-op, the first map it
        # deferred (``_snapshot``); None where it deferred none
        self.resume_point: tuple[int, dict[str, Any]] | None = None
        self._analysing: int | None = None
        wanted = None
        if not whole_program and program.output in self.graph:
            wanted = nx.ancestors(self.graph, program.output) | {program.output}
        nodes = [node for node in program.nodes()
                 if not node.is_selector and (wanted is None or node.id in wanted)]
        start = 0
        if resume is not None and resume.resume_point is not None and self._may_resume(resume):
            start, state = resume.resume_point
            self._restore(state)
        for k in range(start, len(nodes)):
            self._analysing = k  # where the first deferred map is (``MapTables.map_info``)
            self.info[nodes[k].id] = self._analyse(nodes[k])
        self._analysing = None  # (the lowering tabulates maps of its own)
        self._propagate_bool_number()
        if program.output in self.info:
            self._check_bool_number_output(program.output)

    # what ``_snapshot`` leaves out: the options and inputs, which ``_may_resume`` compares
    _OPTIONS = frozenset({"program", "tabulate_up_to", "domain_cap", "defer_from", "dtype", "graph",
                          "vocab", "max_len", "fixed_length", "causal", "lengths", "ctx_all",
                          "whole_program", "resume_point", "_analysing"})

    def _may_resume(self, other: Analysis) -> bool:
        """Whether this analysis analyses the s-ops before ``other``'s first deferred map as
        ``other`` did: the same program and options, and a ``defer_from`` no smaller (None:
        nothing deferred).  Those s-ops were not deferred there, so with a higher threshold they
        are not deferred here either, and every other path of ``map_info`` reads the options
        compared here alike."""
        return (other.program is self.program
                and [(type(v), v) for v in other.vocab] == [(type(v), v) for v in self.vocab]
                and other.max_len == self.max_len and other.fixed_length == self.fixed_length
                and other.causal == self.causal and other.dtype == self.dtype
                and other.whole_program == self.whole_program
                and other.tabulate_up_to == self.tabulate_up_to and other.domain_cap == self.domain_cap
                and other.defer_from is not None
                and (self.defer_from is None or self.defer_from >= other.defer_from))

    def _keep_resume_point(self, sid: str) -> None:
        """Called by ``map_info`` as it defers ``sid``, the first map it defers, while the pass
        over the s-ops is at it: this analysis's state before that s-op (``resume_point``).  What
        its analysis did so far is kept out: the calls of its function, recorded under its name
        (its ``SInfo`` is not in ``info`` yet, nor in the lists of deferred, capped or large
        tables); the caches it filled hold what any analysis would compute alike."""
        if self._analysing is None or self.resume_point is not None:
            return
        state = self._snapshot()
        state["partial"].discard(sid)
        for name in ("failures", "non_atoms", "_zero_one", "_own_clash"):
            state[name].pop(sid, None)
        self.resume_point = (self._analysing, state)

    def _snapshot(self) -> dict[str, Any]:
        """This analysis's state (every attribute but the options): its records and caches
        copied one level deep, where the analysis adds to them (``_zero_one`` two levels: a map's
        entry grows with each call).  The value sets, tables and caches' entries are shared:
        none is changed once made."""
        state: dict[str, Any] = {}
        for name, value in self.__dict__.items():
            if name in self._OPTIONS:
                continue
            if isinstance(value, (dict, list, set)):
                value = value.copy()
            state[name] = value
        state["_zero_one"] = {k: dict(v) for k, v in state["_zero_one"].items()}
        return state

    def _restore(self, state: dict[str, Any]) -> None:
        """Take over ``state`` (another analysis's ``_snapshot``), copied again so that it stays as
        it was; each map's function then records its calls here (``MapTables._recorder``), as
        it would have had this analysis called it first."""
        for name, value in state.items():
            if isinstance(value, (dict, list, set)):
                value = value.copy()
            setattr(self, name, value)
        self._zero_one = {k: dict(v) for k, v in self._zero_one.items()}
        for sid, info in self.info.items():
            node = getattr(info.fn, "recorded_node", None)
            if node is not None:
                info = copy.copy(info)
                info.fn = self._recorder(node)
                self.info[sid] = info

    def node(self, node_id: str) -> Node:
        return self.graph.nodes[node_id]["node"]

    def error(self, node_id: str | None, message: str, hint: str | None = None,
              pos: SourcePos | None = None, too_large: bool = False) -> CompileError:
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
        cls = ModelTooLargeError if too_large else CompileError
        source = None
        if pos is not None:
            source = getattr(self.program, "sources", {}).get(pos.file)
            if getattr(pos, "called", ""):  # built in tracr's library (pyapi.lib): the user's line too
                message += f" (in {pos.called})"
            return cls(message, pos.file, pos.line, pos.col, source=source, hint=hint,
                       width=max(1, len(pos.text.splitlines()[0]) if pos.text else 1))
        return cls(message, self.program.source_file, hint=hint)

    def describe(self, node_id: str) -> str:
        parts = node_id[1:-1].split(",") if node_id.startswith("(") and node_id.endswith(")") else []
        if node_id not in self.graph and len(parts) > 1 and all(p in self.graph for p in parts):
            # the one-hot of several s-ops that a selector compares at once (lowering's tuples)
            return "the tuple of " + " and ".join(self.describe(p) for p in parts)
        node = self.node(node_id) if node_id in self.graph else None
        text = node.pos.text if node is not None and node.pos is not None and node.pos.text else ""
        return f"'{node_id}'" + (f" ({text})" if text and text != node_id else "")

    def _base(self, node: Node, kind: str, values: list[Any], encoding: str, *,
              cond: dict | None = None, ordered: bool = False) -> SInfo:
        """A base's ``SInfo``; ``ordered``: ``values`` are ``sorted_values``'s list already."""
        if not ordered:
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
            falsy = [v for v in self.vocab if node.type == "bool" and isinstance(v, str)
                     and v.strip().lower() in ("0", "false", "f", "no", "n", "off")]
            if falsy:   # --vocab 01 read as [True, True] without a word (Python's bool, the original's)
                info.notes.append("every non-empty string reads as True (Python's bool, as in the "
                                  f"original REPL): {', '.join(map(repr, falsy[:3]))} "
                                  f"read{'s' if len(falsy) == 1 else ''} as True; read 0/1 with "
                                  "tokens_int (tokens_int == 1)")
        elif isinstance(node, Indices):
            info = self._base(node, "index", list(range(max(self.lengths))), enc or "categorical")
        elif isinstance(node, Length):
            if self.fixed_length is not None:
                info = self._const(node.id, node.kind, self.fixed_length, node.pos, enc or "categorical")
            else:
                if self.causal:
                    raise self.error(node.id, "length needs the whole input, which a causal model "
                                     "cannot see", hint="compile without causal=True (--causal)")
                info = self._base(node, "length", list(self.lengths), enc or "categorical")
        elif isinstance(node, Constant):
            info = self._const(node.id, node.kind, node.value, node.pos, enc or "categorical")
        elif isinstance(node, (Map, SequenceMap)):
            info = self._analyse_map(node, enc)
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
        if isinstance(node, (Aggregate, SelectorWidth)):
            info.notes.extend(self._string_number_selects(node.inputs[0]))
        if info.encoding == "numerical" and not info.numeric and info.kind not in ("aggregate",) \
                and not all(isinstance(v, bool) for v in info.values):  # booleans are held as 0/1
            raise self.error(node.id, f"{self.describe(node.id)} is marked numerical but holds "
                             f"non-numbers ({_preview(info.values)})",
                             hint="remove numerical(...) or make the values numbers (indicator(...))")
        # (a value equals inf exactly where it is an infinite float: ``in`` compares in C)
        if info.encoding == "numerical" and (math.inf in info.values or -math.inf in info.values):
            # one residual number cannot hold inf (inf - inf is NaN): the run refused every input,
            # blaming damaged weights
            raise self.error(node.id, f"{self.describe(node.id)} is marked numerical but may be "
                             f"infinite ({_preview(info.values)}): one number in the residual stream "
                             "cannot carry inf", hint="return a finite number, or remove numerical(...) "
                             "so that inf is one of its categories")
        return info

    def _string_number_selects(self, sel_id: str) -> list[str]:
        """Notes for the selects of ``sel_id`` that compare strings with numbers by == or !=
        (`select(tokens, 1, ==)` over --vocab 123): constant, as in the interpreter and the
        original REPL, and compiled without a word (`<` on the same pair is an error)."""
        notes = []
        for atom in sl.atoms(sl.formula(self.graph, sel_id)):
            if atom.fn is not None or atom.op not in ("==", "!="):
                continue
            keys, queries = self.info[atom.key].values, self.info[atom.query].values
            for strings, numbers in ((keys, queries), (queries, keys)):
                if strings and numbers and all(isinstance(v, str) for v in strings) and all(
                        isinstance(v, (int, float)) and not isinstance(v, bool) for v in numbers):
                    holds = atom.op == "!="   # the select itself; a `not` around it is the user's
                    notes.append(f"{self.describe(atom.select)} compares strings with numbers by "
                                 f"{atom.op}, so it selects {'every key' if holds else 'no key'} (as in "
                                 "the interpreter); to compare numbers read the input with tokens_int "
                                 "or tokens_float, or compare with strings")
                    break
        return notes

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
