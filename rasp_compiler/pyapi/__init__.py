"""Write RASP programs in Python, with the names tracr users know.

    from rasp_compiler.pyapi import (Comparison, aggregate, compile_program, indices, length, select,
                                     to_source, tokens)
    flip = select(indices, length - indices - 1, Comparison.EQ)
    reverse = aggregate(flip, tokens).named("reverse")
    model = compile_program(reverse, vocab="abc", max_len=8)
    print(to_source(reverse.program()))

See ``docs/python-api.md``; ``rasp_compiler.pyapi.lib`` has tracr's library programs.
"""

from typing import TYPE_CHECKING, Any, Callable, Union

from rasp_compiler.graph.nodes import Program
from rasp_compiler.pyapi.aggregates import Aggregate, SelectorWidth, aggregate, selector_width
from rasp_compiler.pyapi.base import (
    PyApiKeyError,
    PyApiTypeError,
    PyApiValueError,
    RASPExpr,
    Selector,
    SOp,
    indices,
    length,
    tokens,
    tokens_bool,
    tokens_float,
    tokens_int,
    tokens_str,
)
from rasp_compiler.pyapi.encodings import Encoding, annotate, get_encoding, is_categorical, is_numerical
from rasp_compiler.pyapi.program import build_program
from rasp_compiler.pyapi.selectors import (
    Comparison,
    ConstantSelector,
    Select,
    SelectorAnd,
    SelectorNot,
    SelectorOr,
    select,
    selector_and,
    selector_not,
    selector_or,
)
from rasp_compiler.pyapi.sops import (
    ConstantLengthError,
    ConstantSOp,
    Full,
    LinearSequenceMap,
    Map,
    SequenceMap,
    categorical,
    indicator,
    numerical,
    rasp_round,
    sop_not,
)
from rasp_compiler.pyapi.source import to_source

if TYPE_CHECKING:  # the compiler loads torch: only a compile imports it
    from rasp_compiler.compiler import CompiledModel

# tracr's type aliases, for code that annotates with them
Value = Union[None, int, float, str, bool]
NumericValue = Union[int, float]
SelectorValue = list[list[bool]]


def as_program(program_or_sop: Any) -> Program:
    """A ``Program`` from a Python-API s-op (or a Program, unchanged)."""
    if isinstance(program_or_sop, RASPExpr):
        return program_or_sop.program()
    if not isinstance(program_or_sop, Program):
        # a compiled model is the usual slip in rasp.run / evaluate: the text hint misled there
        compiled = hasattr(program_or_sop, "run") or hasattr(program_or_sop, "apply")
        hint = ("a compiled model runs itself: model.run([xs]) (tracr's: model.apply([BOS, *xs]))"
                if compiled else "for RASP text use rasp_compiler.lang.program_from_source(text)")
        raise PyApiTypeError(f"expected a Program or a Python-API s-op, got {type(program_or_sop).__name__}",
                             hint=hint)
    return program_or_sop


# tracr's compile_rasp_to_model arguments, which a tracr user passes here by habit
_TRACR_ARGUMENTS = {
    "max_seq_len": "compile_program's length is max_len=",
    "compiler_bos": "BOS and padding are built in here; for tracr's apply([BOS, ...]) layout use "
                    "rasp_compiler.pyapi.compiling.compile_rasp_to_model(p, vocab, max_seq_len, "
                    "compiler_bos=...)",
    "compiler_pad": "BOS and padding are built in here; for tracr's apply([BOS, ...]) layout use "
                    "rasp_compiler.pyapi.compiling.compile_rasp_to_model(p, vocab, max_seq_len, "
                    "compiler_pad=...)",
    "mlp_exactness": "every MLP here is exact on the values the compiler derives; drop the argument",
}


