"""How the compiler chooses a plan: named candidate strategies and the one place that compares them.

Every strategy builds a model that computes the same values; they differ in which maps the
analysis tabulates (so that a map can fuse into the MLPs that read it) and which it keeps opaque
(a base of its own, computed by an MLP that its readers must wait for), and, where the output is
too large as a one-hot, in the output's encoding:

* ``plain``: every map tabulated up to ``analysis.limits.DOMAIN_CAP`` joint assignments;
* ``deferred``: maps of independent inputs past ``limits.DEFER_FROM`` assignments kept opaque;
* ``fewer deferred``: of those, only the maps larger than the smallest kept opaque;
* ``wide tables``: joint domains tabulated up to ``limits.WIDE_DOMAIN_CAP``;
* ``large tables opaque``: categorical tables past ``limits.LARGE_TABLE`` kept opaque;
* ``numeric output``: the output encoded as one number (``rewrites.numerical_output``), each of
  the strategies above then built for that program;
* ``numeric over the integers``: a program over integer tokens given ``--input-range`` (an
  ``IntegerTokens``), compiled by ``compiler.real`` as exact sum and product units over the
  range's integers, its output rounded to the integer it stands for, instead of one-hot tables.

``PlanSearch.best`` is the one comparison: of the plans built, the one with the fewest layers,
then the fewest parameters (the first built on a tie), of the exact plans: a numeric plan with an
error bound (a division's reciprocal, an output that is no integer) or flagged inputs
(``--min-denominator``) is kept only where no exact plan is built. Each plan costs a compile, so ``choose``
builds a strategy only where the plans already built say it may win, and ``PlanSearch.tried``
records every strategy it built, with its time, layers and parameters
(``CompiledWeights.plans_tried``; ``bench/plan_candidates.py`` prints them). docs/compiler.md,
"How the plan is chosen", gives the measurements behind each rule.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from rasp_compiler.compiler.analysis import Analysis, limits
from rasp_compiler.compiler.assemble import assemble
from rasp_compiler.compiler.lowering import Lowering
from rasp_compiler.compiler.rewrites import numerical_output
from rasp_compiler.compiler.schedule import Schedule, head_depth, schedule
from rasp_compiler.errors import ModelTooLargeError, UserError
from rasp_compiler.graph.nodes import Program


@dataclass(frozen=True, eq=False)
class IntegerTokens:
    """A program over integer tokens compiled with ``--input-range``: the program as written (the
    numeric plan reads it before the categorical rewrites), the range, and ``compile_numeric``'s
    options (``input_grid``, ``min_denominator``)."""

    program: Program
    integer_range: tuple[float, float]
    options: dict[str, Any]


@dataclass(frozen=True)
class Strategy:
    """One way of building ``program``'s model: the analysis options that tell its maps apart."""

    name: str
    program: Program = field(compare=False)
    program_label: str = "as written"  # or "output as a number"
    defer_from: int | None = None
    tabulate_up_to: int | None = None
    domain_cap: int | None = None
    integers: IntegerTokens | None = field(default=None, compare=False)  # the numeric plan's

    @property
    def key(self) -> tuple:
        return (id(self.program), self.defer_from, self.tabulate_up_to, self.domain_cap,
                self.integers is not None)

    @property
    def label(self) -> str:
        past = "" if self.defer_from is None else f" (past {self.defer_from:,})"
        return self.labelled(self.name + past)

    def labelled(self, text: str) -> str:
        """``text``, followed by the program's label where it is not the program as written."""
        return text if self.program_label == "as written" else f"{text}, {self.program_label}"


def plain(program: Program, program_label: str = "as written") -> Strategy:
    return Strategy("plain", program, program_label)


def deferred(program: Program, defer_from: int, program_label: str = "as written") -> Strategy:
    return Strategy("deferred", program, program_label, defer_from=defer_from)


def fewer_deferred(program: Program, analysis: Analysis,
                   program_label: str = "as written") -> Strategy | None:
    """Deferring only the larger of ``analysis``'s deferred maps (the threshold raised to the
    smallest one's size); None where they are all of one size."""
    sizes = sorted({size for _, size in analysis.deferred})
    if len(sizes) < 2:
        return None
    return Strategy("fewer deferred", program, program_label, defer_from=sizes[0])


