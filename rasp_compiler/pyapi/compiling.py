"""tracr's compile entry point, for code written against ``tracr.compiler.compiling``.

    from rasp_compiler import pyapi as rasp                 # tracr: from tracr.rasp import rasp
    from rasp_compiler.pyapi import compiling, lib          # tracr: from tracr.compiler import compiling, lib

    model = compiling.compile_rasp_to_model(lib.make_reverse(rasp.tokens), {"a", "b"}, 5,
                                            compiler_bos="BOS")
    model.apply(["BOS", "a", "b"]).decoded                  # ["BOS", "b", "a"]

The model is this compiler's (``CompiledModel``: BOS, padding and decoding are built in); ``apply``
takes and gives sequences the way tracr's ``AssembledTransformerModel.apply`` does, with the BOS
token first and optional padding tokens after the input.  The model also has tracr's
``input_encoder``, ``output_encoder`` and ``params``, over this compiler's weights and ids.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from rasp_compiler.errors import InputError, UserError
from rasp_compiler.pyapi.base import PyApiTypeError, PyApiValueError

if TYPE_CHECKING:
    import numpy as np

COMPILER_BOS = "compiler_bos"
COMPILER_PAD = "compiler_pad"


class ApplyInputError(InputError, ValueError):
    """An input ``apply`` cannot run (no BOS first, an unknown token, too long): an InputError,
    and a ValueError, as tracr's input encoder raises."""


@dataclass
class ModelOutput:
    """What ``apply`` returns: ``decoded`` has tracr's layout (BOS, one value per input token,
    the pad token at padded positions); ``trace`` holds this compiler's logits, residual streams
    and attention patterns (see ``RaspModel.trace``), empty for the empty input.

    tracr's views of the same run, as NumPy arrays [1, positions, d_model] over BOS, the input's
    tokens and its padding: ``input_embeddings``, ``residuals`` (after every sublayer),
    ``layer_outputs`` (what each sublayer added) and ``transformer_output``; ``attn_logits``, per
    layer [1, heads, query, key], the scores the softmax read (masked keys at the dtype's lowest
    number, where tracr writes -1e30); ``unembedded`` [1, positions], the argmax of the logits
    (an id of ``output_encoder``) or, for a numerical output, the output number."""

    decoded: list[Any]
    trace: dict[str, Any] = field(repr=False, default_factory=dict)
    _unembedded: Any = field(repr=False, default=None)

    @property
    def attn_logits(self) -> list[Any]:
        self._stream()  # the empty input's error
        return [a.numpy() for a in self.trace["attn_logits"]]

    @property
    def unembedded(self) -> Any:
        self._stream()
        return self._unembedded

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


class CategoricalEncoder:
    """tracr's ``encoder.CategoricalEncoder``: ``encoding_map`` (token -> id), ``encode`` and
    ``decode`` (ValueError for a token or id it lacks).  ``decoding_map`` (id -> token) is this
    compiler's: tracr builds it inside ``decode``."""

    def __init__(self, values: list[Any], enforce_bos: bool = False, bos_token: Any = None,
                 pad_token: Any = None, max_seq_len: int | None = None) -> None:
        self.encoding_map: dict[Any, int] = {}
        for i, value in enumerate(values):
            self.encoding_map.setdefault(value, i)  # the runtime's id of a repeated key is its first
        self.decoding_map: dict[int, Any] = dict(enumerate(values))
        self.enforce_bos = enforce_bos
        self._bos_token, self._pad_token, self._max_seq_len = bos_token, pad_token, max_seq_len

    def encode(self, inputs: list[Any]) -> list[int]:
        if self.enforce_bos and (not inputs or inputs[0] != self.bos_token):
            raise PyApiValueError(f"the first input token must be the BOS token {self.bos_token!r}, not "
                                  f"{inputs[0] if inputs else 'nothing'!r}")
        missing = [x for x in inputs if x not in self.encoding_map]
        if missing:
            raise PyApiValueError(f"inputs {missing!r} are not in the encoding {list(self.encoding_map)!r}")
        if self._max_seq_len is not None and len(inputs) > self._max_seq_len:
            raise PyApiValueError(f"inputs={inputs!r} are longer than the maximum sequence length "
                                  f"{self._max_seq_len}")
        return [self.encoding_map[x] for x in inputs]

    def __repr__(self) -> str:
        return f"CategoricalEncoder(encoding_map={self.encoding_map!r})"

    def decode(self, encodings: list[int]) -> list[Any]:
        missing = [x for x in encodings if x not in self.decoding_map]
        if missing:
            raise PyApiValueError(f"ids {missing!r} are not in the decoding map (0 to "
                                  f"{len(self.decoding_map) - 1})")
        return [self.decoding_map[x] for x in encodings]

    @property
    def vocab_size(self) -> int:
        return len(self.encoding_map)

    @property
    def bos_token(self) -> Any:
        return self._bos_token

    @property
    def pad_token(self) -> Any:
        return self._pad_token

    @property
    def bos_encoding(self) -> int | None:
        return None if self._bos_token is None else self.encoding_map[self._bos_token]

    @property
    def pad_encoding(self) -> int | None:
        return None if self._pad_token is None else self.encoding_map[self._pad_token]


