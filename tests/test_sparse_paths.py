"""The runtime's sparse paths (runtime.Transformer, ``paths``): on a CPU each weight's product
runs dense, on its used columns, or as a CSR matrix, chosen from the weight alone; every choice
must give the dense path's logits bit for bit in float64, on every shipped program at max length
6, 16 and 64 (about 10 s in all)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
import torch

from rasp_compiler.compiler import compile_program
from rasp_compiler.lang import load_program

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from shipped import PROGRAMS, Shipped  # noqa: E402

torch.set_num_threads(1)


def _inputs(s: Shipped, n: int, count: int = 48) -> list[list]:
    """Random inputs of every length class, the longest and all-equal ones included."""
    rng = random.Random(n)
    vocab = list(s.vocab5)
    xs = [[rng.choice(vocab) for _ in range(rng.randint(1, n))] for _ in range(count)]
    return xs + [[rng.choice(vocab) for _ in range(n)] for _ in range(8)] + [[v] * n for v in vocab]


def _logits(model, xs: list[list], paths: str) -> torch.Tensor:
    ids, lengths, values = model.encode_inputs(xs)
    model.module.paths = paths
    with torch.inference_mode():
        return model.module(ids, lengths, values=values)


def _check(s: Shipped, n: int, dtype: str = "float64") -> None:
    model = compile_program(load_program(str(s.file)), list(s.vocab5), n, dtype=dtype)
    xs = _inputs(s, n)
    dense, auto = _logits(model, xs, "dense"), _logits(model, xs, "auto")
    assert dense.dtype == getattr(torch, dtype)
    # bit for bit: equal values and the same NaN / sign-free zeros (torch.equal compares values)
    assert torch.equal(dense, auto), f"{s.name} at {n}: max difference {float((dense - auto).abs().max())}"


@pytest.mark.parametrize("n", [6, 16, 64])
@pytest.mark.parametrize("s", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_auto_paths_give_the_dense_logits_bit_for_bit(s: Shipped, n: int) -> None:
    _check(s, n)


@pytest.mark.parametrize("n", [6, 16])
@pytest.mark.parametrize("s", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_auto_paths_give_the_dense_logits_bit_for_bit_in_float32(s: Shipped, n: int) -> None:
    """float32 too, where narrow products run padded (GEMM_COLUMNS): every path pads alike."""
    _check(s, n, "float32")


def test_large_and_small_models_take_the_sparse_paths() -> None:
    """The bit-identity tests above are only worth something where the sparse paths run: dyck2 at
    64 gathers columns (its MLPs' W_out add up to 66 terms an output: no CSR product, see
    test_a_csr_product_adds_two_terms_an_output_at_most); reverse at 6 gathers too (a small weight is no
    reason to stay dense: bench/small_weights.py).  Every weight's product is listed once, with a
    reason."""
    r = next(p for p in PROGRAMS if p.name == "reverse")
    small = compile_program(load_program(str(r.file)), list(r.vocab5), 6).module.explain()
    assert small and all(e["why"] for e in small)
    assert sum(e["path"] == "columns" for e in small) > len(small) // 2
    s = next(p for p in PROGRAMS if p.name == "dyck2")
    program = load_program(str(s.file))
    model = compile_program(program, list(s.vocab5), 64, dtype="float64")
    big = model.module.explain()
    names = [e["tensor"] for e in big]
    assert len(names) == len(set(names))
    assert {n for n in model.tensors if n.split(".")[-1] in ("W_Q", "W_K", "W_V", "W_O", "W_in", "W_out",
                                                                 "W_U")} == set(names)
    assert "columns" in {e["path"] for e in big}
    model.module.paths = "dense"
    assert {e["path"] for e in model.module.explain()} == {"dense"}


def test_a_sublayer_that_writes_nothing_runs_on_the_columns_path() -> None:
    """An MLP whose W_out is all zeros (a map of a constant comparison: ``length < length``)
    writes no column: its columns path adds nothing, as the dense path adds zeros.  It crashed
    (a [rows, 0] reshape) once small weights gathered their columns (random program seed 443)."""
    from rasp_compiler.lang import program_from_source, run

    source = """v1 = indices >= 0;
