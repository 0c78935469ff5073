"""Programs over integer (or string) tokens given ``--input-range``: compiled categorically, with
the integers of the range as the vocabulary."""

from __future__ import annotations

import math

from rasp_compiler.errors import CompileError
from rasp_compiler.graph.nodes import Program, Tokens


def reads_integer_tokens(program: Program) -> bool:
    """Whether the program reads its tokens as integers (tokens_int): they are then on the grid 1,
    and the program may be compiled numerically over the range's integers (``plans``)."""
    return any(isinstance(n, Tokens) and n.type == "int" for n in program.nodes())


def integer_vocab(program: Program, input_range: tuple[float, float]) -> list[int] | None:
    """For a program that reads no real-valued tokens (tokens_int, tokens_str, ...), the integers
    of ``input_range``: such a program is compiled categorically over that vocabulary."""
    if any(isinstance(n, Tokens) and n.type in ("float", "value") for n in program.nodes()):
        return None
    lo, hi = math.ceil(input_range[0]), math.floor(input_range[1])
    if hi < lo:
        raise CompileError(f"--input-range {input_range[0]} {input_range[1]} holds no integer, and the "
                           "program reads integer (or string) tokens", program.source_file)
    if hi - lo >= 4096:
        raise CompileError(f"--input-range holds {hi - lo + 1} integers, too many tokens for a program "
                           "that reads integer tokens", program.source_file, hint="give a smaller range")
    return list(range(lo, hi + 1))
