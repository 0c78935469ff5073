"""Helpers for MLPs over numerical inputs: which points a step MLP must separate, and how.

* ``projection(pts, mags, dtype)`` maps the numerical part ``x`` of every point to one number
  ``z = coef · x`` such that points with different outputs get distinct ``z`` values, far enough
  apart that the rounding of ``coef · x`` at ``dtype`` cannot swap them; None when no such
  projection is found.
* ``group_points`` / ``merge_groups``: the points per categorical combination, and the gate groups
  that combinations with the same points share.
* ``SharedSteps``: steps shared across the values of one categorical input (usually the position).
* ``step_units``: how many hidden units the per-combination step MLP needs.
"""

from __future__ import annotations

import itertools
import operator
from typing import Any

import numpy as np


def _first(p: tuple) -> Any:
    return p[0]


_coordinates, _output = operator.itemgetter(0), operator.itemgetter(1)  # of a (point, output) pair


def _same(a: Any, b: Any) -> bool:
    """Equal outputs (of the same type: 1, 1.0 and True are different outputs)."""
    return a == b and type(a) is type(b)


def output_codes(pts: list[tuple[tuple[float, ...], Any]]) -> np.ndarray | None:
    """An id per point, equal where the outputs are the same (``_same``), or None where an output
    is a float NaN (``_same`` tells it from itself, a dict key would not)."""
    ys = list(map(_output, pts))
    # outputs of one type (the usual case) are their own keys: equal exactly where ``_same``
    one_type = len(set(map(type, ys))) == 1
    keys = ys if one_type else list(zip(map(type, ys), ys, strict=True))
    distinct = dict.fromkeys(keys)
    if any(type(y) is float and y != y for y in (distinct if one_type else map(_output, distinct))):
        return None  # each NaN object is a key of its own
    ids = {k: i for i, k in enumerate(distinct)}
    return np.fromiter(map(ids.__getitem__, keys), dtype=np.int64, count=len(keys))


def points_array(pts: list[tuple[tuple[float, ...], Any]], k: int) -> np.ndarray:
    """The points' numerical coordinates (``k`` each), one row each.  Read flat by
    ``np.fromiter``: the same floats as ``np.array`` of the list of tuples, without the time
    ``np.array`` spends finding the nested list's shape."""
    flat = np.fromiter(itertools.chain.from_iterable(map(_coordinates, pts)), dtype=np.float64)
    return flat.reshape(len(pts), k)  # (raises, as before, where a point has other than k)


def _separates(coef: np.ndarray, pts: list[tuple[tuple[float, ...], Any]], mags: list[float],
               dtype: str, xs: np.ndarray | None = None, codes: np.ndarray | None = None) -> bool:
    """Whether z = coef · x keeps points with different outputs further apart than the rounding
    noise.  ``xs`` (``points_array``) and ``codes`` (``output_codes``), where given, are the
    points' coordinates and outputs already read (a projection tries several coefficients)."""
    eps = float(np.finfo(np.float32 if dtype == "float32" else np.float64).eps)
    noise = 64.0 * eps * float(np.sum(np.abs(coef) * np.asarray(mags, dtype=np.float64))) + 1e-300
    if len(pts) > 1:
        # one coordinate: z = coef * x exactly as np.dot computes it; only the close neighbours'
        # outputs need comparing (the same answer as the loop below, without a dot per point).
        # Several: z = xs @ coef may differ from a dot per point in the last bit, which moves a
        # gap by an ulp of z against a noise allowance of 64 float32 or float64 epsilons.
        if xs is None:
            xs = points_array(pts, len(coef))
        if len(coef) == 1:
            z = xs[:, 0] * float(coef[0])
        else:
            z = xs @ coef
        order = np.argsort(z, kind="stable")
        zs_ = z[order]
        close = np.nonzero(np.diff(zs_) <= noise)[0]
        if codes is not None:
            return bool(np.all(codes[order[close]] == codes[order[close + 1]]))
        return all(_same(pts[order[i]][1], pts[order[i + 1]][1]) for i in close.tolist())
    zs = sorted(((float(np.dot(coef, x)), y) for x, y in pts), key=lambda p: p[0])
    for (z0, y0), (z1, y1) in zip(zs, zs[1:], strict=False):
        if not _same(y0, y1) and z1 - z0 <= noise:
            return False
    return True