v2 = length > 3;
v3 = length < length;
v4 = selector_width(not select(length, indices, >));
v5 = v1 and v3;
v6 = numerical(aggregate((select(tokens, "c", >) and select(v4, v4, >=)), numerical(indicator(v5)), 0));
v6;
"""
    program = program_from_source(source)
    model = compile_program(program, list("abc"), 6)
    paths = {e["tensor"]: e["path"] for e in model.module.explain()}
    assert any(p == "columns" for n, p in paths.items() if ".mlp." in n)
    inputs = [list(w) for w in ("a", "abc", "cba", "ccc", "abcabc")]
    assert model.run(inputs) == [run(program, x) for x in inputs]
    dense = model.forward(inputs)
    model.module.paths = "dense"
    assert torch.equal(model.forward(inputs), dense)


def test_a_batch_does_not_change_an_inputs_logits() -> None:
    """The path is chosen from the weights alone: an input's logits are the same alone and in a
    batch of 300 (which the forward also slices into chunks)."""
    s = next(p for p in PROGRAMS if p.name == "most_frequent")
    model = compile_program(load_program(str(s.file)), list(s.vocab5), 40, dtype="float64")
    model.module.chunk_elements = 1 << 20  # several chunks
    xs = _inputs(s, 40, count=300)
    batch = _logits(model, xs, "auto")
    for i in (0, 7, 299):
        alone = _logits(model, [xs[i]], "auto")
        width = alone.shape[1]
        assert torch.equal(alone[0], batch[i, :width])


def test_an_unknown_path_setting_is_refused() -> None:
    s = next(p for p in PROGRAMS if p.name == "reverse")
    model = compile_program(load_program(str(s.file)), list(s.vocab5), 6)
    model.module.paths = "fast"
    with pytest.raises(ValueError, match="paths must be one of auto, dense"):
        model.module.explain()


def test_rasp_eval_explains_the_paths_and_runs_dense_on_request(tmp_path, capsys) -> None:
    """``rasp eval DIR --explain`` alone prints one line per weight's product; with an input the
    table goes to stderr and the output is printed as always; ``--paths dense`` gives the same
    output; no input and no --explain is one clear error."""
    from rasp_compiler.cli import main

    out = str(tmp_path / "m")
    assert main(["compile", "programs/dyck2.rasp", "--vocab", "(){}a", "--max-len", "16", "-o", out]) == 0
    capsys.readouterr()
    assert main(["eval", out, "--explain"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert any(line.startswith("layers.0.mlp.W_in") and " columns " in line for line in table)
    assert table[-1].startswith("unembed.W_U")
    assert main(["eval", out, "--input", "({)}", "--explain"]) == 0
    got = capsys.readouterr()
    assert "layers.0.mlp.W_in" in got.err and "layers.0" not in got.out
    assert main(["eval", out, "--input", "({)}", "--paths", "dense"]) == 0
    assert capsys.readouterr().out == got.out
    assert main(["eval", out]) == 1
    assert capsys.readouterr().err.startswith("error: rasp eval needs an input")


# -- one-hot blocks read as table lookups (runtime._Lookup) -------------------------------------------
def _forced_lookups(monkeypatch, model) -> list[str]:
    """Every attention projection that can be a lookup made one (at any size); the tensors that are."""
    import rasp_compiler.runtime as runtime

    for name, value in (("COLUMNS_MAX_SHARE", 1.0), ("LOOKUP_MIN_ROWS", 1)):
        monkeypatch.setattr(runtime, name, value)
    model.module.paths, model.module._prepared = "auto", None  # prepared again under the forced limits
    return [e["tensor"] for e in model.module.explain() if e["path"] == "lookup"]


@pytest.mark.parametrize("name", ["dyck2", "most_frequent", "sort_by_frequency", "sort", "induction_2hop"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lookups_give_the_dense_logits_bit_for_bit(monkeypatch, name: str, dtype: str) -> None:
    """Forced on every projection that reads only one-hot blocks, at max length 16 (where the
    default leaves them products), the lookups give the dense logits bit for bit, in float32 too:
    each output is a sum of weights that rounds alike in any order (``_sums_exact``)."""
    s = next(p for p in PROGRAMS if p.name == name)
    model = compile_program(load_program(str(s.file)), list(s.vocab5), 16, dtype=dtype)
    xs = _inputs(s, 16)
    dense = _logits(model, xs, "dense")
    assert _forced_lookups(monkeypatch, model)
    auto = _logits(model, xs, "auto")
    assert torch.equal(dense, auto), f"max difference {float((dense - auto).abs().max())}"


def test_large_products_of_one_hots_are_lookups_and_say_so() -> None:
    """dyck2 at 64: its second and third layers' queries and keys read 130-196 rows of one-hot
    blocks (the index, the depth), and become lookups; ``explain`` names the blocks, the tables
    and the path taken where a block is not a one-hot."""
    s = next(p for p in PROGRAMS if p.name == "dyck2")
    model = compile_program(load_program(str(s.file)), list(s.vocab5), 64)
    found = [e for e in model.module.explain() if e["path"] == "lookup"]
    assert {e["tensor"] for e in found} >= {"layers.1.attn.W_Q", "layers.1.attn.W_K"}
    assert all("one-hot blocks" in e["why"] and "where they are not one-hots" in e["why"] for e in found)


def test_a_block_that_is_not_a_one_hot_falls_back_to_the_product(monkeypatch) -> None:
    """A categorical mean of several keys (`first` on "ab": half a, half b) leaves a block that is
    not a one-hot; the lookup reading it (the query of `match`) is not taken for that batch, and
    the logits stay the dense ones.  The check itself: one 1 or none per row, nothing else."""
    import rasp_compiler.runtime as runtime
    from rasp_compiler.lang import program_from_source

    assert torch.equal(runtime._hot_index(torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])),
                       torch.tensor([1, 3]))
    for bad in ([[0.5, 0.5, 0.0]], [[1.0, 1.0, 0.0]], [[0.0, 2.0, 0.0]], [[1.0, -1.0, 1.0]],
                [[float("nan"), 0.0, 0.0]]):
        assert runtime._hot_index(torch.tensor(bad)) is None
    source = """
