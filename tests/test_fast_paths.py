"""Fast paths must give exactly what the slow, obvious code gives.

* ``selectors.atom_matrix`` ranks values and compares ranks with NumPy; the reference compares every
  (query, key) pair with the interpreter's operator semantics (``selectors.compare``).
* ``runtime.Transformer`` runs large batches in chunks (a bounded memory peak); a chunked run must
  equal an unchunked one.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from rasp_compiler.compiler import selectors as sl

OPS = ["==", "!=", "<", ">", "<=", ">="]


def _reference(atom: sl.Atom, qvalues: list, kvalues: list) -> np.ndarray:
    m = np.array([[sl.compare(atom.op, k, q) for k in kvalues] for q in qvalues], dtype=bool)
    m = m.reshape(len(qvalues), len(kvalues))
    return ~m if atom.negated else m


VALUE_POOLS = {
    "ints": [-3, -1, 0, 1, 2, 5, 2**60 + 1, 2**60],
    "floats": [-2.5, -0.0, 0.0, 0.1, 1 / 3, 1.0, 2.0, math.inf, -math.inf, 1e-300],
    "mixed_numbers": [True, False, 0, 1, 1.0, 0.5, 2, 2**53 + 1, float(2**53), -7],
    "strings": ["", "a", "b", "ab", "B", "-", "é", "a\x00"],
    "mixed_types": ["a", 1, 2.5, True, "1"],
    "nan": [float("nan"), 1.0, 2],
    "tuples": [(1, "a"), (0, "b"), (1, "b")],
}


@pytest.mark.parametrize("pool", sorted(VALUE_POOLS))
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("negated", [False, True])
def test_atom_matrix_equals_pairwise_compare(pool: str, op: str, negated: bool) -> None:
    rng = random.Random(f"{pool}{op}{negated}")
    values = VALUE_POOLS[pool]
    atom = sl.Atom("s", "k", "q", op, negated)
    for _ in range(20):
        qv = [rng.choice(values) for _ in range(rng.randint(0, 6))]
        kv = [rng.choice(values) for _ in range(rng.randint(0, 6))]
        got = sl.atom_matrix(atom, qv, kv)
        want = _reference(atom, qv, kv)
        assert got.shape == want.shape
        assert got.dtype == np.bool_
        assert np.array_equal(got, want), (qv, kv)


# -- chunked forward ---------------------------------------------------------------------------------
def _forward_with(model, chunk: int, inputs: list):
    old = model.module.chunk_elements
    model.module.chunk_elements = chunk
    try:
        return model.forward(inputs)
    finally:
        model.module.chunk_elements = old


@pytest.mark.parametrize("path, vocab", [("programs/dyck1.rasp", "()a"), ("programs/sort.rasp", "abc")])
def test_chunked_forward_equals_unchunked(path: str, vocab: str) -> None:
    import torch

    from rasp_compiler.compiler import compile_program
    from rasp_compiler.compiler.checking import random_inputs
    from rasp_compiler.lang import load_program

    torch.set_num_threads(1)
    model = compile_program(load_program(path), list(vocab), 8)
    assert any(model.mlp_sizes) and any(model.heads_per_layer)
    inputs = random_inputs(list(vocab), 8, 37, seed=3) + [[vocab[0]], list(vocab * 3)[:8]]
    whole = _forward_with(model, 1 << 40, inputs)

    # Bit for bit, except where a layer keeps its MLP in float64 (config "mlp_dtype"): there BLAS
    # may sum in another order for another slice shape, and a 1e-13 residue on a 0 survives the
    # rounding back to float32.  The decoded outputs are the same either way.
    wide = any(lc.get("mlp_dtype") for lc in model.config["layers"])

    def same(a: torch.Tensor, b: torch.Tensor) -> bool:
        return torch.allclose(a, b, rtol=0.0, atol=1e-9) if wide else torch.equal(a, b)

    # 1: one input per slice and one position per MLP slice; 1000: uneven slices of both
    for chunk in (1, 1000, 7 * max(model.mlp_sizes) + 3):
        assert same(_forward_with(model, chunk, inputs), whole), chunk
    model.module.chunk_elements = 1
    assert model.run(inputs) == [model.decode(whole[i:i + 1], [len(x)])[0] for i, x in enumerate(inputs)]
    # the trace path slices its MLPs too, and gives the same logits
    assert same(model.trace(inputs)["logits"], whole)


@pytest.mark.parametrize("path, vocab", [("programs/dyck2.rasp", "(){}a"), ("programs/sort.rasp", "abc"),
                                         ("programs/matmul.rasp", None)])
def test_sparse_mlp_products_equal_dense_ones(monkeypatch, path: str, vocab: str | None) -> None:
    """Large, mostly-zero MLP weights are multiplied as CSR matrices on a CPU (the "csr" path of
    ``Transformer.explain``); forced on every MLP weight here, the logits match the dense products
    to the summation order and decode alike, in any slicing."""
    import torch

    import rasp_compiler.runtime as runtime
    from rasp_compiler.compiler import compile_program
    from rasp_compiler.compiler.checking import random_inputs
    from rasp_compiler.lang import load_program

    torch.set_num_threads(1)
    if vocab is None:  # real-valued tokens: a gated MLP
        model = compile_program(load_program(path), None, 10, dtype="float64", input_range=(-1, 1))
        rng = random.Random(2)
        inputs = [[rng.uniform(-1, 1) for _ in range(10)] for _ in range(9)]
    else:
        model = compile_program(load_program(path), list(vocab), 12)
        inputs = random_inputs(list(vocab), 12, 40, seed=4)
    dense = model.forward(inputs)
    for name, value in (("COLUMNS_MAX_SHARE", 1.0), ("CSR_MIN_ELEMENTS", 1), ("CSR_MAX_DENSITY", 1.0),
                        ("_two_terms_at_most", lambda w: True)):
        monkeypatch.setattr(runtime, name, value)
    model.module._prepared = None  # prepared again under the forced limits
    paths = {e["tensor"]: e["path"] for e in model.module.explain()}
    mlp = [n for n in paths if ".mlp.W_" in n]
    assert mlp and all(paths[n] == "csr" for n in mlp)
    for chunk in (1 << 40, 1000):
        sparse = _forward_with(model, chunk, inputs)
        assert torch.allclose(sparse, dense, rtol=0.0, atol=1e-5 * max(1.0, float(dense.abs().max())))
    if vocab is not None:
        assert model.run(inputs) == [model.decode(dense[i:i + 1], [len(x)])[0] for i, x in enumerate(inputs)]


def test_chunked_forward_gated_numeric_model() -> None:
    import torch

    from rasp_compiler.compiler import compile_program
    from rasp_compiler.lang import load_program

    torch.set_num_threads(1)
    m = compile_program(load_program("programs/matmul.rasp"), None, 10, dtype="float64", input_range=(-1, 1))
    assert "layers.0.mlp.W_gate" in m.tensors
    rng = random.Random(1)
    xs = [[rng.uniform(-1, 1) for _ in range(10)] for _ in range(9)]
    whole = _forward_with(m, 1 << 40, xs)
    for chunk in (1, 50):
        assert torch.equal(_forward_with(m, chunk, xs), whole)


# -- mean value sets ---------------------------------------------------------------------------------
@pytest.mark.parametrize("values", [[-1, 0, 1], [0, 1], [False, True], [0, 1, 2, 3, 7], [-3.0, 1.0, 2.0],
                                    [0, 5, 100, 2**40], [0.5, 1, 2], [1, 2**60]])
def test_integer_means_equal_fraction_means(values: list) -> None:
    """``values.means`` takes an int64 path for integer values; the reference is the sets of
    Fractions (``values.sums``), each mean rounded once."""
    from rasp_compiler.compiler import values as V

    vals = V.sorted_values(values)
    cache: dict = {}
    for w in range(1, 40):
        got = V.means(vals, w, cache)
        s = V.sums(vals, w, {}) if w > 1 else None
        want = [float(v) for v in vals] if w == 1 else (None if s is None else [float(x / w) for x in s])
        assert (got is None) == (want is None), w
        if got is not None:
            assert sorted(got) == sorted(want) and all(type(x) is float for x in got), w


@pytest.mark.parametrize("values", [[0, 1], [False, True], [1, False], [0, 1, 1.0], [-2, -1, 0, 1],
                                    [3.0, 4.0, 5], [7], [0, 2], [0, 1, 3], [2**49, 2**49 + 1], [0.5, 1.5],
                                    [True]])
@pytest.mark.parametrize("cap", [200_000, 31, 30, 7])
def test_sorted_means_equal_sorted_fraction_means(monkeypatch, values: list, cap: int) -> None:
    """``values.means`` lists the means of a run of integers (0/1 indicators) as k/width without
    adding them up, and ``sorted_means`` skips the sort where they come in order: both must give
    what the sets of Fractions (``values.sums``, with the same cut-offs) give, each mean rounded
    once, sorted as ``sorted_values`` sorts, type for type; None exactly where those give up."""
    from rasp_compiler.compiler import values as V

    monkeypatch.setattr(V, "MAX_VALUES", cap)
    cache: dict = {}
    for w in range(1, 60):
        s = V.sums(values, w, {}) if w > 1 else None
        want = [float(v) for v in values] if w == 1 else (None if s is None else [float(x / w) for x in s])
        got, ordered = V.means(values, w, cache), V.sorted_means(values, w, cache)
        assert (got is None) == (want is None) == (ordered is None), w
        if want is not None:
            assert sorted(got) == sorted(want), w
            want = V.sorted_values(want)
            assert [(type(v), repr(v)) for v in ordered] == [(type(v), repr(v)) for v in want], w


def test_shared_lists_keeps_the_first_of_equal_lists() -> None:
    """``shared_lists`` maps each context to one list per distinct (values, types), the first of
    them, keeping the contexts' order; the reference is a loop over the contexts."""
    from rasp_compiler.compiler.analysis.sinfo import shared_lists

    rng = random.Random(3)
    pool = [[0.5, 1.0], [1, 2], [1.0, 2.0], [True], [1], [], ["a"]]
    for _ in range(200):
        made = [list(rng.choice(pool)) for _ in range(rng.randint(0, 6))]
        cond = {(i, 9 - i): rng.choice(made) for i in range(rng.randint(0, 9))} if made else {}
        if rng.random() < 0.5:  # a list of its own at every context (a selector width's [w])
            cond = {ctx: list(vals) for ctx, vals in cond.items()}
        canonical: dict = {}
        want = {ctx: canonical.setdefault((tuple(v), tuple(map(type, v))), v) for ctx, v in cond.items()}
        got = shared_lists(cond)
        assert list(got) == list(want) and all(got[c] is want[c] for c in want)


