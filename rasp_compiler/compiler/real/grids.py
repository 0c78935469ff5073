"""Grids: which numerical s-ops provably hold multiples of a known step, and how far the float
computation of each may drift from its exact value.

Real inputs are often fixed-point: ``--input-grid 0.001`` states that every token is a multiple of
0.001, and integer tokens (``tokens_int``) are multiples of 1.  Such values stay on a grid through
integer-coefficient sums, products (the product of the steps), gathers, means over a known number
of keys (the step divided by the count) and ReLUs.  A comparison of two values on a grid of step
h has a margin: their difference is 0 or at least h apart from it, so a step unit whose ramp lies
between h/4 and 3h/4 is exact as long as the float computation of the difference stays within
h/4 of its exact value.  ``delta`` bounds that drift (rounding of every operation, conservatively,
plus the slack the runtime allows an input off its grid point).  A comparison of values on no grid
(after an exp, a softmax, a division) or whose drift reaches h/4 is refused at its line, with the
reason.

Per position p, ``grid[sid][p]`` is a Fraction (the step; 0 where the value is exactly 0) or None.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np

from rasp_compiler.compiler.real.limits import GRID_SLACK_ULPS, MAX_GRID_DENOMINATOR, UNIT_ROUNDOFF
from rasp_compiler.graph.nodes import Aggregate, SoftmaxAggregate, Tokens

Step = Fraction | None


def as_fraction(v: Any) -> Fraction | None:
    """A number as an exact fraction: an int exactly, a float as its shortest decimal (0.1 is 1/10:
    the float's own rounding is counted in ``delta``); None for anything else."""
    if isinstance(v, bool):
        return Fraction(int(v))
    if isinstance(v, int):
        return Fraction(v)
    if isinstance(v, float) and math.isfinite(v):
        return _float_fraction(v)
    return None


@functools.lru_cache(maxsize=1 << 16)
def _float_fraction(v: float) -> Fraction:
    """Fraction(repr(v)), parsed once a value: U's maps read the same few coefficients at every
    position (11 million parses at d = 24, 96 of its 209 s to generate)."""
    return Fraction(repr(float(v)))  # float(): numpy 2 writes np.float64(0.1) as "np.float64(0.1)"


def coefficients(c: Any) -> np.ndarray:
    """``np.nan_to_num(c, nan=0.0)`` as float64, without a copy where every entry is finite (read
    only: the same array may be a form's own)."""
    c = np.asarray(c, dtype=np.float64)
    return c if np.isfinite(c).all() else np.nan_to_num(c, nan=0.0)


def grid_gcd(a: Step, b: Step) -> Step:
    """The largest step both a's and b's multiples are multiples of (0 is a multiple of anything)."""
    if a is None or b is None:
        return None
    a, b = abs(a), abs(b)
    if a == 0:
        return b
    if b == 0:
        return a
    g = Fraction(math.gcd(a.numerator * b.denominator, b.numerator * a.denominator),
                 a.denominator * b.denominator)
    return g if g.denominator <= MAX_GRID_DENOMINATOR else None


def _times(a: Step, k: Fraction | None) -> Step:
    if a is None or k is None:
        return None
    g = abs(a * k)
    return g if g.denominator <= MAX_GRID_DENOMINATOR else None


Coded = tuple[list[Step], np.ndarray]  # (distinct steps, the index of each position's step in them)
CODE = np.int32


def intern(steps: list[Step]) -> Coded:
    """A list of steps per position as its distinct steps and one index a position (equal steps
    share one index: they are interchangeable in every operation on steps).  Every step of a
    coded list is held by some position."""
    if steps and steps.count(steps[0]) == len(steps):
        return uniform(steps[0], len(steps))
    first: dict[Step, int] = {}
    codes = [first.setdefault(s, len(first)) for s in steps]
    return list(first), np.array(codes, dtype=CODE)


def uniform(step: Step, n: int) -> Coded:
    """One step at every position (its codes a read-only view of one 0)."""
    return [step], np.broadcast_to(np.zeros(1, dtype=CODE), (n,))


def materialise(coded: Coded) -> list[Step]:
    vals, codes = coded
    return [vals[i] for i in codes.tolist()]


def has_none(coded: Coded) -> bool:
    return any(v is None for v in coded[0])


def apply(fn: Any, args: list[Coded], where: np.ndarray | None = None,
          keep: Coded | None = None) -> Coded:
    """``fn`` applied position by position to coded arguments, computed once per distinct
    combination of their steps (the same function on the same exact values: the same steps as a
    loop over positions).  With ``where``, positions outside it keep ``keep``'s step instead."""
    sizes = [len(v) for v, _ in args]
    n = len(args[0][1])
    if all(size == 1 for size in sizes):  # one step each, everywhere: one result
        r = fn(*(v[0] for v, _ in args))
        if where is None:
            return uniform(r, n)
        if keep is not None and len(keep[0]) == 1 and keep[0][0] == r:
            return keep
    idx = None if where is None else np.nonzero(where)[0]
    m = n if idx is None else len(idx)
    # an argument with one step everywhere adds nothing to the combination (its index is 0)
    varying = [(codes, size) for (_, codes), size in zip(args, sizes, strict=True) if size > 1]
    if math.prod(size for _, size in varying) < 2 ** 62:
        key = np.zeros(m, dtype=np.int64)
        for codes, size in varying:
            key = key * size + (codes if idx is None else codes[idx])
        uniq, inv = _dedupe(key, math.prod(size for _, size in varying))
        combos = np.zeros((len(uniq), len(args)), dtype=np.int64)
        if varying and len(uniq):
            spread = np.unravel_index(uniq, [size for _, size in varying])
            at = [i for i, size in enumerate(sizes) if size > 1]
            for j, col in zip(at, spread, strict=True):
                combos[:, j] = col
    else:  # pragma: no cover - more distinct steps than any program has
        stacked = np.stack([codes if idx is None else codes[idx] for _, codes in args], axis=1)
        combos, inv = np.unique(stacked, axis=0, return_inverse=True)
        inv = inv.ravel()
    results = [fn(*(v[i] for (v, _), i in zip(args, row, strict=True))) for row in combos.tolist()]
    first: dict[Step, int] = {}
    if keep is not None:
        for v in keep[0]:
            first.setdefault(v, len(first))
    remap = np.array([first.setdefault(r, len(first)) for r in results], dtype=CODE)
    if keep is None:
        codes = remap[inv] if len(remap) else np.zeros(n, dtype=CODE)
    else:
        old = np.array([first[v] for v in keep[0]], dtype=CODE)
        codes = old[keep[1]]
        if len(remap):
            codes[idx if idx is not None else slice(None)] = remap[inv]
    vals = list(first)
    present = np.zeros(len(vals), dtype=bool)
    present[codes] = True
    if not present.all():  # keep only the steps some position holds
        used = np.nonzero(present)[0]
        new = np.zeros(len(vals), dtype=CODE)
        new[used] = np.arange(len(used))
        vals, codes = [vals[i] for i in used.tolist()], new[codes]
    return uniform(vals[0], n) if len(vals) == 1 else (vals, codes)


def _dedupe(key: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, return_inverse=True)`` for keys in [0, bound): by a table where the
    bound is small (no sort)."""
    if bound <= max(4 * len(key), 1 << 16):
        present = np.zeros(bound, dtype=bool)
        present[key] = True
        uniq = np.nonzero(present)[0]
        table = np.zeros(bound, dtype=np.int64)
        table[uniq] = np.arange(len(uniq))
        return uniq, table[key]
    uniq, inv = np.unique(key, return_inverse=True)
    return uniq, inv.ravel()


def _key_gcd(row: tuple, vals: list[Step]) -> Step:
    """The gcd of a query row's keys' steps, as the fold ``g = grid_gcd(g, step)`` from 0 over its
    keys gives it, from ``row``: ``(True,)`` where a key has no grid, else (how many keys have a
    nonzero step, at most 2, then the indices of the distinct nonzero steps).  The fold is None at
    a key with no grid; it skips zeros; its first nonzero step is taken as it is (no denominator
    check); each later one checks the denominator of the gcd so far, and that denominator (the
    lcm of those steps' denominators) only grows, so with two nonzero steps or more the fold is
    the gcd of the distinct ones, None where its denominator is too large."""
    if row[0] is True:
        return None
    many, distinct = row[0], [vals[i] for i in row[1:]]
    g: Step = Fraction(0)
    if many == 0:
        return g
    if many == 1:
        return grid_gcd(g, distinct[0])
    for v in distinct:
        g = grid_gcd(g, v)
    if len(distinct) == 1:  # the same step again: the check of its denominator
        g = grid_gcd(g, distinct[0])
    return g


def resume(states: dict[str, tuple[list, Any]], items: list[tuple], after: Any) -> tuple[int, Any]:
    """(how many, state): the state a loop over a form's terms ``items`` had reached after the
    longest run of its first terms that is a whole earlier form, one of the s-ops ``after`` (the
    map's inputs), or (0, None).  A sum of products written as ``s = s + x * y`` is one map a
    term, each with a form that adds one term to the last one's (the same atoms and the same
    coefficient arrays, in order): U at d = 32 has 4,095 such forms with 53,664 terms in all."""
    best: tuple[int, Any] = (0, None)
    for sid in after:
        got = states.get(sid)
        if got is None:
            continue
        earlier, state = got
        if best[0] < len(earlier) <= len(items) and all(
                a == b and c is d for (a, c), (b, d) in zip(earlier, items, strict=False)):
            best = (len(earlier), state)
    return best


def remember(states: dict[str, tuple[list, Any]], sid: str, items: list[tuple], state: Any,
             keep: int = 64) -> None:
    """Keep the state a loop over ``sid``'s form's ``items`` ended in, for ``resume`` (the last
    ``keep`` forms only: a sum's next term is the next map or close to it)."""
    states.pop(sid, None)
    states[sid] = (items, state)
    while len(states) > keep:
        del states[next(iter(states))]


def _gcd_times(fw: Fraction | None) -> Any:
    return lambda a, b: grid_gcd(a, _times(b, fw))


class Grids:
    """Part of ``NumericCompiler`` (``core``): the grid and the float drift of each s-op.

    Steps are computed on coded lists (``intern``): once per distinct combination of steps, not
    once a position; U at d = 32 (2,304 positions, 4,095 maps) spent most of its 126 s to generate
    in per-position fraction arithmetic here."""

    def _unit(self) -> float:
        return UNIT_ROUNDOFF[self.dtype]

    def _mag(self, sid: str) -> float:
        lo, hi = self._interval_any(sid)
        return max(abs(lo), abs(hi))

    def _grid_of(self, sid: str) -> list[Step]:
        if sid in self.pos:
            return materialise(self._coded_grid(sid))
        return self.grid.get(sid, [None] * self.n)

    def _coded_grid(self, sid: str) -> Coded:
        """``_grid_of(sid)`` coded, interned once a list (positional s-ops: once)."""
        cache = self._grid_codes
        if sid in self.pos:
            got = cache.get(sid)
            if got is None:
                got = cache[sid] = (None, intern([as_fraction(v) for v in self.pos[sid]]))
            return got[1]
        lst = self.grid.get(sid)
        if lst is None:
            return uniform(None, self.n)
        got = cache.get(sid)
        if got is None or got[0] is not lst:
            got = cache[sid] = (lst, intern(lst))
        return got[1]

    def _set_grid(self, sid: str, coded: Coded) -> None:
        lst = materialise(coded)
        self.grid[sid] = lst
        self._grid_codes[sid] = (lst, coded)

    def _grid_reason(self, sid: str) -> str:
        return self.grid_why.get(sid, "it is not computed from values on a grid")

    def _delta_of(self, sid: str) -> float:
        if sid in self.pos:
            cache = self._pos_delta
            if sid not in cache:
                vals = [float(v) for v in self.pos[sid] if isinstance(v, (int, float))]
                exact = all(float(v).is_integer() and abs(v) < 2 ** 24 for v in vals)
                cache[sid] = 0.0 if exact else self._unit() * max((abs(v) for v in vals), default=0.0)
            return cache[sid]
        return self.delta.get(sid, math.inf)

    # -------------------------------------------------------------- per node
    def _grid_tokens(self, node: Tokens) -> None:
        lo, hi = self.range
        mag = max(abs(lo), abs(hi))
        step = self.token_grid
        if step is None:
            self._no_grid(node.id, "the input has no stated grid (--input-grid)")
            return
        self.grid[node.id] = [step] * self.n
        exact = step.denominator == 1 and mag < 2 ** (24 if self.dtype == "float32" else 53)
        # the slack the runtime allows an input off its grid point, and its rounding to the dtype
        self.delta[node.id] = 0.0 if exact else (GRID_SLACK_ULPS + 1) * self._unit() * max(mag, float(step))

    def _no_grid(self, sid: str, why: str) -> None:
        self.grid[sid] = [None] * self.n
        self.grid_why[sid] = why
        self.delta[sid] = math.inf

    def _selector_rows(self, sel: str) -> dict[str, Any]:
        """A positional selector's (query, key) pairs (``rows``, ``cols``, by query then key), its
        keys per query (``sizes``) and the fewest of them a query can see (``lows``: at a fixed
        length all; ``_grid_aggregate``), once a selector."""
        cache = self._sel_rows
        if sel not in cache:
            m = self._selector_matrix(sel)
            rows, cols = (a.astype(np.int32) for a in np.nonzero(m))
            sizes = np.bincount(rows, minlength=m.shape[0])
            if self.fixed is not None:
                # every key at a fixed length: one count, the row's keys (all before n)
                lows = sizes
            else:
                # at a length of q + 1 .. n a query sees the keys before the end: every count from
                # its keys up to q to all of its keys (one more key a length)
                lows = np.bincount(rows[cols <= rows], minlength=m.shape[0])
            cache[sel] = {"rows": rows, "cols": cols, "sizes": sizes, "lows": lows}
        return cache[sel]

    def _selector_matrix(self, sel: str) -> np.ndarray:
        """The boolean [query, key] matrix of a positional selector (the interpreter's own array,
        not a copy, where it is one)."""
        return np.asarray(self.pos[sel], dtype=bool)

    def _grid_aggregate(self, node: Any) -> None:
        nid = node.id
        if isinstance(node, SoftmaxAggregate):
            self._no_grid(nid, f"'{nid}' is a softmax-weighted average")
            return
        assert isinstance(node, Aggregate)
        sel, src = node.inputs[0], node.inputs[-1]
        rows = self._selector_rows(sel)
        src_vals, src_codes = self._coded_grid(src)
        default = as_fraction(node.default)
        # the grid of each row's values: the gcd of its keys' steps, folded from 0 (``_key_gcd``),
        # from a summary of the row: 0 where a key has no grid, 1 where no key has a nonzero step,
        # 2 + i where one key has one (step i), larger ids for the rest (distinct tuples)
        nq, nv = len(rows["sizes"]), len(src_vals)
        vals = src_codes[rows["cols"]]
        none = np.array([v is None for v in src_vals], dtype=bool)[vals]
        nonzero = ~none & np.array([v is not None and v != 0 for v in src_vals], dtype=bool)[vals]
        any_none = np.bincount(rows["rows"], weights=none, minlength=nq) > 0
        many = np.bincount(rows["rows"], weights=nonzero, minlength=nq).astype(np.int64)
        single = np.bincount(rows["rows"][nonzero], weights=vals[nonzero], minlength=nq).astype(np.int64)
        summary = np.where(any_none, 0, np.where(many == 0, 1, 2 + single))
        summaries: dict[tuple, int] = {}
        rest = np.nonzero(~any_none & (many >= 2))[0]
        if len(rest):
            pairs = np.unique(rows["rows"][nonzero].astype(np.int64) * nv + vals[nonzero])
            distinct: dict[int, list[int]] = {}
            for pair in pairs.tolist():
                distinct.setdefault(pair // nv, []).append(pair % nv)
            for q in rest.tolist():
                summary[q] = 2 + nv + summaries.setdefault(tuple(distinct[q]), len(summaries))
        by_id = {0: (True,), 1: (0,), **{2 + i: (1, i) for i in range(nv)},
                 **{2 + nv + i: (2, *t) for t, i in summaries.items()}}
        lows, sizes = rows["lows"], rows["sizes"]
        span = nq + 1  # lows and sizes are counts of keys, 0 .. nq
        uniq, inv = np.unique((summary * span + lows) * span + sizes, return_inverse=True)
        steps: list[Step] = []
        for key in uniq.tolist():
            sid_, low, size = key // (span * span), key // span % span, key % span
            g = _key_gcd(by_id[sid_], src_vals)
            step: Step = Fraction(0)
            for c in range(low, size + 1):
                step = grid_gcd(step, default if c == 0 else _times(g, Fraction(1, c)))
            steps.append(step)
        coded = intern(steps)
        out = uniform(coded[0][0], nq) if len(coded[0]) == 1 else (coded[0], coded[1][inv.ravel()])
        most = max(1, int(sizes.max(initial=0)))
        self._set_grid(nid, out)
        if all(s is None for s in out[0]):
            self.grid_why[nid] = (self._grid_reason(src) if all(s is None for s in src_vals) else
                                  f"'{nid}' averages over counts whose steps do not combine")
        mag = self._mag(src)
        drift = 0.0 if most <= 1 else (most + 2) * self._unit() * mag
        self.delta[nid] = self._delta_of(src) + drift

    def _grid_form(self, nid: str, form: Any, after: Any = ()) -> None:
        """Grid and drift of a map read as a form (``real_forms``); ``after``: its inputs, whose
        forms' loops it may resume (``resume``)."""
        items = list(form.terms.items())
        start, state = resume(self._form_states["grid"], items, after)
        out: Coded
        out, drift, size, why = state if state is not None else (uniform(Fraction(0), self.n), 0.0, 0.0, None)
        for atom, c in items[start:]:
            c = coefficients(c)
            steps, atom_delta, atom_mag, reason = self._atom_grid(atom)
            why = why or reason
            k = float(np.max(np.abs(c)))
            drift += k * atom_delta
            size += k * atom_mag
            on = c != 0
            if not on.any():
                continue
            if steps[0] == [None]:  # no grid: None wherever the atom is, whatever its coefficient
                out = apply(lambda o: None, [out], where=on, keep=out)
                continue
            if np.all(c == c[0]):
                coded_c = uniform(as_fraction(float(c[0])), self.n)
            else:
                coefs, cidx = np.unique(c, return_inverse=True)
                coded_c = ([as_fraction(float(v)) for v in coefs], cidx.ravel())
            out = apply(lambda o, s, f: grid_gcd(o, _times(s, f)), [out, steps, coded_c], where=on, keep=out)
        remember(self._form_states["grid"], nid, items, (out, drift, size, why))
        self._set_grid(nid, out)
        if why is not None and has_none(out):
            self.grid_why[nid] = why
        self.delta[nid] = drift + (2 * len(form.terms) + 4) * self._unit() * size

    def _atom_grid(self, atom: tuple) -> tuple[Coded, float, float, str | None]:
        """(steps per position, coded; drift; magnitude; why it has no grid) of one atom of a form."""
        one = uniform(Fraction(1), self.n)
        if atom[0] == "one":
            return one, 0.0, 1.0, None
        if atom[0] == "x":
            s = atom[1]
            return self._coded_grid(s), self._delta_of(s), self._mag(s), self._why(s)
        if atom[0] == "xx":
            a, b = atom[1], atom[2]
            ga, gb = self._coded_grid(a), self._coded_grid(b)
            da, db, ma, mb = self._delta_of(a), self._delta_of(b), self._mag(a), self._mag(b)
            steps = apply(_times, [ga, gb])
            return steps, ma * db + mb * da + da * db, ma * mb, self._why(a) or self._why(b)
        if atom[0] == "relu":
            steps, drift, mag = self._lin_grid(atom[1])
            return steps, drift, mag, next((self._why(s) for s, _ in atom[1].terms if self._why(s)), None)
        if atom[0] == "step":
            return one, 0.0, 1.0, None
        if atom[0] == "stepx":
            s = atom[3]
            return self._coded_grid(s), self._delta_of(s), self._mag(s), self._why(s)
        return uniform(None, self.n), math.inf, math.inf, "it is not a sum of products"

    def _why(self, sid: str) -> str | None:
        return None if sid in self.pos or not has_none(self._coded_grid(sid)) else \
            self._grid_reason(sid)

    def _lin_grid(self, lin: Any) -> tuple[Coded, float, float]:
        """Steps per position (coded), drift and magnitude of a linear form with constant weights."""
        steps: Coded = uniform(as_fraction(float(lin.const)), self.n)
        mag, drift = abs(float(lin.const)), 0.0
        for s, w in lin.terms:
            gs, fw = self._coded_grid(s), as_fraction(float(w))
            steps = apply(_gcd_times(fw), [steps, gs])
            drift += abs(w) * self._delta_of(s)
            mag += abs(w) * self._mag(s)
        return steps, drift + (len(lin.terms) + 2) * self._unit() * mag, mag

    # -------------------------------------------------------------- steps
    def _step_margins(self, nid: str, form: Any) -> str | None:
        """For every step atom of ``form``, the grid step of its difference at each position
        (recorded in ``step_grid`` for the units); a message saying why one has no margin, else
        None."""
        for atom in form.terms:
            if atom[0] not in ("step", "stepx"):
                continue
            lin = atom[1]
            if lin in self.step_grid:
                continue
            coded, drift, _ = self._lin_grid(lin)
            names = ", ".join(dict.fromkeys(f"'{self.stand_in.get(s, s)}'" for s, _ in lin.terms))
            if has_none(coded):
                why = next((self._grid_reason(s) for s, _ in lin.terms
                            if has_none(self._coded_grid(s))), "its values are on no common grid")
                return (f"{{node}} can jump as a real number moves (it compares {names}): a hard "
                        f"threshold is exact only with a margin, as between values on a grid; here {why}")
            vals, codes = coded  # every step of vals is held by some position
            finite = [float(s) for s in vals if s]
            # where the difference is exactly 0 any step will do: it never nears a threshold
            h = np.array([float(s) if s else min(finite, default=1.0) for s in vals], dtype=np.float64)[codes]
            if not drift < float(np.min(h)) / 4:
                return (f"{{node}} compares {names}, on a grid of step {float(np.min(h)):g}, but the float "
                        f"computation may drift by {drift:.3g}, a quarter of the step or more")
            self.step_grid[lin] = h
        return None

    def _integer_output(self, sid: str) -> float | None:
        """The drift of ``sid`` when it is an integer at every position with a drift under 1/4 (the
        runtime then rounds it to that integer, exactly), else None."""
        steps = self._coded_grid(sid)[0]
        drift = self._delta_of(sid)
        if all(s is not None and (s == 0 or s.denominator == 1) for s in steps) and drift < 0.25:
            return drift
        return None

    # -------------------------------------------------------------- categorical estimate
    def _value_count(self, sid: str) -> float:
        """How many values ``sid`` can take: its range over its finest grid step (inf off a grid)."""
        if sid in self.pos:
            return 1.0
        vals = self._coded_grid(sid)[0]  # the distinct steps: min and None-ness as over positions
        steps = [g for g in vals if g is not None and g != 0]
        if not steps or any(g is None for g in vals) or sid not in self.interval:
            return math.inf
        lo, hi = self.interval[sid]
        return math.floor((hi - lo) / float(min(steps)) + 1e-9) + 1.0

    def largest_table(self) -> tuple[str | None, float]:
        """The map a categorical plan would tabulate over the most joint values of its inputs, and
        that number (a lower bound of that plan's hidden units for it): the compiler skips the
        categorical plan of an integer program where this alone outweighs the numeric plan."""
        best: tuple[str | None, float] = (None, 0.0)
        for node in self.program.nodes():
            if node.id in self.pos or node.is_selector or node.kind not in ("map", "sequence_map"):
                continue
            reads = [i for i in dict.fromkeys(node.inputs) if i not in self.pos]
            if len(reads) < 2:
                continue
            rows = math.prod(self._value_count(i) for i in reads)
            if rows > best[1]:
                best = (node.id, rows)
        return best