class NumericalEncoder:
    """tracr's ``encoder.NumericalEncoder``, the output encoder of a numerical output: the identity."""

    bos_token = pad_token = bos_encoding = pad_encoding = None

    def __repr__(self) -> str:
        return "NumericalEncoder()"

    def encode(self, inputs: list[Any]) -> list[Any]:
        return inputs

    def decode(self, encodings: list[Any]) -> list[Any]:
        return encodings


class AssembledModel:
    """A compiled model behind tracr's ``apply`` interface; ``.model`` is the ``CompiledModel``,
    ``.residual_labels`` names every residual dimension (``tokens:a``, ``indices:3``, …).

    ``input_encoder`` maps tokens to the rows of the token embedding (the vocabulary in the
    config's order, then BOS, then the pad token); ``output_encoder`` maps output values to the
    columns of the logits (``config["output"]["values"]``), or is a ``NumericalEncoder``."""

    def __init__(self, model: Any, compiler_bos: Any, compiler_pad: Any) -> None:
        from rasp_compiler.runtime import _from_json  # torch is loaded by the compile, not by this import

        self.model = model
        self.compiler_bos = compiler_bos
        self.compiler_pad = compiler_pad
        self.residual_labels = model.labels()
        # the runtime's ids: each vocabulary token's row, then BOS and PAD (RaspModel.bos_id, pad_id)
        self.input_encoder = CategoricalEncoder(
            [*model.vocab, compiler_bos, compiler_pad], enforce_bos=True, bos_token=compiler_bos,
            pad_token=compiler_pad, max_seq_len=model.max_len + 1)
        out = model.config["output"]
        self.output_encoder: CategoricalEncoder | NumericalEncoder = (
            CategoricalEncoder([_from_json(v) for v in out["values"]]) if out["encoding"] == "categorical"
            else NumericalEncoder())

    def __repr__(self) -> str:
        return (f"AssembledModel(compiler_bos={self.compiler_bos!r}, compiler_pad={self.compiler_pad!r}, "
                f"model={self.model!r})")

    @cached_property
    def params(self) -> dict[str, dict[str, np.ndarray]]:
        """The weights under tracr's Haiku names and layouts: ``token_embed`` and ``pos_embed``
        (``embeddings``), per layer ``transformer/layer_{i}/attn/{query,key,value,linear}`` and
        ``transformer/layer_{i}/mlp/{linear_1,linear_2}``, each ``w`` [in, out] and ``b`` [out]
        (``x @ w + b``; heads side by side, as tracr lays them).  Unlike tracr, each layer has its
        own number of heads and head size (``model.config["layers"][i]``: scores are divided by
        sqrt of that ``d_head``), an MLP may be float64, and ``unembed`` (``w``, ``b``) holds the
        logits' weights, where tracr's unembedding is a projection without parameters."""
        import numpy as np

        # copies: tracr's parameters are immutable arrays, and an edit must not change the model
        t = {name: w.detach().cpu().numpy().copy() for name, w in self.model.tensors.items()}
        if any(name.endswith("W_gate") for name in t):  # never from this entry point: only numerical inputs
            raise UserError("a gated MLP has no place in tracr's parameters")
        d, dtype = int(self.model.config["d_model"]), t["embed.token"].dtype
        params = {"token_embed": {"embeddings": t["embed.token"]},
                  "pos_embed": {"embeddings": t["embed.pos"]}}
        for li, lc in enumerate(self.model.config["layers"]):
            h, dh, m = lc["n_heads"], lc["d_head"], lc["d_mlp"]
            attn, mlp = f"transformer/layer_{li}/attn", f"transformer/layer_{li}/mlp"
            for name, key in (("query", "W_Q"), ("key", "W_K"), ("value", "W_V")):
                w = t.get(f"layers.{li}.attn.{key}", np.zeros((0, d, 0), dtype))  # [heads, d_model, d_head]
                params[f"{attn}/{name}"] = {"w": w.transpose(1, 0, 2).reshape(d, h * dh),
                                            "b": np.zeros(h * dh, dtype)}
            w_o = t.get(f"layers.{li}.attn.W_O", np.zeros((0, 0, d), dtype))  # [heads, d_head, d_model]
            params[f"{attn}/linear"] = {"w": w_o.reshape(h * dh, d), "b": np.zeros(d, dtype)}
            mt = np.float64 if lc.get("mlp_dtype") == "float64" else dtype
            params[f"{mlp}/linear_1"] = {"w": t.get(f"layers.{li}.mlp.W_in", np.zeros((d, m), mt)),
                                         "b": t.get(f"layers.{li}.mlp.b_in", np.zeros(m, mt))}
            params[f"{mlp}/linear_2"] = {"w": t.get(f"layers.{li}.mlp.W_out", np.zeros((m, d), mt)),
                                         "b": t.get(f"layers.{li}.mlp.b_out", np.zeros(d, mt))}
        params["unembed"] = {"w": t["unembed.W_U"], "b": t["unembed.b_U"]}
        return params

    def apply(self, tokens: list[Any]) -> ModelOutput:
        """Run the model on one input in tracr's layout: the BOS token, the tokens, then any
        padding tokens.  ``decoded`` holds BOS, one value per token and the pad token at padded
        positions; a bad input is an ``ApplyInputError`` (a ValueError, as in tracr) whose
        positions count BOS as position 0."""
        if not isinstance(tokens, Iterable):  # an ApplyInputError (ValueError), as the docstring says
            raise ApplyInputError(f"apply takes one input, a list of tokens with the BOS token first, got "
                             f"{type(tokens).__name__}",
                             hint=f"call apply([{self.compiler_bos!r}, ...tokens])")
        tokens = list(tokens)
        if not tokens or tokens[0] != self.compiler_bos:
            raise ApplyInputError(f"the input must start with the BOS token {self.compiler_bos!r}, as in "
                                  "tracr", hint=f"call apply([{self.compiler_bos!r}, ...tokens])")
        body = tokens[1:]
        n = len(body)
        while n and body[n - 1] == self.compiler_pad:
            n -= 1
        if any(t == self.compiler_pad for t in body[:n]):
            raise ApplyInputError("padding tokens may only follow the input")
        again = next((i for i, t in enumerate(body, 1) if _same_token(t, self.compiler_bos)), None)
        if again is not None:  # it said "not in the vocabulary", with a hint to add BOS to it
            raise ApplyInputError(f"the BOS token {self.compiler_bos!r} is at position {again} too: it "
                                  "comes once, first", hint="drop it there; the tokens follow the one BOS")
        if len(body) > self.model.max_len:  # tracr has no position embedding past max_seq_len either
            raise ApplyInputError(f"the input has {len(body)} tokens after BOS, padding included, more than "
                                  f"the {self.model.max_len} this model was compiled for",
                                  hint="compile again with a larger max_seq_len")
        if n == 0:  # the empty input (BOS alone): nothing to compute, as RASP has no empty sequence
            return ModelOutput([self.compiler_bos] + [self.compiler_pad] * len(body))
        # padded positions are computed too, as tracr does: pads are masked as keys, so the input's
        # own positions get the numbers of a batch that holds a longer input
        try:
            trace = self.model.trace([body[:n]], positions=len(body))
        except InputError as err:
            raise _in_tracr_terms(err) from None
        why = self.model.several_keys(trace["attention"], [n])[0]
        if why:  # a clean one-hot where the interpreter raises: refused, as model.run refuses it
            from rasp_compiler.runtime import ModelOutputError

            raise ModelOutputError(f"the input has no answer: {why}",
                                   hint="the program has no answer on this input (the interpreter "
                                        "raises); see the note in the compile summary")
        # typed as the interpreter types it: one key's int, a mean's float (known-bugs #19)
        out = self.model.typed(self.model.decode(trace["logits"], [n]),
                               self.model.output_reads_several(trace["attention"]))[0]
        return ModelOutput([self.compiler_bos, *out] + [self.compiler_pad] * (len(body) - n), trace,
                           self._unembed(trace))

    def _unembed(self, trace: dict[str, Any]) -> Any:
        """tracr's ``unembedded`` [1, positions]: the trace's logits leave out BOS, whose row
        (meaningless, as in tracr) is unembedded here from the last residual."""
        import torch

        w_u, b_u = self.model.tensors["unembed.W_U"], self.model.tensors["unembed.b_U"]
        bos = trace["residuals"][-1][:, :1] @ w_u + b_u
        logits = torch.cat([bos, trace["logits"]], dim=1)
        if isinstance(self.output_encoder, NumericalEncoder):
            return logits[..., 0].numpy()
        return logits.argmax(dim=-1).numpy()


