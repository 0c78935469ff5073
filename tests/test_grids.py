"""``real.grids``: ``as_fraction`` (a float as its shortest decimal, parsed once a value: U's maps
read the same coefficients at every position, 11 million parses at d = 24), and the grids of maps
and aggregates computed on coded lists, against the per-position loops they replace."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from rasp_compiler.compiler.real.bounds import _one_sign
from rasp_compiler.compiler.real.grids import (
    Grids,
    _key_gcd,
    _times,
    apply,
    as_fraction,
    grid_gcd,
    has_none,
    intern,
    materialise,
    resume,
)
from rasp_compiler.compiler.real.intervals import Intervals
from rasp_compiler.compiler.real_forms import Form
from rasp_compiler.graph.nodes import Aggregate


def test_as_fraction_is_the_shortest_decimal_and_the_same_on_every_call() -> None:
    assert as_fraction(np.float64(0.37)) == Fraction(37, 100)   # before 0.37 is cached as a float
    for _ in range(2):                                    # the second round reads the cache
        assert as_fraction(0.1) == Fraction(1, 10) and as_fraction(-2.5) == Fraction(-5, 2)
        assert as_fraction(1e-300) == Fraction(1, 10**300) and as_fraction(3) == Fraction(3)
        assert as_fraction(-0.0) == 0 == as_fraction(0.0)
        assert as_fraction(True) == 1 and isinstance(as_fraction(True), Fraction)
        assert as_fraction(np.float64(0.1)) == Fraction(1, 10)
        assert as_fraction(math.inf) is None and as_fraction(math.nan) is None and as_fraction("1") is None


# --------------------------------------------------------------------------------------------
# The grids of maps and aggregates are computed once per distinct combination of steps (coded
# lists), not once a position: U at d = 32 took 126 s to generate, most of it in per-position
# fraction arithmetic.  Each is checked here against the per-position loop it replaces (written
# out below as it was), on steps that take every path: None, 0, negative steps, denominators past
# MAX_GRID_DENOMINATOR, and positions where a coefficient is 0.

def _ref_grid_aggregate(m, src, default, fixed: bool):
    """The per-query loop of ``_grid_aggregate`` before coded lists: (steps, most)."""
    n = m.shape[0]
    out, most = [], 1
    for q in range(n):
        keys = np.nonzero(m[q])[0].tolist()
        lengths = [n] if fixed else range(q + 1, n + 1)
        counts = {sum(1 for k in keys if k < length) for length in lengths}
        g = Fraction(0)
        for k in keys:
            g = grid_gcd(g, src[k])
        step = Fraction(0)
        for c in counts:
            step = grid_gcd(step, as_fraction(default) if c == 0 else _times(g, Fraction(1, c)))
        out.append(step)
        most = max(most, max(counts))
    return out, most


# steps a position may hold: no grid, 0, small steps of either sign, a large denominator
_BIG = Fraction(1, 3 * 10 ** 12 + 1)
_STEPS = [None, Fraction(0), Fraction(1), Fraction(-1, 2), Fraction(3, 4), Fraction(1, 10),
          Fraction(6), _BIG, -_BIG, Fraction(2, 7 * 10 ** 11)]


class _Stub(Grids, Intervals):
    """Just what ``Grids`` reads of a ``NumericCompiler``."""

    def __init__(self, n: int, fixed: bool, pos: dict, grid: dict) -> None:
        self.n, self.fixed, self.dtype = n, (n if fixed else None), "float64"
        self.pos, self.grid = pos, grid
        self.grid_why: dict = {}
        self.delta = {k: 0.0 for k in grid}
        self._grid_codes, self._pos_delta, self._sel_rows = {}, {}, {}
        self._form_states = {"grid": {}, "interval": {}}

    def _interval_any(self, sid: str) -> tuple[float, float]:
        return (-1.0, 1.0)


def test_grid_aggregate_matches_the_per_query_loop() -> None:
    rng = np.random.default_rng(7)
    for trial in range(300):
        n = int(rng.integers(1, 9))
        density = rng.choice([0.0, 0.15, 0.5, 1.0])
        m = rng.random((n, n)) < density
        palette = [_STEPS[i] for i in rng.choice(len(_STEPS), size=int(rng.integers(1, 5)))]
        src = [palette[i] for i in rng.integers(0, len(palette), size=n)]
        fixed = bool(trial % 2)
        default = [0, 1, 0.5, 1 / 3, 2][trial % 5]
        nc = _Stub(n, fixed, {"sel": m.tolist()}, {"src": src})
        nc._grid_aggregate(Aggregate("agg", ("sel", "src"), default=default))
        want, most = _ref_grid_aggregate(m, src, default, fixed)
        assert nc.grid["agg"] == want, (trial, m.astype(int).tolist(), src, default)
        drift = 0.0 if most <= 1 else (most + 2) * 2.0 ** -53
        assert nc.delta["agg"] == drift


def test_coded_apply_matches_the_per_position_loop() -> None:
    rng = np.random.default_rng(11)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        a = [_STEPS[i] for i in rng.integers(0, len(_STEPS), size=n)]
        b = [_STEPS[i] for i in rng.integers(0, len(_STEPS), size=n)]
        k = [as_fraction(float(v)) for v in rng.choice([0.5, -2.0, 0.1, 3.0, 1 / 3], size=n)]
        on = rng.random(n) < 0.6
        got = apply(lambda o, s, f: grid_gcd(o, _times(s, f)), [intern(a), intern(b), intern(k)],
                    where=on, keep=intern(a))
        want = [grid_gcd(a[p], _times(b[p], k[p])) if on[p] else a[p] for p in range(n)]
        assert materialise(got) == want
        assert all(np.any(got[1] == i) for i in range(len(got[0])))   # no step that no position holds
        assert has_none(got) == any(s is None for s in want)
        products = [_times(x, y) for x, y in zip(a, b, strict=True)]
        assert materialise(apply(_times, [intern(a), intern(b)])) == products


def _ref_grid_form(nc: _Stub, form: Form) -> list:
    """``_grid_form``'s steps before coded lists, for atoms "one", "x" and "xx"."""
    out = [Fraction(0)] * nc.n
    for atom, c in form.terms.items():
        c = np.nan_to_num(np.asarray(c, dtype=np.float64), nan=0.0)
        if atom[0] == "one":
            steps = [Fraction(1)] * nc.n
        elif atom[0] == "x":
            steps = nc._grid_of(atom[1])
        else:
            steps = [_times(x, y) for x, y in zip(nc._grid_of(atom[1]), nc._grid_of(atom[2]), strict=True)]
        for p in range(nc.n):
            if c[p] != 0:
                out[p] = grid_gcd(out[p], _times(steps[p], as_fraction(float(c[p]))))
    return out