@pytest.mark.parametrize("pool", sorted(VALUE_POOLS))
def test_is_numeric_equals_the_isinstance_rule(pool: str) -> None:
    """``is_numeric`` reads the set of types where it holds only int, float and bool; subclasses
    (NumPy floats, an IntEnum) take the isinstance rule, which is the reference."""
    import enum

    from rasp_compiler.compiler.analysis.sinfo import is_numeric

    class Small(enum.IntEnum):
        ONE = 1

    rng = random.Random(pool)
    extra = [np.float64(0.25), Small.ONE, True, False]
    for _ in range(300):
        values = [rng.choice(VALUE_POOLS[pool] + extra) for _ in range(rng.randint(0, 5))]
        want = bool(values) and all(isinstance(v, (int, float)) for v in values) and \
            not all(isinstance(v, bool) for v in values)
        assert is_numeric(values) == want, values


def test_distinct_rounded_sums_equal_numpy_unique() -> None:
    """``_linear_map``'s value set per combination of lists takes the steps of ``np.unique`` on
    the rounded sums; the reference is ``np.unique`` then ``sorted_values``, compared with signs
    of zero (+0.0 and -0.0 are equal values, and one of them is kept: the same one), NaN and
    infinities, and integer sums."""
    from rasp_compiler.compiler.analysis.maps import _distinct_rounded
    from rasp_compiler.compiler.values import sorted_values

    def signed(values: list) -> list:
        return [(repr(v), type(v)) for v in values]

    rng = random.Random(5)
    pool = [0.0, -0.0, 1e-13, -1e-13, 1 / 3, -1 / 3, 0.1 + 0.2, 0.3, 2.5, -7.0, 1e-300]
    with np.errstate(all="ignore"):
        for trial in range(500):
            acc = np.array([rng.choice(pool) for _ in range(rng.randint(0, 40))], dtype=np.float64)
            if trial % 10 == 0 and len(acc):
                acc[rng.randrange(len(acc))] = rng.choice([math.nan, math.inf, -math.inf, 1e300])
            want = sorted_values(float(v) for v in np.unique(np.round(acc, 12)))
            got = _distinct_rounded(acc)
            if np.isnan(acc).any():  # NaN does not compare: the order of a sort is arbitrary
                got, want = sorted(map(repr, got)), sorted(map(repr, want))
            assert signed(got) == signed(want), acc
    assert signed(_distinct_rounded(np.array([1, 0, 1]))) == signed([0.0, 1.0])


