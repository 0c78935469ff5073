"""Compile a RASP program graph into exact transformer weights.

    from rasp_compiler.compiler import compile_program, load
    model = compile_program(program, vocab=list("abc"), max_len=16)
    model.run(["abca"])          # decoded outputs
    model.forward(["abca"])      # logits [batch, positions, outputs]
    model.trace(["abca"])        # residual stream after every sublayer + attention patterns
    model.save("out/"); load("out/")
    print(model.summary()); model.plan
    weights = compile_weights(program, vocab=list("abc"), max_len=16)   # the same, without torch
    weights.save("out/"); weights.model()

Stages (one module or package each): ``analysis`` (value sets, encodings, joint domains) → ``lowering``
(residual features, heads, MLP ops, map fusion) → ``schedule`` (layers) → ``blocks`` (weights of
each head / MLP) → ``assemble`` (tensors + config) → ``artifact`` (``CompiledWeights``: NumPy
tensors, the files) → ``model`` (``CompiledModel``, a ``rasp_compiler.runtime.RaspModel``, the
same class users load with torch alone).  Nothing before ``model`` imports torch: importing this
package does not either, so ``rasp compile`` starts without it.
"""

from __future__ import annotations

import contextlib
import gc
import math
import time
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable, Iterator

from rasp_compiler.compiler.analysis import Analysis
from rasp_compiler.compiler.artifact import CompiledWeights, config_digest, weights_digest
from rasp_compiler.compiler.assemble import DTYPES
from rasp_compiler.compiler.notes import warn_about_answers
from rasp_compiler.compiler.plans import IntegerTokens, choose
from rasp_compiler.compiler.rewrites import rewritten
from rasp_compiler.compiler.values import vocab_list
from rasp_compiler.errors import CompileError, UserError
from rasp_compiler.graph.expr import deep_recursion
from rasp_compiler.graph.nodes import Program

if TYPE_CHECKING:
    from rasp_compiler.compiler.model import CompiledModel


MAX_LEN = 2048


def _whole_number(value: Any, what: str) -> int:
    """An integral argument as an int (a NumPy integer too); anything else (a bool, a float) is
    refused here, so the range checks of ``compile_program`` see only ints."""
    if hasattr(value, "item") and not isinstance(value, (bool, str)):
        try:
            value = value.item()
        except (TypeError, ValueError):
            pass
    if not isinstance(value, int) or isinstance(value, bool):
        raise UserError(f"{what} must be a positive integer, got {value!r}")
    return value


def _flag(value: Any, what: str) -> bool:
    """A yes/no argument as a bool (a NumPy bool too): a string such as "no" is truthy, and
    compiled as if it were True."""
    if hasattr(value, "item") and not isinstance(value, (bool, str)):
        try:
            value = value.item()
        except (TypeError, ValueError):
            pass
    if not isinstance(value, bool):
        raise UserError(f"{what} must be True or False, got {value!r}")
    return value


def _range(value: Any) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise UserError(f"input_range (--input-range) must be two numbers (lo, hi), got {value!r}") from None
    return lo, hi


def _numeric_options(input_range: tuple[float, float] | None, input_grid: Any,
                     min_denominator: Any) -> dict[str, Any]:
    """``input_grid`` as an exact positive fraction (0.001 is 1/1000) and ``min_denominator`` as a
    positive float; both need ``input_range``."""
    out: dict[str, Any] = {"input_grid": None, "min_denominator": None}
    for name, value in (("input_grid", input_grid), ("min_denominator", min_denominator)):
        if value is None:
            continue
        flag = "--" + name.replace("_", "-")
        if input_range is None:
            raise UserError(f"{name} ({flag}) needs input_range (--input-range): it is about real inputs")
        try:
            frac = Fraction(str(value)) if not isinstance(value, Fraction) else value
        except (ValueError, ZeroDivisionError):
            frac = None
        if isinstance(value, bool) or frac is None or not frac > 0 or not math.isfinite(float(frac)):
            raise UserError(f"{name} ({flag}) must be a number > 0, got {value!r}")
        out[name] = frac if name == "input_grid" else float(frac)
    return out


