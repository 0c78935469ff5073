"""Hostile programs and inputs (issue 49): absurd arithmetic, huge literals, odd Unicode and deeply
nested JSON each give one located error, quickly, never a traceback or a hang."""

from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path

import pytest

from rasp_compiler.cli import main
from rasp_compiler.graph.semantics import MAX_INT_BITS

REPO = Path(__file__).resolve().parents[1]


def rasp(*args: str, stdin: str = "") -> tuple[int, str, str]:
    import sys

    out, err = io.StringIO(), io.StringIO()
    old, sys.stdin = sys.stdin, io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exit_:
                code = exit_.code or 0
    finally:
        sys.stdin = old
    return code, out.getvalue(), err.getvalue()


def run_file(tmp_path: Path, source: str, *args: str) -> tuple[int, str, str, float]:
    f = tmp_path / "p.rasp"
    f.write_text(source)
    start = time.process_time()
    code, out, err = rasp("run", str(f), *(args or ("--input", "abc")))
    return code, out, err, time.process_time() - start


# ---------------------------------------------------------------- defect 1: absurd arithmetic
@pytest.mark.parametrize("source, column", [
    ("zz = 10 ^ 100000000; zz;", 6),                    # the 21 bytes of the issue
    ("y = indices + 7 ^ 123456789;", 15),               # an s-op operand: still refused at the power
    ("a = 9 ^ 3000; b = a * a * a * a; b;", 19),        # a product of huge numbers
])
def test_absurd_integers_are_refused_quickly_with_a_location(tmp_path, source, column) -> None:
    code, _, err, cpu = run_file(tmp_path, source)
    assert code == 1 and "Traceback" not in err
    assert f"p.rasp:1:{column}: error:" in err and f"{MAX_INT_BITS:,} bits" in err
    assert cpu < 1.0


def test_a_float_past_the_float_range_is_an_error_not_inf(tmp_path) -> None:
    code, out, err, _ = run_file(tmp_path, "y = tokens_float * 1e308 * 10; y;", "--input-json", "[1, 2]")
    assert code == 1 and "past the float range" in err and "p.rasp:1:5" in err and out == ""
    code, _, err, _ = run_file(tmp_path, "y = 1e999;")
    assert code == 1 and "p.rasp:1:5: error: the number is past the float range" in err


def test_a_huge_repetition_is_refused(tmp_path) -> None:
    code, _, err, cpu = run_file(tmp_path, 'y = "ab" * 1000000000;')
    assert code == 1 and "at most 1,000,000" in err and cpu < 1.0


def test_the_analysis_refuses_an_absurd_map_quickly(tmp_path) -> None:
    f = tmp_path / "p.rasp"
    f.write_text("y = 10 ^ (tokens_int * 100000000); y;")
    start = time.process_time()
    code, out, err = rasp("compile", str(f), "--vocab", "0123", "--max-len", "3", "-o", str(tmp_path / "m"))
    assert time.process_time() - start < 5.0 and "Traceback" not in err
    assert "too large" in out + err  # a note naming the refused values (the interpreter raises there too)


def test_the_repl_refuses_an_absurd_power_quickly() -> None:
    start = time.process_time()
    code, out, err = rasp("repl", stdin="zz = 10 ^ 100000000;\nzz = 2 ^ 10;\n")
    assert time.process_time() - start < 2.0
    assert "too large" in out + err and "1024" in out


# ---------------------------------------------------------------- defect 2: big integers
def test_a_literal_of_4301_digits_is_a_located_error(tmp_path) -> None:
    code, _, err, _ = run_file(tmp_path, "x = " + "1" * 4301 + "; x;")
    assert code == 1 and "p.rasp:1:5: error: the integer literal of 4,301 digits is too large" in err


def test_leading_zeros_do_not_count_against_a_literal(tmp_path) -> None:
    code, out, err, _ = run_file(tmp_path, "y = indices + " + "0" * 5000 + "7; y;")
    assert code == 0 and out.startswith("[7, 8, 9]"), err


def test_operand_naming_of_a_huge_power(tmp_path) -> None:
    code, _, err, _ = run_file(tmp_path, "y = indices + 10 ^ 5000; y;")
    assert code == 1 and "Traceback" not in err and "p.rasp:1:15" in err


def test_a_4300_digit_result_prints_whole(tmp_path) -> None:
    big = "9" * 4300  # the longest int JSON input reads: tokens_int passes it through
    code, out, err, _ = run_file(tmp_path, "y = tokens_int; y;", "--input-json", f"[{big}]")
    assert code == 0, err
    assert out.strip() == f"[{big}] (ints)"