def numeric_over_integers(integers: IntegerTokens) -> Strategy:
    return Strategy("numeric over the integers", integers.program, integers=integers)


def wide_tables(program: Program, program_label: str = "as written") -> Strategy:
    return Strategy("wide tables", program, program_label, domain_cap=limits.WIDE_DOMAIN_CAP)


def large_tables_opaque(program: Program, program_label: str = "as written") -> Strategy:
    return Strategy("large tables opaque", program, program_label, tabulate_up_to=limits.LARGE_TABLE)


@dataclass
class Tried:
    """What building one strategy gave and cost (wall-clock and CPU seconds of this process for its
    analysis, lowering, schedule and assembly: on a shared machine the CPU seconds are the
    steadier measure)."""

    strategy: str
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    layers: int | None = None  # None where it could not be lowered
    head_depth: int | None = None
    params: int | None = None  # None where it was not assembled
    outcome: str = ""  # "assembled", "not assembled: ...", "refused: ...", "kept"

    def add_time(self, start: float, cpu_start: float) -> None:
        """Add the time since ``start`` (time.perf_counter) and ``cpu_start`` (time.process_time)."""
        self.seconds += time.perf_counter() - start
        self.cpu_seconds += time.process_time() - cpu_start

    def as_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "seconds": round(self.seconds, 4),
                "cpu_seconds": round(self.cpu_seconds, 4), "layers": self.layers,
                "head_depth": self.head_depth, "params": self.params, "outcome": self.outcome}


@dataclass(eq=False)
class Candidate:
    """A strategy built as far as it went: lowered and scheduled, then perhaps assembled."""

    strategy: Strategy
    tried: Tried
    analysis: Analysis | None = None
    lowering: Lowering | None = None
    schedule: Schedule | None = None
    error: UserError | None = None
    config: dict | None = None
    tensors: dict | None = None
    order: int = -1  # when it was assembled: the earlier wins a tie

    @property
    def layers(self) -> int:
        if self.schedule is None:  # a numeric plan: no categorical schedule
            assert self.config is not None
            return int(self.config["n_layers"])
        return self.schedule.n_layers

    @property
    def params(self) -> int:
        assert self.tensors is not None
        return sum(t.size for t in self.tensors.values())

    @property
    def size(self) -> tuple[int, int]:
        """(layers, parameters): what the compiler minimises, in that order."""
        return self.layers, self.params

    @property
    def assembled(self) -> bool:
        return self.tensors is not None

    @property
    def exact(self) -> bool:
        """Whether the plan computes the program exactly on every input it takes: every categorical
        plan; a numeric one whose output is an integer it rounds to, with no error bound and no
        flagged inputs."""
        if self.config is None or "numeric" not in self.config:
            return True
        return bool(self.config["output"]["integer"]) and not self.config.get("guards") \
            and self.config["numeric"]["approx_error_bound"] == 0