def test_linear_value_sets_equal_one_outer_sum_each() -> None:
    """``_linear_map`` adds the sums of all its combinations of lists in one array; each
    combination's value set must be what its own outer sum gives (``np.unique`` of the rounded
    sums, then ``sorted_values``), signs of zero included, for 1 to 3 inputs, zero weights,
    integer and float constants, empty lists, and sums that round to -0.0 or overflow."""
    from rasp_compiler.compiler.analysis.maps import _linear_value_sets
    from rasp_compiler.compiler.values import sorted_values

    def reference(w: tuple, c: object, key: tuple) -> list:
        acc = np.array([c])
        for wj, xs in zip(w, key, strict=False):
            if wj != 0.0:
                acc = np.add.outer(acc, wj * np.array(xs)).ravel()
        return sorted_values(float(v) for v in np.unique(np.round(acc, 12)))

    def signed(sets: list) -> list:
        return [[(repr(v), type(v)) for v in vs] for vs in sets]

    rng = random.Random(7)
    pool = [0.0, -0.0, 1e-13, 1 / 3, 2 / 3, 0.1, 0.2, 0.3, 1.0, -1.0, 2.5]
    with np.errstate(all="ignore"):
        for trial in range(400):
            arity = rng.randint(1, 3)
            w = tuple(rng.choice([1, -1, 0.0, 0.5, -3.0]) for _ in range(arity))
            c = rng.choice([0, 0.0, -0.0, 1, 0.25])
            lists = [tuple(rng.sample(pool, rng.randint(0 if trial % 25 == 0 else 1, 5)))
                     for _ in range(rng.randint(1, 6))]
            if trial % 40 == 0:
                lists.append((1e300, math.nan)[: rng.randint(1, 2)])
            keys = list(dict.fromkeys(tuple(rng.choice(lists) for _ in range(arity)) for _ in range(6)))
            want = [reference(w, c, key) for key in keys]
            got = _linear_value_sets(w, c, keys)
            if any(math.isnan(x) for key in keys for xs in key for x in xs):
                got, want = [sorted(map(repr, g)) for g in got], [sorted(map(repr, g)) for g in want]
            assert signed(got) == signed(want), (w, c, keys)
    w, c = (1, -1), 0
    keys = [(tuple(k / n for k in range(n + 1)),) * 2 for n in range(1, 41)]
    assert _linear_value_sets(w, c, keys) == [reference(w, c, key) for key in keys]
    # long combinations whose sums round to both +0.0 and -0.0
    tiny = (-1e-13, 0.0, 1e-13, -2e-13, 2e-13, -3e-13, 3e-13, 1 / 3, -1 / 3, 0.5)
    w, c = (1, 1, 1), 0.0
    keys = [(tiny, tiny, tiny), (tiny[:9], tiny, tiny[::-1])]
    assert signed(_linear_value_sets(w, c, keys)) == signed([reference(w, c, key) for key in keys])


