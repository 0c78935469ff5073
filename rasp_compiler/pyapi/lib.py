"""tracr's library programs (``tracr/compiler/lib.py``), written in this Python API.

Each function keeps tracr's name, arguments and node names.  Two changes: a numerical mean of
booleans is written as a mean of ``indicator(...)`` (0/1 numbers; the booleans themselves would
give the same values), and tracr's ``Comparison.TRUE`` selector is a select on constants
(``select(0, 0, ==)``), which selects every key.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any, Callable, Sequence

from rasp_compiler.pyapi.aggregates import aggregate, selector_width
from rasp_compiler.pyapi.base import PyApiTypeError, PyApiValueError, SOp, indices, tokens, tokens_int
from rasp_compiler.pyapi.selectors import Comparison, select
from rasp_compiler.pyapi.sops import LinearSequenceMap, Map, SequenceMap, indicator, numerical


def _sop(value: Any, where: str) -> SOp:
    """``value`` if it is an s-op.  tracr's constructors assert it; here an atom would have become
    a constant (make_reverse("abc") gave "abc" at every position) and a selector a later error."""
    if not isinstance(value, SOp):
        kind = "a selector" if hasattr(value, "keys") and hasattr(value, "queries") else type(value).__name__
        raise PyApiTypeError(f"{where} must be an s-op (rasp.tokens, a Map, …), got {kind}",
                             hint="pass rasp.tokens, rasp.indices or an s-op built from them")
    return value


def make_length() -> SOp:
    """The input length at every position: the width of an all-true selector."""
    all_true_selector = select(tokens, tokens, Comparison.TRUE).named("all_true_selector")
    return selector_width(all_true_selector).named("length")


# tracr's module-level `lib.length` (make_reverse and make_shuffle_dyck there read it)
length = make_length()


def make_reverse(sop: SOp) -> SOp:
    """``sop`` backwards."""
    sop = _sop(sop, "make_reverse's sop")
    length = make_length()
    opp_idx = (length - indices).named("opp_idx")
    opp_idx = (opp_idx - 1).named("opp_idx_1")
    reverse_selector = select(indices, opp_idx, Comparison.EQ).named("reverse_selector")
    # tracr's Aggregate default (None: False for a boolean s-op, else 0), as in its lib.py
    return aggregate(reverse_selector, sop, default=None).named("reverse")


def make_hist() -> SOp:
    """How often each position's token occurs."""
    same_tok = select(tokens, tokens, Comparison.EQ).named("same_tok")
    return selector_width(same_tok).named("hist")


def make_sort_unique(vals: SOp, keys: SOp) -> SOp:
    """``vals`` sorted by ``keys`` (keys must be distinct)."""
    vals, keys = _sop(vals, "make_sort_unique's vals"), _sop(keys, "make_sort_unique's keys")
    smaller = select(keys, keys, Comparison.LT).named("smaller")
    target_pos = selector_width(smaller).named("target_pos")
    sel_new = select(target_pos, indices, Comparison.EQ)
    return aggregate(sel_new, vals, default=None).named("sort")


def make_sort(vals: SOp, keys: SOp, *, max_seq_len: int, min_key: float) -> SOp:
    """``vals`` sorted by ``keys``, ties kept in input order: keys made unique by
    ``x + min_key * i / max_seq_len`` (a Python function, as in tracr)."""
    vals, keys = _sop(vals, "make_sort's vals"), _sop(keys, "make_sort's keys")
    # checked here: a bad one failed only when run, inside the keys' lambda (division by zero …)
    if not isinstance(max_seq_len, Integral) or isinstance(max_seq_len, bool) or max_seq_len < 1:
        raise PyApiValueError(f"make_sort's max_seq_len must be a positive integer, got {max_seq_len!r}",
                              hint="the max_seq_len the program is compiled for")
    if not isinstance(min_key, Real) or isinstance(min_key, bool):
        raise PyApiTypeError(f"make_sort's min_key must be a number, got {min_key!r}",
                             hint="the smallest gap between two keys (1 for integer keys)")
    keys = SequenceMap(lambda x, i: x + min_key * i / max_seq_len, keys, indices).named("keys")
    return make_sort_unique(vals, keys)


def make_sort_freq(max_seq_len: int) -> SOp:
    """The tokens sorted by decreasing frequency."""
    hist = (-1 * make_hist()).named("hist")
    return make_sort(tokens, hist, max_seq_len=max_seq_len, min_key=1).named("sort_freq")


