"""Maps: a positionwise function's table over the joint domain of its inputs' bases.

A map is tabulated (``map_info``) while its joint domain stays under the limits; past them it keeps
its values per position context (its inputs share no bases, or it is a numerical combination of
attention outputs), or becomes a base of its own, tabulated on its inputs' value sets.  The
special forms that need no table at all live in ``affine`` (integer ``a·index + b·length + c``)
and here (``_linear_map``: a numerical ``w·x + c`` of attention outputs).
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Callable

import numpy as np

from rasp_compiler.compiler.analysis import limits
from rasp_compiler.compiler.analysis.bool_number import _tag
from rasp_compiler.compiler.analysis.domains import (
    FAILED,
    SMALL_CONTEXT,
    _key_getter,
    _lookup,
    lookup_columns,
)
from rasp_compiler.compiler.analysis.selector_formulas import failure_reason
from rasp_compiler.compiler.analysis.sinfo import SInfo
from rasp_compiler.compiler.forms import linear_form
from rasp_compiler.compiler.values import sorted_values
from rasp_compiler.graph.expr import Binary, Const, Var
from rasp_compiler.graph.expr import evaluate as eval_expr
from rasp_compiler.graph.nodes import Map, Node, SequenceMap, SourcePos
from rasp_compiler.graph.semantics import OperatorError


def _is_value(v: Any) -> bool:
    """An atom, tracr's None, or a tuple of such (tracr's n-ary sequence maps pass tuples on)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return True
    return isinstance(v, tuple) and all(_is_value(x) for x in v)


class _NotAnAtom(Exception):
    """A map gave a value that is not an atom (recorded in ``Analysis.non_atoms``)."""