def projection(pts: list[tuple[tuple[float, ...], Any]], mags: list[float],
               dtype: str = "float32", relative: list[bool] | None = None,
               read: tuple[np.ndarray, np.ndarray | None] | None = None) -> np.ndarray | None:
    """A coefficient vector separating points with different outputs, or None.

    ``relative`` marks the coordinates that float rounds relative to their own size (a BOS
    attention weight 1/(w+1): see ``_relative_projection``); they are used only where the
    uniform noise bound finds no projection, so every other MLP keeps its weights."""
    found = _uniform_projection(pts, mags, dtype, read)
    if found is None and relative is not None and any(relative) and pts:
        return _relative_projection(pts, mags, relative, dtype)
    return found


def _uniform_projection(pts: list[tuple[tuple[float, ...], Any]], mags: list[float],
                        dtype: str, read: tuple[np.ndarray, np.ndarray | None] | None = None
                        ) -> np.ndarray | None:
    """``projection`` with every coordinate's rounding bounded by its largest magnitude; ``read``,
    where given, is the points' ``points_array`` and ``output_codes``."""
    k = len(mags)
    if k == 0:
        return np.zeros(0)
    if not pts:
        return np.ones(k)
    xs, codes = read if read is not None else (points_array(pts, k), output_codes(pts))
    candidates = [np.ones(k)]
    if k == 1:
        return candidates[0] if _separates(candidates[0], pts, mags, dtype, xs, codes) else None
    candidates.append(np.array([1.0] + [-1.0] * (k - 1)))
    for c in candidates:
        if _separates(c, pts, mags, dtype, xs, codes):
            return c
    # Neither sum nor difference separates: order the points lexicographically by a few linear
    # forms, the first one major.  Mixed radix over the coordinates (the last one major) came
    # first and is kept on ties; a form of all the coordinates as the major key (their sum or
    # difference, then one coordinate) is taken where it leaves fewer output changes, so fewer
    # step pairs.  The paper's Dyck-2 at a position where (i + 1) * (k / (i + 1)) is not k reads
    # depth + closes from two prefix means: along m1 - m2, then m1, it changes about 2n times
    # plus where the rounding does, against once per point of the n x n grid by mixed radix.
    orders = _lexicographic_orders(k)
    ids: dict[tuple, int] = {}
    ys = codes if codes is not None else \
        np.array([ids.setdefault((type(y), y), len(ids)) for _, y in pts], dtype=np.int64)
    ranked = []
    held: dict[bytes, tuple[float, float]] = {}
    for rank, forms in enumerate(orders):
        coef = _lexicographic(xs, forms, held)
        if coef is None:
            continue
        # the new orders must separate at float32 even in a float64 model: at float64's noise a
        # sum of two means split at 1e-9 took coefficients of 17,685 (800 times mixed radix's),
        # and the one-hot it stepped into carried 1e-8 into a mean (tests/test_regressions.py::
        # test_mean_over_a_tuple_one_hot_of_two_numbers)
        at = dtype if rank == 0 else "float32"
        cost = _order_cost(coef, xs, ys, mags, at)
        if cost is not None:
            ranked.append((cost, rank, coef, at, True))
        elif rank == 0:
            ranked.append((len(pts), rank, coef, at, False))   # checked exactly below, as before
    for _, _, coef, at, counted in sorted(ranked, key=lambda r: (r[0], r[1])):
        # an order whose changes were counted passed ``_separates``' own test there (the same z,
        # order, noise and output codes), unless the outputs have no codes (a NaN among them)
        if (counted and codes is not None) or _separates(coef, pts, mags, at, xs, codes):
            return coef
    # Mixed radix leaves a gap of only the first coordinate's smallest step between the blocks
    # of consecutive values of a later coordinate, below the rounding noise once that
    # coordinate's coefficient is large.  Wider gaps (a multiple of the span so far) cost a
    # larger coefficient, so each is checked on the points again (tracr's shuffle-Dyck-2 at 20).
    steps, spans = [], []
    for j in range(k):
        vals = np.unique(xs[:, j])
        steps.append(float(np.min(np.diff(vals))) if len(vals) > 1 else 1.0)
        spans.append(float(vals[-1] - vals[0]) if len(vals) > 1 else 0.0)
    for widen in (1.0, 4.0, 16.0):
        coef = np.zeros(k)
        coef[0] = 1.0
        acc = spans[0]
        for j in range(1, k):
            coef[j] = (acc * (1.0 + widen) + steps[0]) / steps[j]
            acc += coef[j] * spans[j]
        if _separates(coef, pts, mags, dtype, xs, codes):
            return coef
    return None


