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


class Grids:
    """Part of ``NumericCompiler`` (``core``): the grid and the float drift of each s-op."""

    def _unit(self) -> float:
        return UNIT_ROUNDOFF[self.dtype]

    def _mag(self, sid: str) -> float:
        lo, hi = self._interval_any(sid)
        return max(abs(lo), abs(hi))

    def _grid_of(self, sid: str) -> list[Step]:
        if sid in self.pos:
            return [as_fraction(v) for v in self.pos[sid]]
        return self.grid.get(sid, [None] * self.n)

    def _grid_reason(self, sid: str) -> str:
        return self.grid_why.get(sid, "it is not computed from values on a grid")

    def _delta_of(self, sid: str) -> float:
        if sid in self.pos:
            vals = [float(v) for v in self.pos[sid] if isinstance(v, (int, float))]
            exact = all(float(v).is_integer() and abs(v) < 2 ** 24 for v in vals)
            return 0.0 if exact else self._unit() * max((abs(v) for v in vals), default=0.0)
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

    def _grid_aggregate(self, node: Any) -> None:
        nid = node.id
        if isinstance(node, SoftmaxAggregate):
            self._no_grid(nid, f"'{nid}' is a softmax-weighted average")
            return
        assert isinstance(node, Aggregate)
        sel, src = node.inputs[0], node.inputs[-1]
        m = np.asarray(self.pos[sel], dtype=bool)
        src_grid = self._grid_of(src)
        default = as_fraction(node.default)
        out: list[Step] = []
        most = 1
        for q in range(m.shape[0]):
            keys = np.nonzero(m[q])[0].tolist()
            # the counts a query can see: every key at a fixed length, those before the end otherwise
            lengths = [self.n] if self.fixed is not None else range(q + 1, self.n + 1)
            counts = {sum(1 for k in keys if k < length) for length in lengths}
            g: Step = Fraction(0)
            for k in keys:
                g = grid_gcd(g, src_grid[k])
            step: Step = Fraction(0)
            for c in counts:
                step = grid_gcd(step, default if c == 0 else _times(g, Fraction(1, c)))
            out.append(step)
            most = max(most, max(counts))
        self.grid[nid] = out
        if all(s is None for s in out):
            self.grid_why[nid] = (self._grid_reason(src) if all(s is None for s in src_grid) else
                                  f"'{nid}' averages over counts whose steps do not combine")
        mag = self._mag(src)
        drift = 0.0 if most <= 1 else (most + 2) * self._unit() * mag
        self.delta[nid] = self._delta_of(src) + drift

    def _grid_form(self, nid: str, form: Any) -> None:
        """Grid and drift of a map read as a form (``real_forms``)."""
        out: list[Step] = [Fraction(0)] * self.n
        drift = 0.0
        size = 0.0
        why = None
        for atom, c in form.terms.items():
            c = np.nan_to_num(np.asarray(c, dtype=np.float64), nan=0.0)
            steps, atom_delta, atom_mag, reason = self._atom_grid(atom)
            why = why or reason
            k = float(np.max(np.abs(c)))
            drift += k * atom_delta
            size += k * atom_mag
            for p in range(self.n):
                if c[p] != 0:
                    out[p] = grid_gcd(out[p], _times(steps[p], as_fraction(float(c[p]))))
        self.grid[nid] = out
        if why is not None and any(s is None for s in out):
            self.grid_why[nid] = why
        self.delta[nid] = drift + (2 * len(form.terms) + 4) * self._unit() * size

    def _atom_grid(self, atom: tuple) -> tuple[list[Step], float, float, str | None]:
        """(steps per position, drift, magnitude, why it has no grid) of one atom of a form."""
        one = [Fraction(1)] * self.n
        if atom[0] == "one":
            return one, 0.0, 1.0, None
        if atom[0] == "x":
            s = atom[1]
            return self._grid_of(s), self._delta_of(s), self._mag(s), self._why(s)
        if atom[0] == "xx":
            a, b = atom[1], atom[2]
            ga, gb = self._grid_of(a), self._grid_of(b)
            da, db, ma, mb = self._delta_of(a), self._delta_of(b), self._mag(a), self._mag(b)
            steps = [_times(x, y) for x, y in zip(ga, gb, strict=True)]
            return steps, ma * db + mb * da + da * db, ma * mb, self._why(a) or self._why(b)
        if atom[0] == "relu":
            steps, drift, mag = self._lin_grid(atom[1])
            return steps, drift, mag, next((self._why(s) for s, _ in atom[1].terms if self._why(s)), None)
        if atom[0] == "step":
            return one, 0.0, 1.0, None
        if atom[0] == "stepx":
            s = atom[3]
            return self._grid_of(s), self._delta_of(s), self._mag(s), self._why(s)
        return [None] * self.n, math.inf, math.inf, "it is not a sum of products"

    def _why(self, sid: str) -> str | None:
        return None if sid in self.pos or all(g is not None for g in self._grid_of(sid)) else \
            self._grid_reason(sid)

    def _lin_grid(self, lin: Any) -> tuple[list[Step], float, float]:
        """Steps per position, drift and magnitude of a linear form with constant weights."""
        steps: list[Step] = [as_fraction(float(lin.const))] * self.n
        mag, drift = abs(float(lin.const)), 0.0
        for s, w in lin.terms:
            gs, fw = self._grid_of(s), as_fraction(float(w))
            steps = [grid_gcd(a, _times(b, fw)) for a, b in zip(steps, gs, strict=True)]
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
            steps, drift, _ = self._lin_grid(lin)
            names = ", ".join(dict.fromkeys(f"'{self.stand_in.get(s, s)}'" for s, _ in lin.terms))
            if any(s is None for s in steps):
                why = next((self._grid_reason(s) for s, _ in lin.terms
                            if any(g is None for g in self._grid_of(s))), "its values are on no common grid")
                return (f"{{node}} can jump as a real number moves (it compares {names}): a hard "
                        f"threshold is exact only with a margin, as between values on a grid; here {why}")
            finite = [float(s) for s in steps if s]
            # where the difference is exactly 0 any step will do: it never nears a threshold
            h = np.array([float(s) if s else min(finite, default=1.0) for s in steps])
            if not drift < float(np.min(h)) / 4:
                return (f"{{node}} compares {names}, on a grid of step {float(np.min(h)):g}, but the float "
                        f"computation may drift by {drift:.3g}, a quarter of the step or more")
            self.step_grid[lin] = h
        return None

    def _integer_output(self, sid: str) -> float | None:
        """The drift of ``sid`` when it is an integer at every position with a drift under 1/4 (the
        runtime then rounds it to that integer, exactly), else None."""
        steps = self._grid_of(sid)
        drift = self._delta_of(sid)
        if all(s is not None and (s == 0 or s.denominator == 1) for s in steps) and drift < 0.25:
            return drift
        return None

    # -------------------------------------------------------------- categorical estimate
    def _value_count(self, sid: str) -> float:
        """How many values ``sid`` can take: its range over its finest grid step (inf off a grid)."""
        if sid in self.pos:
            return 1.0
        steps = [g for g in self._grid_of(sid) if g is not None and g != 0]
        if not steps or any(g is None for g in self._grid_of(sid)) or sid not in self.interval:
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
