"""Run a compiled RASP model with torch and safetensors alone.

This module is self-contained (it imports only torch, safetensors, json, math and hashlib), so a
saved model directory plus this one file is all a user needs::

    from rasp_compiler.runtime import RaspModel
    model = RaspModel.load("out/")
    model.run(["abca", "ab"])        # -> decoded outputs, one list per input
    logits = model.forward(["abca"])  # -> [batch, positions, outputs] logits (BOS excluded)
    trace = model.trace(["abca"])     # residual stream after every sublayer, attention patterns

A model directory holds ``config.json`` (shapes, vocabulary, residual labels, the layer plan, the
output decoding) and ``model.safetensors`` (the weights).  The config stores the SHA-256 of the
weights and the weights file stores the SHA-256 of the config (in the safetensors metadata), so a
truncated or edited artifact is refused with an error instead of giving wrong answers.

The network: position 0 holds a BOS token; token embedding + position embedding; per layer a
multi-head softmax attention (scores divided by sqrt(d_head), padded keys masked, optionally
causal) then a ReLU MLP, both added to the residual stream; a linear unembedding to logits.

Real-valued models (``rasp compile --input-range``): ``config["input"] = {"kind": "numerical",
"range": [lo, hi]}``; every token is the number token (id 0) and its value is added times
``embed.value`` [d_model] (a linear embedding); inputs outside the range or non-finite are refused.
Gated MLPs: when ``layers.{l}.mlp.W_gate`` [d_model, d_mlp] and ``b_gate`` [d_mlp] exist, the hidden
layer is relu(x W_in + b_in) * (x W_gate + b_gate) (exact products of two residual numbers).
Wide MLPs: a layer whose config has ``"mlp_dtype": "float64"`` stores its MLP tensors in float64
inside a float32 model; the residual stream is widened for that MLP and rounded back after it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

FORMAT = "rasp-compiler-model/1"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
# Peak-memory bound of a forward pass: see Transformer.forward.
CHUNK_ELEMENTS = 1 << 25

try:  # inside the rasp-compiler package the errors are the project's user errors (clean CLI exit)
    from rasp_compiler.errors import ArtifactError as _ArtifactBase
    from rasp_compiler.errors import InputError as _InputBase
except ImportError:  # standalone copy of this file
    class _ArtifactBase(Exception):  # type: ignore[no-redef]
        def __init__(self, message: str, hint: str | None = None) -> None:
            super().__init__(message)
            self.message, self.hint = message, hint

    class _InputBase(Exception):  # type: ignore[no-redef]
        def __init__(self, message: str, hint: str | None = None) -> None:
            super().__init__(message)
            self.message, self.hint = message, hint


class ModelArtifactError(_ArtifactBase):
    """The model directory is missing, truncated, corrupt or was edited."""


class ModelInputError(_InputBase):
    """An input the model cannot read: unknown token, too long, empty."""


class ModelOutputError(_ArtifactBase):
    """The model's output is not a clean one-hot, so it cannot be decoded with confidence (a
    compiled model writes exactly one output value at ``logit_scale`` and the rest at 0)."""


# A categorical output whose best logit beats the runner-up by less than this share of the logit
# scale is refused instead of decoded: a wrong answer then fails loudly, never silently.
CLEAN_MARGIN = 0.5


def config_digest(config: dict) -> str:
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def weights_digest(tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        if t.numel():
            h.update(t.view(torch.uint8).numpy())  # the bytes in place: no copy of a large model
    return h.hexdigest()


class Transformer(torch.nn.Module):
    """The compiled network; weights are parameters so gradients and hooks work as usual."""

    def __init__(self, config: dict, tensors: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.config = config
        self.causal = bool(config.get("causal", False))
        self.layers_cfg = config["layers"]
        # the most numbers one intermediate tensor of forward() may hold (32 Mi: 128 MiB at float32)
        self.chunk_elements = CHUNK_ELEMENTS
        self.params = torch.nn.ParameterDict(
            {name.replace(".", "__"): torch.nn.Parameter(t, requires_grad=False)
             for name, t in tensors.items()})

    def w(self, name: str) -> torch.Tensor:
        return self.params[name.replace(".", "__")]

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, trace: bool = False,
                values: torch.Tensor | None = None) -> Any:
        """``ids`` [batch, 1 + positions] (BOS first, PAD after each input's end); ``lengths`` the
        number of real tokens per row.  Returns logits [batch, 1 + positions, outputs], and with
        ``trace`` also the residual stream after the embedding and every sublayer and each layer's
        attention pattern [batch, heads, query, key].

        Memory: a large batch runs in slices of whole inputs, and every MLP in slices of positions,
        so that no intermediate tensor holds much more than ``chunk_elements`` numbers (the MLP
        hidden activations [positions, d_mlp] of an O(N²) lookup table, the attention scores
        [batch, heads, N, N]).  Each input's numbers are computed by the same operations either
        way, so slicing does not change the result."""
        b, t = ids.shape
        if not trace and b > 1:
            step = max(1, self.chunk_elements // max(1, self._row_cost(t)))
            if step < b:
                parts = [self.forward(ids[s:s + step], lengths[s:s + step],
                                      values=None if values is None else values[s:s + step])
                         for s in range(0, b, step)]
                return torch.cat(parts, dim=0)
        x = self.w("embed.token")[ids] + self.w("embed.pos")[:t].unsqueeze(0)
        if values is not None:  # numerical tokens: embedded linearly, value * embed.value
            x = x + values.to(x.dtype).unsqueeze(-1) * self.w("embed.value")
        pos = torch.arange(t, device=ids.device)
        valid = pos.unsqueeze(0) <= lengths.unsqueeze(1)  # BOS + real tokens
        allowed = valid.unsqueeze(1).expand(b, t, t)
        if self.causal:
            allowed = allowed & (pos.unsqueeze(0) <= pos.unsqueeze(1)).unsqueeze(0)
        neg = torch.finfo(x.dtype).min
        residuals, patterns = [x], []
        for li, lc in enumerate(self.layers_cfg):
            if lc["n_heads"]:
                wq, wk = self.w(f"layers.{li}.attn.W_Q"), self.w(f"layers.{li}.attn.W_K")
                wv, wo = self.w(f"layers.{li}.attn.W_V"), self.w(f"layers.{li}.attn.W_O")
                q = torch.einsum("btd,hde->bhte", x, wq)
                k = torch.einsum("btd,hde->bhte", x, wk)
                v = torch.einsum("btd,hde->bhte", x, wv)
                scores = q @ k.transpose(-1, -2) / math.sqrt(lc["d_head"])
                scores = scores.masked_fill(~allowed.unsqueeze(1), neg)
                attn = torch.softmax(scores, dim=-1)
                x = x + torch.einsum("bhte,hed->btd", attn @ v, wo)
                if trace:
                    patterns.append(attn)
            elif trace:
                patterns.append(torch.zeros(b, 0, t, t, dtype=x.dtype, device=x.device))
            if trace:
                residuals.append(x)
            if lc["d_mlp"]:
                x = self._mlp(li, x, int(lc["d_mlp"]))
            if trace:
                residuals.append(x)
        logits = x @ self.w("unembed.W_U") + self.w("unembed.b_U")
        if trace:
            return logits, residuals, patterns
        return logits

    def _mlp(self, li: int, x: torch.Tensor, d_mlp: int) -> torch.Tensor:
        """x + MLP(x), over slices of at most ``chunk_elements // d_mlp`` positions."""
        w_in, b_in = self.w(f"layers.{li}.mlp.W_in"), self.w(f"layers.{li}.mlp.b_in")
        w_out, b_out = self.w(f"layers.{li}.mlp.W_out"), self.w(f"layers.{li}.mlp.b_out")
        gated = f"layers__{li}__mlp__W_gate" in self.params
        w_gate = self.w(f"layers.{li}.mlp.W_gate") if gated else None
        b_gate = self.w(f"layers.{li}.mlp.b_gate") if gated else None

        def block(xs: torch.Tensor) -> torch.Tensor:
            h = torch.relu(xs @ w_in + b_in)
            if gated:  # a gated unit: relu(x W_in + b_in) * (x W_gate + b_gate)
                h = h * (xs @ w_gate + b_gate)
            return xs + h @ w_out + b_out

        def widened(xs: torch.Tensor) -> torch.Tensor:   # a float64 MLP in a float32 model
            return block(xs.to(w_in.dtype)).to(xs.dtype) if w_in.dtype != xs.dtype else block(xs)

        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        step = max(1, self.chunk_elements // max(1, d_mlp))
        if step >= flat.shape[0]:
            return widened(x)
        out = torch.empty_like(flat)
        for s in range(0, flat.shape[0], step):
            out[s:s + step] = widened(flat[s:s + step])
        return out.reshape(shape)

    def _row_cost(self, t: int) -> int:
        """About how many numbers one input of t positions keeps alive at once (residual stream,
        attention scores and queries/keys/values; the MLPs slice themselves)."""
        d_model = int(self.config.get("d_model", 1))
        heads = max([int(lc.get("n_heads", 0)) for lc in self.layers_cfg] + [0])
        d_head = max([int(lc.get("d_head", 0)) for lc in self.layers_cfg] + [0])
        return t * (3 * d_model + heads * (3 * t + 4 * d_head))


class RaspModel:
    """A loaded (or freshly compiled) model: encoding of inputs, the network, decoding of outputs."""

    def __init__(self, config: dict, tensors: dict[str, torch.Tensor]) -> None:
        self.config = config
        self.tensors = tensors
        self.module = Transformer(config, tensors)
        self.vocab = list(config["vocab"])
        self.max_len = int(config["max_len"])
        self._ids = {}
        for i, tok in enumerate(self.vocab):
            self._ids.setdefault(_token_key(tok), i)
        # str tokens never compare equal to other types, so a plain dict is exact for them
        self._str_ids = ({tok: i for i, tok in reversed(list(enumerate(self.vocab)))}
                         if all(type(t) is str for t in self.vocab) else None)
        self.bos_id = len(self.vocab)
        self.pad_id = len(self.vocab) + 1
        self.device = torch.device("cpu")

    def to(self, device: str | torch.device) -> "RaspModel":
        """Run the network on ``device`` (e.g. ``"cuda"``); inputs are encoded on the CPU and
        moved there, logits come back to the CPU.  Returns the model itself.  ``self.tensors``
        (what ``save`` writes) stay on the CPU."""
        try:
            device = torch.device(device)
        except (RuntimeError, TypeError):
            raise ModelInputError(f"unknown device {device!r}", hint="use cpu or cuda") from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ModelInputError("no CUDA device is available", hint="use --device cpu")
        if device.type not in ("cpu", "cuda"):
            raise ModelInputError(f"device {str(device)!r} is not supported", hint="use cpu or cuda")
        self.module.to(device)
        self.device = device
        return self

    # ------------------------------------------------------------------ files
    def save(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)
        config = dict(self.config)
        config["weights_sha256"] = weights_digest(self.tensors)
        digest = config_digest(config)
        tensors = {k: v.detach().contiguous() for k, v in sorted(self.tensors.items())}
        # One metadata key only: safetensors keeps metadata in a Rust HashMap, so with two keys
        # their order in the header (and the file's bytes) changed from save to save.  The format
        # is recorded in config.json.
        save_file(tensors, os.path.join(directory, WEIGHTS_FILE), metadata={"config_sha256": digest})
        with open(os.path.join(directory, CONFIG_FILE), "w", encoding="utf-8") as fh:
            json.dump(config, fh, indent=1, sort_keys=True, ensure_ascii=False)
            fh.write("\n")
        self.config = config

    @classmethod
    def load(cls, directory: str) -> "RaspModel":
        cpath, wpath = os.path.join(directory, CONFIG_FILE), os.path.join(directory, WEIGHTS_FILE)
        for p in (cpath, wpath):
            if not os.path.isfile(p):
                raise ModelArtifactError(f"{p} does not exist", hint="run 'rasp compile' to create the model")
        try:
            with open(cpath, encoding="utf-8") as fh:
                config = json.load(fh)
        except (OSError, ValueError) as err:
            raise ModelArtifactError(f"{cpath} is not valid JSON ({err})") from None
        if not isinstance(config, dict) or config.get("format") != FORMAT:
            raise ModelArtifactError(f"{cpath} is not a rasp-compiler model config (format {FORMAT})")
        try:
            with safe_open(wpath, framework="pt") as fh:
                metadata = fh.metadata() or {}
                tensors = {k: fh.get_tensor(k) for k in fh.keys()}
        except Exception as err:  # truncated or corrupt file: safetensors raises several kinds
            raise ModelArtifactError(f"{wpath} cannot be read: it is truncated or corrupt ({err})",
                                     hint="compile the model again") from None
        if metadata.get("config_sha256") != config_digest(config):
            raise ModelArtifactError(f"{cpath} does not match {wpath}: the config was edited or belongs to "
                                     "another model", hint="compile the model again")
        if config.get("weights_sha256") != weights_digest(tensors):
            raise ModelArtifactError(f"{wpath} does not match its config: the weights were changed",
                                     hint="compile the model again")
        try:
            return cls(config, tensors)
        except (KeyError, TypeError, ValueError) as err:
            raise ModelArtifactError(f"{directory} holds an inconsistent model ({err})") from None

    # ------------------------------------------------------------------ inputs
    def encode(self, batch: list[Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids [batch, 1 + longest] (BOS, tokens, PAD) and the lengths."""
        seqs = []
        for b, item in enumerate(batch):
            if not isinstance(item, (str, list, tuple)):
                raise ModelInputError(f"input {b} is not a string or a list of tokens (got "
                                      f"{type(item).__name__})")
            toks = list(item)
            if not toks:
                raise ModelInputError(f"input {b} is empty: a RASP program runs on at least one token")
            if len(toks) > self.max_len:
                raise ModelInputError(f"input {b} has {len(toks)} tokens, more than the {self.max_len} "
                                      "this model was compiled for",
                                      hint="compile again with a larger --max-len")
            if self._str_ids is not None:     # the common case: a vocabulary of strings
                try:
                    seqs.append([self._str_ids[tok] for tok in toks])
                    continue
                except (KeyError, TypeError):
                    pass                           # the careful loop below names the bad token
            ids = []
            for p, tok in enumerate(toks):
                try:
                    i = self._ids.get(_token_key(tok))
                except TypeError:  # unhashable: a list where a token should be
                    i = None
                if i is None and isinstance(tok, (int, float)):
                    i = self._ids.get(_token_key(str(tok)))
                if i is None:
                    shown = ", ".join(repr(v) for v in self.vocab[:12])
                    raise ModelInputError(f"token {tok!r} at position {p} of input {b} is not in the "
                                          f"vocabulary ({shown}{', …' if len(self.vocab) > 12 else ''})",
                                          hint="compile again with a --vocab that includes it")
                ids.append(i)
            seqs.append(ids)
        lengths = [len(s) for s in seqs]
        width = max(lengths) if seqs else 0
        ids_t = torch.full((len(seqs), width + 1), self.pad_id, dtype=torch.long)
        ids_t[:, 0] = self.bos_id
        if seqs and min(lengths) == width:
            ids_t[:, 1:] = torch.tensor(seqs, dtype=torch.long)
        else:
            for r, s in enumerate(seqs):
                ids_t[r, 1:len(s) + 1] = torch.tensor(s, dtype=torch.long)
        return ids_t, torch.tensor(lengths, dtype=torch.long)

    # ------------------------------------------------------------------ running
    def encode_inputs(self, batch: list[Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Token ids, lengths and, for a model with numerical input (config ``input.kind ==
        "numerical"``), the token values [batch, 1 + longest] (0 at BOS and padding)."""
        spec = self.config.get("input") or {}
        if spec.get("kind") != "numerical":
            ids, lengths = self.encode(batch)
            return ids, lengths, None
        lo, hi = spec.get("range", [-math.inf, math.inf])
        fixed = self.config.get("fixed_length")
        rows = []
        for b, item in enumerate(batch):
            vals = list(item)
            if not vals:
                raise ModelInputError(f"input {b} is empty: a RASP program runs on at least one token")
            if len(vals) > self.max_len or (fixed and len(vals) != fixed):
                need = f"exactly {fixed}" if fixed else f"at most {self.max_len}"
                raise ModelInputError(f"input {b} has {len(vals)} values; this model takes {need}")
            for p, v in enumerate(vals):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise ModelInputError(f"input {b} position {p} holds {v!r}: this model reads finite "
                                          "real numbers")
                if not lo <= v <= hi:
                    raise ModelInputError(f"input {b} position {p} holds {v!r}, outside the input range "
                                          f"[{lo}, {hi}] the model was compiled for (its exactness "
                                          "margins and error bounds hold only there)",
                                          hint="compile again with a wider --input-range")
            rows.append([float(v) for v in vals])
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width + 1), self.pad_id, dtype=torch.long)
        values = torch.zeros((len(rows), width + 1), dtype=torch.float64)
        ids[:, 0] = self.bos_id
        for r, vals in enumerate(rows):
            ids[r, 1:len(vals) + 1] = 0  # the one "number" token
            values[r, 1:len(vals) + 1] = torch.tensor(vals, dtype=torch.float64)
        return ids, torch.tensor([len(r) for r in rows], dtype=torch.long), values

    def forward(self, batch: list[Any]) -> torch.Tensor:
        """Logits [batch, longest input, outputs] (BOS removed; rows past an input's end are padding)."""
        ids, lengths, values = self.inputs_on_device(*self.encode_inputs(batch))
        with torch.no_grad():
            return self.module(ids, lengths, values=values)[:, 1:].cpu()

    def inputs_on_device(self, ids: torch.Tensor, lengths: torch.Tensor, values: torch.Tensor | None
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``encode_inputs``'s tensors moved to the network's device (see ``to``)."""
        if self.device.type == "cpu":
            return ids, lengths, values
        return (ids.to(self.device), lengths.to(self.device),
                None if values is None else values.to(self.device))

    def unclean(self, logits: torch.Tensor, lengths: list[int]) -> list[list[int]]:
        """Per input, the positions whose categorical output is not a clean one-hot (best logit
        ahead of the runner-up by less than CLEAN_MARGIN x the logit scale); empty lists for a
        numerical output."""
        out_cfg = self.config["output"]
        if out_cfg["encoding"] != "categorical" or logits.shape[-1] < 2:
            return [[] for _ in lengths]
        top = logits.topk(2, dim=-1).values
        bad = (top[..., 0] - top[..., 1]) < CLEAN_MARGIN * float(out_cfg.get("logit_scale", 1.0))
        real = torch.tensor(lengths, device=bad.device)[:, None]
        bad &= torch.arange(bad.shape[1], device=bad.device) < real
        out: list[list[int]] = [[] for _ in lengths]
        for r, p in bad.nonzero().tolist():     # usually none: no per-position Python work
            out[r].append(p)
        return out

    def decode(self, logits: torch.Tensor, lengths: list[int], strict: bool = True) -> list[list[Any]]:
        """Output values per input.  With ``strict`` an output that is not a clean one-hot raises
        ModelOutputError instead of being decoded by argmax."""
        out_cfg = self.config["output"]
        result = []
        if strict:
            undefined = out_cfg.get("undefined", {})
            for r, n in enumerate(lengths):
                if str(n) in undefined:
                    sid, i = undefined[str(n)]
                    raise ModelOutputError(f"input {r} has no answer: at length {n}, {sid} has no value "
                                           f"at position {i} on any input (the interpreter raises there)",
                                           hint="the program is undefined at this length; see the note "
                                                "in the compile summary")
            for r, positions in enumerate(self.unclean(logits, lengths)):
                if positions:
                    p = positions[0]
                    top = logits[r, p].topk(2).values.tolist()
                    raise ModelOutputError(
                        f"the output at position {p} of input {r} is ambiguous: its two best logits "
                        f"are {top[0]:.4g} and {top[1]:.4g}, where a compiled model gives "
                        f"{out_cfg.get('logit_scale')} and 0; the model is outside the exactness its "
                        "compiler derived, so no answer is given",
                        hint="this is a compiler bug: please report the program, the compile options "
                             "and this input (`rasp check` reproduces it)")
        if out_cfg["encoding"] == "categorical":
            values = [_from_json(v) for v in out_cfg["values"]]
            idx = logits.argmax(dim=-1).tolist()
            for r, n in enumerate(lengths):
                result.append([values[i] for i in idx[r][:n]])
        else:
            col = logits[..., 0].double().tolist()
            integer = out_cfg.get("integer", False)
            for r, n in enumerate(lengths):
                row = col[r][:n]
                if integer:
                    row = [int(round(v)) if abs(v - round(v)) < 1e-3 else v for v in row]
                result.append(row)
        return result

    def run(self, batch: list[Any], strict: bool = True) -> list[list[Any]]:
        """The decoded output of every input (a string is read as its characters).  With
        ``strict`` (the default) an ambiguous output raises ModelOutputError (see ``decode``)."""
        if isinstance(batch, str):
            raise ModelInputError("run() takes a list of inputs; wrap a single input in a list")
        logits = self.forward(batch)
        return self.decode(logits, [len(list(x)) for x in batch], strict=strict)

    def trace(self, batch: list[Any]) -> dict[str, Any]:
        """Logits, the residual stream after the embedding and after every sublayer
        ([batch, 1 + positions, d_model], BOS at position 0) and each layer's attention pattern,
        with the residual labels from the config."""
        ids, lengths, values = self.inputs_on_device(*self.encode_inputs(batch))
        with torch.no_grad():
            logits, residuals, patterns = self.module(ids, lengths, trace=True, values=values)
        residuals = [r.cpu() for r in residuals]
        patterns = [a.cpu() for a in patterns]
        return {"logits": logits[:, 1:].cpu(), "residuals": residuals, "attention": patterns,
                "labels": self.labels(), "lengths": lengths.tolist()}

    def labels(self) -> list[str]:
        """The label of every residual dimension, in order."""
        out = [""] * int(self.config["d_model"])
        for sub in self.config["residual"]:
            for j, lab in enumerate(sub["labels"]):
                out[sub["start"] + j] = lab
        return out


def _token_key(tok: Any) -> tuple:
    return (type(tok).__name__ if not isinstance(tok, bool) else "bool", tok)


def _from_json(v: Any) -> Any:
    return tuple(_from_json(x) for x in v) if isinstance(v, list) else v
