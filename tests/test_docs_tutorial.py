"""docs/tutorial.md shows real runs: its `rasp run` / `rasp compile` transcript and its Python API
output are recomputed here, so the page cannot fall behind the compiler."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import warnings
from pathlib import Path

from rasp_compiler.cli import main
from rasp_compiler.errors import CompileWarning

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = (ROOT / "docs" / "tutorial.md").read_text(encoding="utf-8")


def _transcript(command: str) -> list[str]:
    """The lines the tutorial shows after ``$ COMMAND`` (up to the next ``$`` or the block's end)."""
    block = TUTORIAL[TUTORIAL.index(f"$ {command}\n") + len(command) + 3:]
    block = block[: block.index("```")]
    return [ln for ln in block.splitlines() if ln][: next(
        (i for i, ln in enumerate(block.splitlines()) if ln.startswith("$ ")), None)]


def _run(args: list[str]) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(args) == 0
    return out.getvalue().splitlines()


def _masked(lines: list[str]) -> list[str]:
    return [re.sub(r"compile time: [0-9.]+ s", "compile time: T s", ln) for ln in lines]


def test_tutorial_run_and_compile_transcripts(tmp_path: Path, monkeypatch) -> None:
    shutil.copy(ROOT / "programs" / "sort.rasp", tmp_path / "sort.rasp")
    monkeypatch.chdir(tmp_path)
    assert _run(["run", "sort.rasp", "--input", "banana"]) == _transcript("rasp run sort.rasp --input banana")
    shown = _transcript("rasp compile sort.rasp --vocab abn --max-len 8 -o sort_model/")
    got = _run(["compile", "sort.rasp", "--vocab", "abn", "--max-len", "8", "-o", "sort_model/"])
    assert _masked(got) == _masked(shown)


def test_tutorial_python_api_output(tmp_path: Path, monkeypatch) -> None:
    section = TUTORIAL[TUTORIAL.index("## 6. The same program from Python"):]
    start = section.index("```python\n") + 10
    end = section.index("```", start)
    code = section[start:end]
    after = section[end + 3:]                        # the output block follows the code block
    printed = after[after.index("```\n") + 4:].splitlines()[0]
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(code, "tutorial.md", "exec"), {})
    assert out.getvalue().splitlines()[0] == printed
    # the page says what the run prints on stderr too (a reader following it saw an unexplained warning)
    told = " ".join(after[after.index("The script also\nprints, on stderr,"):].split())
    assert [str(w.message) for w in caught if w.category is CompileWarning] == \
        ["compile note: sorted: several keys may be selected: the interpreter rejects such inputs (a mean "
         "of non-numbers)"]
    assert "`CompileWarning: compile note: sorted: several keys may be selected: the interpreter rejects " \
           "such inputs (a mean of non-numbers)`" in told
    shown = section[section.index("$ cat sort_api.rasp\n") + len("$ cat sort_api.rasp\n"):]
    shown = shown[: shown.index("$ rasp run")]
    assert (tmp_path / "sort_api.rasp").read_text(encoding="utf-8") == shown


def test_python_api_page_shows_what_its_example_prints(monkeypatch) -> None:
    """docs/python-api.md pastes the output of docs/python_api_example.py."""
    doc = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    start = doc.index("```\n", doc.index("`.venv/bin/python docs/python_api_example.py` printed"))
    shown = doc[start + 4:]
    shown = shown[: shown.index("```")]
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        script = ROOT / "docs" / "python_api_example.py"
        exec(compile(script.read_text(encoding="utf-8"), str(script), "exec"), {"__name__": "__main__"})

    def masked(text: str) -> str:
        text = re.sub(r"compile time: [0-9.]+ s", "compile time: T s", text)
        return re.sub(r"\([^()\s]*python_api_example\.py:", "(python_api_example.py:", text)
    assert masked(out.getvalue()) == masked(shown)


def test_tutorial_transformer_lens_section(tmp_path: Path, monkeypatch) -> None:
    """Section 5: the export transcript and the TransformerLens snippet's printed lines are real."""
    import importlib.util

    import pytest

    if importlib.util.find_spec("transformer_lens") is None:
        pytest.skip("the optional extra: pip install -e .[lens]")
    shutil.copy(ROOT / "programs" / "sort.rasp", tmp_path / "sort.rasp")
    monkeypatch.chdir(tmp_path)
    _run(["compile", "sort.rasp", "--vocab", "abn", "--max-len", "8", "-o", "sort_model/"])
    command = "rasp export sort_model/ --format transformer-lens -o sort_tl.pt --verify --inputs 200"
    assert _run(command.split()[1:]) == _transcript(command)
    section = TUTORIAL[TUTORIAL.index("## 5. Open it in TransformerLens"):TUTORIAL.index("## 6.")]
    start = section.index("```python\n") + 10
    end = section.index("```", start)
    after = section[end + 3:]
    shown = after[after.index("```\n") + 4:]
    shown = shown[: shown.index("```")].splitlines()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(section[start:end], "tutorial.md", "exec"), {})
    assert out.getvalue().splitlines() == shown
    # the padded-batch advice names a function that exists and masks padding
    assert "run_padded" in section
    from rasp_compiler.export import run_padded  # noqa: F401


# The README's transcripts and every `$ rasp run` line of the docs are re-run by
# tests/test_docs_commands.py (scripts/check_docs.py), with the docs' other shown commands.


def test_readme_python_snippet_prints_what_it_shows() -> None:
    """The README's first Python block runs, without a warning, and prints the block after it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("```python\n") + 10
    end = readme.index("```", start)
    after = readme[end + 3:]
    shown_start = after.index("```\n") + 4
    shown = after[shown_start:after.index("```", shown_start)].splitlines()
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("error")
        exec(compile(readme[start:end], "README.md", "exec"), {})
    assert out.getvalue().splitlines() == shown
