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

import math
import time
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable

from rasp_compiler.compiler.analysis import Analysis, limits
from rasp_compiler.compiler.artifact import CompiledWeights, config_digest, weights_digest
from rasp_compiler.compiler.assemble import DTYPES, assemble
from rasp_compiler.compiler.lowering import Lowering
from rasp_compiler.compiler.rewrites import (
    bos_counts,
    nonzero_widths,
    numerical_output,
    shared_subexpressions,
)
from rasp_compiler.compiler.schedule import head_depth, schedule
from rasp_compiler.compiler.values import vocab_list
from rasp_compiler.errors import CompileError, ModelTooLargeError, UserError
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
    stage as it starts."""
    return compile_weights(program, vocab, max_len, output=output, dtype=dtype, causal=causal,
                           fixed_length=fixed_length, input_range=input_range, input_grid=input_grid,
                           min_denominator=min_denominator, progress=progress).model()


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
    integer_range = None
    if input_range is not None:  # integer / string tokens: the range's integers are the vocabulary
        from rasp_compiler.compiler.real import integer_vocab
        ints = integer_vocab(program, input_range)
        if ints is not None:  # compiled categorically, or numerically over those integers
            vocab, integer_range, input_range = ints, input_range, None
    vocab = vocab_list(vocab) if input_range is None else ["<number>"]
    if not vocab:
        raise UserError("the vocabulary is empty", hint="give --vocab abc or --vocab '[\"a\",\"b\"]'")
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
        with deep_recursion():
            if integer_range is not None and _reads_integers(program):
                config, tensors, an = _integer_plans(program, vocab, max_len, dtype, causal, fixed_length,
                                                     integer_range, numeric_options, stage)
            else:
                config, tensors, an = _weights(program, vocab, max_len, dtype, causal, fixed_length,
                                               input_range, stage, numeric_options)
    except RecursionError:
        raise CompileError("the program's chains of operations are too long to compile",
                           program.source_file, hint="split a long chain of maps with an aggregate, "
                                                     "or write it as one map") from None
    config["weights_sha256"] = weights_digest(tensors)
    config_digest(config)  # a config JSON cannot hold fails here, at compile time, not at save
    return CompiledWeights(config, tensors, analysis=an, compile_seconds=time.perf_counter() - start)


def _reads_integers(program: Program) -> bool:
    from rasp_compiler.graph.nodes import Tokens

    return any(isinstance(n, Tokens) and n.type == "int" for n in program.nodes())


def _integer_plans(program: Program, vocab: list[Any], max_len: int, dtype: str, causal: bool,
                   fixed_length: int | None, integer_range: tuple[float, float],
                   numeric_options: dict[str, Any], stage: Callable[[str], None]
                   ) -> tuple[dict, dict, Analysis | None]:
    """A program over integer tokens in ``integer_range``: the categorical plan over the range's
    integers and the numeric plan (exact product and sum units over the integers, the output
    rounded to the integer it stands for), the smaller kept (layers, then parameters).  A numeric
    plan that is not exact (a division's reciprocal, an output that is no integer) is kept only
    where the categorical plan is refused."""
    from rasp_compiler.compiler.real import compile_numeric

    stage("numeric plan over the integers")
    try:
        numeric = compile_numeric(program, integer_range, max_len, dtype=dtype, causal=causal,
                                  fixed_length=fixed_length, **numeric_options)
        node, rows = numeric[0]["numeric"]["largest_table"].values()
        rows = math.inf if rows is None else rows
    except UserError as err:
        numeric, numeric_error = None, err
        node, rows = getattr(err, "largest_table", (None, 0.0))
    exact = numeric is not None and numeric[0]["output"]["integer"] and not numeric[0].get("guards") \
        and numeric[0]["numeric"]["approx_error_bound"] == 0
    # a categorical table of R rows costs at least R hidden units, each reading and writing a
    # number: where that alone outweighs the numeric plan (or passes the size guard's scale), the
    # categorical plan is not built (a 3 x 3 determinant over -9..9 took a minute to be refused)
    too_large = 2 * rows > (_size(numeric)[1] if exact else limits.DOMAIN_CAP)
    if too_large:
        what = f"'{node}' alone would tabulate {rows:,.0f} joint values" if math.isfinite(rows) else \
            f"'{node}' reads real numbers, which no table holds"
        if numeric is None:
            raise numeric_error from None
        how = "exact sums and products, the output rounded to its integer" if exact else \
            "with the error bound stated"
        numeric[0]["notes"].append(f"integer tokens: compiled numerically ({how}); categorically, {what}")
        return numeric[0], numeric[1], None
    try:
        categorical = _weights(program, vocab, max_len, dtype, causal, fixed_length, None, stage, {})
    except UserError as err:
        if numeric is None:
            raise (numeric_error if isinstance(err, ModelTooLargeError) else err) from None
        numeric[0]["notes"].append(f"integer tokens: compiled numerically over {len(vocab)} integers "
                                   f"(categorically: {err.message.splitlines()[0]})")
        return numeric[0], numeric[1], None
    if numeric is None:
        categorical[0]["notes"].append("integer tokens: compiled categorically over the range's "
                                       f"{len(vocab)} integers (numerically: "
                                       f"{numeric_error.message.splitlines()[0]})")
        return categorical
    if not exact or _size(categorical) <= _size(numeric):
        return categorical
    numeric[0]["notes"].append(
        f"integer tokens: compiled numerically (exact sums and products, the output rounded to its "
        f"integer), {_size(numeric)[1]:,} parameters against {_size(categorical)[1]:,} categorically")
    return numeric[0], numeric[1], None


def _weights(program: Program, vocab: list[Any], max_len: int, dtype: str, causal: bool,
             fixed_length: int | None, input_range: tuple[float, float] | None,
             stage: Callable[[str], None], numeric_options: dict[str, Any]
             ) -> tuple[dict, dict, Analysis | None]:
    """The config and tensors of ``program``'s model (and its analysis, for categorical programs)."""
    if input_range is not None:
        from rasp_compiler.compiler.real import compile_numeric
        config, tensors = compile_numeric(program, input_range, max_len, dtype=dtype, causal=causal,
                                          fixed_length=fixed_length, **numeric_options)
        return config, tensors, None
    stage("value sets")
    # same values, fewer heads and layers
    rewritten = nonzero_widths(bos_counts(shared_subexpressions(program), max_len), max_len)
    fallback_note = None
    try:
        plan = _plan(rewritten, vocab, max_len, dtype, causal, fixed_length, stage,
                     defer_from=limits.DEFER_FROM)
    except ModelTooLargeError as too_large:
        # An unannotated output too large as a one-hot may fit as one number (``numerical_output``)
        numeric = numerical_output(rewritten)
        if numeric is None:
            raise
        try:
            plan = _plan(numeric, vocab, max_len, dtype, causal, fixed_length,
                         lambda step: stage(f"{step} (a second plan, the output as a number)"),
                         defer_from=limits.DEFER_FROM)
        except UserError:
            raise too_large from None
        values = plan[2].info[numeric.output].values
        if not values or not all(type(v) in (int, float) for v in values):
            raise too_large from None  # booleans or strings would decode as other values
        if rewritten.node(rewritten.output).encoding is None:
            fallback_note = (f"{numeric.output}: encoded numerical (one dimension, decoded as a "
                             f"number): as a one-hot, {too_large.message.split('; ')[0]}, past the "
                             "size guard; write numerical(...) to choose this, categorical(...) to "
                             "refuse it")
        rewritten = numeric

    widest = max((int(lc["d_mlp"]) for lc in plan[0]["layers"]), default=0)
    if plan[2].large_tables and widest > min(limits.LARGE_MLP, limits.LARGE_MLP_PER_POSITION * max_len):
        # A large table fuses into its readers and may save a layer, or cost a thousand times the
        # parameters for none (shuffle-Dyck-2 at max_len 12: 20.8M against 21k at 13).  Where an
        # MLP came out that wide, build the plan with such maps opaque too, and keep the one with
        # fewer layers, then parameters (only there: it doubles the compile time).
        other = _plan(rewritten, vocab, max_len, dtype, causal, fixed_length, stage,
                      tabulate_up_to=limits.LARGE_TABLE)
        if _size(other) < _size(plan):
            plan = other
    if not plan[2].deferred and _opaque_layer(
            plan[0], {sid for sid, size in plan[2].capped if size <= limits.WIDE_DOMAIN_CAP}):
        # A map past the domain cap is opaque: it cannot fuse into the maps that read it, and here
        # its MLP has a layer of its own, on the critical path.  Tabulated, it may fuse and save
        # that layer, at the price of a larger table to enumerate and a wider MLP (tried only
        # here: it can triple the compile).  A plan that deferred maps has been weighed against
        # the tabulated ones already (``_plan``).
        try:
            wide = _plan(rewritten, vocab, max_len, dtype, causal, fixed_length,
                         lambda step: stage(f"{step} (a second plan, with larger tables)"),
                         domain_cap=limits.WIDE_DOMAIN_CAP, fewer_layers_than=_size(plan)[0])
        except UserError:  # e.g. past the size guard: the first plan stands
            wide = None
        if wide is not None:
            plan = wide
    if fallback_note is not None:
        plan[0]["notes"].append(fallback_note)
    return plan


def _plan(program: Program, vocab: list[Any], max_len: int, dtype: str, causal: bool,
          fixed_length: int | None, stage: Callable[[str], None],
          tabulate_up_to: int | None = None, domain_cap: int | None = None,
          fewer_layers_than: int | None = None, defer_from: int | None = None
          ) -> tuple[dict, dict, Analysis] | None:
    """The plan's config, tensors and analysis; None (nothing assembled) when it has no fewer
    layers than ``fewer_layers_than``.  With ``defer_from``, maps of independent inputs past that
    many joint assignments are first kept opaque; where that plan has more layers than its heads
    need, only the larger are deferred or all tabulated, whichever saves a layer; where it cannot
    be built, or is larger than its tables could have made it, they are tabulated."""
    def lowered(defer: int | None) -> tuple[Analysis, Lowering, Any]:
        an = Analysis(program, vocab, max_len, fixed_length=fixed_length, causal=causal, dtype=dtype,
                      tabulate_up_to=tabulate_up_to, domain_cap=domain_cap, defer_from=defer)
        stage("heads and MLPs")
        low = Lowering(an)
        stage("layers")
        return an, low, schedule(low)

    def assembled(an: Analysis, low: Lowering, sched: Any,
                  bound: int | None = fewer_layers_than) -> tuple[dict, dict, Analysis] | None:
        if bound is not None and sched.n_layers >= bound:
            return None
        stage("weights")
        config, tensors = assemble(an, low, sched, dtype=dtype, causal=causal)
        return config, tensors, an

    def tabulated(bound: int) -> tuple[dict, dict, Analysis] | None:
        """The plain plan, or failing that the one with larger tables where the plain one keeps
        maps past the domain cap, if either has fewer layers than ``bound``."""
        try:
            plain = lowered(None)
            got = assembled(*plain, bound=bound)
        except UserError:  # e.g. past the size guard: the opaque plan stands
            return None
        if got is not None or not any(size <= limits.WIDE_DOMAIN_CAP for _, size in plain[0].capped):
            return got
        # what ``_weights`` tries for a plain plan whose capped maps cost it a layer (dyck2 at
        # max_len 256: 5 layers plain and deferred, 4 with larger tables)
        try:
            return _plan(program, vocab, max_len, dtype, causal, fixed_length,
                         lambda step: stage(f"{step} (a second plan, with larger tables)"),
                         domain_cap=limits.WIDE_DOMAIN_CAP, fewer_layers_than=bound)
        except UserError:
            return None

    def fewer_deferred(an: Analysis, bound: int) -> tuple[dict, dict, Analysis] | None:
        """The plan deferring only the larger of ``an``'s deferred tables, if it has fewer layers
        than ``bound``: the smaller may be the one that costs the layer (the paper's Dyck-2 at
        max_len 24 from 4,096: `delay_closer`, 22,096 rows)."""
        sizes = sorted({size for _, size in an.deferred})
        if len(sizes) < 2:
            return None
        try:
            return _plan(program, vocab, max_len, dtype, causal, fixed_length, stage,
                         tabulate_up_to=tabulate_up_to, domain_cap=domain_cap,
                         fewer_layers_than=bound, defer_from=sizes[0])
        except UserError:
            return None

    if defer_from is not None:
        try:
            an, low, sched = lowered(defer_from)
        except UserError:  # opaque, a map's values per position can make a selector too large
            an = None
        if an is not None and not an.deferred:
            return assembled(an, low, sched)  # nothing was deferred: this is the plain plan
        if an is not None:
            if sched.n_layers > head_depth(low):
                # Tabulated, the deferred maps may fuse into their readers and save a layer; where
                # the heads already need every layer the plan has, they could only widen its MLPs
                # (dyck2's `bad` at max_len 48: 72,000 rows, 1.69M parameters and a 1.3 s compile,
                # against 1.31M and 0.3 s opaque, 4 layers either way).
                bound = sched.n_layers if fewer_layers_than is None else min(sched.n_layers,
                                                                             fewer_layers_than)
                shallower = fewer_deferred(an, bound) or tabulated(bound)
                if shallower is not None:
                    return shallower
            try:
                opaque = assembled(an, low, sched)
            except UserError:  # past the size guard opaque: tabulated, it may fit
                opaque = None
            if opaque is not None and _size(opaque)[1] <= _tabulating_cost(opaque):
                return opaque
            if opaque is not None:
                # Larger than its tables could have made it: opaque, a map's values per position
                # can widen what its readers read (a selector key over `v2 == v12` in random
                # program 12200085 at max_len 8: 11,709 parameters against 7,614 tabulated).
                plain = tabulated(sched.n_layers + 1)
                return plain if plain is not None and _size(plain) < _size(opaque) else opaque
    return assembled(*lowered(None))


def _tabulating_cost(plan: tuple[dict, dict, Analysis]) -> int:
    """About the most parameters tabulating a plan's deferred maps could add: a hidden unit per
    row, reading and writing the residual stream."""
    config, _, an = plan
    return 2 * int(config["d_model"]) * sum(size for _, size in an.deferred)


def _opaque_layer(config: dict, capped: set[str]) -> bool:
    """Whether a layer without heads, on the critical path, holds the MLP of a map in ``capped``."""
    forcing = set(config.get("critical_path") or [])
    return any(not lp["heads"] and any(op["node"] in capped and op["node"] in forcing
                                       for op in lp["mlp"]["ops"])
               for lp in config["plan"] if lp["mlp"])


def _size(plan: tuple) -> tuple[int, int]:
    """(layers, parameters) of a built plan: what the compiler minimises, in that order."""
    config, tensors = plan[0], plan[1]
    return int(config["n_layers"]), sum(t.size for t in tensors.values())


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