class PlanSearch:
    """The strategies built for one compile, each at most once, and the comparison of their plans."""

    def __init__(self, vocab: list[Any], max_len: int, *, dtype: str, causal: bool,
                 fixed_length: int | None, stage: Callable[[str], None]) -> None:
        self.vocab, self.max_len, self.dtype = vocab, max_len, dtype
        self.causal, self.fixed_length, self.stage = causal, fixed_length, stage
        self.candidates: dict[tuple, Candidate] = {}
        self._assembled = 0

    def lowered(self, strategy: Strategy) -> Candidate:
        """``strategy``'s analysis, ops and layers (its error, where it has none)."""
        cand = self.candidates.get(strategy.key)
        if cand is not None:
            return cand
        cand = Candidate(strategy, Tried(strategy.label))
        self.candidates[strategy.key] = cand
        start, cpu = time.perf_counter(), time.process_time()
        if strategy.integers is not None:
            self._numeric(cand, strategy.integers)
            cand.tried.add_time(start, cpu)
            return cand
        try:
            cand.analysis = Analysis(strategy.program, self.vocab, self.max_len,
                                     fixed_length=self.fixed_length, causal=self.causal, dtype=self.dtype,
                                     tabulate_up_to=strategy.tabulate_up_to, domain_cap=strategy.domain_cap,
                                     defer_from=strategy.defer_from, resume=self._resumable(strategy))
            if strategy.defer_from is not None and not cand.analysis.deferred:
                cand.tried.strategy = strategy.labelled(f"plain (none past {strategy.defer_from:,} to defer)")
            self._stage(strategy, "heads and MLPs")
            cand.lowering = Lowering(cand.analysis)
            self._stage(strategy, "layers")
            cand.schedule = schedule(cand.lowering)
            cand.tried.layers = cand.schedule.n_layers
            cand.tried.outcome = "not assembled"  # until ``build`` says otherwise
            cand.tried.head_depth = head_depth(cand.lowering)
        except UserError as err:
            cand.error = err
            cand.tried.outcome = f"refused: {err.message}"
        cand.tried.add_time(start, cpu)
        return cand

    def _resumable(self, strategy: Strategy) -> Analysis | None:
        """An analysis built before that ``strategy``'s may start from (``Analysis.resume_point``):
        of the same program with the same caps, deferring from a threshold no higher, so that
        the s-ops before the first map it deferred are analysed alike (the plain plan after the
        deferred one: tracr's shuffle-Dyck-2 then analyses 22 of its 30 s-ops once, not twice).
        Of several, the one that got furthest."""
        if strategy.integers is not None:
            return None
        held = [c.analysis for c in self.candidates.values()
                if c.analysis is not None and c.analysis.resume_point is not None
                and c.strategy.program is strategy.program and c.strategy.domain_cap == strategy.domain_cap
                and c.strategy.tabulate_up_to == strategy.tabulate_up_to
                and c.strategy.defer_from is not None
                and (strategy.defer_from is None or strategy.defer_from >= c.strategy.defer_from)]
        return max(held, key=lambda an: an.resume_point[0], default=None)  # type: ignore[index]

    def build(self, strategy: Strategy, fewer_layers_than: int | None = None) -> Candidate | None:
        """``strategy``'s plan, assembled, if it can be built with fewer layers than
        ``fewer_layers_than`` (any number where None); else None, and nothing is assembled."""
        cand = self.lowered(strategy)
        if strategy.integers is not None:  # built whole by ``lowered``
            return cand if cand.assembled else None
        if cand.schedule is None:
            return None
        if fewer_layers_than is not None and cand.layers >= fewer_layers_than:
            if not cand.assembled and cand.error is None:
                cand.tried.outcome = f"not assembled: no fewer layers than {fewer_layers_than}"
            return None
        if not cand.assembled and cand.error is None:
            start, cpu = time.perf_counter(), time.process_time()
            self._stage(strategy, "weights")
            try:
                cand.config, cand.tensors = assemble(cand.analysis, cand.lowering, cand.schedule,
                                                     dtype=self.dtype, causal=self.causal)
                cand.order, self._assembled = self._assembled, self._assembled + 1
                cand.tried.params = cand.params
                cand.tried.outcome = "assembled"
            except UserError as err:
                cand.error = err
                cand.tried.outcome = f"refused: {err.message}"
            cand.tried.add_time(start, cpu)
        return cand if cand.assembled else None

    def _numeric(self, cand: Candidate, integers: IntegerTokens) -> None:
        """Build the numeric plan of ``integers`` whole (``compiler.real`` plans and assembles in
        one pass): its config and tensors, or its error."""
        from rasp_compiler.compiler.real import compile_numeric

        self._stage(cand.strategy, "numeric plan over the integers")
        try:
            cand.config, cand.tensors = compile_numeric(
                integers.program, integers.integer_range, self.max_len, dtype=self.dtype,
                causal=self.causal, fixed_length=self.fixed_length, **integers.options)
        except UserError as err:
            cand.error = err
            cand.tried.outcome = f"refused: {err.message}"
            return
        cand.order, self._assembled = self._assembled, self._assembled + 1
        cand.tried.layers, cand.tried.params = cand.layers, cand.params
        cand.tried.outcome = "assembled" if cand.exact else \
            "assembled (with an error bound or flagged inputs)"

    def best(self, numeric: bool = True) -> Candidate | None:
        """The plan with the fewest layers, then parameters, of the exact plans assembled (the
        first assembled on a tie), or of the inexact ones where no exact plan is; None before any
        is assembled.  ``numeric=False``: of the categorical plans only."""
        built = [c for c in self.candidates.values()
                 if c.assembled and (numeric or c.strategy.integers is None)]
        return min(built, key=lambda c: (not c.exact, c.size, c.order), default=None)

    def failure(self, program: Program, numeric: bool = False) -> UserError:
        """Why ``program`` has no plan: the plain plan's error, or the first strategy's where the
        plain plan was not built (a deferred plan that deferred nothing is the plain plan); with
        ``numeric``, why it has no numeric plan."""
        tried = [c for c in self.candidates.values() if c.strategy.program is program and c.error
                 and (c.strategy.integers is not None) == numeric]
        plain_ones = [c for c in tried if c.strategy.name == "plain"]
        return (plain_ones or tried)[0].error  # type: ignore[return-value]

    @property
    def tried(self) -> list[Tried]:
        return [c.tried for c in self.candidates.values()]

    def _stage(self, strategy: Strategy, step: str) -> None:
        first = next(iter(self.candidates.values())).strategy is strategy
        self.stage(step if first else f"{step} (another plan: {strategy.label})")


