"""The `rasp` entry point: every command is reachable and start-up stays light."""

from __future__ import annotations

import subprocess
import sys

from rasp_compiler.cli import COMMANDS, build_parser


def test_every_command_is_registered() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == set(COMMANDS)


def test_building_the_parser_does_not_import_torch() -> None:
    # `rasp run` must not pay torch's multi-second import; commands import heavy modules in main().
    code = ("import sys; from rasp_compiler.cli import build_parser; build_parser(); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_no_command_prints_help_and_fails() -> None:
    out = subprocess.run([sys.executable, "-m", "rasp_compiler.cli"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "COMMAND" in out.stdout


def test_negative_numbers_in_exponent_form_are_values_not_options() -> None:
    parser = build_parser()
    args = parser.parse_args(["compile", "f.rasp", "--input-range", "-1e6", "1e6", "--max-len", "4",
                              "-o", "m"])
    assert args.input_range == [-1e6, 1e6]
    args = parser.parse_args(["simulate", "--n", "2", "--d", "2", "--input-range", "-1.5E+2", "-.5"])
    assert args.input_range == [-150.0, -0.5]
