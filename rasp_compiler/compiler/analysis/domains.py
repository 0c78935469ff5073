"""Joint domains: which value assignments of a set of bases can occur at one position.

Index and length are tied (index < length) and conditional bases have values per (index, length),
so the assignments are enumerated per position *context*; contexts whose bases offer the same
choices are enumerated once.  ``joint`` reads the tuples of values of any s-ops off these
assignments through their tables, and ``ctx_values`` the values of one s-op in one context.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from typing import Any, Callable, Iterable, Iterator

from rasp_compiler.compiler.analysis import limits
from rasp_compiler.compiler.values import sorted_values


class Domains:
    """Part of ``Analysis`` (``core``): enumeration of the assignments of bases per context."""

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
        """How many assignments of ``bases`` an enumeration visits: each context's product of
        choices, once per distinct set of choices, as ``_contexts`` skips the repeats.  tracr's
        shuffle-Dyck-1 at max_len 128 reads a mean over all positions, whose values depend on
        the length alone: 8,384 assignments (n + 1 per length), counted once per (index, length)
        715,520.  Counted once per set of bases (the lowering asks again for each map it tries
        to fuse)."""
        held = self.__dict__.setdefault("_domain_sizes", {})
        if bases not in held:
            held[bases] = self._count_domain(bases)
        return held[bases]

    def _count_domain(self, bases: tuple[str, ...]) -> int:
        total = 0
        for _ctx, choices, first in self._contexts(bases):
            if first is None:
                total += math.prod(len(c) for c in choices)
                if total > 10 * limits.DOMAIN_CAP:
                    break
        return total

    def joint(self, sids: list[str], extra: str | None = None) -> list[tuple]:
        """Distinct tuples of values of ``sids`` (then ``extra``) that can occur at one position."""
        allsids = list(sids) + ([extra] if extra else [])
        bases = tuple(sorted({b for s in allsids for b in self.info[s].bases}))
        pairs = [([bases.index(b) for b in self.info[s].bases], self.info[s].table) for s in allsids]
        getters = [(_key_getter(proj, len(bases)), table) for proj, table in pairs]
        coords = _coordinates(self.info, list(sids), bases)
        through = None if coords is None or extra is None else _through_memos(self.info, list(sids), extra)
        out: dict[tuple, None] = {}
        # every assignment of every context, contexts in ``_ctx_list``'s order; a context whose
        # choices repeat an earlier one's gives only rows already there, so it is skipped whole
        for _ctx, choices, first in self._contexts(bases):
            if first is not None:
                continue
            if math.prod(map(len, choices)) <= SMALL_CONTEXT:
                out.update(dict.fromkeys(row for _, row in _lookup(getters, itertools.product(*choices))))
                continue
            if coords is not None and (extra is None or through is not None):
                rows = _rows_by_coordinates(self.info, list(sids), coords, choices, through)
                if rows is not None:
                    out.update(dict.fromkeys(rows))
                    continue
            for _, cols in lookup_columns(pairs, len(bases), choices):
                out.update(dict.fromkeys(zip(*cols, strict=True) if cols else [()]))
        return list(out)

    def table_rows(self, sids: list[str], extra: str) -> list[tuple[tuple, Any]] | None:
        """``joint(sids, extra)`` as (values of ``sids``, value of ``extra``) pairs, read off
        ``extra``'s table where ``sids`` are the bases it is tabulated over, in their order, and
        each base's table gives every choice back as itself (or as a value no operation tells
        from it: ``_same_atom``): its rows are then its table's items, in the order the
        enumeration meets them (a fused map over two balances: 12,340 assignments at max_len
        20).  None where that does not hold."""
        info = self.info[extra]
        if info.base_kind is not None or info.kind not in ("map", "sequence_map", "tuple") \
                or list(info.bases) != list(sids) or len(set(sids)) != len(sids):
            return None
        tables = []
        for s in sids:
            si = self.info[s]
            if si.base_kind in (None, "const") or tuple(si.bases) != (s,):
                return None
            tables.append(si.table)
        # whether each base gives its choices back holds of the bases, not of ``extra``: asked once
        # per set of bases (and their records, held to keep their ids unique)
        infos = tuple(self.info[s] for s in sids)
        checked = self.__dict__.setdefault("_choices_given_back", {})
        key = (tuple(sids), tuple(map(id, infos)))
        if key not in checked:
            checked[key] = (infos, all(
                all(_same_atom(table.get((x,), _MISSING), x)
                    for table, options in zip(tables, choices, strict=True) for x in options)
                for _ctx, choices, first in self._contexts(tuple(sids)) if first is None))
        if not checked[key][1]:
            return None
        return list(info.table.items())

    def _contexts(self, bases: tuple[str, ...]) -> Iterator[tuple[tuple, list[list[Any]], tuple | None]]:
        """(context, each base's choices, the earlier context with the same choices or None), in
        ``_ctx_list``'s order.  Choices are the same when each base's list is the same
        object (or the same index / length): then so are the context's assignments.

        Kept per set of bases (and their records, which hold the choices) where there are at
        most ``_CONTEXTS_KEPT`` contexts: a map's table, its domain's size and the joint rows of
        its inputs each enumerate them (tracr's shuffle-Dyck-2 at max_len 40: about 20
        enumerations of 820 contexts per compile, over 8 sets of bases)."""
        if len(self.ctx_all) > _CONTEXTS_KEPT:
            return self._enumerate_contexts(bases)
        infos = tuple(self.info[b] for b in bases)
        key = (bases, tuple(map(id, infos)))
        kept = self.__dict__.setdefault("_contexts_kept", {})
        got = kept.get(key)
        if got is None:  # (holding the records keeps their ids unique)
            got = kept[key] = (infos, list(self._enumerate_contexts(bases)))
        return iter(got[1])

    def _enumerate_contexts(self, bases: tuple[str, ...]
                            ) -> Iterator[tuple[tuple, list[list[Any]], tuple | None]]:
        """``_contexts``, enumerated."""
        kinds = {self.info[b].base_kind for b in bases}
        by_value = [self.info[b].base_kind in ("index", "length") for b in bases]
        seen: dict[tuple, tuple] = {}
        for ctx in self._ctx_list(kinds, bases):  # type: ignore[arg-type]
            choices = self._choices(bases, ctx)
            # the lists are held by the bases' SInfo (values / cond), so their ids stay unique
            key = tuple(c[0] if v else id(c) for v, c in zip(by_value, choices, strict=True))
            first = seen.setdefault(key, ctx)
            yield ctx, choices, (None if first is ctx else first)

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


_MISSING = object()
# the most contexts (index, length pairs: N(N+1)/2 at max_len N) whose enumeration ``_contexts``
# keeps per set of bases: 50,403 at max_len 317, a few MB of tuples at most
_CONTEXTS_KEPT = 50_000
# a context with at most this many assignments is enumerated one assignment at a time
# (``_lookup``): the lookups by columns and by combinations cost more to set up than they save
# (tracr's reverse reads index and length: 820 contexts of one assignment each at max_len 40)
SMALL_CONTEXT = 32
# a map's result where its function raised, in its memo (``MapTables.map_info``)
FAILED = object()
# assignments looked up at once by ``lookup_columns``: a context's product may run to hundreds of
# thousands (the wide tables' cap), held as tuples only a chunk at a time
_CHUNK = 1 << 16


def lookup_columns(pairs: list[tuple[list[int], dict]], width: int, choices: list[list[Any]]
                   ) -> Iterator[tuple[list[tuple], list[list[Any]]]]:
    """The assignments ``itertools.product(*choices)`` of ``width`` bases that every table holds,
    a chunk at a time, by columns: (those assignments, in product order; per (base positions,
    table) pair, the column of its values there, ``table[tuple(a[j] for j in positions)]``).
    The lookups run in ``map`` and ``zip``, not a Python loop per assignment: this runs once per
    joint assignment (tracr's shuffle-Dyck-2 at max_len 40 tabulates three maps over 91,880)."""
    product = itertools.product(*choices)
    while True:
        chunk = list(itertools.islice(product, _CHUNK))
        if not chunk:
            return
        columns: list[tuple] | None = None
        cols = []
        for proj, table in pairs:
            if proj == list(range(width)):
                keys: Iterable[tuple] = chunk
            elif not proj:
                keys = itertools.repeat((), len(chunk))
            elif len(proj) == 1:
                if columns is None:
                    columns = list(zip(*chunk, strict=True))
                keys = zip(columns[proj[0]])
            else:
                keys = map(operator.itemgetter(*proj), chunk)
            cols.append(list(map(table.get, keys, itertools.repeat(_MISSING))))
        if any(_MISSING in c for c in cols):  # some table lacks some assignment: keep the rest
            held = [k for k in range(len(chunk)) if all(c[k] is not _MISSING for c in cols)]
            chunk = [chunk[k] for k in held]
            cols = [[c[k] for k in held] for c in cols]
        if chunk:
            yield chunk, cols


def _same_atom(a: Any, b: Any) -> bool:
    """Whether ``a`` is ``b``, or a string or number of its type and value that no operation of
    the compiler tells from it (not a NaN, which only itself finds in a dict, nor a zero of the
    other sign).  A base's value set keeps one object of equal floats; its contexts' lists may
    hold others."""
    if a is b:
        return True
    if type(a) is not type(b) or type(a) not in (str, int, float) or a != b:
        return False
    return type(a) is not float or math.copysign(1.0, a) == math.copysign(1.0, b)


def _coordinates(info: dict, sids: list[str], bases: tuple[str, ...]) -> list[int | None] | None:
    """Per s-op, the position in ``bases`` of its one base (None for a constant), where each of
    the others reads one base of its own and together they read all of ``bases``; else None."""
    coords: list[int | None] = []
    for s in sids:
        if not info[s].bases:
            coords.append(None)
        elif len(info[s].bases) == 1:
            coords.append(bases.index(info[s].bases[0]))
        else:
            return None
    moving = [c for c in coords if c is not None]
    return coords if sorted(moving) == list(range(len(bases))) else None


class _NoEntry(Exception):
    """A memo without the entry asked for: ``joint`` enumerates the assignments instead."""


def _through_memos(info: dict, sids: list[str], extra: str) -> Callable[[dict], Any] | None:
    """``extra``'s value as a function of the values of ``sids`` (given as a dict), where every
    path from ``extra`` down to its bases passes through them and each map on the way is
    tabulated (its table's value at an assignment is its memo's entry for its inputs' values
    there); else None.  The function gives ``FAILED`` where a map on the way has no value, and
    raises ``_NoEntry`` where a memo lacks the arguments (then the caller enumerates)."""
    held = set(sids)
    todo, seen = [extra], set()
    while todo:
        x = todo.pop()
        if x in held or x in seen:
            continue
        seen.add(x)
        xi = info[x]
        if xi.base_kind == "const":
            continue
        if xi.base_kind is not None or xi.memo is None:
            return None
        todo.extend(xi.inputs)

    return functools.partial(_value_through_memos, info, extra)


def _value_through_memos(info: dict, x: str, at: dict) -> Any:
    """``_through_memos``'s function: ``x``'s value given the values ``at`` of the s-ops it is
    read through.  (A module function, not a recursive closure: a closure that calls itself is a
    reference cycle, and this one would hold the analysis's tables until the cyclic collector
    ran.)"""
    if x in at:
        return at[x]
    xi = info[x]
    if xi.base_kind == "const":
        return xi.values[0]
    args = tuple(_value_through_memos(info, u, at) for u in xi.inputs)
    if any(a is FAILED for a in args):
        return FAILED
    got = xi.memo.get((*args, *map(type, args)), _NoEntry)
    if got is _NoEntry:
        raise _NoEntry
    return got


def _rows_by_coordinates(info: dict, sids: list[str], coords: list[int | None], choices: list[list[Any]],
                         through: Callable[[dict], Any] | None) -> list[tuple] | None:
    """One context's rows of ``joint`` for s-ops of one base each (``_coordinates``), and
    ``through``'s value after them: the combinations of each base's distinct values (told apart
    by type too), in the lexicographic order of their first occurrences, which is the order in
    which the enumeration of the assignments first meets them.  None where those combinations
    are not far fewer than the assignments (enumerating them is then as quick), or a memo lacks
    an entry.  ``balance_a < 0`` and ``balance_b < 0`` at max_len 40: 4 rows of 91,880 assignments."""
    reader = {c: s for s, c in zip(sids, coords, strict=True) if c is not None}
    distinct: list[list[Any]] = []
    assignments = combinations = 1
    for j, options in enumerate(choices):
        table = info[reader[j]].table
        firsts: dict[tuple, Any] = {}
        for v in map(table.get, zip(options), itertools.repeat(_MISSING)):
            if v is not _MISSING:
                firsts.setdefault((v, type(v)), v)
        distinct.append(list(firsts.values()))
        assignments *= len(options)
        combinations *= len(firsts)
    if 4 * combinations > assignments:
        return None
    consts = {}
    for s, c in zip(sids, coords, strict=True):
        if c is None:
            consts[s] = info[s].table.get((), _MISSING)
            if consts[s] is _MISSING:
                return []
    rows = []
    try:
        for combo in itertools.product(*distinct):
            row = tuple(consts[s] if c is None else combo[c] for s, c in zip(sids, coords, strict=True))
            if through is not None:
                y = through(dict(zip(sids, row, strict=True)))
                if y is FAILED:
                    continue
                row = (*row, y)
            rows.append(row)
    except _NoEntry:
        return None
    return rows


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
