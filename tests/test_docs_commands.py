"""Every command whose output README.md and docs/*.md show prints that output now
(scripts/check_docs.py; the blocks marked slow run with `scripts/check_docs.py --slow`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _check_docs():
    spec = importlib.util.spec_from_file_location("check_docs", ROOT / "scripts" / "check_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("check_docs", module)
    spec.loader.exec_module(module)
    return module


check_docs = _check_docs()
FAST = check_docs.selected(slow=False)


def test_the_docs_show_commands_and_every_one_is_run_or_marked() -> None:
    found = check_docs.examples()
    assert len(found) >= 90  # 62 `rasp run` transcripts and ~30 other commands when this was written
    assert sum(len(v) for v in FAST.values()) >= 80
    for ex in found:
        assert ex.marker != "skip" or ex.reason, f"{ex.where}: a skip says why"


@pytest.mark.parametrize("page", sorted(FAST))
def test_documented_commands_print_what_the_page_shows(page: str) -> None:
    drifted = [o for o in check_docs.check_page(FAST[page]) if not o.ok]
    assert not drifted, "\n".join(f"{o.example.where}: $ {o.example.command}\n{o.diff}" for o in drifted)


def test_drift_is_caught() -> None:
    """The comparison fails on a changed figure and passes only the stated normalisations."""
    ex = check_docs.Example("x.md", 1, "rasp universal lower-bound", ["wrong"])
    assert not check_docs.matches(check_docs.normalise(ex.shown), ["right"])
    shown = ["compile time: 0.009 s", "error 1.618e-06", "zero 0.000e+00", "..."]
    assert check_docs.matches(shown, ["compile time: 2.5 s", "error 1.585e-06", "zero 0.000e+00"]) is False
    assert check_docs.matches(check_docs.normalise(shown),
                              check_docs.normalise(["compile time: 2.5 s", "error 1.585e-06",
                                                    "zero 0.000e+00", "more", "lines"]))
    assert not check_docs.matches(["error 1.618e-06"], ["error 1.585e-03"])
    assert not check_docs.matches(["zero 0.000e+00"], ["zero 1.000e-16"])
    assert not check_docs.matches(["error 1.618e-06"], ["error 1.585e-06"], exact=True)