@dataclass
class Choice:
    """The plan the compiler keeps, the program it is a plan of, and every strategy it built."""

    config: dict
    tensors: dict
    analysis: Analysis | None  # None for a numeric plan
    program: Program | None  # None for a numeric plan (it compiles the program as written)
    tried: list[Tried]


def choose(program: Program, vocab: list[Any], max_len: int, *, dtype: str, causal: bool,
           fixed_length: int | None, stage: Callable[[str], None],
           integers: IntegerTokens | None = None) -> Choice:
    """Build the strategies worth building for ``program`` and keep the best plan (the rules are
    in docs/compiler.md, "How the plan is chosen").  With ``integers``, the numeric plan over the
    integers is built first and weighed with the categorical ones (``_over_integers``)."""
    search = PlanSearch(vocab, max_len, dtype=dtype, causal=causal, fixed_length=fixed_length, stage=stage)
    if integers is not None:
        numeric = _over_integers(search, integers)
        if numeric is not None:
            return numeric
    try:
        program, note = _categorical(search, program, max_len)
    except UserError as err:
        if integers is None:
            raise
        numeric = search.best()  # no categorical plan was assembled: the numeric one, if any
        if numeric is None:  # neither plan: the numeric error where the tables were too large
            raise (search.failure(integers.program, numeric=True) if isinstance(err, ModelTooLargeError)
                   else err) from None
        numeric.config["notes"].append(  # type: ignore[index]
            f"integer tokens: compiled numerically over {len(vocab)} integers (categorically: "
            f"{err.message.splitlines()[0]})")
        return _kept(search, numeric, None)
    best = search.best()
    assert best is not None and best.config is not None
    if integers is not None:
        numeric = search.candidates[numeric_over_integers(integers).key]
        if best is numeric:
            categorical = min((c for c in search.candidates.values() if c.assembled and c is not numeric),
                              key=lambda c: c.size)
            best.config["notes"].append(
                f"integer tokens: compiled numerically (exact sums and products, the output rounded "
                f"to its integer), {best.params:,} parameters against {categorical.params:,} categorically")
            return _kept(search, best, None)
        why = numeric.error.message.splitlines()[0] if numeric.error is not None else \
            f"{numeric.params:,} parameters" + ("" if numeric.exact else ", not exact")
        best.config["notes"].append(f"integer tokens: compiled categorically over the range's "
                                    f"{len(vocab)} integers (numerically: {why})")
    if note is not None:
        best.config["notes"].append(note)
    return _kept(search, best, program)


def _kept(search: PlanSearch, best: Candidate, program: Program | None) -> Choice:
    best.tried.outcome = "kept"
    assert best.config is not None and best.tensors is not None
    return Choice(best.config, best.tensors, best.analysis, program, search.tried)


