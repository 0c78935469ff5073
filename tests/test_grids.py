"""``real.grids.as_fraction``: a float as its shortest decimal, parsed once a value (a cache: U's
maps read the same coefficients at every position, 11 million parses at d = 24)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from rasp_compiler.compiler.real.grids import as_fraction


def test_as_fraction_is_the_shortest_decimal_and_the_same_on_every_call() -> None:
    assert as_fraction(np.float64(0.37)) == Fraction(37, 100)   # before 0.37 is cached as a float
    for _ in range(2):                                    # the second round reads the cache
        assert as_fraction(0.1) == Fraction(1, 10) and as_fraction(-2.5) == Fraction(-5, 2)
        assert as_fraction(1e-300) == Fraction(1, 10**300) and as_fraction(3) == Fraction(3)
        assert as_fraction(-0.0) == 0 == as_fraction(0.0)
        assert as_fraction(True) == 1 and isinstance(as_fraction(True), Fraction)
        assert as_fraction(np.float64(0.1)) == Fraction(1, 10)
        assert as_fraction(math.inf) is None and as_fraction(math.nan) is None and as_fraction("1") is None