def test_range_past_2_to_the_63_is_a_located_error(tmp_path) -> None:
    code, _, err, _ = run_file(tmp_path, "y = [x for x in range(99999999999999999999)];")
    assert code == 1 and "p.rasp:1:17: error: range of more than 2^63 numbers is too long" in err


# ---------------------------------------------------------------- defect 3: lone surrogate
def test_a_lone_surrogate_in_input_json_is_an_input_error() -> None:
    code, out, err = rasp("run", str(REPO / "programs/reverse.rasp"), "--input-json", '["\\ud800", "a"]')
    assert code == 1 and "Traceback" not in err and out == ""
    assert "position 0 holds a lone surrogate (\\ud800)" in err


# ---------------------------------------------------------------- defect 4: deep JSON in files
def test_deep_example_json_line_is_an_error_naming_the_line(tmp_path) -> None:
    f = tmp_path / "p.rasp"
    f.write_text("# note\n# example-json: " + "[" * 100_000 + "\ny = tokens_float; y;\n")
    code, _, err = rasp("compile", str(f), "--input-range", "0", "1", "-o", str(tmp_path / "m"))
    assert code == 1 and "Traceback" not in err
    assert f"{f}:2 (# example-json) cannot be read: it nests too deeply" in err


@pytest.mark.parametrize("fmt_name", ["UT_FORMAT", "TARGET_FORMAT"])
def test_deep_safetensors_metadata_is_an_artifact_error(tmp_path, fmt_name) -> None:
    import torch

    from rasp_compiler.errors import ArtifactError
    from rasp_compiler.universal import model, target
    from rasp_compiler.universal.artifact import read_artifact, write_deterministic

    fmt = getattr(model, fmt_name, None) or getattr(target, fmt_name)
    path = tmp_path / "x.safetensors"
    write_deterministic(path, {"w": torch.zeros(2)}, {"format": fmt, "config": "[" * 100_000})
    with pytest.raises(ArtifactError, match="header's config cannot be read: it nests too deeply"):
        read_artifact(path, fmt, "thing")


def test_deep_saved_target_through_the_command_line(tmp_path) -> None:
    import torch

    from rasp_compiler.universal.artifact import write_deterministic
    from rasp_compiler.universal.target import TARGET_FORMAT

    path = tmp_path / "t.safetensors"
    write_deterministic(path, {"w": torch.zeros(2)}, {"format": TARGET_FORMAT, "config": "{" * 100_000})
    code, _, err = rasp("universal", "--target", str(path))
    assert code != 0 and "Traceback" not in err and "nests too deeply" in err


def test_deep_experiment_config_is_an_artifact_error(tmp_path) -> None:
    (tmp_path / "config.json").write_text("[" * 100_000)
    (tmp_path / "model.safetensors").write_bytes(b"")
    code, _, err = rasp("experiment", "probe", str(tmp_path))
    assert code == 1 and "Traceback" not in err and "nests too deeply" in err


# ---------------------------------------------------------------- defect 14: minor semantics
def test_booleans_are_not_numbers_in_a_float_program() -> None:
    code, out, err = rasp("run", str(REPO / "programs/maxmin.rasp"), "--input-json", "[true, false, 1]")
    assert code == 1 and out == ""
    assert "tokens_float cannot read input position 0 (true) as float" in err


def test_inputs_that_overflow_are_an_error_not_inf() -> None:
    code, out, err = rasp("run", str(REPO / "programs/matmul.rasp"), "--input-json",
                          "[1e308, 2, 3, 4, 5, 6, 7, 8, 9, 10]")
    assert code == 1 and "inf" not in out and "past the float range" in err
    assert "matmul.rasp:" in err and "RuntimeWarning" not in err


def test_matmul_of_the_wrong_length_names_the_expected_length() -> None:
    code, out, err = rasp("run", str(REPO / "programs/matmul.rasp"), "--input-json", "[1, 2, 3]")
    assert code == 1 and out == "" and "exactly 10 tokens" in err and "got 3" in err
    ok = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"
    code, out, _ = rasp("run", str(REPO / "programs/matmul.rasp"), "--input-json", ok)
    assert code == 0 and out.startswith("[21.0, 24.0, 27.0, 47.0, 54.0, 61.0")


def test_the_simulators_source_states_its_length() -> None:
    from rasp_compiler.commands.run import FIXED_LENGTH
    from rasp_compiler.simulator.source import generate_source

    text = generate_source(2, 2, 1)
    m = FIXED_LENGTH.search(text)
    assert m is not None and int(m.group(1)) == 2 * 2 * 2 + 2 * 2  # 2*H*d*d + n*d
