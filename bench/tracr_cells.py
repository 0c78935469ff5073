"""The cells of the tracr side-by-side bench (``bench/tracr_side_by_side.py``): tracr's library
programs, each built by the same call in tracr and in ``rasp_compiler.pyapi``, with a vocabulary
of five tokens.

This module imports nothing but the standard library: ``bench/tracr_driver.py`` reads it in the
Python that has tracr (jax, haiku), where neither torch nor rasp_compiler may be installed.  Each
builder takes the ``rasp`` and ``lib`` modules of the compiler at hand and the max length.
"""

from __future__ import annotations

import random
import time
from typing import Any, Callable, NamedTuple


class Cell(NamedTuple):
    build: Callable[[Any, Any, int], Any]  # (rasp, lib, max_len) -> the program
    vocab: tuple[Any, ...]
    numerical: bool  # tracr's output is one number: the bench reports its largest error


LETTERS = tuple("abcde")
INTS = (0, 1, 2, 3, 4)
PARENS = tuple("()abc")
TWO_PAIRS = tuple("(){}a")

# the programs of programs/tracr/, by the calls their headers name
PROGRAMS: dict[str, Cell] = {
    "length": Cell(lambda rasp, lib, n: lib.make_length(), LETTERS, False),
    "reverse": Cell(lambda rasp, lib, n: lib.make_reverse(rasp.tokens), LETTERS, False),
    "hist": Cell(lambda rasp, lib, n: lib.make_hist(), LETTERS, False),
    "sort_unique": Cell(lambda rasp, lib, n: lib.make_sort_unique(rasp.tokens, rasp.tokens), INTS, False),
    "sort": Cell(lambda rasp, lib, n: lib.make_sort(rasp.tokens, rasp.tokens, max_seq_len=n, min_key=1),
                 INTS, False),
    "sort_freq": Cell(lambda rasp, lib, n: lib.make_sort_freq(max_seq_len=n), LETTERS, False),
    "frac_prevs": Cell(lambda rasp, lib, n: lib.make_frac_prevs(rasp.tokens == "a"), LETTERS, True),
    "pair_balance": Cell(lambda rasp, lib, n: lib.make_pair_balance(rasp.tokens, "(", ")"), PARENS, True),
    "shuffle_dyck1": Cell(lambda rasp, lib, n: lib.make_shuffle_dyck(["()"]), PARENS, False),
    "shuffle_dyck2": Cell(lambda rasp, lib, n: lib.make_shuffle_dyck(["()", "{}"]), TWO_PAIRS, False),
}

# a numerical output agrees with the reference within this absolute or relative error
TOLERANCE = 1e-5


def check_inputs(name: str, max_len: int, count: int) -> list[list[Any]]:
    """``count`` random inputs of random lengths 1..max_len over the cell's vocabulary, the same
    in both processes (seeded by the cell)."""
    rng = random.Random(f"{name}/{max_len}/check")
    vocab = PROGRAMS[name].vocab
    return [[rng.choice(vocab) for _ in range(rng.randint(1, max_len))] for _ in range(count)]


def batch_inputs(name: str, max_len: int, count: int) -> list[list[Any]]:
    """``count`` random inputs of length max_len: the batch whose forward is timed."""
    rng = random.Random(f"{name}/{max_len}/batch")
    vocab = PROGRAMS[name].vocab
    return [[rng.choice(vocab) for _ in range(max_len)] for _ in range(count)]


def agrees(got: Any, want: Any) -> bool:
    """Whether one position's output is the reference's: numbers within TOLERANCE (a mean read
    from a softmax carries rounding residue: 7.7e-18 for a mean of two 0s; a boolean is its 0 or
    1, as tracr's evaluator averages it), anything else equal."""
    numbers = all(isinstance(v, (int, float)) for v in (got, want))
    if numbers and not (isinstance(got, bool) and isinstance(want, bool)):
        return abs(got - want) <= TOLERANCE * max(1.0, abs(want))
    return got == want


def compile_times(compile_once: Callable[[], Any], repeats: int, budget: float) -> tuple[list[float], Any]:
    """CPU seconds of the timed compiles and the last model: the first compile warms the process
    up, then ``repeats`` are timed, unless the first alone took more than ``budget`` seconds, in
    which case it is the only one (tracr's shuffle-Dyck-2 at 40 takes minutes)."""
    c0 = time.process_time()
    model = compile_once()
    first = time.process_time() - c0
    if first > budget:
        return [first], model
    times = []
    for _ in range(repeats):
        c0 = time.process_time()
        model = compile_once()
        times.append(time.process_time() - c0)
    return times, model
