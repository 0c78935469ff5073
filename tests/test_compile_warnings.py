"""Compile notes that concern the answers reach Python callers as ``CompileWarning``s
(``compiler/notes.py``): the float32 note about a numerical output past 2^24 was printed by
``rasp compile`` but, in the Python API, only in ``summary()``."""

from __future__ import annotations

import warnings

import pytest

from rasp_compiler import compile_program
from rasp_compiler import pyapi as rasp
from rasp_compiler.cli import main as cli
from rasp_compiler.errors import CompileWarning
from rasp_compiler.lang import program_from_source

POWERS = "x = numerical(10 ^ indices); x;"  # 10^9 at max_len 10: past float32's 2^24


def _compile_recording(*args, **kwargs) -> tuple[object, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = compile_program(*args, **kwargs)
    return model, caught


def test_a_float32_output_past_2_to_the_24_warns_at_the_callers_line() -> None:
    model, caught = _compile_recording(program_from_source(POWERS, output="x"), "ab", 10)
    assert [w.category for w in caught] == [CompileWarning]
    assert "past 16,777,216 where float32 stops holding every integer" in str(caught[0].message)
    assert caught[0].filename == __file__  # the user's line, not the compiler's
    assert str(caught[0].message) == "compile note: " + model.config["notes"][0]


def test_the_tracr_style_api_warns_too_and_float64_does_not() -> None:
    sop = rasp.numerical(rasp.Map(lambda i: 10 ** i, rasp.indices))
    with pytest.warns(CompileWarning, match="float32 stops holding every integer") as record:
        rasp.compile_program(sop, "ab", 10)
    assert record[0].filename == __file__
    _, caught = _compile_recording(program_from_source(POWERS, output="x"), "ab", 10, dtype="float64")
    assert caught == []


def test_inputs_without_an_answer_warn_and_a_plain_program_does_not() -> None:
    """A dict without the key 'b': inputs holding 'b' have no answer (the interpreter raises)."""
    _, caught = _compile_recording(program_from_source('x = {"a": 1}[tokens] + 0; x;', output="x"), "ab", 3)
    assert len(caught) == 1 and "have no answer" in str(caught[0].message)
    _, caught = _compile_recording(program_from_source("x = tokens; x;", output="x"), "ab", 3)
    assert caught == []


def test_the_command_line_prints_the_note_in_its_summary_not_as_a_python_warning(tmp_path, capsys) -> None:
    src = tmp_path / "powers.rasp"
    src.write_text(POWERS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cli(["compile", str(src), "--vocab", "ab", "--max-len", "10", "-o", str(tmp_path / "m")]) == 0
    out = capsys.readouterr()
    assert "note: the numerical output reaches 1e+09" in out.out
    assert "CompileWarning" not in out.err and caught == []


def test_the_runtime_reads_the_several_keys_note_by_the_phrase_the_compiler_writes() -> None:
    """runtime.py runs without the compiler, so it spells the phrase out (known-bugs #22)."""
    from rasp_compiler.compiler.notes import SEVERAL_KEYS
    from rasp_compiler.runtime import SEVERAL_KEYS_NOTE

    assert SEVERAL_KEYS == SEVERAL_KEYS_NOTE
