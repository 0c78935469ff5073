"""tracr's compile entry point, for code written against ``tracr.compiler.compiling``.

    from rasp_compiler import pyapi as rasp                 # tracr: from tracr.rasp import rasp
    from rasp_compiler.pyapi import compiling, lib          # tracr: from tracr.compiler import compiling, lib

    model = compiling.compile_rasp_to_model(lib.make_reverse(rasp.tokens), {"a", "b"}, 5,
                                            compiler_bos="BOS")
    model.apply(["BOS", "a", "b"]).decoded                  # ["BOS", "b", "a"]

The model is this compiler's (``CompiledModel``: BOS, padding and decoding are built in); ``apply``
takes and gives sequences the way tracr's ``AssembledTransformerModel.apply`` does, with the BOS
token first and optional padding tokens after the input.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rasp_compiler.errors import InputError, UserError
from rasp_compiler.pyapi.base import PyApiTypeError

COMPILER_BOS = "compiler_bos"
COMPILER_PAD = "compiler_pad"


@dataclass
class ModelOutput:
    """What ``apply`` returns: ``decoded`` has tracr's layout (BOS, one value per input token,
    the pad token at padded positions); ``trace`` holds this compiler's logits, residual streams
    and attention patterns (see ``RaspModel.trace``), empty for the empty input.

    tracr's views of the same run, as NumPy arrays [1, positions, d_model] over BOS and the input's
    tokens (padding positions are not computed here): ``input_embeddings``, ``residuals`` (after
    every sublayer), ``layer_outputs`` (what each sublayer added) and ``transformer_output``."""

    decoded: list[Any]
    trace: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def input_embeddings(self) -> Any:
        return self._stream()[0]

    @property
    def residuals(self) -> list[Any]:
        return self._stream()[1:]

    @property
    def layer_outputs(self) -> list[Any]:
        stream = self._stream()
        return [after - before for before, after in zip(stream[:-1], stream[1:], strict=True)]

    @property
    def transformer_output(self) -> Any:
        return self._stream()[-1]

    def _stream(self) -> list[Any]:
        if not self.trace:
            raise UserError("the empty input (BOS alone) runs no network, so it has no residual stream")
        return [r.numpy() for r in self.trace["residuals"]]


class AssembledModel:
    """A compiled model behind tracr's ``apply`` interface; ``.model`` is the ``CompiledModel``,
    ``.residual_labels`` names every residual dimension (``tokens:a``, ``indices:3``, …)."""

    def __init__(self, model: Any, compiler_bos: Any, compiler_pad: Any) -> None:
        self.model = model
        self.compiler_bos = compiler_bos
        self.compiler_pad = compiler_pad
        self.residual_labels = model.labels()

    def apply(self, tokens: list[Any]) -> ModelOutput:
        if not isinstance(tokens, Iterable):
            raise InputError(f"apply takes one input, a list of tokens with the BOS token first, got "
                             f"{type(tokens).__name__}",
                             hint=f"call apply([{self.compiler_bos!r}, ...tokens])")
        tokens = list(tokens)
        if not tokens or tokens[0] != self.compiler_bos:
            raise UserError(f"the input must start with the BOS token {self.compiler_bos!r}, as in tracr",
                            hint=f"call apply([{self.compiler_bos!r}, ...tokens])")
        body = tokens[1:]
        n = len(body)
        while n and body[n - 1] == self.compiler_pad:
            n -= 1
        if any(t == self.compiler_pad for t in body[:n]):
            raise UserError("padding tokens may only follow the input")
        if n == 0:  # the empty input (BOS alone): nothing to compute, as RASP has no empty sequence
            return ModelOutput([self.compiler_bos] + [self.compiler_pad] * len(body))
        trace = self.model.trace([body[:n]])
        out = self.model.decode(trace["logits"], [n])[0]
        return ModelOutput([self.compiler_bos, *out] + [self.compiler_pad] * (len(body) - n), trace)


def compile_rasp_to_model(program: Any, vocab: Any, max_seq_len: int, causal: bool = False,
                          compiler_bos: Any = COMPILER_BOS, compiler_pad: Any = COMPILER_PAD,
                          mlp_exactness: int = 100) -> AssembledModel:
    """tracr's signature.  ``mlp_exactness`` is accepted and ignored: every MLP here is exact on
    the value sets the compiler derives, with margins computed from their gaps.

    With ``causal=True``, as in tracr, every selector is masked to keys at or before its query:
    the model computes ``causal_eval.evaluate(program, xs)``, also for a program that looks ahead
    (tracr's ``make_length`` gives ``1, 2, 3, …``).  ``compile_program(..., causal=True)`` instead
    keeps the program's own meaning and refuses a program that looks ahead."""
    del mlp_exactness
    from rasp_compiler.pyapi import compile_program
    from rasp_compiler.pyapi.base import RASPExpr
    from rasp_compiler.pyapi.causal_eval import masked_program

    for token in (compiler_bos, compiler_pad):
        try:
            hash(token)  # tracr's tokens are dict keys; `[0] in vocab` raised a bare TypeError
        except TypeError:
            raise PyApiTypeError(f"compiler_bos and compiler_pad must be tokens (a string or a number), "
                                 f"got {token!r}", hint='compiler_bos="BOS", compiler_pad="PAD"') from None
    given = list(vocab) if isinstance(vocab, str) else vocab  # `"ab" in "abc"` tests a substring
    try:
        clash = compiler_bos in given or compiler_pad in given
    except TypeError:  # not a collection: compile_program says what a vocabulary must be
        clash = False
    if clash:
        raise UserError("the BOS and padding tokens must not be in the vocabulary")
    if causal and isinstance(program, RASPExpr):
        program = masked_program(program)
    model = compile_program(program, vocab, max_seq_len, causal=causal)
    return AssembledModel(model, compiler_bos, compiler_pad)