def _lexicographic_orders(k: int) -> list[list[np.ndarray]]:
    """The lexicographic orders ``projection`` tries: mixed radix over the coordinates (the last
    one major), then the sum or the difference as the major key and the coordinates after it."""
    eye = np.eye(k)
    orders = [[eye[j] for j in reversed(range(k))]]
    for major in (np.ones(k), np.array([1.0] + [-1.0] * (k - 1))):
        orders += [[major] + [eye[j] for j in reversed(range(k)) if j != first] for first in range(k)]
    return orders


def _relative_projection(pts: list[tuple[tuple[float, ...], Any]], mags: list[float],
                         relative: list[bool], dtype: str) -> np.ndarray | None:
    """``projection`` where the ``relative`` coordinates' rounding scales with their value.

    A width head's BOS weight 1/(w+1) is the quotient of equal exponentials: float rounds it
    relative to itself (measured: within half an epsilon of 1/(w+1) at max_len 192 and 256 in
    most_frequent), while the uniform bound charges every point the rounding of the largest
    value, 1/2.  most_frequent's ``key`` reads that weight and a 0/1 mean: along their sum the
    weights of w = 255 and 256 are 1/(256·257) apart, just under the uniform bound for the two
    coordinates at float32 and far above the relative one.  Candidates are the sum, the
    difference and the lexicographic orders, fewest output changes first."""
    k = len(mags)
    xs = np.array([x for x, _ in pts], dtype=np.float64).reshape(len(pts), k)
    ids: dict[tuple, int] = {}
    ys = np.array([ids.setdefault((type(y), y), len(ids)) for _, y in pts], dtype=np.int64)
    candidates = [np.ones(k)]
    if k > 1:
        candidates.append(np.array([1.0] + [-1.0] * (k - 1)))
        candidates += [c for c in (_lexicographic(xs, forms) for forms in _lexicographic_orders(k))
                       if c is not None]
    scale = np.where(np.asarray(relative, dtype=bool), np.abs(xs), np.asarray(mags, dtype=np.float64))
    eps = float(np.finfo(np.float32 if dtype == "float32" else np.float64).eps)
    ranked = []
    for rank, coef in enumerate(candidates):
        z = xs @ coef
        order = np.argsort(z, kind="stable")
        cost = int(np.count_nonzero(ys[order][1:] != ys[order][:-1]))
        ranked.append((cost, rank, coef, z, order))
    for _, _, coef, z, order in sorted(ranked, key=lambda r: (r[0], r[1])):
        # half of ``_separates``' allowance per point, so that two points of the uniform case
        # are apart by exactly that allowance
        err = 32.0 * eps * (scale @ np.abs(coef)) + 1e-300
        if _apart(z[order], err[order], ys[order]):
            return coef
    return None


