"""RASP-compiled models as targets: the attention-only ones whole, the others one attention sublayer
at a time.

A compiled model (``rasp_compiler.runtime``) is: X = token + position embedding (BOS first), then per
layer a residual multi-head attention sublayer softmax(X W_Q W_K^T X^T / sqrt(d_head)) X W_V W_O and an
optional MLP, then logits X W_U + b_U.  Without MLPs this is exactly the target class with a residual:
W_{l,h} = W_Q W_K^T / sqrt(d_head), V_{l,h} = W_V W_O, U = W_U, and the embedded input X as the
target's input.  Layers with fewer heads get zero heads (W = 0, V = 0 adds nothing).  The bias b_U is
a constant added after the last layer, outside the transformer, on both sides.  Inputs are run one at
a time at their own length, so the model's padding mask never masks anything.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import torch

from rasp_compiler.errors import UserError
from rasp_compiler.universal.check import worst_abs
from rasp_compiler.universal.target import Target

if TYPE_CHECKING:
    from rasp_compiler.graph.nodes import Program
    from rasp_compiler.runtime import RaspModel
    from rasp_compiler.universal.model import UniversalTransformer

# The largest |UT - compiled model| on the stream after one attention sublayer that still counts as
# simulating it: that stream is never decoded, so this error is the whole verdict.
SUBLAYER_TOL = 1e-9


def _attention_sublayer(model: RaspModel, li: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(W, V) of layer ``li`` of a compiled model, each (heads, d, d) in float64."""
    mod, lc = model.module, model.config["layers"][li]
    wq, wk = mod.w(f"layers.{li}.attn.W_Q").double(), mod.w(f"layers.{li}.attn.W_K").double()
    wv, wo = mod.w(f"layers.{li}.attn.W_V").double(), mod.w(f"layers.{li}.attn.W_O").double()
    W = wq @ wk.transpose(-1, -2) / math.sqrt(lc["d_head"])
    return W, wv @ wo


def attention_target(model: RaspModel, layers: list[int] | None = None, *,
                     with_unembedding: bool = True) -> Target:
    """The attention sublayers ``layers`` (default all) of a compiled model as one residual target.

    Raises a UserError naming the MLPs when whole-model simulation is asked of a model that has them.
    """
    cfg = model.config["layers"]
    if not cfg:  # max() of no heads was a ValueError
        raise UserError("the compiled model has no layers (its output is a map of the tokens, read "
                        "from the embedding): there is no attention for a universal transformer to run",
                        hint="the lookup UT runs it: rasp universal --program FILE --with-mlps --check")
    if layers is None:
        mlps = [i for i, lc in enumerate(cfg) if lc["d_mlp"]]
        if mlps:
            widths = ", ".join(f"layer {i}: {cfg[i]['d_mlp']}" for i in mlps)
            raise UserError(f"the compiled model has MLPs ({widths}), so it is outside the attention-only "
                            "class of a fixed universal transformer",
                            hint="run it whole through the lookup UT, which carries MLPs: rasp universal "
                                 "--program FILE --with-mlps --check; or one attention sublayer at a time: "
                                 "--attention-layer N (Python: run_sublayer_through_ut)")
        layers = list(range(len(cfg)))
    d = int(model.config["d_model"])
    H = max(1, max(cfg[i]["n_heads"] for i in layers))
    W = torch.zeros(len(layers), H, d, d, dtype=torch.float64)
    V = torch.zeros(len(layers), H, d, d, dtype=torch.float64)
    for j, li in enumerate(layers):
        if cfg[li]["n_heads"]:
            w, v = _attention_sublayer(model, li)
            W[j, :w.shape[0]], V[j, :v.shape[0]] = w, v
    U = model.module.w("unembed.W_U").double() if with_unembedding else None
    return Target(W=W, V=V, U=U, residual=True, causal=bool(model.config.get("causal", False)))


def embedded_input(model: RaspModel, tokens: Sequence[Any]) -> torch.Tensor:
    """The compiled model's residual stream after the embedding for one input (BOS first), float64."""
    ids, _ = model.encode([tokens])
    mod = model.module
    x = mod.w("embed.token")[ids[0]] + mod.w("embed.pos")[: ids.shape[1]]
    return x.double()