def test_selects_of_one_comparison_share_their_widths_and_no_other() -> None:
    """``widths`` computes the widths of two selects of the same comparison of the same s-ops
    once; selects that differ in the comparison, its order, its negation or a predicate of
    their own keep their own widths, each the count of keys its comparison selects."""
    from rasp_compiler import pyapi as rasp
    from rasp_compiler.compiler.analysis import Analysis

    n = 9
    ix = rasp.indices
    selects = {
        "le": rasp.Select(ix, ix, rasp.Comparison.LEQ), "le2": rasp.Select(ix, ix, rasp.Comparison.LEQ),
        "lt": rasp.Select(ix, ix, rasp.Comparison.LT), "ge": rasp.Select(ix, ix, rasp.Comparison.GEQ),
        "ne": rasp.Select(ix, ix, rasp.Comparison.NEQ),
        "fn": rasp.Select(ix, ix, lambda k, q: k <= q), "fn2": rasp.Select(ix, ix, lambda k, q: k < q),
    }
    counts = {"le": lambda i, m: i + 1, "le2": lambda i, m: i + 1, "lt": lambda i, m: i,
              "ge": lambda i, m: m - i, "ne": lambda i, m: m - 1, "fn": lambda i, m: i + 1,
              "fn2": lambda i, m: i}
    widths = [rasp.SelectorWidth(sel.named(name)).named(f"w_{name}") for name, sel in selects.items()]
    total = widths[0]
    for w in widths[1:]:
        total = rasp.SequenceMap(lambda a, b: a + b, total, w)
    an = Analysis(rasp.build_program(total), list("ab"), n)
    for name in selects:
        got = an.widths(name)
        assert got == {(i, m): counts[name](i, m) for m in range(1, n + 1) for i in range(m)}, name
    assert an.widths("le") is an.widths("le2")
    assert len({id(an.widths(name)) for name in selects}) == len(selects) - 1