class MapTables:
    """Part of ``Analysis`` (``core``): the ``SInfo`` of maps and sequence maps."""

    def _analyse_map(self, node: Map | SequenceMap, enc: str | None) -> SInfo:
        """The ``SInfo`` of a map (the map case of ``Analysis._analyse``): an integer
        ``a·index + b·length + c`` is kept as such, a numerical ``w·x + c`` of attention outputs
        by its sums, any other map tabulated over its bases (``map_info``).  Its function is
        called through a wrapper that records where it raises, which results are not atoms,
        and which results bring both 0 and False."""
        samples: list[tuple[tuple, Any]] = []  # a few calls, asked again below
        call = self._recorder(node, samples)
        info = None
        if enc == "numerical":
            info = self._linear_map(node, call)
        posaff = self._positional_affine(node, call) if info is None else None
        if posaff is not None and posaff[0] and posaff[1] and len(self.ctx_all) > limits.DOMAIN_CAP:
            info = self._affine_base(node, call, enc or "categorical", posaff)
        if info is None:
            info = self.map_info(node.id, node.kind, node.inputs, call, enc or "categorical", node.pos)
        if posaff is not None:
            info.posaff = posaff
        self._check_deterministic(node, samples)
        if not samples and node.id in self.failures:  # called, and never answered
            args, err = self.failures[node.id]
            shown = repr(args[0]) if len(args) == 1 else "(" + ", ".join(map(repr, args)) + ")"
            # an operator's own hint where it has one (`tokens + 1` over --vocab 123: tokens are
            # strings); the arity hint is for a Python function, never for a RASP expression's operator
            hint = err.hint if isinstance(err, OperatorError) else (
                "a map's function takes one value (a sequence map's, one per input s-op) and returns one")
            raise self.error(node.id, f"the function of {self.describe(node.id)} fails on every value "
                             f"it may receive, so no input has an answer: on {shown}, "
                             f"{failure_reason(err)}", hint=hint)
        if node.id in self.non_atoms:
            args, value = self.non_atoms[node.id]
            shown = repr(args[0]) if len(args) == 1 else "(" + ", ".join(map(repr, args)) + ")"
            if isinstance(value, float):  # NaN: it equals nothing, so no one-hot or table holds it
                raise self.error(node.id, f"{self.describe(node.id)} gives nan for {shown}: a compiled "
                                 "model cannot carry NaN (it equals no value, and any sum with it is "
                                 "NaN)", hint="return a number, or test for that case first")
            raise self.error(node.id, f"{self.describe(node.id)} gives {value!r} for {shown}: the "
                             "value of an s-op at a position is a string, a number or a boolean "
                             "(or a tuple of them)",
                             hint="return an atom (a tuple or list can be joined into a string)")
        self._note_string_number_equality(node, info)
        return info

    def _note_string_number_equality(self, node: Map | SequenceMap, info: SInfo) -> None:
        """`tokens == 1` over --vocab 123 is false at every position (the strings '1', '2', '3'
        equal no number, in the original REPL as here), so it compiled and ran to all-False
        without a word; `<` on the same pair is an error with a hint.  Note it."""
        fn = getattr(node, "fn", None)
        if not isinstance(fn, Binary) or fn.op not in ("==", "!="):
            return

        def side(e: Any) -> list | None:
            if isinstance(e, Var) and 0 <= e.index < len(node.inputs):
                return self.info[node.inputs[e.index]].values
            return [e.value] if isinstance(e, Const) else None

        def numbers(vs: list) -> bool:
            return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vs)

        left, right = side(fn.left), side(fn.right)
        if not left or not right:
            return
        for strings, other, e in ((left, right, fn.right), (right, left, fn.left)):
            if all(isinstance(v, str) for v in strings) and numbers(other):
                what = (f"the number {e.value!r}" if isinstance(e, Const) else
                        f"numbers ({self.describe(node.inputs[e.index])})")
                fix = (f"compare with the string {str(e.value)!r}" if isinstance(e, Const) else
                       "map one side first")
                info.notes.append(f"it compares strings with {what}, so it is "
                                  f"{'false' if fn.op == '==' else 'true'} at every position (as in "
                                  "the interpreter); to compare numbers read the input with tokens_int "
                                  f"or tokens_float, or {fix}")
                return

    def _recorder(self, node: Map | SequenceMap, samples: list[tuple[tuple, Any]] | None = None
                  ) -> Callable[..., Any]:
        """``node``'s function as the analysis calls it (``_analyse_map``): recording in this
        analysis where it raises, which results are not atoms and which bring both 0 and False,
        and its first calls in ``samples``.  Tagged with its node (``recorded_node``), so that an
        analysis that takes over another's first s-ops (``Analysis.resume_point``) records their
        calls in its own records."""
        samples = [] if samples is None else samples
        fn = node.fn
        # ``call`` is kept as the map's function (``SInfo.fn``), so it holds the analysis's
        # records, not the analysis: a closure over ``self`` would make a reference cycle
        # (analysis -> info -> fn -> analysis) that only the cyclic collector frees, and a plan
        # the compiler built and dropped (``compiler.plans``) would then stay in memory until
        # it ran: 0.03 s of CPU after each compile of tracr's shuffle-Dyck-2 at max_len 40
        partial, failures, non_atoms = self.partial, self.failures, self.non_atoms
        zero_one, own_clash = self._zero_one, self._own_clash

        def call(*args: Any, _fn=fn, _id=node.id) -> Any:
            try:
                value = eval_expr(_fn, args)
            except Exception as err:
                partial.add(_id)
                failures.setdefault(_id, (args, err))
                raise
            if isinstance(value, np.generic):  # a NumPy scalar from a Python function: its number
                value = value.item()
            if not _is_value(value) or (isinstance(value, float) and math.isnan(value)):
                non_atoms.setdefault(_id, (args, value))
                raise _NotAnAtom
            if isinstance(value, tuple) or (isinstance(value, (int, float)) and value in (0, 1)):
                # the table keeps each result, but value sets (and so the model) keep one of
                # False/0: note a map whose own results bring both
                first = zero_one.setdefault(_id, {}).setdefault(value, value)
                if _tag(first) != _tag(value):
                    own_clash.setdefault(_id, (first, value))
            if len(samples) < 16:
                samples.append((args, value))
            return value
        call.recorded_node = node  # type: ignore[attr-defined]
        return call

    def _check_deterministic(self, node: Map | SequenceMap, samples: list[tuple[tuple, Any]]) -> None:
        """A model stores one result per value, so a function that answers the same arguments
        differently (random numbers, hidden state) compiles to a model that agrees with no run of
        the interpreter: ask the first calls again and refuse the map if an answer changed."""
        for args, value in samples:
            try:
                again = eval_expr(node.fn, args)
            except Exception as err:  # noqa: BLE001 - it raised now and answered before
                again = err
            if isinstance(again, np.generic):
                again = again.item()
            try:
                nan = again != again and value != value
                same = _tag(again) == _tag(value) and bool(again == value or nan)
            except Exception:  # noqa: BLE001 - an exception object against a value, or odd types
                same = False
            if not same:
                shown = repr(args[0]) if len(args) == 1 else "(" + ", ".join(map(repr, args)) + ")"
                raise self.error(node.id, f"{self.describe(node.id)} gave {value!r} and then {again!r} "
                                 f"for {shown}: a compiled model keeps one result per value, so its "
                                 "function must give the same result every time",
                                 hint="make the function deterministic (no random numbers or state "
                                      "that changes between calls)")

    def _independent_map(self, sid: str, kind: str, inputs: tuple[str, ...], fn: Callable[..., Any],
                         encoding: str, pos: SourcePos | None,
                         most_evaluations: int | None = None) -> SInfo | None:
        """A map whose inputs share no bases: its values per position context are f over the
        product of its inputs' values there (no enumeration of their bases' joint domain).  None
        where that would evaluate f more than ``most_evaluations`` times."""
        if not _disjoint_bases(self, inputs):
            return None
        as_tuple: dict[int, tuple[list, tuple]] = {}  # each value list (by identity) as a tuple, once

        def values_at(i: str, ctx: tuple[int, int]) -> tuple:
            vals = self.ctx_values(i, ctx)
            held = as_tuple.get(id(vals))
            if held is None or held[0] is not vals:
                held = as_tuple[id(vals)] = (vals, tuple(vals))  # holding the list keeps its id
            return held[1]
        ctx_sets = {ctx: tuple(values_at(i, ctx) for i in inputs) for ctx in self.ctx_all}
        evaluations = sum(math.prod(map(len, sets)) for sets in set(ctx_sets.values()))
        if most_evaluations is not None and evaluations > most_evaluations:
            return None
        if evaluations > limits.MOST_MAP_EVALUATIONS:
            # a product of large value sets (a determinant of integer entries: each step multiplies
            # the values a map can take) would run for hours before any one-hot of it is refused
            raise self.error(sid, f"{self.describe(sid)} takes {evaluations:,} combinations of its "
                             "inputs' values: too many to tabulate", too_large=True,
                             hint="compile it numerically (--input-range) where its values are numbers")
        cond: dict[tuple[int, int], list[Any]] = {}
        memo: dict[tuple, Any] = {}
        failed = object()
        cache: dict[tuple, list[Any]] = {}
        for ctx, sets in ctx_sets.items():
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
        domain_cap = self.domain_cap or limits.DOMAIN_CAP
        cap = min(self.tabulate_up_to or domain_cap, domain_cap)
        if sum(self.info[b].kind in ("map", "sequence_map") and self.info[b].encoding == "numerical"
               for b in bases) >= 2:  # (the lowering would not fuse over more of them)
            cap = min(cap, limits.OPAQUE_NUMBERS_CAP)
        # a numerical map of categorical inputs only (``indicator(any_negative)``) has no more values
        # than they have: rebased, it would gain nothing and could no longer fuse over their frontier
        numbers_in = any(self.info[i].encoding == "numerical" for i in inputs)
        rebased = encoding == "numerical" and numbers_in
        # (and only a table larger than all tabulated before it: skipping a smaller one saves
        # little of the analysis, and a plan deeper than its heads is built twice, see
        # ``compiler.plans``; tracr/shuffle_dyck2's output at 256 took 16 s for 7)
        deferring = (not rebased and self.defer_from is not None and self.defer_from < size <= cap
                     and size > self.rows_tabulated)
        opaque = size > (limits.REBASE_SIZE if rebased else cap)
        if opaque or deferring:
            # (not over opaque maps: their fused tables rarely find a separating projection,
            # tracr's shuffle-Dyck-2 at max_len 64 spent 10 s on them to keep its 4 layers)
            # (a deferred map is not capped: ``compiler.plans`` tabulates it where that may pay)
            if not rebased and not deferring and self.tabulate_up_to is None and not any(
                    self.info[b].kind in ("map", "sequence_map") for b in bases):
                self.capped.append((sid, size))
            # deferring pays where the map's values per position take far fewer evaluations than
            # its table has rows (dyck2's `bad` at max_len 40: 4 against 50,400), not where each
            # position has a row of its own (tracr/shuffle_dyck2's tests at 256: 66,048 either way)
            got = self._independent_map(sid, kind, inputs, fn, encoding, pos,
                                        most_evaluations=size // 4 if deferring else None)
            if got is not None:
                if deferring:
                    self._keep_resume_point(sid)  # type: ignore[attr-defined]
                    self.deferred.append((sid, size))
                return got
        if not opaque and encoding != "numerical" and size > limits.LARGE_TABLE \
                and _disjoint_bases(self, inputs):
            self.large_tables.append((sid, size))
        if size <= domain_cap:
            self.rows_tabulated += size
            pairs = [([bases.index(b) for b in self.info[i].bases], self.info[i].table) for i in inputs]
            getters = [(_key_getter(proj, len(bases)), table) for proj, table in pairs]
            table: dict[tuple, Any] = {}
            memo: dict[tuple, Any] = {}
            failed = FAILED
            rebase = (encoding == "numerical" and numbers_in and size > limits.REBASE_SIZE
                      and sum(self.info[b].base_kind not in ("index", "length") for b in bases) >= 2)
            per_ctx: dict[tuple, set] = {}
            carrier = None if rebase else _carrier(self, inputs, bases)
            coords = _coordinates(self, inputs, bases)
            for ctx, choices, first in self._contexts(bases) if carrier is None else ():
                if first is not None:  # an earlier context's assignments: its table rows and values
                    if rebase:
                        per_ctx[ctx] = per_ctx[first]
                    continue
                seen = per_ctx.setdefault(ctx, set()) if rebase else None
                if math.prod(map(len, choices)) <= SMALL_CONTEXT:  # one assignment at a time
                    for a, args in _lookup(getters, itertools.product(*choices)):
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
                    continue
                if coords is not None:
                    got = _by_coordinates(self, fn, memo, inputs, coords, choices, table, failed)
                    if got is not None:
                        if seen is not None:
                            seen.update(got)
                        continue
                for chunk, cols in lookup_columns(pairs, len(bases), choices):
                    values = _memo_calls(fn, memo, cols, len(chunk), failed)
                    if failed in values:  # the interpreter raises where these occur
                        kept = [(a, v) for a, v in zip(chunk, values, strict=True) if v is not failed]
                        table.update(kept)
                        values = [v for _, v in kept]
                    else:
                        table.update(zip(chunk, values, strict=True))
                    if seen is not None:
                        seen.update(values)
            if carrier is not None:
                _derive(fn, memo, inputs, carrier, self.info, table, failed)
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
            return SInfo(sid, kind, encoding, values, bases, table, pos=pos, inputs=inputs, fn=fn, memo=memo)
        # Too many joint assignments: the map becomes a base, tabulated on its inputs' value sets.
        combos = 1
        for i in inputs:
            combos *= max(1, len(self.info[i].values))
        if combos > limits.DOMAIN_CAP:
            raise self.error(sid, f"{self.describe(sid)} combines inputs with {combos} value "
                             "combinations, too many to tabulate",
                             hint="give its inputs smaller value sets (fewer tokens, a smaller "
                                  "--max-len), or split the expression", too_large=True)
        vals = []
        for args in itertools.product(*(self.info[i].values for i in inputs)):
            try:
                vals.append(fn(*args))
            except Exception:
                continue
        values = sorted_values(vals)
        return SInfo(sid, kind, encoding, values, (sid,), {(v,): v for v in values}, base_kind="free",
                     pos=pos, inputs=inputs, fn=fn, notes=["opaque"])

    def _linear_map(self, node: Node, call: Callable[..., Any]) -> SInfo | None:
        """A numerical w·x + c over attention outputs that only read positions (e.g. opens -
        closes of two prefix means): its values per position context, from sums of value sets,
        without enumerating the joint assignments one by one."""
        form = linear_form(node.fn, len(node.inputs))  # type: ignore[attr-defined]
        if form is None or len(set(node.inputs)) != len(node.inputs):
            return None
        infos = [self.info[i] for i in node.inputs]
        # a categorical aggregate of numbers is "cond" too, but its one-hot has no single
        # dimension to weigh: only numerically encoded inputs are read linearly
        if not all((i.base_kind == "const" and i.numeric)
                   or (i.base_kind == "cond" and i.encoding == "numerical") for i in infos):
            return None
        if sum(i.base_kind == "cond" for i in infos) < 2:
            return None
        w, c = form
        cache: dict[tuple, list[Any]] = {}
        # contexts whose inputs hold the same lists (``shared_lists``) give the same sums: their
        # values once per combination of lists (820 contexts at max_len 40, 40 combinations).
        # The lists are held by the inputs' SInfo, so their ids stay unique.
        columns = [map(id, map(i.cond.__getitem__, self.ctx_all)) if i.base_kind == "cond"
                   else itertools.repeat(id(i.values), len(self.ctx_all)) for i in infos]
        combos = list(zip(*columns, strict=True))
        # a context of each combination (its last), to read the combination's lists at; the
        # combinations in order of first occurrence
        lists_at = dict(zip(combos, self.ctx_all, strict=True))
        keys = {}
        for ids, ctx in lists_at.items():
            lists = [i.cond[ctx] if i.base_kind == "cond" else i.values for i in infos]
            keys[ids] = tuple(tuple(map(float, vals)) for vals in lists)
        distinct = list(dict.fromkeys(keys.values()))
        cache.update(zip(distinct, _linear_value_sets(w, c, distinct), strict=True))
        by_lists = {ids: cache[key] for ids, key in keys.items()}
        cond = dict(zip(self.ctx_all, map(by_lists.__getitem__, combos), strict=True))
        values = sorted_values(itertools.chain.from_iterable(cache.values()))
        info = SInfo(node.id, node.kind, "numerical", values, (node.id,), {(v,): v for v in values},
                     base_kind="cond", cond=cond, pos=node.pos, inputs=node.inputs, fn=call,
                     notes=["opaque"])
        info.linear = (w, c)  # type: ignore[attr-defined]
        return info


_UNSEEN = object()
_MISSING = object()


def _linear_value_sets(w: Any, c: Any, keys: list[tuple]) -> list[list[float]]:
    """For each combination of value lists in ``keys`` (one tuple of floats per input), the
    distinct values of c + Σ wj·xj over every choice of xj from the lists, rounded to 12 places
    and sorted: ``_distinct_rounded`` of the outer sums, per combination.  The combinations'
    sums are added in one array, the same additions in the same order, and each one's run then
    sorted in place: 40 combinations (tracr's pair balance at max_len 40) cost a few NumPy calls
    each instead of a dozen.  Where a sum is not a finite float, or is -0.0 (which of +0.0 and
    -0.0 ``np.unique`` keeps depends on its sort of that array alone), each combination takes
    ``_distinct_rounded``."""
    def one(key: tuple) -> list[float]:
        acc = np.array([c])
        for wj, xs in zip(w, key, strict=False):
            if wj != 0.0:
                acc = np.add.outer(acc, wj * np.array(xs)).ravel()
        return _distinct_rounded(acc)
    if len(keys) < 2:
        return [one(key) for key in keys]
    acc = np.repeat(np.array([c]), len(keys))
    sizes = np.ones(len(keys), dtype=np.int64)
    for j, wj in enumerate(w[:len(keys[0])]):
        if wj == 0.0:
            continue
        counts = np.array([len(key[j]) for key in keys], dtype=np.int64)
        if not counts.all():
            return [one(key) for key in keys]
        ys = wj * np.array(list(itertools.chain.from_iterable(key[j] for key in keys)), dtype=np.float64)
        # the ravelled outer sum of each combination: each of its sums so far (a row), plus each
        # of its values of this input in turn (the row's entries: ys from the combination's start)
        row_len = np.repeat(counts, sizes)
        row_start = np.cumsum(row_len) - row_len
        shift = np.repeat(np.repeat(np.cumsum(counts) - counts, sizes) - row_start, row_len)
        acc = np.repeat(acc, row_len) + ys[np.arange(len(shift)) + shift]
        sizes = sizes * counts
    if acc.dtype != np.float64:
        return [one(key) for key in keys]
    rounded = np.round(acc, 12)
    zeros = rounded[rounded == 0]
    if not np.isfinite(rounded).all() or np.signbit(zeros).any():
        return [one(key) for key in keys]
    ends = np.cumsum(sizes)
    starts = ends - sizes
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        # (no -0.0: equal values are equal bits, and any sort keeps the same ones.  An outer sum
        # comes in ordered runs, its rows, which the stable sort merges: quicker on long ones)
        rounded[a:b].sort(kind="stable" if b - a > 600 else None)
    keep = np.empty(len(rounded), dtype=bool)
    keep[0] = True
    np.not_equal(rounded[1:], rounded[:-1], out=keep[1:])
    keep[starts] = True
    flat = rounded[keep].tolist()
    bounds = np.cumsum(np.add.reduceat(keep, starts, dtype=np.int64)).tolist()
    return [flat[a:b] for a, b in zip([0, *bounds[:-1]], bounds, strict=True)]


def _distinct_rounded(acc: np.ndarray) -> list[float]:
    """``sorted_values(float(v) for v in np.unique(np.round(acc, 12)))``.  For finite floats, the
    steps of ``np.unique`` on the same array, its sort included (which of +0.0 and -0.0 stays
    depends on it), without its checks and wrappers, and without ``sorted_values``: its floats
    come sorted and distinct.  ``_linear_map`` calls this once per combination of its inputs'
    lists, 40 times in each compile of tracr's pair balance at max_len 40."""
    rounded = np.round(acc, 12)
    if rounded.dtype == np.float64 and len(rounded):
        ordered = np.sort(rounded)
        if math.isfinite(ordered[0]) and math.isfinite(ordered[-1]):  # a NaN sorts last
            keep = np.empty(len(ordered), dtype=bool)
            keep[0] = True
            np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
            return ordered[keep].tolist()
    # (``np.unique`` keeps one NaN of several, and a NaN equals nothing)
    return sorted_values(float(v) for v in np.unique(rounded))


def _carrier(an: Any, inputs: tuple[str, ...], bases: tuple[str, ...]) -> str | None:
    """The one input that is not a constant, where it is a map tabulated over exactly ``bases``;
    else None.  Its table was enumerated over the same contexts in the same order, so its keys
    are this map's assignments in the order the enumeration would insert them (``_derive``)."""
    moving = {i for i in inputs if an.info[i].base_kind != "const"}
    if len(moving) != 1:
        return None
    carrier = next(iter(moving))
    info = an.info[carrier]
    if info.base_kind is not None or info.kind not in ("map", "sequence_map", "tuple") \
            or tuple(info.bases) != bases:
        return None
    return carrier


def _derive(fn: Callable[..., Any], memo: dict[tuple, Any], inputs: tuple[str, ...], carrier: str,
            info: dict, table: dict[tuple, Any], failed: object) -> None:
    """Fill ``table`` for a map of ``carrier`` (``_carrier``) and constants: f of the carrier's
    value at each of its rows, in its rows' order, without enumerating the assignments again
    (``indicator(any_negative)`` of tracr's shuffle-Dyck-2: 75,113 rows at max_len 40).  The
    same calls of ``fn`` in the same order as the enumeration: each value's first row."""
    held = info[carrier].table
    column = list(held.values())
    if len(set(map(type, column))) == 1:
        # one type: values equal as keys exactly where they are equal with their types, so each
        # distinct value is looked up (and called, in order of first row) once, by value
        by_value = {}
        for v in dict.fromkeys(column):
            args = tuple(v if i == carrier else info[i].values[0] for i in inputs)
            by_value[v] = _memo_calls(fn, memo, [[a] for a in args], 1, failed)[0]
        values = list(map(by_value.__getitem__, column))
    else:
        cols = [column if i == carrier else [info[i].values[0]] * len(column) for i in inputs]
        values = _memo_calls(fn, memo, cols, len(column), failed)
    if failed in values:
        table.update((a, v) for a, v in zip(held, values, strict=True) if v is not failed)
    else:
        table.update(zip(held, values, strict=True))


def _coordinates(an: Any, inputs: tuple[str, ...], bases: tuple[str, ...]) -> list[int | None] | None:
    """Per input, the position in ``bases`` of its one base (None for a constant), where every
    other input reads one base of its own (``len(bases)`` of them: maps of independent inputs,
    ``balance < 0 or other_balance < 0``); else None."""
    coords: list[int | None] = []
    for i in inputs:
        info = an.info[i]
        if info.base_kind == "const":
            coords.append(None)
        elif len(info.bases) == 1:
            coords.append(bases.index(info.bases[0]))
        else:
            return None
    moving = [c for c in coords if c is not None]
    return coords if sorted(moving) == list(range(len(bases))) else None


def _by_coordinates(an: Any, fn: Callable[..., Any], memo: dict[tuple, Any], inputs: tuple[str, ...],
                    coords: list[int | None], choices: list[list[Any]], table: dict[tuple, Any],
                    failed: object) -> list[Any] | None:
    """Add one context's rows to ``table`` for inputs of one base each (``_coordinates``): f of
    each combination of the inputs' distinct values, then each assignment's value read off by
    its combination, instead of a lookup and a call per assignment.  The same rows in the same
    order as the enumeration, and the same calls of ``fn`` in the same order (a combination
    first occurs at each coordinate's first choice with that value, so in the lexicographic
    order of the values' first occurrences).  Returns the values added, in row order; None, and
    nothing added, where the combinations are not far fewer than the assignments (the
    enumeration's lookups by columns are then quicker than a call per combination)."""
    reader = {c: i for i, c in zip(inputs, coords, strict=True) if c is not None}
    kept: list[list[Any]] = []  # per coordinate, the choices its input's table holds
    typed: list[list[tuple]] = []  # ... and their values with their types (1, 1.0, True apart)
    firsts: list[dict[tuple, int]] = []  # ... each distinct one's rank of first occurrence
    assignments = combinations = 1
    for j, options in enumerate(choices):
        held = an.info[reader[j]].table
        vals = list(map(held.get, zip(options), itertools.repeat(_MISSING)))
        if _MISSING in vals:  # an assignment with a value the table lacks has no row
            options = [x for x, v in zip(options, vals, strict=True) if v is not _MISSING]
            vals = [v for v in vals if v is not _MISSING]
        keys = list(zip(vals, map(type, vals), strict=True))
        ranks = {k: r for r, k in enumerate(dict.fromkeys(keys))}
        kept.append(options)
        typed.append(keys)
        firsts.append(ranks)
        assignments *= len(options)
        combinations *= len(ranks)
    if 2 * combinations > assignments and assignments > 64:
        return None
    codes = [list(map(ranks.__getitem__, keys)) for ranks, keys in zip(firsts, typed, strict=True)]
    distinct = [[v for v, _ in ranks] for ranks in firsts]  # the first object of each value
    # a combination (in coordinate order) as the function's arguments (in input order): itself
    # where each input reads the coordinate of its place; else picked from it and the constants
    arrange = None
    if coords != list(range(len(coords))):
        constants = tuple(an.info[i].values[0] for i, c in zip(inputs, coords, strict=True) if c is None)
        picks, k = [], len(distinct)
        for c in coords:
            picks.append(k if c is None else c)
            k += c is None
        arrange = (constants, picks)
    outcome: list[Any] = []  # per combination, in product order
    for combo in itertools.product(*distinct):
        if arrange is None:
            args = combo
        else:
            full = combo + arrange[0]
            args = tuple([full[p] for p in arrange[1]])
        key = (*args, *map(type, args))
        value = memo.get(key, _UNSEEN)
        if value is _UNSEEN:
            try:
                value = fn(*args)
            except Exception:  # the interpreter raises here, if this occurs
                value = failed
            memo[key] = value
        outcome.append(value)
    # each assignment's combination as its place in product order (the last coordinate fastest)
    place = np.zeros(1, dtype=np.int64)
    for code, d in zip(codes, distinct, strict=True):
        place = (place[:, None] * len(d) + np.asarray(code, dtype=np.int64)[None, :]).reshape(-1)
    values = list(map(outcome.__getitem__, place.tolist()))
    if failed in outcome:
        rows = [(a, v) for a, v in zip(itertools.product(*kept), values, strict=True) if v is not failed]
        table.update(rows)
        return [v for _, v in rows]
    table.update(zip(itertools.product(*kept), values, strict=True))
    return values


def _memo_calls(fn: Callable[..., Any], memo: dict[tuple, Any], cols: list[list[Any]], count: int,
                failed: object) -> list[Any]:
    """``fn`` of each row of the argument columns ``cols`` (``count`` rows), each distinct
    arguments (told apart by type too: 1, 1.0 and True) called once, in row order, and kept in
    ``memo``; ``failed`` where it raised."""
    if cols:
        keys = list(zip(*cols, *(map(type, c) for c in cols), strict=True))
    else:
        keys = [()] * count
    values = list(map(memo.get, keys, itertools.repeat(_UNSEEN)))
    if _UNSEEN in values:
        arity = len(cols)
        for k, v in enumerate(values):
            if v is _UNSEEN:
                key = keys[k]
                v = memo.get(key, _UNSEEN)
                if v is _UNSEEN:
                    try:
                        v = fn(*key[:arity])
                    except Exception:  # the interpreter raises here, if this occurs
                        v = failed
                    memo[key] = v
                values[k] = v
    return values


def _disjoint_bases(an: Any, inputs: tuple[str, ...]) -> bool:
    """Whether no two of ``inputs`` share a base (their values then combine freely per position,
    the condition of ``_independent_map``)."""
    seen: set[str] = set()
    for i in inputs:
        bs = set(an.info[i].bases)
        if bs & seen:
            return False
        seen |= bs
    return True