def _categorical(search: PlanSearch, program: Program, max_len: int) -> tuple[Program, str | None]:
    """Build the categorical strategies worth building; the program the plans are of (the output
    as a number where it is too large as a one-hot) and the note that says so."""
    note = None
    try:
        _first_plan(search, program, "as written")
    except ModelTooLargeError as too_large:
        # An unannotated output too large as a one-hot may fit as one number
        numeric = numerical_output(program)
        if numeric is None:
            raise
        try:
            _first_plan(search, numeric, "output as a number")
        except UserError:
            raise too_large from None
        best = search.best(numeric=False)
        values = best.analysis.info[numeric.output].values  # type: ignore[union-attr]
        if not values or not all(type(v) in (int, float) for v in values):
            raise too_large from None  # booleans or strings would decode as other values
        if program.node(program.output).encoding is None:
            note = (f"{numeric.output}: encoded numerical (one dimension, decoded as a number): as a "
                    f"one-hot, {too_large.message.split('; ')[0]}, past the size guard; write "
                    "numerical(...) to choose this, categorical(...) to refuse it")
        program = numeric
    label = search.best(numeric=False).strategy.program_label  # type: ignore[union-attr]
    _large_tables(search, program, label, max_len)
    _wide_tables(search, program, label)
    return program, note


def _over_integers(search: PlanSearch, integers: IntegerTokens) -> Choice | None:
    """Build the numeric plan over the integers; the choice where the categorical plans are not
    worth building: a categorical table of R rows costs at least R hidden units, each reading and
    writing a number, so where that alone outweighs an exact numeric plan (or, the numeric plan
    inexact or refused, passes the size guard's scale) only the numeric plan is kept, or its
    error raised (a 3 x 3 determinant over -9..9 took a minute to be refused categorically)."""
    numeric = search.build(numeric_over_integers(integers))
    if numeric is not None:
        node, rows = numeric.config["numeric"]["largest_table"].values()  # type: ignore[index]
        rows = math.inf if rows is None else rows
    else:
        node, rows = getattr(search.failure(integers.program, numeric=True), "largest_table", (None, 0.0))
    exact = numeric is not None and numeric.exact
    if not 2 * rows > (numeric.params if exact else limits.DOMAIN_CAP):  # type: ignore[union-attr]
        return None
    what = f"'{node}' alone would tabulate {rows:,.0f} joint values" if math.isfinite(rows) else \
        f"'{node}' reads real numbers, which no table holds"
    search.candidates[("categorical",)] = Candidate(
        Strategy("categorical", integers.program), Tried("categorical plans", outcome=f"not built: {what}"))
    if numeric is None:
        raise search.failure(integers.program, numeric=True)
    how = "exact sums and products, the output rounded to its integer" if exact else \
        "with the error bound stated"
    numeric.config["notes"].append(f"integer tokens: compiled numerically ({how}); categorically, {what}")  # type: ignore[index]
    return _kept(search, numeric, None)


def _first_plan(search: PlanSearch, program: Program, label: str) -> None:
    """The deferred plan and those it is weighed against (``_deferring``), or the plain plan
    where ``limits.DEFER_FROM`` is None; raises the plain plan's error where none is built."""
    if limits.DEFER_FROM is None:
        search.build(plain(program, label))
    else:
        _deferring(search, deferred(program, limits.DEFER_FROM, label), None)
    if not any(c.assembled for c in search.candidates.values()
               if c.strategy.program is program and c.strategy.integers is None):
        if search.build(plain(program, label)) is None:
            raise search.failure(program)