@pytest.mark.parametrize("n", [1, 2, 7, 13])
def test_linear_map_of_prefix_means_holds_every_difference(n: int) -> None:
    """tracr's pair balance (opens - closes, two prefix means of 0/1): at (i, length) its value
    set holds (a - b)/(i+1) for every a, b in 0..i+1, each once, in increasing order (to the 12
    places ``_linear_map`` rounds to); and the model agrees with the interpreter."""
    from fractions import Fraction

    from rasp_compiler import pyapi as rasp
    from rasp_compiler.compiler.analysis import Analysis
    from rasp_compiler.pyapi import compiling, lib

    program = lib.make_pair_balance(rasp.tokens, "(", ")")
    info = Analysis(rasp.build_program(program), list("()ab"), n).info["pair_balance"]
    assert getattr(info, "linear", None) is not None and len(info.cond) == n * (n + 1) // 2
    for (i, _length), vals in info.cond.items():
        want = sorted({Fraction(a - b, i + 1) for a in range(i + 2) for b in range(i + 2)})
        assert len(vals) == len(want) and vals == sorted(vals), (i, vals)
        assert all(type(v) is float and abs(v - float(x)) < 1e-12 for v, x in zip(vals, want, strict=True))
    assert info.values == sorted(set(v for vals in info.cond.values() for v in vals))
    model = compiling.compile_rasp_to_model(program, set("()ab"), max_seq_len=n, compiler_bos="BOS")
    rng = random.Random(n)
    for _ in range(30):
        xs = [rng.choice("()ab") for _ in range(rng.randint(1, n))]
        want = rasp.evaluate(program, xs)
        got = model.apply(["BOS", *xs]).decoded[1:]
        assert all(abs(g - v) < 1e-6 for g, v in zip(got, want, strict=True)), xs


