"""An analysis that starts from another's state (``Analysis(resume=...)``) ends where one built
from scratch ends: the same s-ops in the same order, each with the same values, bases and table
rows in the same order, and the same records (deferred, capped and large tables, failures,
boolean clashes).  The plan search builds the plain plan this way after the deferred one
(``PlanSearch._resumable``); ``bench/weights_fingerprint.py --compare`` checks the same on whole
models.
"""

from __future__ import annotations

import pytest

from rasp_compiler.compiler import rewritten
from rasp_compiler.compiler.analysis import Analysis, limits
from rasp_compiler.errors import UserError
from rasp_compiler.lang import load_program, program_from_source
from rasp_compiler.testing import random_source


def _state(an: Analysis) -> dict:
    """What an analysis hands on: every s-op's record (tables as ordered rows) and its lists."""
    infos = {}
    for sid, info in an.info.items():
        infos[sid] = (info.kind, info.encoding, info.base_kind, tuple(info.bases),
                      [(v, type(v)) for v in info.values], list(info.table.items()),
                      None if info.cond is None else sorted(info.cond.items()), list(info.notes),
                      info.posaff, info.inputs)
    return {"order": list(an.info), "infos": infos, "deferred": list(an.deferred),
            "capped": list(an.capped), "large": list(an.large_tables), "partial": sorted(an.partial),
            "failures": sorted(an.failures), "non_atoms": sorted(an.non_atoms),
            "clash": sorted(an._own_clash), "marked": dict(an.marked),
            "zero_one": {k: sorted(map(repr, v)) for k, v in an._zero_one.items()}}


def _resumed_matches_fresh(program, vocab: list, n: int, first: int | None, then: int | None) -> bool:
    """Whether the analysis deferring from ``then``, started from the one deferring from
    ``first``, equals the one built from scratch; False where there was nothing to start from."""
    source = Analysis(program, vocab, n, defer_from=first)
    if source.resume_point is None:
        return False
    # the state kept is the one before the first deferred map, which it does not hold yet
    k, state = source.resume_point
    assert list(source.info)[k] == source.deferred[0][0]
    assert list(state["info"]) == list(source.info)[:k] and not state["deferred"]
    fresh = Analysis(program, vocab, n, defer_from=then)
    resumed = Analysis(program, vocab, n, defer_from=then, resume=source)
    assert _state(resumed) == _state(fresh)
    # the functions of the s-ops it took over record their calls in the new analysis
    for sid, info in resumed.info.items():
        if getattr(info.fn, "recorded_node", None) is not None:
            assert info is not source.info.get(sid)
    return True


@pytest.mark.parametrize("n", [16, 20])
def test_plain_after_deferred_shuffle_dyck2(n: int) -> None:
    program = rewritten(load_program("programs/tracr/shuffle_dyck2.rasp"), n)
    assert _resumed_matches_fresh(program, list("(){}a"), n, limits.DEFER_FROM, None)


def test_resume_is_refused_for_another_threshold_or_program() -> None:
    program = rewritten(load_program("programs/tracr/shuffle_dyck2.rasp"), 16)
    source = Analysis(program, list("(){}a"), 16, defer_from=limits.DEFER_FROM)
    assert source.resume_point is not None
    lower = Analysis(program, list("(){}a"), 16, defer_from=limits.DEFER_FROM - 1)
    assert not lower._may_resume(source)  # a lower threshold may defer an earlier map
    other = Analysis(program, list("(){}ab"), 16, defer_from=None)
    assert not other._may_resume(source)
    assert not Analysis(program, list("(){}a"), 16, defer_from=None, fixed_length=16)._may_resume(source)
    assert Analysis(program, list("(){}a"), 16, defer_from=None)._may_resume(source)


def test_random_programs_with_a_low_threshold() -> None:
    """Random programs with maps deferred from 50 assignments on (as the fingerprints'
    ``--set DEFER_FROM=50`` run): the plain analysis and a higher threshold, each resumed."""
    resumed = 0
    for seed in range(12_200_000, 12_200_040):
        gen = random_source.generate(seed, max_len=8)
        program = program_from_source(gen.source, f"<random {seed}>")
        try:
            for then in (None, 200):
                resumed += _resumed_matches_fresh(program, list(gen.vocab), 8, 50, then)
        except UserError:
            continue
    assert resumed >= 6  # the path is taken, not skipped (8 of these 80 analyses)