def _apart(z: np.ndarray, err: np.ndarray, ys: np.ndarray) -> bool:
    """No two points (sorted by ``z``) with different outputs ``ys`` within the sum of their
    rounding allowances ``err``.  Allowances differ from point to point, so a pair of points
    that are not neighbours is checked too, wherever it is close enough to matter."""
    n = len(z)
    reach = np.searchsorted(z, z + err + float(np.max(err)), side="right")
    # the first point after each one with another output
    change = np.nonzero(ys[1:] != ys[:-1])[0] + 1
    nxt = np.full(n, n, dtype=np.int64)
    if len(change):
        pos = np.searchsorted(change, np.arange(n), side="right")
        has = pos < len(change)
        nxt[has] = change[pos[has]]
    for i in np.nonzero(nxt < reach)[0].tolist():
        j = np.arange(int(nxt[i]), int(reach[i]))
        bad = (ys[j] != ys[i]) & (z[j] - z[i] <= err[i] + err[j])
        if np.any(bad):
            return False
    return True


def _order_cost(coef: np.ndarray, xs: np.ndarray, ys: np.ndarray, mags: list[float], dtype: str
                ) -> int | None:
    """The output changes along z = coef · x (``ys``: an id per distinct output), or None when two
    points with different outputs are within the rounding noise of ``_separates`` (vectorised:
    the exact check runs once, on the ordering chosen)."""
    eps = float(np.finfo(np.float32 if dtype == "float32" else np.float64).eps)
    noise = 64.0 * eps * float(np.sum(np.abs(coef) * np.asarray(mags, dtype=np.float64))) + 1e-300
    z = xs @ coef
    order = np.argsort(z, kind="stable")
    differ = ys[order][1:] != ys[order][:-1]
    if np.any(differ & (np.diff(z[order]) <= noise)):
        return None
    return int(np.count_nonzero(differ))


def _lexicographic(xs: np.ndarray, forms: list[np.ndarray],
                   held: dict[bytes, tuple[float, float]] | None = None) -> np.ndarray | None:
    """``coef`` with ``coef · x`` ordering the points ``xs`` by ``forms[0] · x``, then by
    ``forms[1] · x``, …: each form's smallest step among the points outweighs the whole span of
    the forms after it (mixed radix, the existing one when the forms are the coordinates from the
    last to the first).  None when the weights are not finite.  ``held``: each form's (step, span)
    on these points, filled as they are found (the orders ``projection`` tries share their forms:
    of two numbers, 10 forms, 4 distinct)."""
    steps, spans = [], []
    for f in forms:
        got = held.get(f.tobytes()) if held is not None else None
        if got is None:
            got = _step_and_span(xs, f)
            if held is not None:
                held[f.tobytes()] = got
        steps.append(got[0])
        spans.append(got[1])
    least = len(forms) - 1
    coef = forms[least].astype(np.float64).copy()
    acc = spans[least]
    for j in reversed(range(least)):
        w = (acc + steps[least]) / steps[j]
        coef = coef + w * forms[j]
        acc += w * spans[j]
    return coef if np.all(np.isfinite(coef)) else None


def _step_and_span(xs: np.ndarray, f: np.ndarray) -> tuple[float, float]:
    """The smallest step between the distinct values of the form ``f · x`` over the points
    ``xs`` (1.0 where it has one value), and their span."""
    unit = np.count_nonzero(f) == 1 and float(np.max(f)) == 1.0
    vals = np.unique(xs[:, int(np.argmax(f))] if unit else xs @ f)
    # a form of several coordinates gives one value as floats a few ulps apart (5/22 - 20/22
    # and 0 - 15/22): those are one key, left to the forms after it to order
    gaps = np.diff(vals)
    if not unit and len(vals) > 1:
        gaps = gaps[gaps > 1e-9 * max(1.0, float(np.max(np.abs(vals))))]
    return (float(np.min(gaps)) if len(gaps) else 1.0,
            float(vals[-1] - vals[0]) if len(vals) > 1 else 0.0)


