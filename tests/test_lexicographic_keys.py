"""Lexicographic sort keys (``Analysis.lexicographic_key``): tracr's unique keys
``x + min_key * i / max_seq_len`` order the positions by x first and by the index among equal x, so
an order comparison of such a key with itself is rewritten (``selectors.lexicographic``) into
``X_k <' X_q or (X_k == X_q and i_k <'' i_q)``, whose selector width splits into one head per
disjunct (no one-hot over (x, index) pairs, one layer less).

The rewrite must select exactly what the original atom selects: checked here against the
interpreter's own selection matrix on every (query, key) pair of many inputs of several lengths,
for every order operator, negated atoms, decreasing X, decreasing index terms, and keys that are
*not* lexicographic (whose atom must be left alone).
"""

from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from rasp_compiler.compiler import compile_program
from rasp_compiler.compiler import selectors as sl
from rasp_compiler.compiler.analysis import Analysis
from rasp_compiler.compiler.checking import check_model, edge_inputs, random_inputs
from rasp_compiler.interpreter import evaluate
from rasp_compiler.lang import load_program, program_from_source

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from shipped import BY_NAME  # noqa: E402

torch.set_num_threads(1)

INTS = [0, 1, 2, 3, 4]


def _source(key: str, op: str, negate: bool = False) -> str:
    sel = f"select(keys, keys, {op})"
    if negate:
        sel = f"not {sel}"
    return ("tokens2 = tokens_int;\n"
            f"hist = selector_width(select(tokens2, tokens2, ==));\n"
            f"keys = {key};\n"
            f"smaller = {sel};\n"
            f"result = selector_width(smaller);\nresult;\n")


def _selection(f: sl.Formula, values: dict, n: int) -> np.ndarray:
    """The formula's selection matrix [query, key] from the interpreter's per-position values."""
    mats = {}
    for a in sl.atoms(f):
        kv, qv = values[a.key], values[a.query]
        m = np.array([[sl.compare(a.op, kv[k], qv[q]) for k in range(n)] for q in range(n)], dtype=bool)
        mats[a] = ~m if a.negated else m
    return sl.evaluate(f, mats)


def _inputs(vocab: list, lengths: list[int], per_length: int, seed: int = 0) -> list[list]:
    rng = random.Random(seed)
    out = []
    for n in lengths:
        if len(vocab) ** n <= per_length:
            out.extend(list(x) for x in itertools.product(vocab, repeat=n))
        else:
            out.extend([rng.choice(vocab) for _ in range(n)] for _ in range(per_length))
    return out


def _assert_same_selection(program, an: Analysis, sel_id: str, vocab: list, lengths: list[int]) -> int:
    """Compare the analysis's (rewritten) formula with the interpreter's selector on every
    (query, key) pair; returns the number of inputs compared."""
    f = an.formula(sel_id)
    checked = 0
    for x in _inputs(vocab, lengths, 40):
        values = evaluate(program, x)
        want = np.asarray(values[sel_id], dtype=bool)
        got = _selection(f, values, len(x))
        assert got.shape == want.shape
        bad = np.argwhere(got != want)
        assert not len(bad), f"input {x}: (query, key) {bad[:3].tolist()} differ"
        checked += 1
    return checked


def _smaller(program) -> str:
    return program.names["smaller"]


# (key expression, X increasing, index increasing)
LEX_KEYS = [
    ("tokens2 + indices / 1024", True, True),
    ("tokens2 - indices / 1024", True, False),
    ("-2 * tokens2 + indices / 64", False, True),
    ("indices / 16 - 3 * tokens2", False, True),
    ("-1 * hist + indices / 1024", False, True),  # tracr's sort_freq: X is the width, decreasing
    ("hist - indices / 100", True, False),
]


@pytest.mark.parametrize("key,x_up,i_up", LEX_KEYS)
@pytest.mark.parametrize("op,negate", [("<", False), ("<=", False), (">", False), (">=", False),
                                       ("<", True), (">=", True)])
def test_rewrite_selects_what_the_atom_selects(key: str, x_up: bool, i_up: bool, op: str,
                                                negate: bool) -> None:
    program = program_from_source(_source(key, op, negate))
    an = Analysis(program, INTS, 12)
    keys = program.names["keys"]
    found = an.lexicographic_key(keys)
    assert found is not None, f"{key} is lexicographic at max_len 12"
    x, i, got_x_up, got_i_up = found
    assert an.info[i].base_kind == "index"
    assert (got_x_up, got_i_up) == (x_up, i_up)
    f = an.formula(_smaller(program))
    assert isinstance(f, sl.Any_) and {a.key for a in sl.atoms(f)} == {x, i}
    assert _assert_same_selection(program, an, _smaller(program), INTS, [1, 2, 3, 5, 8, 12]) > 100


