"""Value sets: a deterministic order for mixed values, labels, numeric tests and mean sets.

Every list of values the compiler emits (one-hot orders, logits, residual labels) is sorted with
``value_key`` so that compiling twice gives the same layout, whatever Python's set order is.
"""

from __future__ import annotations

import math
from collections.abc import Set as AbcSet
from fractions import Fraction
from typing import Any, Iterable

import numpy as np

from rasp_compiler.errors import UserError

# Above this many distinct values a numerical value set is not enumerated (see ``sums``, ``means``).
MAX_VALUES = 200_000


def vocab_list(vocab: Any) -> list[Any]:
    """The vocabulary as a list without repeats: a string is its characters, and a set (tracr
    passes sets) is sorted, so that every process sees one order and compiles the same weights."""
    if isinstance(vocab, str):
        return list(vocab)
    if vocab is None:
        return []
    if isinstance(vocab, range) or isinstance(vocab, np.ndarray) and vocab.ndim == 1:
        vocab = vocab.tolist() if isinstance(vocab, np.ndarray) else list(vocab)  # in their order
    elif isinstance(vocab, AbcSet) and not isinstance(vocab, (set, frozenset)):
        vocab = set(vocab)  # dict.keys() and other set-likes: sorted as a set is
    if not isinstance(vocab, (list, tuple, set, frozenset)):
        raise UserError(f"the vocabulary is a string or a list of tokens, not {type(vocab).__name__}",
                        hint="e.g. vocab='abc' or vocab=[1, 2, 3]")
    tokens = [tok.item() if isinstance(tok, np.generic) else tok for tok in vocab]  # NumPy scalars
    for tok in tokens:
        if not isinstance(tok, (str, int, float)) or isinstance(tok, float) and not math.isfinite(tok):
            raise UserError(f"the vocabulary holds {tok!r}: tokens are strings, numbers or booleans")
    if isinstance(vocab, (set, frozenset)):
        tokens = sorted(tokens, key=value_key)
    kept: dict[Any, Any] = {}
    for tok in tokens:
        first = kept.setdefault(tok, tok)
        if type(first) is not type(tok):  # 1, 1.0 and True are one key to Python and to the model
            raise UserError(f"the vocabulary holds both {first!r} and {tok!r}, which are equal in Python: "
                            "the model could not tell them apart", hint="keep one of them")
    return list(kept)


def value_key(v: Any) -> tuple:
    """A total order over the values RASP programs produce (numbers by value, then strings, …)."""
    # Exact-type fast paths first: this is called once per table row when MLPs are built.
    t = type(v)
    if t is str:
        return (1, v)
    if t is int or t is float:
        return (0, float(v), True)
    if isinstance(v, (bool, int, float)):
        return (0, float(v), type(v).__name__ != "bool")
    if isinstance(v, str):
        return (1, v)
    if v is None:
        return (2,)
    if isinstance(v, tuple):
        return (3, tuple(value_key(x) for x in v))
    return (4, repr(v))


def sorted_values(values: Iterable[Any]) -> list[Any]:
    """Distinct values in ``value_key`` order (1, 1.0 and True collapse as Python sets do)."""
    distinct = set(values)
    kinds = {type(v) for v in distinct}
    # The analysis sorts every value set it makes (a mean's hundreds of floats), and ``value_key``
    # costs more than the sort itself.  Where every value is a str, or an int or float that
    # ``float`` keeps exact, the keys order the values as ``<`` does and no two tie, so the plain
    # sort compares alike and gives the same list.
    if kinds == {str} or kinds <= {int, float} and (
            int not in kinds or all(-_EXACT_INT <= v <= _EXACT_INT for v in distinct if type(v) is int)):
        return sorted(distinct)
    return sorted(distinct, key=value_key)


_EXACT_INT = 2 ** 53  # ints up to this are floats exactly: ``value_key`` compares them unrounded