Points = list[tuple[tuple[float, ...], Any]]


def group_points(rows: list[tuple[tuple, Any]], num: list[int]) -> dict[tuple, Points]:
    """Rows grouped by their categorical arguments (the positions not in ``num``, in order): per
    combination, the (numerical arguments as floats, output) points in row order."""
    if len(num) == 1 and rows:
        got = _group_one_number(rows, num[0], len(rows[0][0]))
        if got is not None:
            return got
    groups: dict[tuple, Points] = {}
    if not rows:
        return groups
    cat = [k for k in range(len(rows[0][0])) if k not in num]
    argrows = list(map(_coordinates, rows))  # each row's arguments
    if num and not cat and set(map(type, argrows)) == {tuple} and set(map(len, argrows)) == {len(num)}:
        # numbers only (two balances): one group, each point's arguments in ``num``'s order
        if num == list(range(len(num))) and set(map(type, itertools.chain.from_iterable(argrows))) == {float}:
            xs = argrows  # already tuples of floats, in order
        else:
            pick = operator.itemgetter(*num)
            xs = [tuple(map(float, pick(args))) for args in argrows] if len(num) > 1 else \
                [(float(args[num[0]]),) for args in argrows]
        return {(): list(zip(xs, map(_output, rows), strict=True))}
    for args, y in rows:
        key = tuple(args[k] for k in cat)
        groups.setdefault(key, []).append((tuple(float(args[j]) for j in num), y))
    return groups


def _group_one_number(rows: list[tuple[tuple, Any]], j: int, arity: int) -> dict[tuple, Points] | None:
    """``group_points`` for the usual step MLP (one number, then one-hots), by slicing instead of a
    generator per row; None if some row is not a tuple of ``arity`` arguments."""
    groups: dict[tuple, Points] = {}
    for args, y in rows:
        if type(args) is not tuple or len(args) != arity:
            return None
        key = args[:j] + args[j + 1:]
        pts = groups.get(key)
        if pts is None:
            pts = groups[key] = []
        pts.append(((float(args[j]),), y))
    return groups


def sorted_by_projection(coef: np.ndarray, pts: Points) -> tuple[list[float], list[Any]]:
    """(z, outputs) of the points sorted by z = coef · x (stably), as
    ``sorted(((float(np.dot(coef, x)), y) for x, y in pts), key=z)`` lists them."""
    if len(coef) == 1 and pts:
        # one coordinate: np.dot is the one product coef * x, so one vectorised multiply and a
        # stable argsort give the same floats in the same order
        z = np.array([x[0] for x, _ in pts], dtype=np.float64) * coef[0]
        if np.all(np.isfinite(z)):
            order = np.argsort(z, kind="stable").tolist()
            zs = z.tolist()
            return [zs[i] for i in order], [pts[i][1] for i in order]
    zpts = sorted(((float(np.dot(coef, x)), y) for x, y in pts), key=lambda p: p[0])
    return [z for z, _ in zpts], [y for _, y in zpts]


def steps_along(coef: np.ndarray, pts: Points, read: tuple[np.ndarray, np.ndarray | None] | None = None
                ) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray]:
    """(outputs sorted by z = coef · x, the i where the output changes from ys[i] to ys[i + 1],
    z just before and just after each change): what ``sorted_by_projection`` and ``changes``
    give, with z as ``np.dot`` computes it.  Several coordinates: the points are sorted by the
    sum of the products, which may differ from a dot per point in the last bits; where every
    change lies across a gap far wider than that (a projection's gaps exceed the rounding noise,
    64 epsilons), the outputs along z are the same, and a dot per point is needed only for the
    points within that width of a change (tens of thousands of dots otherwise)."""
    if len(coef) > 1 and len(pts) > 1:
        got = _steps_at_changes(coef, pts, read)
        if got is not None:
            return got
    zs, ys = sorted_by_projection(coef, pts)
    at = np.array(changes(ys), dtype=np.intp)
    z = np.array(zs, dtype=np.float64)
    return ys, at, z[at], z[at + 1]