def _same_token(a: Any, b: Any) -> bool:
    """``a == b`` of the same type (1 and True, 1 and 1.0 are different tokens here)."""
    return type(a) is type(b) and a == b


def _in_tracr_terms(err: InputError) -> ApplyInputError:
    """The runtime's error about the tokens after BOS, with tracr's positions (BOS is position 0)
    and the vocabulary as compile_rasp_to_model's argument rather than the command line's flag."""
    message = re.sub(r"at position (\d+) of input 0\b", lambda m: f"at position {int(m.group(1)) + 1}",
                     err.message)
    hint = err.hint
    if hint and "--vocab" in hint:
        hint = "compile again with a vocab that includes it"
    elif hint:  # the command line's way of passing numbers means nothing to apply's caller
        hint = re.sub(r" \(--input-json [^)]*\)", "", hint)
    return ApplyInputError(message, hint=hint)


class _Required:
    def __repr__(self) -> str:  # as help() shows the signature
        return "<required>"


_NOT_GIVEN: Any = _Required()
_ARGUMENTS = ("program", "vocab", "max_seq_len", "causal", "compiler_bos", "compiler_pad", "mlp_exactness")
# compile_program's names and other likely slips -> tracr's
_MEANT = {"max_len": "max_seq_len", "bos": "compiler_bos", "pad": "compiler_pad", "vocabulary": "vocab"}