def test_grid_form_matches_the_per_position_loop() -> None:
    rng = np.random.default_rng(5)
    for _ in range(150):
        n = int(rng.integers(1, 10))
        grid = {s: [_STEPS[i] for i in rng.integers(0, len(_STEPS), size=n)] for s in ("a", "b")}
        pos = {"p": [float(v) for v in rng.choice([0.0, 1.0, 0.25, 1 / 3, -3.0], size=n)]}
        nc = _Stub(n, True, pos, grid)
        nc.interval = {}
        terms = {}
        for atom in (("one",), ("x", "a"), ("x", "p"), ("xx", "a", "b"), ("xx", "p", "b")):
            if rng.random() < 0.6:
                terms[atom] = rng.choice([0.0, 1.0, -0.5, 0.1, 2.0, np.nan], size=n)
        form = Form(n, terms)
        nc._grid_form("m", form)
        assert nc.grid["m"] == _ref_grid_form(nc, form)
        assert nc._grid_of("m") == nc.grid["m"] and nc._grid_of("p") == [as_fraction(v) for v in pos["p"]]


def _ref_one_sign(terms, n: int) -> bool:
    """``_form_error``'s per-position sign test before it was vectorised."""
    for p in range(n):
        signs = set()
        for c, lo, hi, *_ in terms:
            if c[p] == 0:
                continue
            tlo, thi = sorted((c[p] * lo, c[p] * hi))
            signs.add("+" if tlo >= 0 else "-" if thi <= 0 else "±")
        if len([t for t in terms if t[0][p] != 0]) > 1 and (len(signs) > 1 or "±" in signs):
            return False
    return True


