"""A fifth careful hour (7 Dec, hard5): what a user coming from tracr and the original RASP REPL
met, each test a reproducer of a defect that was fixed (docs/robustness.md, "A fifth careful
hour")."""

from __future__ import annotations

import io
from pathlib import Path

from rasp_compiler.commands.repl import Repl


def repl(session: str, example: str = "hello") -> str:
    out = io.StringIO()
    Repl(example=example).loop(io.StringIO(session), out)
    return out.getvalue()


def test_a_draw_example_of_the_wrong_kind_is_located(tmp_path: Path, monkeypatch) -> None:
    """`draw(tokens, 5);` said what was wrong but named no line, at the prompt or in a loaded file."""
    monkeypatch.chdir(tmp_path)
    out = repl('draw(tokens, 5);\ndraw(tokens,\n  "");\ndraw(tokens, [[1]]);\n')
    what = "error: the example to draw on is a non-empty string or list of atoms, got"
    assert f"<repl:1>:1:14: {what} 5" in out and "\n    draw(tokens, 5);\n                 ^\n" in out, out
    assert f'<repl:2>:2:3: {what} ""' in out, out
    assert f"<repl:3>:1:14: {what} a list holding a list" in out, out
    (tmp_path / "lib.rasp").write_text("a = tokens;\n\ndraw(a, 5);\nb = a;\n")
    out = repl('load "lib";\nb;\n')
    assert f"{tmp_path / 'lib.rasp'}:3:9: error: the example to draw on" in out, out
    assert out.count("error:") == 1 and "Example: b(\"hello\") = [h, e, l, l, o]" in out  # the file went on
    assert not list(tmp_path.glob("draw-*.png"))
    out = repl('draw(tokens, "ab");\n')  # a good example still draws
    assert "wrote draw-1.png" in out and (tmp_path / "draw-1.png").exists(), out
