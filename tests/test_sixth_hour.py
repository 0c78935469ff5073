"""A sixth careful hour (8 Dec, hard6): what a transformer-theory researcher met in the universal
simulator, the fixed universal transformers, `rasp experiment` and the original REPL's semantics,
each test a reproducer of a defect that was fixed (docs/robustness.md, "A sixth careful hour")."""

from __future__ import annotations

from pathlib import Path

import pytest

from rasp_compiler.cli import main
from rasp_compiler.errors import InputError
from rasp_compiler.lang import program_from_source, run


def test_tokens_float_of_a_non_finite_token_is_refused_as_the_input(tmp_path: Path, capsys) -> None:
    """`tokens_float` of the token "nan" (also "inf", "1e400"): `rasp compile` crashed with a
    KeyError traceback, a vocabulary with "inf" compiled a model that printed inf where `rasp run`
    refused, and `rasp run` blamed the program's arithmetic for the input's own value."""
    prog = tmp_path / "f.rasp"
    prog.write_text("tokens_float;\n")
    for token in ("nan", "inf", "-1e999"):
        assert main(["compile", str(prog), "--vocab", f'["1", "{token}"]', "--max-len", "2",
                     "-o", str(tmp_path / "m")]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: vocabulary entry '{token}' reads as ") and "Traceback" not in err, err
        assert "(tokens_float): a compiled model carries finite numbers only" in err
        assert f"hint: drop '{token}' from the vocabulary" in err
        assert not (tmp_path / "m").exists()
        assert main(["run", str(prog), "--input-json", f'["1", "{token}"]']) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: tokens_float reads input position 1 ('{token}') as "), err
        assert "not a finite number" in err and "arithmetic" not in err
    with pytest.raises(InputError, match="not a finite number"):
        run(program_from_source("tokens_float * 2;"), [1.0, float("nan")])
    # finite number-like strings read as before, in both (the model and the interpreter agree)
    prog.write_text("tokens_float * 10;\n")
    assert main(["check", str(prog), "--vocab", '["1_0", "01", " 1", "1e1", "-0", "1.5"]',
                 "--max-len", "2", "--exhaustive"]) == 0
    assert "exhaustive: 42/42 inputs agree" in capsys.readouterr().out
    assert run(program_from_source("tokens_float * 10;"), ["1e1", "1.5"]) == [100.0, 15.0]

