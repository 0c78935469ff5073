"""The shipped programs that take categorical tokens, with the vocabularies the bars use.

Shared by ``bench/correctness.py``, ``bench/compile_bench.py`` and ``tests/test_compiled_programs.py``
so that the tests and the benchmarks check the same programs on the same vocabularies.  Each
vocabulary holds the tokens a program reacts to (brackets for Dyck, the counted target), so the
exhaustive and random checks reach the program's interesting cases.

Programs over real-valued tokens (``tokens_float``: matmul, maxmin, softmax, transpose) are compiled
numerically (``--input-range``) and are not categorical programs; they are not listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Shipped:
    name: str  # short name used in tables
    path: str  # relative to the repository root
    vocab3: tuple[Any, ...]  # a vocabulary of three tokens (exhaustive checks)
    vocab5: tuple[Any, ...]  # a vocabulary of five tokens (benchmarks)
    exhaustive_len: int = 6  # longest input checked exhaustively over vocab3
    test_len: int = 5  # longest input checked exhaustively in the default test run
    classic: bool = True  # benchmarked by compile_bench.py
    numerical: bool = False  # numerical output (compared within tolerance)

    @property
    def file(self) -> Path:
        return ROOT / self.path


LETTERS3 = tuple("abc")
LETTERS5 = tuple("abcde")
DYCK1_3 = tuple("()a")
DYCK1_5 = tuple("()abc")
DYCK2_3 = tuple("({)")  # three tokens cannot hold both pairs: "(", "{" and ")" still mismatch
DYCK2_4 = tuple("(){}")
DYCK2_5 = tuple("(){}a")
INTS3 = (1, 2, 3)
INTS5 = (0, 1, 2, 3, 4)

PROGRAMS: list[Shipped] = [
    Shipped("count", "programs/count.rasp", tuple("lab"), tuple("labcd"), classic=False),
    Shipped("double_histogram", "programs/double_histogram.rasp", LETTERS3, LETTERS5),
    Shipped("dyck1", "programs/dyck1.rasp", DYCK1_3, DYCK1_5),
    Shipped("dyck2", "programs/dyck2.rasp", DYCK2_4, DYCK2_5, exhaustive_len=6),
    Shipped("histogram", "programs/histogram.rasp", LETTERS3, LETTERS5),
    Shipped("induction_1hop", "programs/induction_1hop.rasp", LETTERS3, LETTERS5, classic=False),
    Shipped("induction_2hop", "programs/induction_2hop.rasp", LETTERS3, LETTERS5, classic=False),
    Shipped("length", "programs/length.rasp", LETTERS3, LETTERS5, classic=False),
    Shipped("match2", "programs/match2.rasp", (0, 1, 4), INTS5, classic=False),
    Shipped("most_frequent", "programs/most_frequent.rasp", LETTERS3, LETTERS5),
    Shipped("parity", "programs/parity.rasp", tuple("01a"), tuple("01abc"), classic=False),
    Shipped("reverse", "programs/reverse.rasp", LETTERS3, LETTERS5),
    Shipped("shift", "programs/shift.rasp", LETTERS3, LETTERS5, classic=False),
    Shipped("sort", "programs/sort.rasp", LETTERS3, LETTERS5),
    Shipped("sort_by_frequency", "programs/sort_by_frequency.rasp", LETTERS3, LETTERS5),
    Shipped("frac_prevs", "programs/frac_prevs.rasp", tuple("lab"), tuple("labcd"), classic=False,
            numerical=True),
    Shipped("pair_balance", "programs/pair_balance.rasp", DYCK1_3, DYCK1_5, classic=False, numerical=True),
    Shipped("tracr/length", "programs/tracr/length.rasp", LETTERS3, LETTERS5),
    Shipped("tracr/reverse", "programs/tracr/reverse.rasp", LETTERS3, LETTERS5),
    Shipped("tracr/hist", "programs/tracr/hist.rasp", LETTERS3, LETTERS5),
    Shipped("tracr/sort_unique", "programs/tracr/sort_unique.rasp", INTS3, INTS5),
    Shipped("tracr/sort", "programs/tracr/sort.rasp", INTS3, INTS5),
    Shipped("tracr/sort_freq", "programs/tracr/sort_freq.rasp", LETTERS3, LETTERS5),
    Shipped("tracr/frac_prevs", "programs/tracr/frac_prevs.rasp", LETTERS3, LETTERS5, numerical=True),
    Shipped("tracr/pair_balance", "programs/tracr/pair_balance.rasp", DYCK1_3, DYCK1_5, numerical=True),
    Shipped("tracr/shuffle_dyck1", "programs/tracr/shuffle_dyck1.rasp", DYCK1_3, DYCK1_5),
    Shipped("tracr/shuffle_dyck2", "programs/tracr/shuffle_dyck2.rasp", DYCK2_4, DYCK2_5),
]

BY_NAME = {p.name: p for p in PROGRAMS}