def compile_program(program: Program, vocab: list[Any] | str, max_len: int, *, output: str | None = None,
                    dtype: str = "float32", causal: bool = False,
                    fixed_length: int | None = None,
                    input_range: tuple[float, float] | None = None,
                    input_grid: float | str | Fraction | None = None,
                    min_denominator: float | None = None,
                    progress: Callable[[str], None] | None = None) -> CompiledModel:
    """Compile ``program`` for inputs over ``vocab`` of length 1..``max_len``.  With
    ``input_range=(lo, hi)`` the program reads real numbers in [lo, hi] (``tokens_float``) and is
    compiled numerically (``compiler/real/``; ``vocab`` is ignored).  ``input_grid`` states that
    every input is a multiple of it (comparisons of values on that grid then compile exactly);
    ``min_denominator`` compiles a division whose denominator's range holds 0 on |denominator| >=
    it, and the model flags the inputs it excludes.  ``progress`` is called with the name of each
    stage as it starts.

    A compile note that concerns the answers (a float32 output past 2^24, inputs with no answer)
    is also raised as a ``rasp_compiler.errors.CompileWarning`` (``compiler/notes.py``); every
    note is in ``model.config["notes"]`` and ``model.summary()``."""
    weights = compile_weights(program, vocab, max_len, output=output, dtype=dtype, causal=causal,
                              fixed_length=fixed_length, input_range=input_range, input_grid=input_grid,
                              min_denominator=min_denominator, progress=progress)
    warn_about_answers(weights.config.get("notes", []))
    return weights.model()


def compile_weights(program: Program, vocab: list[Any] | str, max_len: int, *, output: str | None = None,
                    dtype: str = "float32", causal: bool = False,
                    fixed_length: int | None = None,
                    input_range: tuple[float, float] | None = None,
                    input_grid: float | str | Fraction | None = None,
                    min_denominator: float | None = None,
                    progress: Callable[[str], None] | None = None) -> CompiledWeights:
    """``compile_program`` up to the weights, without torch: their config, NumPy tensors, report
    (``summary()``, ``stats()``) and files (``save``); ``.model()`` is the torch model."""
    stage = progress or (lambda name: None)
    start = time.perf_counter()
    if not isinstance(program, Program):
        raise UserError(f"compile_program takes a Program, not {type(program).__name__}",
                        hint="load a file with load_program(path), parse text with program_from_source"
                             "(text), or pass an s-op to rasp_compiler.pyapi.compile_program")
    max_len = _whole_number(max_len, "max_len (--max-len)")
    causal = _flag(causal, "causal (--causal)")
    if fixed_length is not None:
        fixed_length = _whole_number(fixed_length, "fixed_length (--fixed-length)")
    if input_range is not None:
        input_range = _range(input_range)
    numeric_options = _numeric_options(input_range, input_grid, min_denominator)
    integer_range = None  # integer tokens given a range: also weighed as a numeric plan
    if input_range is not None:  # integer / string tokens: the range's integers are the vocabulary
        from rasp_compiler.compiler.real.integer_tokens import integer_vocab, reads_integer_tokens
        ints = integer_vocab(program, input_range)
        if ints is not None:  # compiled categorically, or numerically over those integers
            integer_range = input_range if reads_integer_tokens(program) else None
            vocab, input_range = ints, None
    if vocab is None and input_range is None:  # it said "the vocabulary (--vocab) is empty"
        raise UserError("no vocabulary given (vocab is None)",
                        hint='give the tokens: vocab="abc", ["a", "b"] or {1, 2, 3} (--vocab abc on the '
                             'command line)')
    vocab = vocab_list(vocab) if input_range is None else ["<number>"]
    if not vocab:
        raise UserError("the vocabulary (--vocab) is empty",
                        hint='give the tokens: vocab="abc" or ["a", "b"] (--vocab abc on the command line)')
    if dtype not in DTYPES:
        raise UserError(f"unknown dtype {dtype!r}", hint="use float32 or float64")
    if max_len < 1:
        raise UserError(f"max_len (--max-len) must be a positive integer, got {max_len!r}")
    if fixed_length is not None and not 1 <= fixed_length <= max_len:
        raise UserError(f"fixed_length must be between 1 and max_len ({max_len})")
    if fixed_length is None and max_len > MAX_LEN:
        # Positions and lengths are one-hot, and the analysis reads every (position, length) pair:
        # past this a program that reads both takes minutes and gigabytes before it is refused.
        raise UserError(f"--max-len {max_len:,} is more than the compiler takes ({MAX_LEN:,}): "
                        "positions and lengths are one-hot, so widths grow with it and tables "
                        "with its square",
                        hint="compile for the longest input you need; a model for one input "
                             "length (--fixed-length) has no such limit")
    if output is not None:
        try:
            program = program.with_output(output)
        except KeyError:
            known = ", ".join(sorted(program.names)) or "none"
            raise UserError(f"no s-op named '{output}' in the program (named: {known})") from None
    out_node = program.node(program.output)
    if out_node.is_selector:
        raise CompileError(f"the output '{program.output}' is a selector; a model outputs an s-op",
                           program.source_file, hint="aggregate it, or take its selector_width")
    # Analysis and lowering recurse along chains of maps; a long chain (`- - … - indices`) needs
    # more than Python's default 1,000 frames, as elaboration does (lang.elaborator.exec_source).
    try:
        with deep_recursion(), _collector_paused(), _one_blas_thread():
            integers = None if integer_range is None else IntegerTokens(program, integer_range,
                                                                        numeric_options)
            config, tensors, an, tried, compiled = _weights(program, vocab, max_len, dtype, causal,
                                                            fixed_length, input_range, stage,
                                                            numeric_options, integers)
    except RecursionError:
        raise CompileError("the program's chains of operations are too long to compile",
                           program.source_file, hint="split a long chain of maps with an aggregate, "
                                                     "or write it as one map") from None
    config["weights_sha256"] = weights_digest(tensors)
    config_digest(config)  # a config JSON cannot hold fails here, at compile time, not at save
    return CompiledWeights(config, tensors, analysis=an, compile_seconds=time.perf_counter() - start,
                           plans_tried=tried, compiled_program=compiled)