def test_one_sign_matches_the_per_position_loop() -> None:
    rng = np.random.default_rng(3)
    ends = [-math.inf, -2.0, -1.0, 0.0, 0.5, 3.0, math.inf, math.nan]
    for _ in range(500):
        n = int(rng.integers(1, 6))
        terms = []
        for _ in range(int(rng.integers(0, 4))):
            c = rng.choice([0.0, 0.0, 1.0, -1.0, 2.5, -1e308], size=n)
            lo, hi = sorted(rng.choice(ends, size=2).tolist()) if rng.random() < 0.9 else \
                tuple(rng.choice(ends, size=2).tolist())
            terms.append((c, lo, hi, 0.0, 0.0, 1.0))
        with np.errstate(over="ignore", invalid="ignore"):
            want = _ref_one_sign(terms, n)
        assert _one_sign(terms, n) == want, terms


def test_key_gcd_is_the_fold_over_the_keys() -> None:
    """A row's gcd from its summary (any key without a grid, how many nonzero steps, the distinct
    ones) is the fold ``g = grid_gcd(g, step)`` over its keys, whatever their order and repeats."""
    rng = np.random.default_rng(13)
    vals = _STEPS
    for _ in range(2000):
        keys = rng.integers(0, len(vals), size=int(rng.integers(0, 6))).tolist()
        want = Fraction(0)
        for k in keys:
            want = grid_gcd(want, vals[k])
        nonzero = [k for k in keys if vals[k] is not None and vals[k] != 0]
        row = (True,) if any(vals[k] is None for k in keys) else \
            (min(len(nonzero), 2), *sorted(set(nonzero)))
        assert _key_gcd(row, vals) == want, [vals[k] for k in keys]


def test_a_sum_built_term_by_term_resumes_the_last_forms_loops_with_the_same_result() -> None:
    """``s_j = s_(j-1) + x_j * y_j``: each map's form is the last one's plus a term (the same
    coefficient arrays), so its grid, drift and interval loops resume from the last map's
    (``resume``); they agree with loops from scratch, and a changed term is not resumed over."""
    rng = np.random.default_rng(17)
    n = 7
    grid = {f"v{i}": [_STEPS[j] for j in rng.integers(1, len(_STEPS), size=n)] for i in range(6)}
    chain, form = [], Form(n)
    for j in range(5):
        term = Form(n, {("xx", f"v{j}", f"v{j + 1}"): rng.choice([0.0, 1.0, 0.5, -2.0], size=n)})
        form = form.add(term)
        chain.append((f"s{j}", form, (f"s{j - 1}",) if j else ()))
    changed = Form(n, dict(chain[-1][1].terms))
    changed.terms[("xx", "v0", "v1")] = chain[-1][1].terms[("xx", "v0", "v1")] * 3.0
    chain.append(("t", changed, ("s3",)))
    resumed, fresh = _Stub(n, True, {}, dict(grid)), _Stub(n, True, {}, dict(grid))
    for nc in (resumed, fresh):
        nc.interval = {}
    for nid, f, after in chain:
        items = list(f.terms.items())
        start, _ = resume(resumed._form_states["grid"], items, after)
        assert start == (0 if nid in ("s0", "t") else len(items) - 1)
        resumed._grid_form(nid, f, after)
        fresh._grid_form(nid, f)
        assert resumed.grid[nid] == fresh.grid[nid] and resumed.delta[nid] == fresh.delta[nid]
        assert Intervals._form_interval(resumed, f, nid, after) == Intervals._form_interval(fresh, f)