# -- one-coordinate separation -----------------------------------------------------------------------
def _separates_reference(coef, pts, mags, dtype) -> bool:
    eps = float(np.finfo(np.float32 if dtype == "float32" else np.float64).eps)
    noise = 64.0 * eps * float(np.sum(np.abs(coef) * np.asarray(mags, dtype=np.float64))) + 1e-300
    zs = sorted(((float(np.dot(coef, x)), y) for x, y in pts), key=lambda p: p[0])
    return all(not (y0 != y1 or type(y0) is not type(y1)) or z1 - z0 > noise
               for (z0, y0), (z1, y1) in zip(zs, zs[1:], strict=False))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_coordinate_separation_equals_pairwise_loop(dtype: str) -> None:
    from rasp_compiler.compiler.numeric import _separates

    rng = random.Random(dtype)
    for trial in range(300):
        grid = [rng.choice([0.0, -0.0, 1.0, 1 / 3, 2 / 3, 1e-7, 1 + 1e-7, -2.5, 100.0]) for _ in range(6)]
        pts = [((rng.choice(grid) + (rng.random() * 1e-9 if trial % 3 == 0 else 0.0),),
                rng.choice([True, False, 1, "a"])) for _ in range(rng.randint(2, 12))]
        coef = np.array([rng.choice([1.0, -3.0, 1e6])])
        mags = [max(abs(x[0]) for x, _ in pts)]
        assert _separates(coef, pts, mags, dtype) == _separates_reference(coef, pts, mags, dtype)


@pytest.mark.parametrize("values", [[0.1, 0.2, 0.3], [0.1], [0.5, 1 / 3, 2.25], [0, 1]])
def test_means_hold_every_mean_the_interpreter_computes(values: list) -> None:
    """The interpreter's mean is exactly rounded (``exact_means``), as ``values.means`` assumes:
    the original's key-by-key float sum made (0.1 + 0.1 + 0.1) / 3 0.10000000000000002, a value
    missing from the set, and a map `m == 0.1` after it was compiled wrong."""
    from rasp_compiler.compiler import values as V
    from rasp_compiler.graph.nodes import Aggregate
    from rasp_compiler.interpreter import _aggregate

    rng = random.Random(0)
    cache: dict = {}
    node = Aggregate("m", ("s", "v"), encoding="numerical", default=0)
    for w in range(2, 9):
        possible = set(V.means(V.sorted_values(values), w, cache))
        for _ in range(200):
            picked = [rng.choice(values) for _ in range(w)]
            got = _aggregate(node, np.ones((1, w), dtype=bool), picked)[0]
            assert got in possible, (picked, got)
    assert _aggregate(node, np.ones((1, 3), dtype=bool), [0.1, 0.1, 0.1])[0] == 0.1


def test_a_mean_of_huge_whole_numbers_is_exact_and_warns_nothing() -> None:
    """Found by fuzzing: the fast path's check summed the values in floats, which overflowed past
    1e308 and printed numpy's RuntimeWarning to the user; the mean itself is exact."""
    import warnings

    from rasp_compiler.graph.semantics import exact_means

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert exact_means([1e308, 1e308, 5.0], np.array([[True, True, False]])) == [1e308]