def _unknown_argument(name: str) -> PyApiTypeError:
    import difflib

    meant = _MEANT.get(name) or next(iter(difflib.get_close_matches(name.lower(), _ARGUMENTS, 1, 0.6)),
                                     None)
    if meant:
        hint = f"did you mean {meant}=?"
    elif name in ("dtype", "output", "fixed_length", "input_range", "progress"):
        hint = f"{name}= is rasp_compiler.pyapi.compile_program's option (this model has no apply)"
    else:
        hint = "its arguments are " + ", ".join(_ARGUMENTS)
    return PyApiTypeError(f"compile_rasp_to_model() has no argument {name}=", hint=hint)


def compile_rasp_to_model(program: Any, vocab: Any, max_seq_len: Any = _NOT_GIVEN, causal: bool = False,
                          compiler_bos: Any = COMPILER_BOS, compiler_pad: Any = COMPILER_PAD,
                          mlp_exactness: int = 100, **unknown: Any) -> AssembledModel:
    """tracr's signature.  ``mlp_exactness`` is accepted and ignored: every MLP here is exact on
    the value sets the compiler derives, with margins computed from their gaps.

    With ``causal=True``, as in tracr, every selector is masked to keys at or before its query:
    the model computes ``causal_eval.evaluate(program, xs)``, also for a program that looks ahead
    (tracr's ``make_length`` gives ``1, 2, 3, …``).  ``compile_program(..., causal=True)`` instead
    keeps the program's own meaning and refuses a program that looks ahead."""
    del mlp_exactness
    if unknown:  # Python's "unexpected keyword argument" was a bare TypeError
        raise _unknown_argument(sorted(unknown)[0])
    if max_seq_len is _NOT_GIVEN:  # required, as in tracr: a default only so that max_len= gets its hint
        raise PyApiTypeError("compile_rasp_to_model() needs max_seq_len, the longest input it takes",
                             hint="compile_rasp_to_model(program, vocab, max_seq_len, compiler_bos=...)")
    from rasp_compiler.pyapi import compile_program
    from rasp_compiler.pyapi.base import RASPExpr
    from rasp_compiler.pyapi.causal_eval import masked_program

    for token in (compiler_bos, compiler_pad):
        try:
            hash(token)  # tracr's tokens are dict keys; `[0] in vocab` raised a bare TypeError
        except TypeError:
            raise PyApiTypeError(f"compiler_bos and compiler_pad must be tokens (a string or a number), "
                                 f"got {token!r}", hint='compiler_bos="BOS", compiler_pad="PAD"') from None
    if compiler_bos == compiler_pad:  # one token for both: encode gave pads BOS's id, pad_encoding lied
        raise PyApiValueError(f"compiler_bos and compiler_pad must differ, got {compiler_bos!r} for both",
                              hint='compiler_bos="BOS", compiler_pad="PAD"')
    given = list(vocab) if isinstance(vocab, str) else vocab  # `"ab" in "abc"` tests a substring
    try:
        clash = compiler_bos in given or compiler_pad in given
    except TypeError:  # not a collection: compile_program says what a vocabulary must be
        clash = False
    if clash:
        # tracr's ValueError (it was a plain UserError: except ValueError missed it)
        which = "compiler_bos" if compiler_bos in given else "compiler_pad"
        token = compiler_bos if which == "compiler_bos" else compiler_pad
        raise PyApiValueError(f"the BOS and padding tokens must not be in the vocabulary: {which} "
                              f"{token!r} is", hint=f"pass another {which}=, one that is not a token")
    from rasp_compiler.compiler import _whole_number

    # named as tracr's argument: compile_program's own check says "max_len (--max-len)"
    try:
        whole = _whole_number(max_seq_len, "max_seq_len")
    except UserError as err:  # not an integer: a TypeError, as the values below are ValueErrors
        raise PyApiTypeError(err.message) from None
    if whole < 1:
        raise PyApiValueError(f"max_seq_len must be a positive integer, got {max_seq_len!r}")
    from rasp_compiler.compiler import MAX_LEN

    if max_seq_len > MAX_LEN:  # compile_program's refusal names its command-line flag, --max-len
        raise PyApiValueError(f"max_seq_len {max_seq_len:,} is more than the compiler takes ({MAX_LEN:,}): "
                              "positions and lengths are one-hot, so widths grow with it and tables "
                              "with its square", hint="compile for the longest input you need")
    if causal and isinstance(program, RASPExpr):
        program = masked_program(program)
    model = compile_program(program, vocab, max_seq_len, causal=causal)
    return AssembledModel(model, compiler_bos, compiler_pad)