def make_frac_prevs(bools: SOp) -> SOp:
    """At each position, the fraction of positions up to it where ``bools`` holds."""
    bools = _sop(bools, "make_frac_prevs's bools")
    bools = numerical(bools)
    prevs = select(indices, indices, Comparison.LEQ)
    return numerical(aggregate(prevs, bools, default=0)).named("frac_prevs")


def make_pair_balance(sop: SOp, open_token: str, close_token: str) -> SOp:
    """Fraction of ``open_token`` minus fraction of ``close_token`` among positions 0..i."""
    sop = _sop(sop, "make_pair_balance's sop")
    bools_open = numerical(indicator(sop == open_token)).named("bools_open")
    opens = numerical(make_frac_prevs(bools_open)).named("opens")
    bools_close = numerical(indicator(sop == close_token)).named("bools_close")
    closes = numerical(make_frac_prevs(bools_close)).named("closes")
    pair_balance = numerical(LinearSequenceMap(opens, closes, 1, -1))
    return pair_balance.named("pair_balance")


def make_shuffle_dyck(pairs: list[str]) -> SOp:
    """True everywhere iff the input is a shuffle of balanced Dyck words, one per pair."""
    # tracr asserts these; here a mistake is one UserError (a ValueError), not a bare AssertionError
    if isinstance(pairs, str) or not isinstance(pairs, Sequence) or len(pairs) < 1:
        raise PyApiValueError(f"make_shuffle_dyck takes a list of at least one pair, got {pairs!r}",
                              hint='e.g. make_shuffle_dyck(pairs=["()", "{}"])')
    length = make_length()
    balances = []
    for pair in pairs:
        if len(pair) != 2:
            raise PyApiValueError(f"each pair is two tokens, an opening and a closing one, got {pair!r}",
                                  hint='e.g. make_shuffle_dyck(pairs=["()", "{}"])')
        open_token, close_token = pair
        balance = make_pair_balance(tokens, open_token=open_token, close_token=close_token)
        balances.append(balance.named(f"balance_{'_'.join(f'{ord(c):x}' for c in pair)}"))
    any_negative = balances[0] < 0
    for balance in balances[1:]:
        any_negative = any_negative | (balance < 0)
    any_negative = numerical(indicator(any_negative)).named("any_negative")
    select_all = select(indices, indices, Comparison.TRUE).named("select_all")
    has_neg = numerical(aggregate(select_all, any_negative, default=0)).named("has_neg")
    all_zero = balances[0] == 0
    for balance in balances[1:]:
        all_zero = all_zero & (balance == 0)
    select_last = select(indices, length - 1, Comparison.EQ).named("select_last")
    # tracr's default (None: False here, all_zero being boolean). RASP's 0 mixed a number into a
    # boolean output where the analysis cannot prove select_last non-empty: the causal model
    # (compile_rasp_to_model(..., causal=True)) was refused
    last_zero = aggregate(select_last, all_zero, default=None).named("last_zero")
    not_has_neg = (~has_neg).named("not_has_neg")
    return (last_zero & not_has_neg).named("shuffle_dyck")


def make_shuffle_dyck2() -> SOp:
    return make_shuffle_dyck(pairs=["()", "{}"]).named("shuffle_dyck2")


def shift_by(offset: int, /, sop: SOp) -> SOp:
    """``sop`` moved ``offset`` positions right; the first ``offset`` positions select nothing and
    hold the default (tracr's ``None``, RASP's 0)."""
    if not isinstance(offset, Integral) or isinstance(offset, bool):  # 1.5 selected nothing, "1" failed later
        raise PyApiTypeError(f"shift_by's offset is a whole number of positions, got {offset!r}",
                             hint="e.g. shift_by(1, rasp.tokens)")
    sop = _sop(sop, "shift_by's sop")
    select_off_by_offset = select(indices, indices, lambda k, q: q == k + offset)
    out = aggregate(select_off_by_offset, sop, default=None)
    return out.named(f"shift_by({offset})")  # tracr's name; the node id is shift_by_1 (shift_by_neg1)


