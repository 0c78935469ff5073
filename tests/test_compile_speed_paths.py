"""The compiler's quicker paths give what the paths they stand in for give, value for value.

Each quick path (issue 50: compile time of tracr's library) replaces a loop per row or per
assignment; the weights must not change, so each is checked here against the plain loop it
replaces, on random inputs that mix the values Python calls equal (1, 1.0, True; 0, False).
``bench/weights_fingerprint.py --compare`` checks the same on whole models.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from rasp_compiler.compiler import tables
from rasp_compiler.compiler.analysis.domains import _key_getter, _lookup, lookup_columns
from rasp_compiler.compiler.numeric import changes, projection, sorted_by_projection, steps_along
from rasp_compiler.compiler.values import value_key

MIXED = [0, 1, 2, 0.5, True, False, "a", (1, 2), 1.0, 3, None]


def _rectangles_row_by_row(idx: np.ndarray, y: np.ndarray) -> bool:
    """``tables._rectangles_hold`` as it was written first, one row at a time."""
    tol = 1e-8 * (1.0 + float(np.max(np.abs(y), initial=0.0)))
    for j in range(idx.shape[1]):
        col = idx[:, j]
        vals, counts = np.unique(col, return_counts=True)
        ref = vals[int(np.argmax(counts))]
        rest = [tuple(r) for r in np.delete(idx, j, axis=1).tolist()]
        at_ref = {r: y[k] for k, r in enumerate(rest) if col[k] == ref}
        diff: dict[int, float] = {}
        for k, r in enumerate(rest):
            a = int(col[k])
            if a == ref or r not in at_ref:
                continue
            d = y[k] - at_ref[r]
            if abs(diff.setdefault(a, d) - d) > tol:
                return False
    return True


def _random_table(rng: random.Random) -> tuple[list[tuple[tuple, float]], int]:
    n_in = rng.choice([1, 2, 3])
    domains = [[rng.choice(MIXED[:-1]) for _ in range(rng.randint(1, 5))] for _ in range(n_in)]
    parts = [{value_key(v): rng.choice([0.0, 1.0, 2.5]) for v in vs} for vs in domains]
    rows, seen = [], set()
    for _ in range(rng.randint(1, 40)):
        args = tuple(rng.choice(vs) for vs in domains)
        if args in seen:
            continue
        seen.add(args)
        noise = rng.random() if rng.random() < 0.1 else 0.0  # some tables are not separable
        rows.append((args, sum(parts[j][value_key(a)] for j, a in enumerate(args)) + noise))
    return rows, n_in


def test_separable_columns_and_rectangles_match_the_row_by_row_versions():
    rng = random.Random(50)
    held = 0
    for _ in range(1500):
        rows, n_in = _random_table(rng)
        cols, raw, idx, total = tables._columns(rows, n_in)
        want = tables._columns_row_by_row(rows, n_in)
        assert [list(c.items()) for c in cols] == [list(c.items()) for c in want[0]]
        for got_raw, want_raw in zip(raw, want[1], strict=True):
            assert list(got_raw) == list(want_raw) and all(got_raw[k] is want_raw[k] for k in got_raw)
        assert np.array_equal(idx, want[2]) and total == want[3]
        y = np.array([v for _, v in rows])
        got = tables._rectangles_hold(idx, y)
        assert got == _rectangles_row_by_row(idx, y), rows
        held += got
    assert 0 < held < 1500  # both answers occur


def test_lookup_columns_gives_the_rows_of_the_loop_per_assignment():
    rng = random.Random(51)
    for _ in range(400):
        width = rng.randint(0, 3)
        choices = [[rng.choice(MIXED) for _ in range(rng.randint(0, 4))] for _ in range(width)]
        pairs = []
        for _ in range(rng.randint(0, 3)):
            proj = sorted(rng.sample(range(width), rng.randint(0, width)))
            keys = itertools.product(*(choices[j] for j in proj))
            table = {k: rng.choice(MIXED) for k in keys if rng.random() < 0.8}  # some missing
            pairs.append((proj, table))
        want = list(_lookup([(_key_getter(p, width), t) for p, t in pairs], itertools.product(*choices)))
        got = [(a, tuple(row)) for chunk, cols in lookup_columns(pairs, width, choices)
               for a, row in zip(chunk, zip(*cols, strict=True) if cols else [()] * len(chunk), strict=True)]
        assert got == want
        for (_, row), (_, want_row) in zip(got, want, strict=True):
            assert all(x is y for x, y in zip(row, want_row, strict=True))


@pytest.mark.parametrize("k", [2, 3])
def test_steps_along_matches_a_dot_per_point(k):
    rng = np.random.default_rng(52 + k)
    checked = 0
    for _ in range(60):
        n = int(rng.integers(2, 3000))
        grid = rng.integers(-20, 21, size=(n, k)) / rng.integers(1, 30, size=(1, k))
        xs = [tuple(float(v) for v in row) for row in grid]
        outputs = [bool(v) for v in (np.sum(grid, axis=1) > 0)] if rng.random() < 0.5 else \
            [int(v) for v in np.floor(grid[:, 0] * 2)]
        pts = list(dict(zip(xs, outputs, strict=True)).items())
        coef = projection(pts, [float(np.max(np.abs(grid[:, j]))) for j in range(k)], "float32")
        if coef is None:
            continue
        zs, ys = sorted_by_projection(coef, pts)
        at = np.array(changes(ys), dtype=np.intp)
        got_ys, got_at, z0, z1 = steps_along(coef, pts)
        assert np.array_equal(got_at, at)
        assert [(type(a), a) for a in got_ys] == [(type(b), b) for b in ys]
        z = np.array(zs)
        assert np.array_equal(z0, z[at]) and np.array_equal(z1, z[at + 1])
        checked += 1
    assert checked > 20


def _large_table(rng: random.Random, kind: str) -> tuple[list[tuple[tuple, float]], int]:
    """A table of 2,100 to 6,000 rows over 2 or 3 inputs, rows grouped by the first input as the
    analysis's contexts group them: affine, separable, either up to a little noise on a few rows,
    or a threshold of the inputs (as ``indicator(balance_a < 0 or balance_b < 0)``)."""
    n_in = rng.choice([2, 3])
    sizes = [rng.randint(70, 100) if n_in == 2 else rng.randint(18, 25) for _ in range(n_in)]
    domains = [sorted({rng.randint(-400, 400) / rng.randint(1, 8) for _ in range(s)}) for s in sizes]
    w = [rng.choice([0.0, 1.0, -2.0, 0.5]) for _ in range(n_in)]
    parts = [{v: rng.choice([0.0, 1.0, 3.0]) for v in d} for d in domains]
    rows: list[tuple[tuple, float]] = []
    for args in itertools.product(*domains):
        if rng.random() < 0.2:
            continue
        if kind == "affine":
            y = sum(wj * a for wj, a in zip(w, args, strict=True)) + 1.0
        elif kind == "separable":
            y = sum(p[a] for p, a in zip(parts, args, strict=True)) + 2.0
        else:
            y = 1.0 if any(a < 0 for a in args) else 0.0
        rows.append((args, y))
        if len(rows) >= 6000:
            break
    if kind != "threshold" and rng.random() < 0.5:  # a few rows off, anywhere in the table
        for _ in range(rng.randint(1, 3)):
            k = rng.randrange(len(rows))
            rows[k] = (rows[k][0], rows[k][1] + rng.choice([1e-3, 0.5, 1e-12]))
    return rows, n_in


@pytest.mark.parametrize("size", ["large", "medium"])
def test_affine_and_separable_probes_give_what_the_whole_table_gives(monkeypatch, size):
    """``tables._probes`` only ever turn down a table the whole check turns down: the answers
    with them and without them (``PROBE_ROWS`` and ``SMALL_PROBE_ROWS`` past every table) are
    the same, fit for fit.  Medium tables (between the two probes' sizes) get the small probe
    alone."""
    rng = random.Random(f"53 {size}")
    outcomes = {"affine": set(), "separable": set()}
    for trial in range(36):
        rows, n_in = _large_table(rng, ("affine", "separable", "threshold")[trial % 3])
        if size == "medium":
            rows = rows[:rng.randint(4 * tables.SMALL_PROBE_ROWS + 1, 4 * tables.PROBE_ROWS)]
            assert len(tables._probes(len(rows))) == 1
        else:
            assert len(rows) > 4 * tables.PROBE_ROWS and len(tables._probes(len(rows))) == 2
        got_affine, got_sep = tables.affine(rows), tables.separable(rows, n_in)
        with monkeypatch.context() as m:
            m.setattr(tables, "PROBE_ROWS", 10**9)
            m.setattr(tables, "SMALL_PROBE_ROWS", 10**9)
            assert tables._probes(len(rows)) == []
            want_affine, want_sep = tables.affine(rows), tables.separable(rows, n_in)
        assert (got_affine is None) == (want_affine is None)
        if got_affine is not None:
            assert np.array_equal(got_affine[0], want_affine[0]) and got_affine[1] == want_affine[1]
        assert got_sep == want_sep
        outcomes["affine"].add(got_affine is None)
        outcomes["separable"].add(got_sep is None)
    assert outcomes == {"affine": {True, False}, "separable": {True, False}}  # both answers occur


def _by_coordinates_per_combination(an, fn, memo, inputs, coords, choices, table, failed):
    """``maps._by_coordinates`` as it was first written: a dict of outcomes by combination of
    ranks, each assignment's value looked up by its tuple of ranks."""
    reader = {c: i for i, c in zip(inputs, coords, strict=True) if c is not None}
    kept, typed, firsts = [], [], []
    assignments = combinations = 1
    missing = object()
    for j, options in enumerate(choices):
        held = an.info[reader[j]].table
        vals = [held.get((x,), missing) for x in options]
        options = [x for x, v in zip(options, vals, strict=True) if v is not missing]
        vals = [v for v in vals if v is not missing]
        keys = list(zip(vals, map(type, vals), strict=True))
        ranks = {k: r for r, k in enumerate(dict.fromkeys(keys))}
        kept.append(options)
        typed.append(keys)
        firsts.append(ranks)
        assignments *= len(options)
        combinations *= len(ranks)
    if 2 * combinations > assignments and assignments > 64:
        return None
    codes = [[ranks[k] for k in keys] for ranks, keys in zip(firsts, typed, strict=True)]
    distinct = [[v for v, _ in ranks] for ranks in firsts]
    outcome = {}
    for combo in itertools.product(*(range(len(d)) for d in distinct)):
        args = tuple(an.info[i].values[0] if c is None else distinct[c][combo[c]]
                     for i, c in zip(inputs, coords, strict=True))
        key = (*args, *map(type, args))
        if key not in memo:
            try:
                memo[key] = fn(*args)
            except Exception:
                memo[key] = failed
        outcome[combo] = memo[key]
    values = [outcome[c] for c in itertools.product(*codes)]
    rows = [(a, v) for a, v in zip(itertools.product(*kept), values, strict=True) if v is not failed]
    table.update(rows)
    return [v for _, v in rows]


def test_by_coordinates_matches_the_lookup_per_combination():
    """Rows, their order, the values returned, the memo and the order of the function's calls."""
    from types import SimpleNamespace

    from rasp_compiler.compiler.analysis.maps import _by_coordinates

    rng = random.Random(54)
    compared = 0
    for _ in range(300):
        n_in = rng.randint(1, 3)
        bases = list(range(rng.randint(1, n_in)))  # coordinates; the other inputs are constants
        coords = bases + [None] * (n_in - len(bases))
        rng.shuffle(coords)
        info, inputs = {}, []
        for k, c in enumerate(coords):
            name = f"x{k}"
            inputs.append(name)
            if c is None:
                info[name] = SimpleNamespace(values=[rng.choice(MIXED[:-1])], table={(): None})
            else:  # a table from each choice to a value, some choices missing
                domain = [rng.choice(MIXED[:-1]) for _ in range(rng.randint(1, 6))]
                info[name] = SimpleNamespace(values=domain, table={(v,): rng.choice(MIXED[:-1])
                                                                   for v in domain if rng.random() < 0.9})
        choices = [None] * len(bases)
        for name, c in zip(inputs, coords, strict=True):
            if c is not None:
                choices[c] = [rng.choice(info[name].values) for _ in range(rng.randint(0, 12))]
        an = SimpleNamespace(info=info)
        failed = object()

        def make_fn(calls):
            def fn(*args):
                calls.append(args)
                if len(repr(args)) % 7 == 0:
                    raise ValueError("undefined here")
                return repr(args)[:3]
            return fn
        got_calls, want_calls = [], []
        got_memo, want_memo, got_table, want_table = {}, {}, {}, {}
        got = _by_coordinates(an, make_fn(got_calls), got_memo, tuple(inputs), coords, choices,
                              got_table, failed)
        want = _by_coordinates_per_combination(an, make_fn(want_calls), want_memo, tuple(inputs),
                                               coords, choices, want_table, failed)
        assert got == want
        assert list(got_table.items()) == list(want_table.items())
        assert [(k, v) for k, v in got_memo.items() if v is not failed] == \
            [(k, v) for k, v in want_memo.items() if v is not failed]
        assert got_calls == want_calls
        compared += got is not None
    assert compared > 100


def _codes_by_type_and_value(pts: list) -> np.ndarray | None:
    """``numeric.output_codes`` as it was first written: every output keyed with its type."""
    keys = [(type(y), y) for _, y in pts]
    ids = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    if any(t is float and y != y for t, y in ids):
        return None
    return np.array([ids[k] for k in keys], dtype=np.int64)


@pytest.mark.parametrize("pool", ["ints", "bools and ints", "floats", "mixed", "nan", "tuples"])
def test_points_array_and_output_codes_equal_the_plain_reads(pool):
    """``points_array`` reads the coordinates flat, ``output_codes`` keys outputs of one type by
    themselves: the same array and the same codes as ``np.array`` and keys with their types."""
    from rasp_compiler.compiler.numeric import output_codes, points_array

    outputs = {"ints": [0, 1, 2, -3], "bools and ints": [True, False, 1, 0], "floats": [0.0, -0.0, 0.5, 1.0],
               "mixed": [1, 1.0, True, "1", None, (1,)], "nan": [float("nan"), 1.0, 2.0],
               "tuples": [(1, "a"), (1, "b"), (0, "a")]}[pool]
    rng = random.Random(pool)
    for _ in range(30):
        k, n = rng.randint(1, 3), rng.randint(0, 40)
        pts = [(tuple(rng.choice([0.0, 0.25, -1.5, 3.0, 1e300]) for _ in range(k)), rng.choice(outputs))
               for _ in range(n)]
        want_xs = np.array([x for x, _ in pts], dtype=np.float64).reshape(n, k)
        got_xs = points_array(pts, k)
        assert got_xs.dtype == want_xs.dtype and np.array_equal(got_xs, want_xs)
        got, want = output_codes(pts), _codes_by_type_and_value(pts)
        assert (got is None) == (want is None)
        if want is not None:
            assert np.array_equal(got, want)


def test_rows_found_not_affine_are_not_fitted_again_and_the_weights_stay(monkeypatch):
    """An MLP op whose rows the lowering found not affine (``MapRows._count_units``) is not
    fitted again by the assembly (``blocks.mlp_weights``): tracr's shuffle-Dyck-2 has such ops,
    and its weights are those of an assembly that fits every op's rows again."""
    from rasp_compiler.compiler import blocks, compile_weights
    from rasp_compiler.compiler.lowering.map_rows import MapRows
    from rasp_compiler.pyapi import as_program, lib

    program = as_program(lib.make_shuffle_dyck(["()", "{}"]))
    fitted: list[int] = []
    real_affine, real_with_shared = blocks.affine, MapRows._with_shared

    def counted(rows):
        fitted.append(len(rows))
        return real_affine(rows)

    marked: list[str] = []

    def noted(self, op):
        op = real_with_shared(self, op)
        if getattr(op, "not_affine", False):
            marked.append(op.id)
        return op

    monkeypatch.setattr(blocks, "affine", counted)
    monkeypatch.setattr(MapRows, "_with_shared", noted)
    got = compile_weights(program, list("(){}a"), 10)
    assert marked, "no op of shuffle-Dyck-2 was found not affine"
    skipped = len(fitted)

    def forgotten(self, op):  # the assembly as before: every op's rows fitted again
        op = real_with_shared(self, op)
        op.not_affine = False
        return op

    fitted.clear()
    monkeypatch.setattr(MapRows, "_with_shared", forgotten)
    want = compile_weights(program, list("(){}a"), 10)
    assert len(fitted) > skipped
    assert got.config["weights_sha256"] == want.config["weights_sha256"]


def test_numerical_steps_read_only_the_outputs_beside_each_step():
    """``blocks._Output.steps`` of a numerical output: the differences ys[i + 1] - ys[i] at the
    steps, as the whole list converted to floats gives them."""
    from types import SimpleNamespace

    from rasp_compiler.compiler.blocks import _Output

    layout = SimpleNamespace(features={"y": SimpleNamespace(encoding="numerical")}, dim=lambda fid, v=None: 7)
    out = _Output(SimpleNamespace(target="y"), layout)
    rng = random.Random(54)
    for _ in range(50):
        ys = [rng.choice([0, 1, True, False, 0.5, -2.25, 1e300, 3]) for _ in range(rng.randint(1, 30))]
        at = np.array(changes(ys), dtype=np.intp)
        dims, w = out.steps(ys, at)
        yf = np.array([float(y) for y in ys], dtype=np.float64)
        assert np.array_equal(dims, np.full((len(at), 1), 7))
        assert w.shape == (len(at), 1) and np.array_equal(w, (yf[at + 1] - yf[at])[:, None])


def test_row_classes_equal_numpy_unique_along_rows():
    """``selector_blocks.row_classes`` gives ``np.unique(axis=0)``'s first occurrences and
    classes, on boolean score blocks (repeated rows, all alike, all distinct, no columns) and on
    another dtype (which it hands to ``np.unique``)."""
    from rasp_compiler.compiler.lowering.selector_blocks import row_classes

    rng = np.random.default_rng(55)
    shapes = [(int(rng.integers(1, 60)), int(rng.integers(0, 12))) for _ in range(200)]
    for n, k in shapes + [(5, 0), (40, 40)]:
        pool = rng.random((int(rng.integers(1, 6)), k)) < rng.random()
        matrix = pool[rng.integers(0, len(pool), size=n)]
        if rng.random() < 0.3:
            matrix = matrix.T  # (not contiguous: as ``blocks`` hands a key side over)
        for m in (matrix, matrix.astype(np.int64)):
            _, first, cls = np.unique(m, axis=0, return_index=True, return_inverse=True)
            got_first, got_classes = row_classes(m)
            assert got_first == first.tolist()
            assert got_classes == tuple(cls.ravel().tolist())


def test_a_selector_widths_contexts_share_one_list_per_width():
    """A selector width's conditional values (``AttentionOutputs._selector_width``): each
    context's list is [its width], one list object per width, as ``sinfo.shared_lists`` makes of
    a list per context (the contexts' choices are told apart by their lists' identity)."""
    from rasp_compiler.compiler.analysis import Analysis
    from rasp_compiler.compiler.analysis.sinfo import shared_lists
    from rasp_compiler.pyapi import as_program, lib

    for program in (lib.make_length(), lib.make_hist(), lib.make_frac_prevs(lib.tokens == "a")):
        an = Analysis(as_program(program), list("abc"), 12)
        for sid, info in an.info.items():
            if info.kind != "selector_width" or info.cond is None:
                continue
            want = shared_lists({ctx: [vals[0]] for ctx, vals in info.cond.items()})
            assert info.cond == want
            firsts = {}
            for ctx, vals in info.cond.items():
                assert vals is firsts.setdefault(vals[0], vals), (sid, ctx)


def test_step_pairs_are_laid_out_as_stack_lays_them():
    """``blocks._interleaved`` against ``np.stack(axis=1)`` and a reshape, and a categorical
    output's steps against ``Layout.dim`` of each value."""
    from types import SimpleNamespace

    from rasp_compiler.compiler.blocks import Layout, _interleaved, _Output
    from rasp_compiler.compiler.lowering import Feature

    rng = np.random.default_rng(56)
    for shape in [(1,), (7,), (5, 1), (4, 3)]:
        a, b = rng.random(shape), -rng.random(shape)
        want = np.stack([a, b], axis=1).reshape(2 * shape[0], *shape[1:])
        got = _interleaved(a, b)
        assert got.shape == want.shape and got.dtype == want.dtype and np.array_equal(got, want)
    values = [0, 1, 2, True, "a", (1, "b"), 2.5]
    layout = Layout([Feature("x", "numerical", [0.5], None, "map"),
                     Feature("y", "categorical", values, None, "map")])
    out = _Output(SimpleNamespace(target="y"), layout)
    pyrng = random.Random(56)
    for _ in range(30):
        ys = [pyrng.choice(values) for _ in range(pyrng.randint(2, 12))]
        at = np.array(changes(ys), dtype=np.intp)
        if not len(at):
            continue
        dims, w = out.steps(ys, at)
        want = np.array([[layout.dim("y", ys[i + 1]), layout.dim("y", ys[i])] for i in at.tolist()])
        assert np.array_equal(dims, want) and np.array_equal(w, np.tile([1.0, -1.0], (len(at), 1)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_an_order_whose_changes_are_counted_separates(dtype):
    """``numeric.projection`` takes an order whose output changes ``_order_cost`` counted without
    asking ``_separates`` again: wherever the count is given, ``_separates`` holds too."""
    from rasp_compiler.compiler import numeric as nm

    rng = np.random.default_rng(57)
    counted = separated = 0
    for _ in range(150):
        k = int(rng.integers(2, 4))
        n = int(rng.integers(2, 400))
        denominators = rng.integers(1, 40, size=(1, k))
        grid = rng.integers(-40, 41, size=(n, k)) / denominators
        if rng.random() < 0.3:  # some points a rounding apart
            grid[: n // 2] += rng.choice([0.0, 1e-9, 1e-13], size=(n // 2, k))
        xs_list = [tuple(float(v) for v in row) for row in grid]
        outputs = [int(v) for v in np.floor(grid.sum(axis=1) * rng.choice([0.5, 1.0, 3.0]))]
        pts = list(dict(zip(xs_list, outputs, strict=True)).items())
        xs, codes = nm.points_array(pts, k), nm.output_codes(pts)
        mags = [float(np.max(np.abs(xs[:, j]))) for j in range(k)]
        for forms in nm._lexicographic_orders(k):
            coef = nm._lexicographic(xs, forms)
            if coef is None or nm._order_cost(coef, xs, codes, mags, dtype) is None:
                continue
            counted += 1
            separated += nm._separates(coef, pts, mags, dtype, xs, codes)
    assert counted > 100 and separated == counted