def compile_program(program_or_sop: Any, vocab: Any, max_len: int | None = None, *,
                    output: str | None = None,
                    dtype: str = "float32", causal: bool = False, fixed_length: int | None = None,
                    input_range: tuple[float, float] | None = None,
                    input_grid: Any = None, min_denominator: float | None = None,
                    progress: Callable[[str], None] | None = None,
                    **unknown: Any) -> "CompiledModel":
    """Compile a Python-API s-op (or a Program) for inputs over ``vocab`` of length 1..``max_len``.

    The options are ``rasp_compiler.compiler.compile_program``'s: ``output`` (another named s-op),
    ``dtype`` ("float32" or "float64"), ``causal`` (causal attention; a program that looks ahead
    is refused), ``fixed_length`` (inputs of exactly that length), ``input_range`` ((lo, hi):
    real-valued tokens, ``vocab`` unused), ``input_grid`` (every input a multiple of it:
    comparisons of reals compile exactly), ``min_denominator`` (a division near 0 excluded, the
    inputs there flagged) and ``progress`` (called with each stage's name).  tracr's arguments
    (``max_seq_len=``, ``compiler_bos=``, …) are refused with a ``PyApiTypeError`` that says where
    they went; ``output=`` takes a name, not an s-op."""
    from rasp_compiler.compiler import compile_program as compile_graph

    if unknown:  # Python's own "unexpected keyword argument" says nothing of where tracr's went
        name = sorted(unknown)[0]
        raise PyApiTypeError(f"compile_program() has no argument {name}=",
                             hint=_TRACR_ARGUMENTS.get(name, "its options are output, dtype, causal, "
                                                             "fixed_length, input_range, input_grid, "
                                                             "min_denominator and progress"))
    if isinstance(output, RASPExpr):  # it was looked up by its repr, "no s-op named '<map #9>'"
        named = (f"pass output={output.ident!r}, the name it was given" if output.ident
                 else "name it (.named('x')) and pass output='x'")
        raise PyApiTypeError(f"output= takes the name of an s-op in the program (a str), got the "
                             f"{'selector' if isinstance(output, Selector) else 's-op'} {output!r}",
                             hint=f"compile that s-op itself: compile_program(sop, vocab, max_len); or "
                                  f"{named}")
    from rasp_compiler.compiler import MAX_LEN

    if type(max_len) is int and max_len > MAX_LEN and fixed_length is None:
        # named as this call's argument: the compiler's refusal names the flag --max-len
        raise PyApiValueError(f"max_len {max_len:,} is more than the compiler takes ({MAX_LEN:,}): "
                              "positions and lengths are one-hot, so widths grow with it and tables "
                              "with its square", hint="compile for the longest input you need; a model "
                              "for one input length (fixed_length=N) has no such limit")
    return compile_graph(as_program(program_or_sop), vocab, max_len, output=output, dtype=dtype,
                         causal=causal, fixed_length=fixed_length, input_range=input_range,
                         input_grid=input_grid, min_denominator=min_denominator, progress=progress)


def run(program_or_sop: Any, inputs: Any) -> Any:
    """The reference interpreter's output of the program on one input."""
    from rasp_compiler.interpreter import run as interpret
    from rasp_compiler.pyapi.program import evaluate_expr

    if isinstance(program_or_sop, RASPExpr):
        return evaluate_expr(program_or_sop, inputs)
    return interpret(as_program(program_or_sop), inputs)


evaluate = run  # tracr's rasp.evaluate(expr, xs)


class DefaultRASPEvaluator:
    """tracr's evaluator class: ``DefaultRASPEvaluator().evaluate(expr, xs)`` is ``evaluate``."""

    def evaluate(self, expr: Any, xs: Any) -> Any:
        return run(expr, xs)


__all__ = [
    "Aggregate", "Comparison", "ConstantLengthError", "ConstantSOp", "ConstantSelector",
    "DefaultRASPEvaluator", "Encoding", "Full", "LinearSequenceMap", "Map", "NumericValue", "PyApiTypeError",
    "PyApiKeyError", "PyApiValueError", "RASPExpr",
    "Select", "Selector", "SelectorAnd", "SelectorNot", "SelectorOr", "SelectorValue", "SelectorWidth",
    "SequenceMap", "SOp", "Value", "aggregate", "annotate", "as_program", "build_program", "categorical",
    "compile_program", "evaluate", "get_encoding", "indicator", "indices", "is_categorical", "is_numerical",
    "length", "numerical", "rasp_round", "run", "select", "selector_and", "selector_not", "selector_or",
    "selector_width", "sop_not", "to_source", "tokens", "tokens_bool", "tokens_float", "tokens_int",
    "tokens_str",
]