first = aggregate(select(indices, indices, <=), tokens);
match = aggregate(select(tokens, first, ==), indices, -1);
match;
"""
    model = compile_program(program_from_source(source), list("ab"), 8, dtype="float64")
    xs = [list("ab"), list("aab"), list("bbbb"), list("abba")]
    dense = _logits(model, xs, "dense")
    assert "layers.1.attn.W_Q" in _forced_lookups(monkeypatch, model)
    seen = {"not one-hot": 0}
    real = runtime._hot_index

    def counting(v: torch.Tensor) -> torch.Tensor | None:
        got = real(v)
        seen["not one-hot"] += got is None
        return got

    monkeypatch.setattr(runtime, "_hot_index", counting)
    assert torch.equal(_logits(model, xs, "auto"), dense)
    assert seen["not one-hot"] >= 1


def test_sums_that_could_round_in_another_order_are_not_looked_up() -> None:
    """Three blocks each with a weight in one column: 1 + 2^-30 + 2^-30 rounds differently by
    order in float32, so that weight is no lookup; in float64, or with two blocks, it is."""
    import rasp_compiler.runtime as runtime

    w = torch.zeros(6, 2)
    w[0, 0], w[2, 0], w[4, 0] = 1.0, 2.0 ** -30, 2.0 ** -30
    w[1, 1] = 3.0
    blocks = [(0, 2), (2, 2), (4, 2)]
    assert not runtime._sums_exact(w, blocks)
    assert runtime._Lookup.build(w, blocks) is None
    assert runtime._sums_exact(w.double(), blocks)
    assert runtime._sums_exact(w, blocks[:2])
    w2 = w.clone()
    w2[4, 0] = 0.0  # two terms: one rounding whatever the order
    assert runtime._sums_exact(w2, blocks)
    lookup = runtime._Lookup.build(w2, blocks)
    x = torch.tensor([[1.0, 0.0, 0.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0, 0.0, 1.0],
                      [0.0, 0.0, 0.0, 0.0, 1.0, 0.0]])
    assert torch.equal(lookup.times(x, {}), x @ w2)
    assert runtime._Lookup.build(w.double(), blocks[:2]) is None  # a row it reads outside the blocks


# -- products of one term an output, the short-row softmax (issue 50: small models' forward) ---------
def test_a_product_of_one_term_an_output_is_that_product_bit_for_bit() -> None:
    """A weight whose every column has one non-zero (or none) is read as x's column times the
    weight, the columns read in any order and repeated: the dense product's bits (one rounding,
    plus exact zeros), in float64 on numbers whose sums would round; ``explain`` says so."""
    import rasp_compiler.runtime as runtime

    g = torch.Generator().manual_seed(5)
    w = torch.zeros(12, 6, dtype=torch.float64)
    for col, row in enumerate([7, 3, 9, 3, 8]):  # rows read out of order, row 3 twice; column 5 empty
        w[row, col] = float(torch.randn(1, generator=g, dtype=torch.float64))
    bias = torch.randn(6, generator=g, dtype=torch.float64)
    x = torch.randn(4, 5, 12, generator=g, dtype=torch.float64) * 1e3
    p = runtime._Product.build("W", w, "auto", bias=bias)
    assert p.path == "columns" and p.terms is not None and "one term an output" in p.explained()["why"]
    assert torch.equal(p.times(x), (x @ w + bias)[..., p.writes.index])
    assert torch.equal(runtime._Product.build("W", w, "dense", bias=bias).times(x), x @ w + bias)
    w[4, 1] = 1.5  # a second term in column 1: a sum, left to the BLAS
    assert runtime._Product.build("W", w, "auto").terms is None
    # consecutive but permuted columns are no span (read as a view they would be in order)
    assert runtime._Cols(torch.tensor([3, 5, 4, 6])).span is None
    assert runtime._Cols(torch.tensor([3, 4, 5, 6])).span == (3, 4)


def test_tracr_hist_copies_and_unembeds_without_a_blas_call() -> None:
    """tracr's hist: its value copy, output, unembedding and its MLP's first layer (one number
    spread over 20 units) have one term an output; the logits stay the dense ones in float64."""
    s = next(p for p in PROGRAMS if p.name == "tracr/hist")
    model = compile_program(load_program(str(s.file)), list(s.vocab5), 10, dtype="float64")
    why = {e["tensor"]: e["why"] for e in model.module.explain()}
    for name in ("layers.0.attn.W_V", "layers.0.attn.W_O", "unembed.W_U"):
        assert "one term an output" in why[name]
    assert "one term a unit" in why["layers.0.mlp.W_in"]
    xs = _inputs(s, 10)
    assert torch.equal(_logits(model, xs, "dense"), _logits(model, xs, "auto"))


@pytest.mark.parametrize("keys", [1, 3, 7, 11, 15, 16, 17, 40])
def test_the_attention_softmax_of_a_row_does_not_depend_on_its_padding(keys: int) -> None:
    """A query's pattern over ``keys`` keys is the same bits with masked keys after them (a longer
    input in the batch).  torch's CPU softmax of a float32 row shorter than one vector register
    adds its lanes in another order than a longer row's: the runtime pads such rows to
    SOFTMAX_KEYS masked keys (``attention_softmax``)."""
    import rasp_compiler.runtime as runtime

    g = torch.Generator().manual_seed(keys)
    neg = torch.finfo(torch.float32).min
    scores = torch.randn(32, 9, keys, generator=g) * 5
    got = runtime.attention_softmax(scores, neg)
    for longer in (keys + 1, keys + 10, 64 + keys):
        padded = torch.nn.functional.pad(scores, (0, longer - keys), value=neg)
        assert torch.equal(runtime.attention_softmax(padded, neg)[..., :keys], got)
    assert torch.allclose(got, torch.softmax(scores, dim=-1), rtol=0, atol=1e-6)
    if keys >= runtime.SOFTMAX_KEYS:
        assert torch.equal(got, torch.softmax(scores, dim=-1))


def test_short_float32_inputs_have_the_same_logits_alone_and_in_a_longer_batch() -> None:
    """float32, max length 20: inputs of 1-14 tokens (fewer than 16 keys, padded softmax; alone
    no key is masked, no masked_fill) give the same logits alone as beside a longer input."""
    for name in ("tracr/hist", "sort", "most_frequent"):
        s = next(p for p in PROGRAMS if p.name == name)
        model = compile_program(load_program(str(s.file)), list(s.vocab5), 20)
        rng = random.Random(name)
        vocab = list(s.vocab5)
        xs = [[rng.choice(vocab) for _ in range(rng.randint(1, 14))] for _ in range(12)]
        batch = _logits(model, xs + [[vocab[0]] * 20], "auto")
        for i, x in enumerate(xs):
            alone = _logits(model, [x], "auto")
            assert torch.equal(alone[0], batch[i, :alone.shape[1]]), (name, x)


def test_scores_of_one_head_dimension_are_products() -> None:
    """tracr's length compares one number of the query with one of the key: its q.k has one term
    (after the head dimensions both factors use are gathered), computed as a broadcast product,
    not a batched matrix product of inner size 1; the logits stay the dense ones in float64."""
    s = next(p for p in PROGRAMS if p.name == "tracr/length")
    model = compile_program(load_program(str(s.file)), list(s.vocab5), 16, dtype="float64")
    layers, _ = model.module._layers()
    assert layers[0].attn is not None and layers[0].attn.qk == 1
    xs = _inputs(s, 16)
    assert torch.equal(_logits(model, xs, "dense"), _logits(model, xs, "auto"))


def test_a_csr_product_adds_two_terms_an_output_at_most() -> None:
    """A CSR product adds an output's terms in unit order, the BLAS in blocks of its inner
    dimension: a random program's 503-unit W_out (random_source seed 345 at max length 8) gave
    other float64 logits than the dense path in the last bit.  A weight runs as CSR only where every
    output has at most two non-zero terms; then the logits are the dense ones."""
    import rasp_compiler.runtime as runtime
    from rasp_compiler.lang import program_from_source
    from rasp_compiler.testing import random_source

    gen = random_source.generate(345, max_len=8)
    model = compile_program(program_from_source(gen.source), list(gen.vocab), 8, dtype="float64")
    rng = random.Random(345)
    xs = [[rng.choice(gen.vocab) for _ in range(rng.randint(1, 8))] for _ in range(40)]
    xs += [[v] * 8 for v in gen.vocab]
    assert torch.equal(_logits(model, xs, "dense"), _logits(model, xs, "auto"))
    for e in model.module.explain():
        if e["path"] == "csr":
            assert int((model.tensors[e["tensor"]] != 0).sum(0).max()) <= 2, e
    wide = torch.zeros(5, 4)
    wide[:3, 1] = 1.0
    assert runtime._two_terms_at_most(wide[:, :1]) and not runtime._two_terms_at_most(wide)


# -- narrow products padded to the BLAS kernel's width (GEMM_COLUMNS) -------------------------------
@pytest.mark.parametrize("dtype, widths", [
    ("float32", {1: 1, 2: 16, 10: 16, 15: 16, 16: 16, 20: 20, 24: 24, 25: 32, 31: 32, 40: 40, 57: 64}),
    ("float64", {1: 1, 8: 8, 10: 12, 12: 12, 13: 13, 20: 24, 21: 24, 30: 36, 40: 48, 50: 50, 61: 61})])
def test_narrow_products_run_at_the_kernels_width(dtype: str, widths: dict[int, int]) -> None:
    """Where padding paid in every shape measured (bench/narrow_products.py --sweep): float32 below
    16 columns or fewer than 8 short of a multiple of 16; float64 a quarter more at most, up to
    48.  Another dtype is left as it is."""
    import rasp_compiler.runtime as runtime

    for n, want in widths.items():
        assert runtime._gemm_width(torch.zeros(3, n, dtype=getattr(torch, dtype))) == want, n
    assert runtime._gemm_width(torch.zeros(3, 10, dtype=torch.bfloat16)) == 10


def test_padded_products_say_so_and_change_no_output(monkeypatch) -> None:
    """tracr's length at 20: its head's 2 value dimensions run as 16 (float32) and its float64
    MLP's 20 output columns as 24; the logits are those of the module without padding to within a
    last bit, and the outputs the interpreter's."""
    import rasp_compiler.runtime as runtime
    from rasp_compiler.interpreter import run

    s = next(p for p in PROGRAMS if p.name == "tracr/length")
    model = compile_program(load_program(str(s.file)), list(s.vocab5), 20)
    why = {e["tensor"]: e["why"] for e in model.module.explain()}
    assert "2 value dimensions a head run as 16" in why["layers.0.attn.W_V"]
    assert "its 20 output columns run as 24" in why["layers.0.mlp.W_out"]
    xs = _inputs(s, 20)
    padded = _logits(model, xs, "auto")
    monkeypatch.setattr(runtime, "GEMM_COLUMNS", {})
    plain = runtime.Transformer(model.config, model.tensors)
    assert not any(" run as " in e["why"] for e in plain.explain())
    ids, lengths, values = model.encode_inputs(xs)
    with torch.inference_mode():
        unpadded = plain(ids, lengths, values=values)
    assert torch.allclose(padded, unpadded, rtol=1e-6, atol=1e-6)
    program = load_program(str(s.file))
    assert model.run(xs) == [run(program, x) for x in xs]