def _deferring(search: PlanSearch, strategy: Strategy, bound: int | None) -> Candidate | None:
    """Build the plan of ``strategy`` (``deferred`` or ``fewer deferred``), and the plans
    it is weighed against; the best of those with fewer layers than ``bound`` (None: any), or
    None where none has. Its maps of independent inputs past ``strategy.defer_from`` joint
    assignments are kept opaque.

    1. Nothing deferred: it is the plain plan.
    2. More layers than its heads need (``schedule.head_depth``): a deferred map may cost the
       layer. The plan deferring fewer maps (the same rules, one step down), or failing that the
       tabulated plan (``_tabulated``), is kept if it has fewer layers.
    3. Otherwise the deferred plan, unless it has more parameters than tabulating its deferred
       maps could add (``_tabulating_cost``): then the tabulated plan at the same depth is built
       too, and the smaller kept.
    4. Where the deferred plan cannot be built, the plain one."""
    program, label = strategy.program, strategy.program_label
    first = search.lowered(strategy)
    lowered = first.schedule is not None
    if lowered and not first.analysis.deferred:  # type: ignore[union-attr]
        return search.build(first.strategy, bound)
    if lowered and first.layers > first.tried.head_depth:  # type: ignore[operator]
        within = first.layers if bound is None else min(first.layers, bound)
        fewer = fewer_deferred(program, first.analysis, label)  # type: ignore[arg-type]
        shallower = _deferring(search, fewer, within) if fewer is not None else None
        shallower = shallower or _tabulated(search, program, label, within)
        if shallower is not None:
            first.tried.outcome = f"not assembled: {shallower.tried.strategy} has fewer layers"
            return shallower
    opaque = search.build(first.strategy, bound)
    if opaque is None:
        return search.build(plain(program, label), bound)
    if opaque.params <= _tabulating_cost(opaque):
        return opaque
    tabulated = _tabulated(search, program, label, opaque.layers + 1)
    return tabulated if tabulated is not None and tabulated.size < opaque.size else opaque


def _tabulated(search: PlanSearch, program: Program, label: str, bound: int) -> Candidate | None:
    """The plain plan, or where it keeps maps past the domain cap that the wide tables hold,
    the wide-table plan, if it has fewer layers than ``bound``."""
    tabulated = search.lowered(plain(program, label))
    if tabulated.schedule is None:
        return None
    got = search.build(tabulated.strategy, bound)
    if got is not None or tabulated.layers < bound:  # assembled, or refused by the assembly
        return got
    if not any(size <= limits.WIDE_DOMAIN_CAP for _, size in tabulated.analysis.capped):  # type: ignore[union-attr]
        return None
    return search.build(wide_tables(program, label), bound)


def _large_tables(search: PlanSearch, program: Program, label: str, max_len: int) -> None:
    """Where the best plan tabulated a large categorical table and has a very wide MLP, the plan
    with such tables opaque: the table may save a layer, or cost far more parameters for none."""
    best = search.best(numeric=False)
    assert best is not None and best.config is not None
    widest = max((int(lc["d_mlp"]) for lc in best.config["layers"]), default=0)
    if best.analysis.large_tables and widest > min(limits.LARGE_MLP,  # type: ignore[union-attr]
                                                   limits.LARGE_MLP_PER_POSITION * max_len):
        search.build(large_tables_opaque(program, label))


def _wide_tables(search: PlanSearch, program: Program, label: str) -> None:
    """Where a map past the domain cap (within the wide cap) has an MLP layer without heads on
    the best plan's critical path, the wide-table plan, kept if it has fewer layers. A plan that
    deferred maps was weighed against the tabulated ones already (``_deferring``)."""
    best = search.best(numeric=False)
    assert best is not None and best.analysis is not None and best.config is not None
    capped = {sid for sid, size in best.analysis.capped if size <= limits.WIDE_DOMAIN_CAP}
    if not best.analysis.deferred and _opaque_layer(best.config, capped):
        search.build(wide_tables(program, label), fewer_layers_than=best.layers)


def _tabulating_cost(cand: Candidate) -> int:
    """About the most parameters tabulating a plan's deferred maps could add: a hidden unit per
    row, reading and writing the residual stream."""
    assert cand.config is not None and cand.analysis is not None
    return 2 * int(cand.config["d_model"]) * sum(size for _, size in cand.analysis.deferred)


def _opaque_layer(config: dict, capped: set[str]) -> bool:
    """Whether a layer without heads, on the critical path, holds the MLP of a map in ``capped``."""
    forcing = set(config.get("critical_path") or [])
    return any(not lp["heads"] and any(op["node"] in capped and op["node"] in forcing
                                       for op in lp["mlp"]["ops"])
               for lp in config["plan"] if lp["mlp"])
