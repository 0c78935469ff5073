"""Checks of numeric command-line options, shared by the commands.

Each command calls these first thing in its ``main``, before any work, so that a bad number is one
``error: --NAME ...`` line (a ``UserError``) and never a library traceback or a silent wrong answer.
Only the standard library here: building the parser must not import torch or NumPy.
"""

from __future__ import annotations

import argparse
import math

from rasp_compiler.errors import UserError

SEED_MAX = 2**32 - 1  # NumPy, torch and random all take 0 .. 2**32-1; derived seeds stay in range
SEED_HELP = f"0 to {SEED_MAX}"


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_seed(args: argparse.Namespace, name: str = "seed") -> None:
    """``--seed`` (or another seed option) must be a whole number from 0 to 2**32-1."""
    value = getattr(args, name, None)
    if value is not None and not 0 <= value <= SEED_MAX:
        raise UserError(f"{_flag(name)} must be between 0 and {SEED_MAX}, got {value}")


def check_at_least(args: argparse.Namespace, minimum: int, *names: str) -> None:
    """Each integer option given (not None) is at least ``minimum``."""
    for name in names:
        value = getattr(args, name, None)
        if value is not None and value < minimum:
            raise UserError(f"{_flag(name)} must be at least {minimum}, got {value}")


def check_finite(args: argparse.Namespace, name: str, *, positive: bool = False) -> None:
    """A float option given (not None) is finite and at least 0 (above 0 with ``positive``)."""
    value = getattr(args, name, None)
    if value is None:
        return
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        what = "a positive" if positive else "a non-negative"
        raise UserError(f"{_flag(name)} must be {what} finite number, got {value:g}")


def check_tokens_or_range(args: argparse.Namespace) -> None:
    """--vocab names the tokens of a categorical model; --input-range makes the tokens real numbers
    (or, for a program that reads no tokens_float, the integers of the range): with both, one of
    them would be ignored without a word."""
    if getattr(args, "input_range", None) is not None and getattr(args, "vocab", None) is not None:
        raise UserError("--vocab and --input-range exclude each other",
                        hint="--input-range LO HI for real-valued tokens (tokens_float), --vocab for "
                             "a vocabulary of tokens")
    for name in ("input_grid", "min_denominator"):
        if getattr(args, name, None) is not None and getattr(args, "input_range", None) is None:
            raise UserError(f"{_flag(name)} needs --input-range LO HI: it is about numerical inputs",
                            hint="give --input-range, e.g. --input-range -5 5")


def check_not_empty(args: argparse.Namespace, *names: str) -> None:
    """Each string option given (not None) is not empty: ``-o ''`` or ``--output ''`` is almost
    always an unset shell variable, and the commands read an empty value as "not given" (``if
    args.out:``), so it fell back to a default without a word."""
    for name in names:
        value = getattr(args, name, None)
        if isinstance(value, str) and not value.strip():
            raise UserError(f"{_flag(name)} is empty",
                            hint=f"give {_flag(name)} a value (an unset shell variable?)")


def refuse_unless(args: argparse.Namespace, needed: str, defaults: dict) -> None:
    """Options (names mapped to their parser defaults) that only act with the option ``needed``:
    one given without it is an error, not silently ignored."""
    given = [_flag(name) for name, default in defaults.items() if getattr(args, name, None) != default]
    if given:
        raise UserError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} only with "
                        f"{needed}", hint=f"add {needed}, or drop {', '.join(given)}")
