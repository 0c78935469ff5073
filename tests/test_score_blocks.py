"""The real-valued compiler's score blocks: ``_distinct`` and ``_indexer`` (dict lookups, so that U
at L = 4,096 compiles in seconds: linear searches took 127 of its 149 s) agree with ``_index``,
the one-by-one comparison they replace, on every kind of value a position can hold."""

from __future__ import annotations

import numpy as np

from rasp_compiler.compiler.real.score_blocks import _distinct, _index, _indexer


def _distinct_linear(vals):
    out = []
    for v in vals:
        if _index(out, v) < 0:
            out.append(v)
    return out


def test_distinct_and_indexer_agree_with_the_linear_search() -> None:
    nan = float("nan")
    vals = [3, 3.0, -0.0, 0, 2.5, np.float64(2.5), 2.5, True, 1, 1.0, False, "a", "a", None, None,
            nan, nan, (1, 2), (1, 2), [1], [1], np.int64(4), 4, 4.0, -7, 1e300, 1e300]
    got, want = _distinct(vals), _distinct_linear(vals)
    assert len(got) == len(want) and all(g is w for g, w in zip(got, want, strict=True))
    index = _indexer(got)
    probes = vals + [5, 5.0, "b", 2.25, np.float64(3.0), (2, 1), nan]
    assert [index(v) for v in probes] == [_index(got, v) for v in probes]
    at = next(i for i, g in enumerate(got) if g is vals[21])   # np.int64(4): not an int, its own value
    assert index(3.0) == 0 and index(np.int64(4)) == at and index(4.0) != at
