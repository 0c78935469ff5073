"""Widths of selectors over functions of the index alone, read off one selection at the longest
length (``SelectorFacts._index_widths``), are the widths of the selection built per length; and
dyck2 at a long max_len, whose ``select(indices, indices, <=)`` built one selection per length
(the sum of n^2 over the lengths, 30 s of CPU at 2,048) before its mean was refused, is refused
with the same message."""

from __future__ import annotations

from pathlib import Path

import pytest

from rasp_compiler.cli import main
from rasp_compiler.compiler import selectors as sl
from rasp_compiler.compiler.analysis import Analysis
from rasp_compiler.lang import program_from_source

ROOT = Path(__file__).resolve().parents[1]

SELECTORS = {
    "prefix": "select(indices, indices, <=)",
    "shifted": "select(indices + 1, indices, ==)",
    "mod": "select(indices % 3, indices % 2, <) or select(indices, 0, ==)",
    "not_diagonal": "select(indices, indices, !=) and select(indices * 2, indices, >=)",
    "constant_query": "select(indices, 2, >)",
    "classes": "select(indices % 4, (indices + 1) % 4, ==)",
    # reads the length: built per length, unless the length is fixed (a constant)
    "with_length": "select(indices, length - indices, <=)",
}


def _per_length(an: Analysis, sel_id: str) -> dict[tuple[int, int], int]:
    """The widths as they were computed before: one selection per length."""
    f = an.formula(sel_id)
    out = {}
    for n in an.lengths:
        for i, w in enumerate(an._selection(f, n).sum(axis=1).tolist()):
            out[(i, n)] = int(w)
    return out


@pytest.mark.parametrize("name", sorted(SELECTORS))
@pytest.mark.parametrize("max_len, fixed", [(1, None), (7, None), (23, None), (12, 5)])
def test_index_widths_are_the_per_length_widths(name: str, max_len: int, fixed: int | None) -> None:
    source = f"s = {SELECTORS[name]};\nw = selector_width(s);\nw;\n"
    an = Analysis(program_from_source(source, "<widths>"), list("ab"), max_len, fixed_length=fixed)
    sel_id = next(n for n in an.graph if an.node(n).is_selector and "s" == n)
    reads_length = any(an.info[b].base_kind == "length" for a in sl.atoms(an.formula(sel_id))
                       for sid in (a.key, a.query) for b in an.info[sid].bases)
    assert reads_length == (name == "with_length" and fixed is None)
    got = an.widths(sel_id)
    want = _per_length(an, sel_id)
    assert list(got.items()) == list(want.items())  # the same entries in the same order
    assert all(type(w) is int for w in got.values())


def test_dyck2_at_a_long_max_len_is_refused_with_its_message(tmp_path: Path, capsys) -> None:
    """At max_len 1,024 the per-length selections took about 5 s of CPU before the refusal."""
    capsys.readouterr()
    assert main(["compile", str(ROOT / "programs" / "dyck2.rasp"), "--vocab", "(){}a", "--max-len", "1024",
                 "-o", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err
    assert "dyck2.rasp:17:15: error: 'sequence_map_2' ((indices + 1) * aggregate(up_to_here, " \
           "indicator(is_open) - indicator(is_close))) reads 'aggregate_1' (aggregate(up_to_here, " \
           "indicator(is_open) - indicator(is_close))), a mean with too many possible values to " \
           "enumerate" in err
    assert "hint: average fewer distinct values (e.g. 0/1 indicators), or compile with a smaller " \
           "--max-len" in err
    assert "Traceback" not in err
    assert not (tmp_path / "d").exists()
