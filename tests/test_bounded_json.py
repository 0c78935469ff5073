"""rasp_compiler.bounded_json: JSON from users' files read within a size and a depth, every failure
one UserError naming what was read."""

from __future__ import annotations

import pytest

from rasp_compiler.bounded_json import load_json_file, load_json_text, nesting_depth
from rasp_compiler.errors import ArtifactError, UserError


@pytest.mark.parametrize("text, depth", [
    ("1", 0), ("[]", 1), ("[[1], {\"a\": [2]}]", 3),
    ('["[[[[", "\\"[[["]', 1),          # brackets inside strings, escaped quotes, do not count
    ('["\\\\", [["x"]]]', 3),          # an escaped backslash before the closing quote
])
def test_nesting_depth_skips_strings(text: str, depth: int) -> None:
    assert nesting_depth(text) == depth


def test_nesting_depth_across_numpy_chunks() -> None:
    text = "[" * 5_000_000 + "]" * 5_000_000  # longer than one chunk
    assert nesting_depth(text) == 5_000_000


def test_deep_nesting_is_a_user_error_not_a_recursion_error() -> None:
    with pytest.raises(UserError, match=r"the header cannot be read: it nests too deeply \(100,000 levels"):
        load_json_text("[" * 100_000 + "]" * 100_000, "the header")


def test_depth_and_size_bounds_are_the_callers() -> None:
    assert load_json_text("[[[1]]]", "x", max_depth=3) == [[[1]]]
    with pytest.raises(UserError, match="nests too deeply"):
        load_json_text("[[[[1]]]]", "x", max_depth=3)
    with pytest.raises(UserError, match="too large to read: 11 bytes"):
        load_json_text('"012345678"', "x", max_bytes=10)


def test_huge_integer_and_bad_text_are_user_errors() -> None:
    with pytest.raises(UserError, match=r"more than 4,300 digits \(5,000\)"):
        load_json_text("[" + "9" * 5000 + "]", "x")
    with pytest.raises(UserError, match="x is not valid JSON: .*line 1, column 2"):
        load_json_text("{bad", "x")
    with pytest.raises(UserError, match="not UTF-8"):
        load_json_text(b"\xff[]", "x")


def test_the_error_class_is_the_callers(tmp_path) -> None:
    p = tmp_path / "config.json"
    p.write_text("[" * 1000)
    with pytest.raises(ArtifactError, match="config.json cannot be read: it nests too deeply"):
        load_json_file(p, error=ArtifactError)


def test_file_size_is_checked_before_reading(tmp_path) -> None:
    p = tmp_path / "big.json"
    with open(p, "wb") as fh:  # a sparse 1 GB file: reading it would take a gigabyte
        fh.truncate(1 << 30)
    with pytest.raises(UserError, match="too large to read: 1,073,741,824 bytes"):
        load_json_file(p, "the config")
    with pytest.raises(UserError, match="cannot be read"):
        load_json_file(tmp_path / "missing.json")
    (tmp_path / "ok.json").write_text('{"a": [1, 2.5, "s"]}')
    assert load_json_file(tmp_path / "ok.json") == {"a": [1, 2.5, "s"]}