def _steps_at_changes(coef: np.ndarray, pts: Points, read: tuple[np.ndarray, np.ndarray | None] | None = None
                      ) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray] | None:
    """``steps_along`` for several coordinates, or None where a change is too close to tell."""
    xs, codes = read if read is not None else (points_array(pts, len(coef)), output_codes(pts))
    # the products summed elementwise, not ``xs @ coef``: a matrix-vector product of tens of
    # thousands of rows wakes OpenBLAS's second thread, which then spins for a while, tens of
    # CPU milliseconds per product on this machine's kind
    z = xs[:, 0] * float(coef[0])
    for j in range(1, len(coef)):
        z = z + xs[:, j] * float(coef[j])
    if codes is None or not np.all(np.isfinite(z)):
        return None
    order = np.argsort(z, kind="stable")
    zs = z[order]
    at = np.nonzero(codes[order][1:] != codes[order][:-1])[0]
    # a dot and that sum each round a sum of len(coef) products: within len(coef) epsilons
    # of the sum of their sizes of the exact value, so of each other
    eps = float(np.finfo(np.float64).eps)
    width = 16.0 * len(coef) * eps * float(np.sum(np.abs(coef) * np.max(np.abs(xs), axis=0))) + 1e-300
    if len(at) and not np.all(zs[at + 1] - zs[at] > 2.0 * width):
        return None
    idx = order.tolist()
    starts = [0] + (at + 1).tolist()  # where each run of one output begins, and ends
    ends = at.tolist() + [len(pts) - 1]
    # the points within 2 widths of each change, on either side (one search for all changes)
    firsts = np.searchsorted(zs, zs[at] - 2.0 * width, side="left").tolist()
    lasts = (np.searchsorted(zs, zs[at + 1] + 2.0 * width, side="right") - 1).tolist()
    z0, z1 = np.empty(len(at)), np.empty(len(at))
    for r, i in enumerate(at.tolist()):
        first = max(starts[r], firsts[r])
        z0[r] = max(float(np.dot(coef, pts[idx[m]][0])) for m in range(first, i + 1))
        last = min(ends[r + 1], lasts[r])
        z1[r] = min(float(np.dot(coef, pts[idx[m]][0])) for m in range(i + 1, last + 1))
    return list(map(_output, map(pts.__getitem__, idx))), at, z0, z1


def changes(ys: list[Any]) -> list[int]:
    """The i with ys[i + 1] a different output from ys[i] (see ``_same``)."""
    return [i for i, (a, b) in enumerate(zip(ys, ys[1:], strict=False))
            if not (b == a and type(b) is type(a))]