_blas: Any = None  # threadpoolctl's controller of NumPy's BLAS, found on the first compile


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """NumPy's BLAS on one thread while the weights are built.  OpenBLAS splits a large product
    among its threads, which changes the order its sums are added in, so the weights would
    depend on the machine's core count (DEVELOPERS.md, "byte-identical weights")."""
    global _blas
    if _blas is None:
        from threadpoolctl import ThreadpoolController
        _blas = ThreadpoolController()
    with _blas.limit(limits=1, user_api="blas"):
        yield


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while the weights are built (as it was after).  A
    compile allocates tables of tens of thousands of tuples, which hold no cycles and are freed
    by reference counting; each full collection that the allocations trigger walks every object
    the process holds, which in a process that has compiled before made some compiles of tracr's
    shuffle-Dyck-2 at max_len 20 take half as long again."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _weights(program: Program, vocab: list[Any], max_len: int, dtype: str, causal: bool,
             fixed_length: int | None, input_range: tuple[float, float] | None,
             stage: Callable[[str], None], numeric_options: dict[str, Any],
             integers: IntegerTokens | None = None
             ) -> tuple[dict, dict, Analysis | None, list[dict], Program | None]:
    """The config and tensors of ``program``'s model, its analysis (for categorical programs), the
    plans weighed for it (``plans.choose``) and the program the plan is of.  A program over integer
    tokens given ``--input-range`` (``integers``) is also weighed as a numeric plan."""
    if input_range is not None:
        from rasp_compiler.compiler.real import compile_numeric
        config, tensors = compile_numeric(program, input_range, max_len, dtype=dtype, causal=causal,
                                          fixed_length=fixed_length, **numeric_options)
        return config, tensors, None, [], None
    stage("value sets")
    # the same values with fewer heads and layers (``rewrites``)
    chosen = choose(rewritten(program, max_len), vocab, max_len, dtype=dtype, causal=causal,
                    fixed_length=fixed_length, stage=stage, integers=integers)
    return (chosen.config, chosen.tensors, chosen.analysis, [t.as_dict() for t in chosen.tried],
            chosen.program)


def load(directory: str) -> CompiledModel:
    """Load a saved model with its plan, ``summary()`` and ``stats()`` (the compile time is not
    saved: it is None). ``runtime.RaspModel.load`` loads the same model with torch and
    safetensors alone."""
    from rasp_compiler.compiler.model import CompiledModel

    return CompiledModel.load(directory)


def __getattr__(name: str) -> Any:
    if name == "CompiledModel":  # on first use: it is a torch model
        from rasp_compiler.compiler.model import CompiledModel

        return CompiledModel
    raise AttributeError(f"module 'rasp_compiler.compiler' has no attribute {name!r}")


__all__ = ["CompiledModel", "CompiledWeights", "compile_program", "compile_weights", "load"]