def test_attention_runs_a_group_of_heads_at_a_time(monkeypatch) -> None:
    """One input's scores [1, heads, t, t] are computed a few heads at a time: U at n = 8, d = 32
    has 65 heads of 2,305² float64 scores, and holding them all (three copies) ran out of memory.
    The grouped run gives the same logits, patterns and scores bit for bit."""
    import numpy as np
    import torch

    from rasp_compiler.simulator import build_simulator
    from rasp_compiler.simulator.check import random_layers

    torch.set_num_threads(1)
    sim = build_simulator(2, 2, 2)
    module = sim.model.module
    assert max(lc["n_heads"] for lc in module.layers_cfg) >= 5
    A, V, X = random_layers(sim.layout, 1, 0)
    ids, lengths, values = sim.tensors_for(np.stack([sim.layout.build(A[0], V[0], X[0])]))
    t = ids.shape[1]
    with torch.no_grad():
        whole, _, whole_patterns = module(ids, lengths, trace=True, values=values)
    sizes: list[int] = []
    real_softmax = torch.softmax

    def counting_softmax(x, *args, **kwargs):
        sizes.append(x.numel())
        return real_softmax(x, *args, **kwargs)

    monkeypatch.setattr(module, "chunk_elements", 2 * t * t)
    monkeypatch.setattr(torch, "softmax", counting_softmax)
    logits_seen: list[torch.Tensor] = []
    with torch.no_grad():
        grouped = module(ids, lengths, values=values)
        traced, _, patterns = module(ids, lengths, trace=True, values=values, attn_logits=logits_seen)
    assert sizes and max(sizes) <= 2 * t * t  # two heads at most, not five
    assert torch.equal(grouped, whole) and torch.equal(traced, whole)
    assert [p.shape for p in patterns] == [p.shape for p in whole_patterns]
    assert all(torch.equal(p, q) for p, q in zip(patterns, whole_patterns, strict=True))
    assert [s.shape for s in logits_seen] == [p.shape for p in whole_patterns]


@pytest.mark.parametrize("pool", sorted(VALUE_POOLS))
def test_sorted_values_equals_sorting_by_value_key(pool: str) -> None:
    """``sorted_values`` skips ``value_key`` for a set of only strings, or of ints and floats that
    floats hold exactly; every draw (with 2**53 + 1, NaN, booleans, tuples mixed in) must come out
    as ``sorted(set(values), key=value_key)``, type for type."""
    from rasp_compiler.compiler.values import sorted_values, value_key

    rng = random.Random(pool)
    pools = [VALUE_POOLS[pool], VALUE_POOLS["ints"][:6], VALUE_POOLS["floats"], VALUE_POOLS["nan"]]
    for _ in range(400):
        chosen = rng.sample(pools, rng.randint(1, 2))
        values = [rng.choice(rng.choice(chosen)) for _ in range(rng.randint(0, 9))]
        try:
            want = sorted(set(values), key=value_key)
        except TypeError:  # a tuple beside a number: value_key orders them; sets of tuples hash
            continue
        got = sorted_values(values)
        assert [(type(v), repr(v)) for v in got] == [(type(v), repr(v)) for v in want], values


def test_program_order_follows_a_changed_graph() -> None:
    """``Program.nodes`` keeps its topological order between calls; a node or edge added to the
    graph afterwards must show in the next call's order, as networkx sorts the changed graph."""
    import networkx as nx

    from rasp_compiler.graph.expr import Var
    from rasp_compiler.graph.nodes import Constant, Map, add_node
    from rasp_compiler.lang import program_from_source

    program = program_from_source("x = tokens == \"a\";\ny = x and x;\n", output="y")
    assert [n.id for n in program.nodes()] == ["tokens", "x", "y"]
    add_node(program.graph, Constant("z_const", (), value=1))
    add_node(program.graph, Map("a_map", ("z_const",), fn=Var(0)))
    assert [n.id for n in program.nodes()] == ["tokens", "x", "y", "z_const", "a_map"]
    program.graph.add_edge("z_const", "x", arg=1)  # an edge alone, the nodes unchanged
    assert [n.id for n in program.nodes()] == ["tokens", "z_const", "a_map", "x", "y"] \
        == list(nx.lexicographical_topological_sort(program.graph))