def merge_groups(groups: dict[tuple, Points]) -> list[tuple[tuple[tuple, ...], Points]]:
    """Gate groups of a step MLP: per categorical combination, the (numerical point, output) list.
    Combinations that differ in one categorical coordinate only and carry the same points share one
    gate that reads the *set* of that coordinate's values (exactly one of a one-hot's entries is 1,
    so the sum over a set is 1 or 0): dyck2's `level` steps once per token class, not per token.
    The coordinate that merges most is used.  Returns (per-coordinate value tuples, points), in a
    deterministic order."""
    from rasp_compiler.compiler.values import value_key

    keys = {c: tuple(value_key(v) for v in c) for c in groups}  # each combination's key, once
    combos = sorted(groups, key=keys.__getitem__)
    if not combos or not combos[0]:
        return [(tuple((v,) for v in c), groups[c]) for c in combos]
    ykey: dict[tuple, tuple] = {}  # value_key of each distinct output (outputs repeat a lot)

    def out_key(y: Any) -> tuple:
        if type(y) not in (str, int, float, bool):  # (1,) and (True,) would share a dict entry
            return value_key(y)
        ck = (type(y), y)
        k = ykey.get(ck)
        if k is None:
            k = ykey[ck] = value_key(y)
        return k

    sig = {c: tuple([(x, out_key(y)) for x, y in sorted(groups[c], key=_first)]) for c in combos}
    best: list[tuple[tuple[tuple, ...], list]] | None = None
    for coord in range(len(combos[0])):
        merged: dict[tuple, list] = {}
        for c in combos:
            ck = keys[c]
            merged.setdefault((ck[:coord] + ck[coord + 1:], sig[c]), []).append(c)
        if best is not None and len(merged) >= len(best):
            continue
        best = []
        for members in merged.values():
            first = members[0]
            sets = tuple((v,) if k != coord else tuple(m[coord] for m in members)
                         for k, v in enumerate(first))
            best.append((sets, groups[first]))
    return best  # type: ignore[return-value]


def _first_x(p: tuple) -> float:
    return p[0][0]


class SharedSteps:
    """The step events of a one-number MLP with categorical context, shared across contexts.

    A step MLP gives every categorical combination its own step pairs: round((i+1)·x) over 64
    positions i is some 8,000 pairs, one per (i, k).  But the *events* (the output changing from
    a to b as x grows) repeat across the values of one categorical coordinate, the *free* one; only
    their thresholds differ.  One step pair per event can serve every value of the free coordinate,
    its threshold set by that value's one-hot weight (a bias that depends on the value); values
    without the event get a threshold beyond every x.  The other coordinates gate, as before.

    ``partitions``: per combination of the non-free coordinates, (the groups: free value -> the
    output at the smallest x), and the events: key (a, b, occurrence) -> {free value: (threshold,
    gap, a, b)}."""

    def __init__(self, groups: dict[tuple, Points], free: int) -> None:
        from rasp_compiler.compiler.values import value_key

        def key_of(y: Any) -> Any:   # equal outputs of one type share a key (as ``_same``)
            return (type(y), y) if type(y) in (str, int, float, bool) else value_key(y)

        self.free = free
        self.partitions: dict[tuple, tuple[dict, dict]] = {}
        for key, pts in groups.items():
            rest = key[:free] + key[free + 1:]
            members, events = self.partitions.setdefault(rest, ({}, {}))
            ordered = sorted(pts, key=_first_x)   # stable: as sorted_by_projection with coef 1
            zs = [p[0][0] for p in ordered]
            ys = [p[1] for p in ordered]
            members[key[free]] = ys[0]
            seen: dict[tuple, int] = {}
            for i in changes(ys):
                ab = (key_of(ys[i]), key_of(ys[i + 1]))
                n = seen[ab] = seen.get(ab, -1) + 1
                events.setdefault((ab, n), {})[key[free]] = ((zs[i] + zs[i + 1]) / 2.0, zs[i + 1] - zs[i],
                                                             ys[i], ys[i + 1])

    def units(self) -> int:
        """Hidden units: a constant per combination, a step pair per event of each partition."""
        return sum(len(members) + 2 * len(events) for members, events in self.partitions.values())


def shared_steps(groups: dict[tuple, Points]) -> SharedSteps | None:
    """``SharedSteps`` with the categorical coordinate of most distinct values as the free one
    (the position, where there is one), or None when there is no categorical coordinate."""
    if not groups:
        return None
    arity = len(next(iter(groups)))
    if arity == 0:
        return None
    free = max(range(arity), key=lambda k: (len({key[k] for key in groups}), -k))
    return SharedSteps(groups, free)