def detect_pattern(sop: SOp, pattern: Sequence[Any]) -> SOp:
    """True at the last position of each occurrence of ``pattern`` in ``sop``.  The first
    ``len(pattern) - 1`` positions compare with the shifts' default (tracr's ``None``)."""
    sop = _sop(sop, "detect_pattern's sop")
    if isinstance(pattern, SOp) or not isinstance(pattern, Sequence):  # len(None) was a bare TypeError
        raise PyApiTypeError(f"detect_pattern's pattern is a sequence of values, got {pattern!r}",
                             hint='e.g. detect_pattern(rasp.tokens, "abc") or [1, 2]')
    if len(pattern) < 1:
        raise PyApiValueError(f"Length of `pattern` must be at least 1. Got {pattern}")
    # detectors[i]: the i-th element from the end of the pattern, seen i positions back
    detectors = []
    for i, element in enumerate(reversed(pattern)):
        detector = sop == element
        if i != 0:
            detector = shift_by(i, detector)
        detectors.append(detector)
    pattern_detected = detectors.pop()
    while detectors:
        pattern_detected = pattern_detected & detectors.pop()
    return pattern_detected.named(f"detect_pattern({pattern})")  # tracr's name; id detect_pattern_abc


def make_count_less_freq(n: int) -> SOp:
    """How many positions hold a token that occurs at most ``n`` times (tracr's predicate is
    ``<=``, whatever the name says)."""
    hist = make_hist()
    select_less = select(hist, hist, lambda x, y: x <= n).named("select_less")
    return selector_width(select_less).named("count_less_freq")


def make_count(sop: SOp, token: Any) -> SOp:
    """How often ``token`` occurs in ``sop``, at every position."""
    sop = _sop(sop, "make_count's sop")
    name = "".join(c if c.isalnum() else "_" for c in str(token))
    return selector_width(select(sop, sop, lambda k, q: k == token)).named(f"count_{name}")


def make_nary_sequencemap(f: Callable[..., Any], *sops: SOp) -> SOp:
    """``f`` of several s-ops, built as tracr builds it: binary SequenceMaps that collect the
    arguments into tuples, then one Map that applies ``f``.  (``SequenceMap(f, *sops)`` here takes
    any number of s-ops directly, and gives a smaller model.)"""
    if not callable(f) or isinstance(f, SOp):
        raise PyApiTypeError(f"make_nary_sequencemap takes the function first, got {type(f).__name__}",
                             hint="e.g. make_nary_sequencemap(lambda x, y, z: x + y - z, a, b, c)")
    if not sops:  # "not enough values to unpack" was a bare ValueError
        raise PyApiValueError("make_nary_sequencemap needs at least one s-op after the function",
                              hint="e.g. make_nary_sequencemap(lambda x, y: x + y, tokens, indices)")
    values, *rest = [_sop(sop, "each of make_nary_sequencemap's s-ops") for sop in sops]
    for sop in rest:
        values = SequenceMap(lambda x, y: (*x, y) if isinstance(x, tuple) else (x, y), values, sop)
    return Map(lambda args: f(*args), values)


# name -> (builder taking max_len, a vocabulary of size 5 for the size table)
LIBRARY = {
    "length": (lambda max_len: make_length(), list("abcde")),
    "reverse": (lambda max_len: make_reverse(tokens), list("abcde")),
    "hist": (lambda max_len: make_hist(), list("abcde")),
    "sort_unique": (lambda max_len: make_sort_unique(tokens_int, tokens_int), [1, 2, 3, 4, 5]),
    "sort": (lambda max_len: make_sort(tokens_int, tokens_int, max_seq_len=max_len, min_key=1),
             [1, 2, 3, 4, 5]),
    "sort_freq": (lambda max_len: make_sort_freq(max_len), list("abcde")),
    "frac_prevs": (lambda max_len: make_frac_prevs(indicator(tokens == "a")), list("abcde")),
    "pair_balance": (lambda max_len: make_pair_balance(tokens, "(", ")"), list("()abc")),
    "shuffle_dyck": (lambda max_len: make_shuffle_dyck(["()"]), list("()abc")),
    "shuffle_dyck2": (lambda max_len: make_shuffle_dyck2(), list("(){}a")),
    "shift_by": (lambda max_len: shift_by(1, tokens), list("abcde")),
    "detect_pattern": (lambda max_len: detect_pattern(tokens, "abc"), list("abcde")),
    "count": (lambda max_len: make_count(tokens, "a"), list("abcde")),
    "count_less_freq": (lambda max_len: make_count_less_freq(2), list("abcde")),
}
