"""Tables: exact decompositions of a map's value table, each an MLP construction the lowering
can choose instead of one hidden unit per value combination.

* ``affine``: y = w·x + c on every row (one unit per numerical input);
* ``separable``: y = c + Σ g_j(x_j), one function per input (steps per input, O(values) units);
* ``priority_split``: y = X if u ∈ U* else h(v) (an override score plus a one-hot, output only).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from rasp_compiler.compiler.values import value_key


def priority_split(rows: list[tuple[tuple, Any]], k: int) -> tuple[Any, set, dict] | None:
    """(X, U*, h) with y = X for every row whose k-th argument is in U*, and y = h(other argument)
    for every other row; None when the table has no such form (both parts non-empty)."""
    by_u: dict[tuple, list[tuple[Any, Any]]] = {}
    for args, y in rows:
        by_u.setdefault(value_key(args[k]), []).append((args[1 - k], y))
    constant = {}
    for uk, pairs in by_u.items():
        ys = {value_key(y): y for _, y in pairs}
        if len(ys) == 1:
            constant[uk] = next(iter(ys.values()))
    for x_value in {value_key(y): y for y in constant.values()}.values():
        overriding = {uk for uk, y in constant.items() if value_key(y) == value_key(x_value)}
        if len(overriding) == len(by_u):
            continue
        rest: dict[tuple, Any] = {}
        ok = True
        for uk, pairs in by_u.items():
            if uk in overriding:
                continue
            for v, y in pairs:
                held = rest.setdefault(value_key(v), y)
                if value_key(held) != value_key(y):
                    ok = False
                    break
            if not ok:
                break
        if ok:
            return x_value, overriding, rest
    return None


def affine(rows: list[tuple[tuple, Any]]) -> tuple[np.ndarray, float] | None:
    """(w, c) with y = w·x + c exactly on every row, if such exist.

    A large table is first fitted on its probe rows (``_probes``): an affine fit of every row
    within the tolerance t fits the k probe rows within t each, so within sqrt(k)·t in the
    least-squares sense, and the probe's own least-squares fit does no worse.  Where the probe's
    fit misses by more (a thousand times that, for the solver's rounding), no fit of every row
    exists, and the table is not read whole (tracr's shuffle-Dyck-2 at max_len 20:
    ``indicator(any_negative)`` over its two balances, 10,017 rows, a step of each)."""
    if not rows:
        return np.zeros(0), 0.0
    y = np.array([float(v) for _, v in rows], dtype=np.float64)
    tol = 1e-9 * (1 + np.max(np.abs(y), initial=0.0))
    for probe in _probes(len(rows)):
        design = _affine_design([rows[k][0] for k in probe])
        sol, *_ = np.linalg.lstsq(design, y[probe], rcond=None)
        if np.max(np.abs(design @ sol - y[probe])) > 1e3 * math.sqrt(len(probe)) * tol:
            return None
    design = _affine_design([args for args, _ in rows])
    sol, *_ = np.linalg.lstsq(design, y, rcond=None)
    # (in blocks: a product of 10,000 rows wakes OpenBLAS's other threads, which then spin)
    if np.max(np.abs(design @ sol - y), initial=0.0) > tol:
        return None
    w = sol[:-1]
    w[np.abs(w) < 1e-12] = 0.0
    return w, float(sol[-1])


# a table of more than 4 times this many rows is first checked on its first and last this many
# rows (``_probes``), each a block of whole contexts' assignments, where rectangles occur
PROBE_ROWS = 512
# ... and, before that, one of more than 4 times this many on its first and last this many: most
# tables of a thousand rows are neither affine nor separable, and the small probe rules them out
# for a tenth of a whole fit
SMALL_PROBE_ROWS = 64


def _probes(n: int) -> list[np.ndarray]:
    """The row sets of a table of ``n`` rows that ``affine`` and ``separable`` check first, the
    smaller first: its first and last ``SMALL_PROBE_ROWS`` and its first and last ``PROBE_ROWS``,
    each where the table has more than 4 times as many rows (a check of the whole table passes
    on any of its rows: a probe that fails spares the whole table, one that passes decides
    nothing)."""
    return [np.concatenate([np.arange(size), np.arange(n - size, n)])
            for size in (SMALL_PROBE_ROWS, PROBE_ROWS) if n > 4 * size]


def _affine_design(argrows: list[tuple]) -> np.ndarray:
    """The rows' arguments as floats, and a column of ones."""
    if set(map(type, itertools.chain.from_iterable(argrows))) == {float} and len(set(map(len, argrows))) == 1:
        # already floats: read flat (``numeric.points_array``: the same floats, in half the time)
        flat = np.fromiter(itertools.chain.from_iterable(argrows), dtype=np.float64)
        x = flat.reshape(len(argrows), -1)
    else:
        x = np.array([[float(a) for a in args] for args in argrows], dtype=np.float64)
    return np.hstack([x, np.ones((len(argrows), 1))])


def separable(rows: list[tuple[tuple, Any]], n_inputs: int
              ) -> tuple[list[dict[tuple, tuple[Any, float]]], float] | None:
    """Univariate parts g_j (value -> number, each 0 at its smallest value) and a constant c with
    y = c + sum_j g_j(x_j) exactly (to 1e-9 relative) on every row, if such exist.

    Parts are keyed by ``value_key`` (1, 1.0 and True are different one-hot entries but one
    number).  The unknowns g_j(v) solve the normal equations of the 0/1 design matrix (one column
    per input value: a few hundred columns even when the rows number N^2), then every row is
    checked exactly.

    A large table's rectangles are first checked on its probe rows (``_probes``): a fit within
    e = 1e-9·(1 + max|y|) of every row (``_fit``'s test) makes the differences that
    ``_rectangles_hold`` compares agree within 4e, under its tolerance of 10e, on any rows, so
    where the probe's fail, no fit exists and the whole table is not read (tracr's
    shuffle-Dyck-2 at max_len 20: ``indicator(any_negative)``, 10,017 rows)."""
    if not rows or n_inputs == 0:
        return None
    try:
        y = np.array([float(v) for _, v in rows], dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if not np.all(np.isfinite(y)):
        return None
    tol = _rectangle_tolerance(y)
    for probe in _probes(len(rows)):
        if not _rectangles_hold(_columns([rows[k] for k in probe], n_inputs)[2], y[probe], tol):
            return None
    cols, raw, idx, total = _columns(rows, n_inputs)
    if total > 4000 or not _rectangles_hold(idx, y, tol):
        return None
    ata = np.zeros((total + 1, total + 1))
    atb = np.zeros(total + 1)
    full = np.hstack([idx, np.full((len(rows), 1), total)])  # the last column: the constant
    for j in range(n_inputs + 1):
        for k in range(n_inputs + 1):
            np.add.at(ata, (full[:, j], full[:, k]), 1.0)
        np.add.at(atb, full[:, j], y)
    # gauge: each part is 0 at its smallest value, the rest goes into the constant.  Where that
    # determines the parts (one input, or two whose values the rows connect), a direct solve finds
    # them far faster than least squares (tracr's shuffle-Dyck-2 over '()[]x' at 64: 2,523
    # columns, 2.2 s by SVD); elsewhere least squares picks the smallest of the solutions
    gauge = [cols[j][min(cols[j])] for j in range(n_inputs)]
    fit = None
    if n_inputs == 1 or (n_inputs == 2 and _connected(idx, total)):
        try:
            fit = _fit(_solve_gauged(ata, atb, cols, gauge), cols, raw, gauge, idx, y)
        except np.linalg.LinAlgError:
            pass
    if fit is None:
        fit = _fit(np.linalg.lstsq(ata, atb, rcond=None)[0], cols, raw, gauge, idx, y)
    return fit


def _columns(rows: list[tuple[tuple, Any]], n_inputs: int
             ) -> tuple[list[dict[tuple, int]], list[dict[tuple, Any]], np.ndarray, int]:
    """``separable``'s design: per input, its values' columns (by ``value_key``, numbered in the
    order the rows first hold them, row by row and input by input) and each one's first value;
    each row's column per input; the number of columns.  ``value_key`` runs once per distinct
    (type, value) of an input, not once per row (tens of thousands of rows)."""
    argrows = [args for args, _ in rows]
    if any(type(a) is not tuple or len(a) != n_inputs for a in argrows):
        return _columns_row_by_row(rows, n_inputs)
    n = len(argrows)
    keys_by_input, firsts = [], []
    for col in zip(*argrows, strict=True):
        cks = list(zip(map(type, col), col, strict=True))
        first_row = dict(zip(reversed(cks), range(n - 1, -1, -1), strict=True))  # the earliest wins
        key_of = {ck: value_key(ck[1]) for ck in first_row}
        keys_by_input.append(list(map(key_of.__getitem__, cks)))
        first: dict[tuple, int] = {}  # value_key -> the first row holding it
        for ck, r in first_row.items():
            k = key_of[ck]
            if r < first.get(k, n):
                first[k] = r
        firsts.append(first)
    order = sorted((r, j, k) for j, first in enumerate(firsts) for k, r in first.items())
    cols: list[dict[tuple, int]] = [{} for _ in range(n_inputs)]
    raw: list[dict[tuple, Any]] = [{} for _ in range(n_inputs)]
    for c, (r, j, k) in enumerate(order):
        cols[j][k] = c
        raw[j][k] = argrows[r][j]
    idx = np.empty((n, n_inputs), dtype=np.int64)
    for j, keys in enumerate(keys_by_input):
        idx[:, j] = np.fromiter(map(cols[j].__getitem__, keys), dtype=np.int64, count=n)
    return cols, raw, idx, len(order)


def _columns_row_by_row(rows: list[tuple[tuple, Any]], n_inputs: int
                        ) -> tuple[list[dict[tuple, int]], list[dict[tuple, Any]], np.ndarray, int]:
    """``_columns`` one argument at a time (rows that are not tuples of ``n_inputs``)."""
    cols: list[dict[tuple, int]] = [{} for _ in range(n_inputs)]
    raw: list[dict[tuple, Any]] = [{} for _ in range(n_inputs)]
    idx = np.empty((len(rows), n_inputs), dtype=np.int64)
    total = 0
    for r, (args, _) in enumerate(rows):
        for j, a in enumerate(args):
            k = value_key(a)
            c = cols[j].get(k)
            if c is None:
                c = cols[j][k] = total
                raw[j][k] = a
                total += 1
            idx[r, j] = c
    return cols, raw, idx, total


def _connected(idx: np.ndarray, total: int) -> bool:
    """Whether the rows join all ``total`` values into one component (values are joined when a
    row holds both): smallest labels spread along the rows, with pointer jumping, until stable."""
    labels = np.arange(total)
    while True:
        row_min = labels[idx].min(axis=1)
        spread = labels.copy()
        for j in range(idx.shape[1]):
            np.minimum.at(spread, idx[:, j], row_min)
        spread = spread[spread]
        if np.array_equal(spread, labels):
            return bool(np.all(labels == 0))
        labels = spread


def _solve_gauged(ata: np.ndarray, atb: np.ndarray, cols: list[dict[tuple, int]], gauge: list[int]
                  ) -> np.ndarray:
    """The normal equations solved with each gauge column's unknown 0 (regular when that fixes
    the parts).  Every row holds one value of each input, so the block of the input with the most
    values is diagonal: it is eliminated first (a Schur complement), and only the other inputs'
    values and the constant are solved for together."""
    n = len(atb)
    widest = max(range(len(cols)), key=lambda j: len(cols[j]))
    kept = np.ones(n, dtype=bool)
    kept[gauge] = False
    in_u = np.zeros(n, dtype=bool)
    in_u[list(cols[widest].values())] = True
    u, v = np.flatnonzero(in_u & kept), np.flatnonzero(~in_u & kept)
    d = np.diag(ata)[u]  # each value's row count: at least 1
    b = ata[np.ix_(u, v)]
    b_over_d = b / d[:, None]
    x_v = np.linalg.solve(ata[np.ix_(v, v)] - b.T @ b_over_d, atb[v] - b_over_d.T @ atb[u])
    sol = np.zeros(n)
    sol[v] = x_v
    sol[u] = (atb[u] - b @ x_v) / d
    return sol


def _fit(sol: np.ndarray, cols: list[dict[tuple, int]], raw: list[dict[tuple, Any]], gauge: list[int],
         idx: np.ndarray, y: np.ndarray) -> tuple[list[dict[tuple, tuple[Any, float]]], float] | None:
    """``separable``'s parts and constant from a solution of its normal equations, moved to its
    gauge and snapped to integers where solver noise is all that separates them; None unless
    they give every row's value."""
    total = len(sol) - 1
    const = float(sol[total])
    parts: list[dict[tuple, tuple[Any, float]]] = []
    for j, ref in enumerate(gauge):
        shift = float(sol[ref])
        const += shift
        parts.append({k: (raw[j][k], float(sol[c]) - shift) for k, c in cols[j].items()})

    def snap(v: float) -> float:  # solver noise off integers (the usual case): exact weights
        r = float(np.round(v))
        return r if abs(v - r) <= 1e-9 * (1.0 + abs(v)) else v

    const = snap(const)
    parts = [{k: (a, snap(v)) for k, (a, v) in p.items()} for p in parts]
    g = np.zeros(total)
    for j in range(len(gauge)):
        for k, c in cols[j].items():
            g[c] = parts[j][k][1]
    fitted = const + g[idx].sum(axis=1)
    if not np.all(np.isfinite(fitted)) or np.max(np.abs(fitted - y)) > 1e-9 * (1.0 + np.max(np.abs(y))):
        return None
    return parts, const


def _rectangle_tolerance(y: np.ndarray) -> float:
    return 1e-8 * (1.0 + float(np.max(np.abs(y), initial=0.0)))


def _rectangles_hold(idx: np.ndarray, y: np.ndarray, tol: float | None = None) -> bool:
    """A necessary condition of ``separable``, in one pass over the rows: for each input j and its
    most frequent value a*, y(a, rest) - y(a*, rest) is one number for every rest of the other
    inputs where both rows occur (g_j(a) - g_j(a*)).  A table that fails it is not separable, so
    the normal equations (cubic in the number of values: 3.5 s for two inputs of 981 values at
    75,000 rows) are not solved for it.  ``tol`` defaults to ``_rectangle_tolerance(y)``."""
    tol = _rectangle_tolerance(y) if tol is None else tol
    n = idx.shape[1]
    rows = np.arange(len(idx))
    for j in range(n):
        col = idx[:, j]
        vals, counts = np.unique(col, return_counts=True)
        ref = vals[int(np.argmax(counts))]
        # the rest of each row as one number (equal rests, equal numbers)
        rest = np.unique(np.delete(idx, j, axis=1), axis=0, return_inverse=True)[1].reshape(-1) \
            if n > 1 else np.zeros(len(idx), dtype=np.int64)
        is_ref = col == ref
        last_ref = np.full(int(rest.max(initial=0)) + 1, -1, dtype=np.int64)  # per rest: its last a* row
        np.maximum.at(last_ref, rest[is_ref], rows[is_ref])
        k = np.nonzero(~is_ref & (last_ref[rest] >= 0))[0]
        d = y[k] - y[last_ref[rest[k]]]
        # g_j(a) - g_j(a*) as each value's first such row gives it, against every other row's
        _, first, which = np.unique(col[k], return_index=True, return_inverse=True)
        if np.any(np.abs(d[first][which.reshape(-1)] - d) > tol):
            return False
    return True