def test_compiled_model_builds_its_module_on_first_use() -> None:
    """A compiled model's torch module is built when ``module`` is first read, over the tensors
    the model was given (the same memory), and is then the one module; a loaded model has it
    at once.  Its outputs are the interpreter's."""
    import tempfile

    from rasp_compiler.compiler import compile_program, load
    from rasp_compiler.interpreter import run
    from rasp_compiler.lang import program_from_source

    program = program_from_source("r = aggregate(select(indices, length - indices - 1, ==), tokens);",
                                  output="r")
    model = compile_program(program, list("abc"), 5)
    assert model._module is None
    assert model.run(["abca"]) == [run(program, list("abca"))]
    module = model.module
    assert model.module is module
    for name, t in model.tensors.items():
        assert module.w(name).data_ptr() == t.data_ptr()
    with tempfile.TemporaryDirectory() as tmp:
        model.save(tmp)
        loaded = load(tmp)
        assert loaded._module is not None
        assert loaded.run(["cab"]) == [run(program, list("cab"))]


def test_schedule_order_is_networkx_lexicographical_order() -> None:
    """``schedule.in_order`` (Kahn's algorithm over the ops' inputs) must give the order networkx's
    ``lexicographical_topological_sort`` gives the ops' dependency graph, on random graphs with
    inputs read twice, inputs that are no op, and ids whose order differs from their creation's;
    a cycle is refused as networkx refuses it."""
    import types

    import networkx as nx

    from rasp_compiler.compiler.schedule import in_order

    rng = random.Random(5)
    for trial in range(300):
        names = [f"{rng.choice('abcxyz')}{rng.randint(0, 99)}_{i}" for i in range(rng.randint(1, 25))]
        rng.shuffle(names)
        ops = {}
        for k, fid in enumerate(names):  # inputs among the earlier ones (a DAG), sometimes twice
            earlier = names[:k] + (["outside"] if trial % 7 == 0 else [])
            inputs = [rng.choice(earlier) for _ in range(rng.randint(0, 3))] if earlier else []
            ops[fid] = types.SimpleNamespace(inputs=tuple(inputs))
        low = types.SimpleNamespace(ops=dict(sorted(ops.items(), key=lambda kv: rng.random())))
        dag = nx.DiGraph()
        for fid, op in low.ops.items():
            dag.add_node(fid)
            for inp in op.inputs:
                dag.add_edge(inp, fid)
        assert in_order(low) == list(nx.lexicographical_topological_sort(dag)), trial
    cyclic = types.SimpleNamespace(ops={"a": types.SimpleNamespace(inputs=("b",)),
                                        "b": types.SimpleNamespace(inputs=("a",))})
    with pytest.raises(nx.NetworkXUnfeasible):
        in_order(cyclic)


def test_program_order_is_networkx_lexicographical_order() -> None:
    """``Program.nodes`` sorts with ``graph.nodes.lexicographic_order``; on the shipped programs,
    the Python-API ones and random ones (ids of every kind the builders make) it must give
    networkx's ``lexicographical_topological_sort`` of the graph."""
    import sys
    from pathlib import Path

    import networkx as nx

    from rasp_compiler.lang import load_program, program_from_source
    from rasp_compiler.testing.random_source import generate

    bench = str(Path(__file__).resolve().parents[1] / "bench")
    sys.path.insert(0, bench)
    try:
        from shipped import PROGRAMS
        from tracr_cells import PROGRAMS as CELLS
    finally:
        sys.path.remove(bench)
    from rasp_compiler import pyapi as rasp
    from rasp_compiler.pyapi import lib

    programs = [load_program(str(s.file)) for s in PROGRAMS]
    programs += [rasp.as_program(cell.build(rasp, lib, 8)) for cell in CELLS.values()]
    programs += [program_from_source(generate(seed, repeats=0.4, hand_widths=0.5).source, "r.rasp")
                 for seed in range(12_800_000, 12_800_040)]
    for program in programs:
        assert [n.id for n in program.nodes()] == list(nx.lexicographical_topological_sort(program.graph))