def label(v: Any) -> str:
    """How a value appears in a residual label: ``tokens:a``, ``indices:3``, ``x:True``."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return repr(v)
    if isinstance(v, tuple):
        return "(" + ",".join(label(x) for x in v) + ")"
    return str(v)


def distinct_labels(values: list[Any]) -> list[str]:
    """``label`` of each value, except that values whose labels would coincide (the int 0 and the
    string "0", True and "True") are shown by ``repr`` ('0', 'True'), so that a residual label
    names one value."""
    plain = [label(v) for v in values]
    if len(set(plain)) == len(plain):
        return plain
    shared = {lab for lab in plain if plain.count(lab) > 1}
    return [repr(v) if lab in shared else lab for v, lab in zip(values, plain, strict=True)]


def json_value(v: Any) -> Any:
    """A JSON-serialisable form (tuples become lists)."""
    if isinstance(v, tuple):
        return [json_value(x) for x in v]
    return v


def _frac(v: Any) -> Fraction:
    return Fraction(v) if not isinstance(v, bool) else Fraction(int(v))


def sums(values: list[Any], width: int, cache: dict) -> set[Fraction] | None:
    """All sums of ``width`` values drawn (with repetition) from ``values``; None if too many."""
    key = (tuple(values), width)
    if key in cache:
        return cache[key]
    if width == 0:
        out: set[Fraction] | None = {Fraction(0)}
    else:
        prev = sums(values, width - 1, cache)
        if prev is None or len(prev) * len(values) > MAX_VALUES:
            out = None
        else:
            fr = [_frac(v) for v in values]
            out = {s + f for s in prev for f in fr}
            if len(out) > MAX_VALUES:
                out = None
    cache[key] = out
    return out


def _integer_sums(values: list[Any], width: int, cache: dict) -> Any:
    """``sums`` for integer-valued ``values`` (ints, booleans, integral floats), with NumPy int64
    arithmetic instead of sets of Fractions: a sorted array of the distinct sums, None if too many
    (the same cut-offs as ``sums``), False when the values are not all small integers."""
    key = ("int", tuple(values), width)
    if key in cache:
        return cache[key]
    if width == 0:
        out: Any = np.zeros(1, dtype=np.int64)
    else:
        vals = []
        for v in values:
            if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
                return False
            if not isinstance(v, (bool, int, float)) or abs(v) * max(width, 1) >= 2 ** 52:
                return False
            vals.append(int(v))
        prev = _integer_sums(values, width - 1, cache)
        if prev is None or len(prev) * len(values) > MAX_VALUES:
            out = None
        else:
            out = np.unique((prev[:, None] + np.array(vals, dtype=np.int64)[None, :]).ravel())
            if len(out) > MAX_VALUES:
                out = None
    cache[key] = out
    return out


def _integer_range(values: list[Any], width: int) -> tuple[int, int] | None:
    """(lo, hi) where ``values`` are the integers lo..hi, every one of them (0/1 indicators,
    booleans), and ``_integer_sums`` takes them at ``width``: their sums of ``width`` values are
    then every integer from width·lo to width·hi, known without adding them up.  Else None."""
    ints = set()
    for v in values:
        t = type(v)
        if t is float:
            if not (math.isfinite(v) and v.is_integer()):
                return None
        elif t is not int and t is not bool:
            return None
        if abs(v) * width >= 2 ** 52:
            return None
        ints.add(int(v))
    if not ints:
        return None
    lo, hi = min(ints), max(ints)
    return (lo, hi) if len(ints) == hi - lo + 1 else None


def _range_sums_fit(values: list[Any], width: int, lo: int, hi: int) -> bool:
    """Whether ``_integer_sums`` lists the sums of ``width`` values of the integers lo..hi rather
    than giving up: its cut-offs at each width k <= ``width``, on the k·(hi-lo)+1 sums there,
    grow with k, so the last width decides."""
    last, before = width * (hi - lo) + 1, (width - 1) * (hi - lo) + 1
    return before * len(values) <= MAX_VALUES and last <= MAX_VALUES


def means(values: list[Any], width: int, cache: dict) -> list[float] | None:
    """Every mean of ``width`` values from ``values`` (width >= 1), as floats; None if too many.
    From width 2 on, where the values are integers, the list is in increasing order.

    This is the k/n rule tracr gets wrong: a mean of 0/1 values over 3 keys can be 0, 1/3, 2/3 or 1.
    """
    if width == 1:
        return [float(v) for v in values]
    return _means(values, width, cache, _integer_range(values, width))


def _means(values: list[Any], width: int, cache: dict, span: tuple[int, int] | None) -> list[float] | None:
    """``means`` from width 2 on, given ``_integer_range(values, width)``."""
    if span is not None:
        # a mean of 0/1 values (tracr's frac_prevs) at every width of a prefix: k/width for each
        # k, without ``_integer_sums``'s sums of each width before this one
        lo, hi = span
        if not _range_sums_fit(values, width, lo, hi):
            return None
        return [k / width for k in range(width * lo, width * hi + 1)]
    ints = _integer_sums(values, width, cache)
    if ints is not False:
        # int / int is correctly rounded in Python, as float(Fraction(s, width)) is: the same floats
        return None if ints is None else [int(x) / width for x in ints.tolist()]
    s = sums(values, width, cache)
    if s is None:
        return None
    return [float(x / width) for x in s]


def sorted_means(values: list[Any], width: int, cache: dict) -> list[float] | None:
    """``sorted_values(means(values, width, cache))``.  The means of integers from width 2 on are
    in order already, and distinct (sums under 2^52 over one width: consecutive ones differ by
    1/width, more than a float's spacing there), so they are not sorted again."""
    # two means of the same values (tracr's opens and closes) list each width once; each gets a
    # list of its own, as before
    key = ("sorted", tuple(values), tuple(map(type, values)), width)
    if key not in cache:
        cache[key] = _sorted_means(values, width, cache)
    got = cache[key]
    return None if got is None else list(got)


def _sorted_means(values: list[Any], width: int, cache: dict) -> list[float] | None:
    if width == 1:
        return sorted_values(means(values, width, cache))
    span = _integer_range(values, width)
    got = _means(values, width, cache, span)
    if got is None or span is not None:
        return got
    if cache.get(("int", tuple(values), width)) is not None:
        return got  # ``_integer_sums`` listed them, in order
    return sorted_values(got)