def shared_projected_steps(groups: dict[tuple, Points], mags: list[float], dtype: str
                           ) -> tuple[SharedSteps, np.ndarray, dict[tuple, Points]] | None:
    """``SharedSteps`` for several numbers: the groups that one common projection (the sum or
    the difference of the numbers, whichever separates more groups) separates share their steps
    along z = coef · x, as one number's do; the other groups are returned, to be stepped one by
    one.  None when no group is separated or there is no categorical coordinate.  The paper's
    Dyck-2 reads `depth + closes` from two prefix means, the index and the token: along m1 - m2
    the change from r to r + 1 is one event at every position whose means give whole numbers."""
    k = len(mags)
    if k < 2 or not groups or not next(iter(groups)):
        return None
    coefs = (np.ones(k), np.array([1.0] + [-1.0] * (k - 1)))
    eps = float(np.finfo(np.float32 if dtype == "float32" else np.float64).eps)
    ok: tuple[list[tuple], list[tuple]] = ([], [])
    zs: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    for key, pts in groups.items():
        xs = np.array([x for x, _ in pts], dtype=np.float64).reshape(len(pts), k)
        z2 = []
        for c, coef in enumerate(coefs):
            # ``_separates`` on the group, with its points' array built once for both projections
            noise = 64.0 * eps * float(np.sum(np.abs(coef) * np.asarray(mags, dtype=np.float64))) + 1e-300
            z = xs @ coef
            order = np.argsort(z, kind="stable")
            close = np.nonzero(np.diff(z[order]) <= noise)[0].tolist()
            if all(_same(pts[order[i]][1], pts[order[i + 1]][1]) for i in close):
                ok[c].append(key)
            z2.append(z)
        zs[key] = (z2[0], z2[1])
    c = 0 if len(ok[0]) >= len(ok[1]) else 1
    coef = coefs[c]
    if not ok[c]:
        return None
    held = set(ok[c])
    projected = {key: [((z,), y) for z, (_, y) in zip(zs[key][c].tolist(), groups[key], strict=True)]
                 for key in ok[c]}
    shared = shared_steps(projected)
    if shared is None:
        return None
    return shared, coef, {key: pts for key, pts in groups.items() if key not in held}


# one gate group of a step MLP: its categorical value sets (``merge_groups``), its projection's
# coefficients, its points' outputs sorted by z = coef · x, where they change, and z on either
# side of each change (``steps_along``)
StepGroup = tuple[tuple[tuple, ...], np.ndarray, list[Any], np.ndarray, np.ndarray, np.ndarray]


def step_groups(groups: dict[tuple, Points], mags: list[float], dtype: str,
                relative: list[bool] | None = None) -> list[StepGroup] | None:
    """The gate groups of the per-combination step MLP over ``groups``, each with its projection
    and its points along it, in ``merge_groups``' order; None where no projection separates
    (the first group without one ends the search).  What ``blocks._step_mlp`` builds its units
    from: the lowering counts the units on it and hands it to the assembly with the op, so the
    projections of a table of tens of thousands of rows are found once, not twice."""
    out = []
    for sets, pts in merge_groups(groups):
        read = (points_array(pts, len(mags)), output_codes(pts)) if len(mags) > 1 and pts else None
        coef = projection(pts, mags, dtype, relative, read)
        if coef is None:
            return None
        out.append((sets, coef, *steps_along(coef, pts, read)))
    return out


def step_units(groups: dict[tuple, Points], mags: list[float], dtype: str,
               relative: list[bool] | None = None) -> int | None:
    """Hidden units of the per-combination step MLP over ``groups`` (a constant and a step pair
    per change along each merged group's projection); None where no projection separates."""
    plan = step_groups(groups, mags, dtype, relative)
    return None if plan is None else plan_units(plan)


def plan_units(plan: list[StepGroup]) -> int:
    """Hidden units of the step MLP of ``step_groups``' plan."""
    return sum(1 + 2 * len(at) for _, _, _, at, _, _ in plan)