def residual_trace(model: RaspModel, tokens: Sequence[Any]) -> list[torch.Tensor]:
    """The residual stream after the embedding and after every sublayer (model.trace), float64."""
    ids, lengths = model.encode([tokens])
    with torch.no_grad():
        _, residuals, _ = model.module(ids, lengths, trace=True)
    return [r[0].double() for r in residuals]


@dataclass
class CompiledRun:
    """Agreement of a compiled model and a UT running it, over a set of inputs."""

    inputs: int
    max_logit_error: float       # |UT logits - model logits| (both float64; one sublayer: its stream)
    decoded_agree: int | None    # inputs whose decoded UT output equals the model's (None: a
                                 # sublayer's stream, which is not decoded)
    attention_max_diff: float
    interpreter_agree: int | None = None   # inputs whose decoded UT output equals the interpreter's


def same_output(a: list, b: list, tol: float = 1e-6) -> bool:
    """Equal outputs: categorical values exactly, numbers to a relative/absolute 1e-6.  A number read
    from float logits is not bit-identical across two computations; the max logit error is reported
    separately and is the exactness measure (compiled models' hard-attention logits are ~800, so a
    random UT's 1e-12 relative error shows as ~1e-9 there)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
            if not math.isclose(float(x), float(y), rel_tol=tol, abs_tol=tol):
                return False
        elif x != y:
            return False
    return True


def run_through_ut(model: RaspModel, ut: UniversalTransformer, inputs: Sequence[Sequence[Any]],
                   program: Program | None = None, progress: Callable[[int], None] | None = None
                   ) -> CompiledRun:
    """Encode the attention-only ``model`` into ``ut`` once and compare on every input (and with the
    reference interpreter when ``program`` is given); ``progress`` hears 1 after each input."""
    from rasp_compiler.universal.api import encode

    target = attention_target(model)
    enc = encode(ut, target)
    bias = model.module.w("unembed.b_U").double()
    err = att = 0.0
    agree, interp = 0, 0
    for tokens in inputs:
        X = embedded_input(model, tokens)
        ids, lengths = model.encode([tokens])
        with torch.no_grad():
            ref, _, patterns = model.module(ids, lengths, trace=True)
            y_ut, a_ut = ut(X, enc.E, enc.U)
        y_ut = y_ut + bias
        err = max(err, worst_abs(y_ut - ref[0].double()))
        for li, p in enumerate(patterns):
            if p.shape[1]:
                att = max(att, worst_abs(a_ut[li, : p.shape[1]] - p[0].double()))
        n = len(list(tokens))
        ours = model.decode(y_ut[1:].unsqueeze(0).to(ref.dtype), [n])[0]
        agree += same_output(ours, model.decode(ref[:, 1:], [n])[0])
        if program is not None:
            from rasp_compiler.interpreter import run
            interp += same_output(ours, list(run(program, list(tokens))))
        if progress is not None:
            progress(1)
    return CompiledRun(len(inputs), err, agree, att, interp if program is not None else None)


def run_sublayer_through_ut(model: RaspModel, layer: int, ut: UniversalTransformer,
                            inputs: Sequence[Sequence[Any]], progress: Callable[[int], None] | None = None
                            ) -> CompiledRun:
    """Attention sublayer ``layer`` of any compiled model (MLPs elsewhere allowed) through ``ut``: the
    input is the model's own residual stream before that sublayer, the reference the stream after it.
    Nothing is decoded (``decoded_agree`` is None): the stream's error is the result.  ``progress``
    hears 1 after each input."""
    from rasp_compiler.universal.api import encode

    cfg = model.config["layers"]
    if not 0 <= layer < len(cfg):
        raise UserError(f"--attention-layer {layer} is out of range: the model has layers 0..{len(cfg) - 1}")
    if not cfg[layer]["n_heads"]:
        raise UserError(f"layer {layer} of the compiled model has no attention heads")
    target = attention_target(model, [layer], with_unembedding=False)
    enc = encode(ut, target)
    err = att = 0.0
    for tokens in inputs:
        stream = residual_trace(model, tokens)
        ids, lengths = model.encode([tokens])
        with torch.no_grad():
            _, _, patterns = model.module(ids, lengths, trace=True)
            y_ut, a_ut = ut(stream[2 * layer], enc.E, enc.U)
        err = max(err, worst_abs(y_ut - stream[2 * layer + 1]))
        p = patterns[layer][0].double()
        att = max(att, worst_abs(a_ut[0, : p.shape[0]] - p))
        if progress is not None:
            progress(1)
    return CompiledRun(len(inputs), err, None, att)