@pytest.mark.parametrize("key", [
    "tokens2 + indices / 2",        # the index term spans 5.5 > the gap 1 between tokens
    "tokens2 + indices / 11",       # spans exactly 1 at max_len 12: ties (x, 11) with (x + 1, 0)
    "tokens2 * indices",            # not ordered by x first
    "tokens2 + (indices % 2) / 4",  # not monotone in the index
    "tokens2",                      # no index term
    "indices / 4",                  # no X
    "hist + tokens2 / 8",           # no index base
])
def test_non_lexicographic_keys_are_left_alone(key: str) -> None:
    program = program_from_source(_source(key, "<"))
    an = Analysis(program, INTS, 12)
    assert an.lexicographic_key(program.names["keys"]) is None
    f = an.formula(_smaller(program))
    assert isinstance(f, sl.Atom) and f.key == f.query == program.names["keys"]
    model = compile_program(program, INTS, 6)
    res = check_model(model, program, _inputs(INTS, [1, 2, 3, 4, 6], 30, seed=1))
    assert res.ok, res.failures[:3]


def test_string_tokens_and_other_ops_are_left_alone() -> None:
    # == and != between keys are not rewritten; a key compared with another s-op neither
    src = ("keys = tokens_int + indices / 1024;\n"
           "a = selector_width(select(keys, keys, ==));\n"
           "b = selector_width(select(keys, tokens_int + 0.5, <));\n"
           "result = a + b;\nresult;\n")
    program = program_from_source(src)
    an = Analysis(program, INTS, 8)
    sels = [n for n in program.graph if program.node(n).is_selector]
    for s in sels:
        assert isinstance(an.formula(s), sl.Atom)


@pytest.mark.parametrize("name", ["tracr/sort", "tracr/sort_freq"])
def test_tracr_sort_formulas(name: str) -> None:
    s = BY_NAME[name]
    program = load_program(str(s.file))
    vocab = list(s.vocab5)
    an = Analysis(program, vocab, 16)
    sel = program.names["smaller"]
    assert isinstance(an.formula(sel), sl.Any_)
    assert _assert_same_selection(program, an, sel, vocab, [1, 2, 4, 7, 11, 16]) > 150
    # the key is ordered by the token's (sort_freq: the histogram's) value, then by position
    assert an.lexicographic_key(program.names["keys"])[2:] == ((True, True) if name == "tracr/sort"
                                                                else (False, True))


def test_tracr_sort_depth_and_size() -> None:
    """tracr's sort (keys = tokens + i/1024) in 2 layers like programs/sort.rasp: the width of
    select(keys, keys, <) splits into two heads of layer 0, decoded by one MLP (before: an MLP
    building a one-hot over 5 x 40 (token, index) keys, a width head over it, 3 layers, 460,511
    parameters at max_len 40; tracr: 1.1M)."""
    s = BY_NAME["tracr/sort"]
    program = load_program(str(s.file))
    model = compile_program(program, list(s.vocab5), 40)
    assert model.n_layers == 2
    assert model.heads_per_layer == [2, 1]
    assert model.params < 110_000
    # no residual feature holds the keys (nor a product one-hot of tokens and indices)
    assert {r["feature"] for r in model.config["residual"]} & {program.names["keys"],
                                                               "(indices,tokens_int)"} == set()


def test_tracr_sort_freq_depth_and_size() -> None:
    s = BY_NAME["tracr/sort_freq"]
    program = load_program(str(s.file))
    model = compile_program(program, list(s.vocab5), 40)
    assert model.n_layers == 3  # histogram head, the two part heads, the aggregate
    assert model.params < 1_000_000  # before: 23.4M (a one-hot over (histogram, index) keys)


@pytest.mark.parametrize("name", ["tracr/sort", "tracr/sort_freq"])
def test_tracr_sorts_agree_at_16(name: str) -> None:
    s = BY_NAME[name]
    program = load_program(str(s.file))
    vocab = list(s.vocab5)
    model = compile_program(program, vocab, 16)
    inputs = random_inputs(vocab, 16, 120, seed=3) + edge_inputs(vocab, 16)
    res = check_model(model, program, inputs)
    assert res.inputs_checked >= 120
    assert res.ok, res.failures[:3]
