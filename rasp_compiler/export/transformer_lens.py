"""Compiled RASP models as TransformerLens models.

The compiled network is already a standard transformer (token + position embedding, blocks of
multi-head attention then a ReLU MLP, no layer norm, a linear unembedding), so the conversion is
a relabelling of tensors plus three adjustments TransformerLens needs:

* every layer has the same number of heads and the same ``d_head`` — missing heads and head
  dimensions are zero (a zero head adds nothing to the residual stream);
* TransformerLens divides every layer's scores by one ``attn_scale``, the runtime by
  ``sqrt(d_head)`` of that layer — ``W_Q`` of a layer with a smaller ``d_head`` is multiplied by
  ``sqrt(D / d_head)`` so the scores are the same;
* a layer without an MLP gets an all-zero MLP (ReLU(0) = 0).

The weights are written in TransformerLens's own ``HookedTransformer`` state-dict layout
(``embed.W_E``, ``blocks.{l}.attn.W_Q`` [heads, d_model, d_head], ``unembed.W_U`` …), which is
what TransformerLens 2.x/3.x loads directly and what TransformerLens 4.x converts with
``convert_tl_checkpoint``.  ``to_hooked_transformer`` builds the model for whichever version is
installed: a ``HookedTransformer`` before 4.0, the equivalent ``TransformerBridge.boot_native``
model from 4.0 on (4.0 removed the ``HookedTransformer`` class).  Hook names are the same in both
(``blocks.0.hook_resid_pre``, ``blocks.0.attn.hook_pattern`` …).

Token ids are the runtime's: vocabulary entries 0..V-1, BOS = V, PAD = V+1; position 0 holds BOS.
Padding needs ``attention_mask`` (1 for BOS and real tokens, 0 for PAD).  TransformerLens 2.x/3.x
applies ``attention_mask`` only in causal models: a bidirectional model's heads then attend to PAD
keys and the logits of a padded batch are wrong (reverse, length …).  ``padding_hooks`` gives the
forward hooks that mask PAD keys in every layer; ``run_padded`` runs a batch with them (``verify``
checks mixed-length batches this way).

transformer-lens is an optional dependency (``pip install -e .[lens]``); this module imports it
only inside the functions that need it.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from rasp_compiler.compiler.values import distinct_labels
from rasp_compiler.errors import ArtifactError, UserError, file_in_the_way
from rasp_compiler.memory import available_memory
from rasp_compiler.runtime import RaspModel

FORMAT = "rasp-compiler-transformer-lens/1"
INSTALL_HINT = "install the optional extra: pip install -e .[lens]  (or: pip install transformer-lens)"
# Tensors of one layer the TransformerLens block can hold; anything else is a unit it lacks.
ATTN_TENSORS = ("W_Q", "W_K", "W_V", "W_O")
MLP_TENSORS = ("W_in", "b_in", "W_out", "b_out")


class UnsupportedUnitError(UserError):
    """The compiled model uses a unit (sublayer kind) TransformerLens has no component for."""


# --------------------------------------------------------------------------- importing TL
def _import_tl() -> tuple[str, Any]:
    """("bridge", module namespace) for TransformerLens >= 4, ("hooked", ...) before."""
    try:
        import transformer_lens  # noqa: F401
    except ImportError:
        raise UserError("TransformerLens is not installed", hint=INSTALL_HINT) from None
    try:
        from transformer_lens.config import TransformerBridgeConfig
        from transformer_lens.model_bridge.sources.native import boot
        from transformer_lens.utilities.tl_checkpoint_conversion import convert_tl_checkpoint

        return "bridge", (TransformerBridgeConfig, boot, convert_tl_checkpoint)
    except ImportError:
        pass
    try:
        from transformer_lens import HookedTransformer, HookedTransformerConfig
    except ImportError as err:
        raise UserError(f"this TransformerLens version has neither HookedTransformer nor "
                        f"TransformerBridge.boot_native ({err})", hint=INSTALL_HINT) from None
    return "hooked", (HookedTransformerConfig, HookedTransformer)


def transformer_lens_version() -> str:
    try:
        from importlib.metadata import version

        return version("transformer-lens")
    except Exception:  # not installed, or installed without metadata
        return "unknown"


# --------------------------------------------------------------------------- weights
def _as_model(model: RaspModel | str | os.PathLike, caller: str) -> RaspModel:
    if isinstance(model, (str, os.PathLike)):
        return RaspModel.load(str(model))
    if type(model).__name__ == "AssembledModel" and isinstance(getattr(model, "model", None), RaspModel):
        # tracr's compile_rasp_to_model: its input_encoder's ids are the runtime's, so the export of
        # its compiled model reads input_encoder.encode([BOS, ...]) as apply reads the tokens
        return model.model
    if not isinstance(model, RaspModel):
        got = _a(model)
        # a Program or a Python-API s-op is the usual slip: it has to be compiled first
        hint = ("compile it first: rasp_compiler.compile_program(program, vocab, max_len) (an s-op: "
                "rasp_compiler.pyapi.compile_program)" if hasattr(model, "graph") or hasattr(model, "program")
                else "pass the model compile_program returns, or the directory rasp compile or "
                     "model.save(path) wrote")
        raise UserError(f"{caller} takes a compiled model (compile_program(...)), got {got}", hint=hint)
    return model


def _a(value: Any) -> str:
    """What ``value`` is, for a message: "None", "a Program", "an Aggregate"."""
    if value is None:
        return "None"
    name = type(value).__name__
    return ("an " if name[:1].lower() in "aeiou" else "a ") + name


def _unit_error(config: dict, layer: int, unit: str) -> UnsupportedUnitError:
    """Name the unit and the program lines that needed it (from the config's plan)."""
    lines = []
    plan = config.get("plan") or []
    if layer < len(plan):
        lp = plan[layer]
        ops = list((lp.get("mlp") or {}).get("ops", [])) if "mlp" in unit.lower() else []
        ops += [] if ops else list(lp.get("heads", [])) + list((lp.get("mlp") or {}).get("ops", []))
        for op in ops:
            where = op.get("source") or "?"
            text = op.get("text") or op.get("node") or ""
            lines.append(f"{where}: {text}")
    needed = ("; needed by " + "; ".join(lines)) if lines else ""
    return UnsupportedUnitError(
        f"layer {layer} uses {unit}, which a TransformerLens block cannot express{needed}",
        hint="TransformerLens blocks hold softmax attention heads and one ReLU MLP; recompile without "
             "that unit (e.g. make the map categorical) to export")


def _check_expressible(config: dict, tensors: dict[str, torch.Tensor]) -> None:
    if "embed.value" in tensors or (config.get("input") or {}).get("kind") == "numerical":
        # TransformerLens embeds token ids; a real-valued token adds value * embed.value instead
        if isinstance(config.get("simulator"), dict):   # U: "compile with a --vocab" does not apply
            raise UnsupportedUnitError(
                "the model is the universal simulator U (rasp simulate), which reads real numbers: "
                "a TransformerLens token embedding cannot express them",
                hint="U runs as it is saved: rasp simulate --model DIR --input-json '[...]', or "
                     "load_simulator(DIR) in Python")
        raise UnsupportedUnitError(
            "the model reads real-valued tokens (compiled with --input-range), which a "
            "TransformerLens token embedding cannot express",
            hint="compile with a --vocab of tokens to export; numerical s-ops inside the program are fine")
    known = {"embed.token", "embed.pos", "unembed.W_U", "unembed.b_U"}
    for li, lc in enumerate(config["layers"]):
        act = lc.get("mlp_activation", lc.get("activation", "relu"))
        if act not in (None, "relu"):
            raise _unit_error(config, li, f"an MLP with activation {act!r}")
        kind = lc.get("mlp_kind", lc.get("mlp_unit"))
        if kind not in (None, "relu", "standard"):
            raise _unit_error(config, li, f"a {kind} MLP")
        known |= {f"layers.{li}.attn.{n}" for n in ATTN_TENSORS}
        known |= {f"layers.{li}.mlp.{n}" for n in MLP_TENSORS}
    for name in sorted(tensors):
        if name in known:
            continue
        parts = name.split(".")
        if len(parts) >= 3 and parts[0] == "layers" and parts[1].isdigit():
            li = int(parts[1])
            what = {"mlp": f"an MLP with an extra weight '{parts[-1]}' (a gated/bilinear unit)",
                    "attn": f"an attention head with an extra weight '{parts[-1]}'"}.get(
                        parts[2], f"a '{parts[2]}' sublayer")
            raise _unit_error(config, li, what)
        raise UnsupportedUnitError(f"the model has a tensor '{name}' that has no TransformerLens "
                                   "counterpart", hint="export supports embeddings, attention, ReLU "
                                   "MLPs and the unembedding")


def tl_config(model: RaspModel | str | os.PathLike) -> dict[str, Any]:
    """The TransformerLens config (plain JSON values) of ``model``: keyword arguments of both
    ``HookedTransformerConfig`` and ``TransformerBridgeConfig``."""
    m = _as_model(model, "tl_config")
    cfg = m.config
    layers = cfg["layers"] or [{"n_heads": 0, "d_head": 0, "d_mlp": 0}]
    d_head = max(1, max(lc["d_head"] for lc in layers))
    program = os.path.splitext(os.path.basename(cfg.get("program") or "program"))[0]
    return {
        "model_name": f"rasp-{program}",
        "d_model": int(cfg["d_model"]),
        "n_layers": len(layers),
        "n_heads": max(1, max(lc["n_heads"] for lc in layers)),
        "d_head": d_head,
        "d_mlp": max(1, max(lc["d_mlp"] for lc in layers)),
        "d_vocab": len(cfg["vocab"]) + 2,
        "d_vocab_out": int(m.tensors["unembed.W_U"].shape[1]),
        "n_ctx": int(cfg["max_len"]) + 1,
        "act_fn": "relu",
        "normalization_type": None,
        "attention_dir": "causal" if cfg.get("causal") else "bidirectional",
        "attn_only": False,
        "positional_embedding_type": "standard",
        "use_attn_scale": True,
        "attn_scale": math.sqrt(d_head),
        "default_prepend_bos": False,
        "init_weights": False,
    }


def tl_state_dict(model: RaspModel | str | os.PathLike) -> dict[str, torch.Tensor]:
    """The weights in TransformerLens's HookedTransformer layout (see the module docstring)."""
    m = _as_model(model, "tl_state_dict")
    config, t = m.config, m.tensors
    _check_expressible(config, t)
    tc = tl_config(m)
    dtype = t["embed.token"].dtype
    d, H, D, M = tc["d_model"], tc["n_heads"], tc["d_head"], tc["d_mlp"]
    sd: dict[str, torch.Tensor] = {
        "embed.W_E": t["embed.token"].clone(),
        "pos_embed.W_pos": t["embed.pos"].clone(),
    }
    n_ctx = tc["n_ctx"]
    for li in range(tc["n_layers"]):
        lc = config["layers"][li] if li < len(config["layers"]) else {"n_heads": 0, "d_head": 0, "d_mlp": 0}
        h, dh, m_l = lc["n_heads"], lc["d_head"], lc["d_mlp"]
        wq, wk, wv = (torch.zeros(H, d, D, dtype=dtype) for _ in range(3))
        wo = torch.zeros(H, D, d, dtype=dtype)
        if h:
            # Same scores as the runtime: q.k / sqrt(d_head_l) == (c q).k / sqrt(D) with c below.
            # c is exactly 1 in layers whose d_head is the largest (the usual case).
            c = 1.0 if dh == D else math.sqrt(D / dh)
            wq[:h, :, :dh] = t[f"layers.{li}.attn.W_Q"] * c
            wk[:h, :, :dh] = t[f"layers.{li}.attn.W_K"]
            wv[:h, :, :dh] = t[f"layers.{li}.attn.W_V"]
            wo[:h, :dh, :] = t[f"layers.{li}.attn.W_O"]
        p = f"blocks.{li}"
        sd[f"{p}.attn.W_Q"], sd[f"{p}.attn.W_K"], sd[f"{p}.attn.W_V"], sd[f"{p}.attn.W_O"] = wq, wk, wv, wo
        for name in ("b_Q", "b_K", "b_V"):
            sd[f"{p}.attn.{name}"] = torch.zeros(H, D, dtype=dtype)
        sd[f"{p}.attn.b_O"] = torch.zeros(d, dtype=dtype)
        # HookedTransformer's persistent buffers, so a strict load_state_dict works there too.
        sd[f"{p}.attn.mask"] = torch.tril(torch.ones(n_ctx, n_ctx, dtype=torch.bool))
        sd[f"{p}.attn.IGNORE"] = torch.tensor(-torch.inf, dtype=dtype)
        w_in, b_in = torch.zeros(d, M, dtype=dtype), torch.zeros(M, dtype=dtype)
        w_out, b_out = torch.zeros(M, d, dtype=dtype), torch.zeros(d, dtype=dtype)
        if m_l:
            w_in[:, :m_l] = t[f"layers.{li}.mlp.W_in"]
            b_in[:m_l] = t[f"layers.{li}.mlp.b_in"]
            w_out[:m_l] = t[f"layers.{li}.mlp.W_out"]
            b_out[:] = t[f"layers.{li}.mlp.b_out"]
        sd[f"{p}.mlp.W_in"], sd[f"{p}.mlp.b_in"], sd[f"{p}.mlp.W_out"], sd[f"{p}.mlp.b_out"] = (
            w_in, b_in, w_out, b_out)
    sd["unembed.W_U"] = t["unembed.W_U"].clone()
    sd["unembed.b_U"] = t["unembed.b_U"].clone()
    return sd


def metadata(model: RaspModel | str | os.PathLike) -> dict[str, Any]:
    """What a TransformerLens user needs besides the weights: token ids, output values, the
    meaning of every residual dimension, and which heads/MLPs implement which program line."""
    m = _as_model(model, "metadata")
    cfg = m.config
    v = len(cfg["vocab"])
    return {
        "vocab": cfg["vocab"], "bos_id": v, "pad_id": v + 1,
        # JSON keys are strings: a token that prints like another ("1" and 1) is keyed by its repr
        "token_ids": {key: i for i, key in enumerate(distinct_labels(cfg["vocab"]))},
        "max_len": cfg["max_len"],
        # a model compiled for one length (--fixed-length) answers other lengths wrongly, and the
        # TransformerLens model cannot refuse them as the runtime does: the JSON must say so
        "fixed_length": cfg.get("fixed_length"),
        "causal": bool(cfg.get("causal")), "dtype": cfg.get("dtype", "float32"),
        "output": cfg["output"], "residual_labels": m.labels(), "plan": cfg.get("plan", []),
        "program": cfg.get("program"),
    }


# --------------------------------------------------------------------------- building the TL model
def _dtype_of(model: RaspModel) -> torch.dtype:
    return model.tensors["embed.token"].dtype


def build_hooked_transformer(cfg: dict[str, Any], state_dict: dict[str, torch.Tensor],
                             dtype: torch.dtype = torch.float32) -> Any:
    """A TransformerLens model from a config and a HookedTransformer-layout state dict."""
    kind, api = _import_tl()
    if kind == "bridge":
        config_cls, boot, convert = api
        tl_cfg = config_cls(**cfg, dtype=dtype, device="cpu")
        bridge = boot(tl_cfg, dtype=dtype, device="cpu")
        converted = convert({k: v for k, v in state_dict.items()}, tl_cfg)
        # The native head has no bias parameter of its own but the bridge exposes one.
        expected = bridge.state_dict()
        if "unembed.bias" in expected and "unembed.bias" not in converted:
            converted["unembed.bias"] = torch.zeros_like(expected["unembed.bias"])
        result = bridge.load_state_dict(converted, strict=True)
        if getattr(result, "missing_keys", None) or getattr(result, "unexpected_keys", None):
            raise ArtifactError(f"TransformerLens refused the weights: {result}")
        bridge.eval()
        return bridge
    config_cls, hooked_cls = api
    tl_cfg = config_cls(**cfg, dtype=dtype, device="cpu")
    model = hooked_cls(tl_cfg)
    model.load_state_dict(state_dict, strict=True)
    model.eval()
    return model


def to_hooked_transformer(model: RaspModel | str | os.PathLike) -> Any:
    """The compiled model as a TransformerLens model (HookedTransformer before TransformerLens 4,
    the equivalent ``TransformerBridge`` from 4 on).  Feed it the runtime's token ids
    (``model.encode(batch)``).  Run a padded batch with ``run_padded(tl_model, ids, attention_mask)``,
    not ``tl_model(ids, attention_mask=...)``: TransformerLens 2.x/3.x applies ``attention_mask``
    only in causal models, so a bidirectional model's heads also read the PAD positions and the
    shorter inputs get wrong logits."""
    m = _as_model(model, "to_hooked_transformer")
    sd = tl_state_dict(m)  # raises for inexpressible units before importing TransformerLens
    return build_hooked_transformer(tl_config(m), sd, _dtype_of(m))


# --------------------------------------------------------------------------- files
def _earlier_export(json_path: str, pt_name: str) -> bool:
    """Whether ``json_path`` is the config an earlier 'rasp export -o ....pt' wrote beside
    ``pt_name`` (read within bounds; anything unreadable is not)."""
    from rasp_compiler.bounded_json import load_json_file

    try:
        if os.path.getsize(json_path) > 16 * 1024 * 1024:
            return False
        doc = load_json_file(json_path)
    except (OSError, UserError):
        return False
    return isinstance(doc, dict) and doc.get("format") == FORMAT and doc.get("weights") == pt_name


def check_replaceable(pt_path: str) -> None:
    """``save_transformer_lens`` replaces FILE.pt and FILE.json only where they are an earlier
    export (unless ``force``): a checkpoint of the user's own, or another program's JSON beside
    it, was replaced silently.  (A link is replaced, never followed, as every artifact file is.)"""
    json_path = os.path.splitext(pt_path)[0] + ".json"
    pt_there = os.path.isfile(pt_path) and not os.path.islink(pt_path)
    json_there = os.path.isfile(json_path) and not os.path.islink(json_path)
    if not (pt_there or json_there):
        return
    if json_there and _earlier_export(json_path, os.path.basename(pt_path)):
        return
    what = (f"{json_path} exists and is not the config of an earlier export" if json_there else
            f"{pt_path} exists, and no {os.path.basename(json_path)} of an earlier export is beside it")
    raise UserError(f"{what}; it is not replaced",
                    hint="give another file name, or --force (force=True from Python) to replace it")


def _save_state_dict(sd: dict, tmp: str) -> None:
    """torch.save into an open file: given a path, torch names the archive's records after the
    file (here the temporary ``.NAME.pt.tmp-...``), so the same model exported to two names gave
    two different files; an open file's records are always named ``archive/``."""
    with open(tmp, "wb") as fh:
        torch.save(sd, fh)


def save_transformer_lens(model: RaspModel | str | os.PathLike, path: str,
                          force: bool = False) -> tuple[str, str]:
    """Write the state dict to ``path`` (torch.save of plain tensors, loadable with
    ``weights_only=True``) and ``{cfg, metadata}`` as JSON beside it (``path`` with ``.json``).
    Returns both paths.  Files there that are not an earlier export are replaced only with
    ``force`` (``check_replaceable``)."""
    if not force:
        check_replaceable(str(path))
    from rasp_compiler.atomic_dir import write_file

    m = _as_model(model, "save_transformer_lens")
    sd = tl_state_dict(m)
    cfg = tl_config(m)
    base, _ = os.path.splitext(path)
    json_path = base + ".json"
    doc = {"format": FORMAT, "cfg": cfg, "weights": os.path.basename(path), **metadata(m),
           "how_to_load": LOAD_HOWTO}
    blocker = file_in_the_way(os.path.dirname(path))  # makedirs would only say "File exists"
    if blocker is not None:
        raise UserError(f"{path}: cannot write: {blocker} is a file, not a directory",
                        hint="write it inside a directory")
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    except OSError as err:
        raise UserError(f"{path}: cannot write ({err.strerror or err})") from None
    try:
        # each file beside it, renamed over it: never half-written, never written through a link
        write_file(path, lambda tmp: _save_state_dict({k: v.contiguous() for k, v in sd.items()}, tmp))
    except OSError as err:
        raise UserError(f"{path}: cannot write ({err.strerror or err})") from None
    except RuntimeError as err:  # torch reports a file it cannot open or write this way
        if "allocate" in str(err):  # out of memory: the command line says so
            raise
        reason = re.search(r"strerror: (.*)$", str(err).strip())
        raise UserError(f"{path}: cannot write ({reason.group(1) if reason else err})") from None
    try:
        text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
        write_file(json_path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    except OSError as err:
        raise UserError(f"{json_path}: cannot write ({err.strerror or err})") from None
    return path, json_path


# The recipe written into the export's JSON, for TransformerLens 2.x alone: the version the `lens`
# extra installs and `verify` checks.  It mixed in 4.x lines (TransformerBridge, boot_native), whose
# imports fail on 2.x, so the recipe as written ran on no version; tests/test_export.py runs it.
LOAD_HOWTO = [
    "# TransformerLens 2.x (2.16 or later; checked with 2.18.0). For another version, "
    "rasp_compiler.export.transformer_lens.load_transformer_lens('model_tl.pt') builds the model.",
    "import json, torch",
    "from transformer_lens import HookedTransformer, HookedTransformerConfig",
    "doc = json.load(open('model_tl.json')); sd = torch.load('model_tl.pt', weights_only=True)",
    "model = HookedTransformer(HookedTransformerConfig(**doc['cfg'], dtype=getattr(torch, doc['dtype'])))",
    "model.load_state_dict(sd)",
    "# inputs: ids = [doc['bos_id']] + [doc['token_ids'][t] for t in text], PAD = doc['pad_id']; "
    "logits = model(torch.tensor([ids])); output position i is logits[0, i + 1], "
    "doc['output']['values'][argmax] for a categorical output",
    "# a padded batch of a bidirectional model: HookedTransformer applies attention_mask only in causal "
    "models, so run rasp_compiler.export.transformer_lens.run_padded(model, ids, attention_mask) "
    "(attention_mask = 1 on BOS and tokens, 0 on PAD; it masks PAD keys with hooks on "
    "blocks.L.attn.hook_attn_scores), or one length per batch",
]


def load_transformer_lens(path: str) -> tuple[Any, dict[str, Any]]:
    """The TransformerLens model saved at ``path`` (the ``.pt``) and its JSON document."""
    if not isinstance(path, (str, os.PathLike)):
        raise UserError(f"load_transformer_lens takes the path of the .pt that rasp export or "
                        f"save_transformer_lens wrote, got {_a(path)}")
    path = os.fspath(path)
    if os.path.isdir(path):
        what = ("a model directory from rasp compile" if os.path.isfile(os.path.join(path, "config.json"))
                else "a directory")
        raise ArtifactError(f"{path} is {what}; pass the .pt written by rasp export "
                            "(or save_transformer_lens)",
                            hint=f"rasp export {path} -o model_tl.pt, then load_transformer_lens("
                                 f"'model_tl.pt'); or to_hooked_transformer('{path}') without a file")
    base, ext = os.path.splitext(path)
    if ext.lower() == ".json" and os.path.isfile(path):
        raise ArtifactError(f"{path}: pass the .pt, not its .json (the weights are in the .pt; "
                            "load_transformer_lens reads the .json beside it)",
                            hint=f"load_transformer_lens('{base}.pt')")
    json_path = base + ".json"
    for p in (path, json_path):
        if not os.path.isfile(p):
            raise ArtifactError(f"{p} does not exist", hint="run 'rasp export' to create it")
    from rasp_compiler.bounded_json import load_json_file

    doc = load_json_file(json_path, error=ArtifactError)  # bounded in size and depth
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ArtifactError(f"{json_path} is not a rasp-compiler TransformerLens export ({FORMAT})")
    try:
        sd = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as err:  # truncated/corrupt/pickled objects: torch raises several kinds
        raise ArtifactError(f"{path} cannot be read as a state dict ({err})") from None
    dtype = getattr(torch, str(doc.get("dtype", "float32")), None)
    if not isinstance(dtype, torch.dtype) or not isinstance(doc.get("cfg"), dict):
        raise ArtifactError(f"{json_path} has no valid 'cfg' and 'dtype'", hint="run 'rasp export' again")
    try:
        return build_hooked_transformer(doc["cfg"], sd, dtype), doc
    except (TypeError, ValueError, KeyError, RuntimeError, AttributeError) as err:
        # an edited cfg or a state dict of another model: torch/TransformerLens say which key
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ArtifactError(f"{path} and {json_path} do not make a TransformerLens model ({first})",
                            hint="run 'rasp export' again") from None


# --------------------------------------------------------------------------- verification
def random_inputs(model: RaspModel, k: int, seed: int = 0) -> list[list[Any]]:
    """``k`` random inputs over the vocabulary; lengths cycle through 1..max_len so every
    length (and the longest) is covered."""
    return [item for chunk in _random_chunks(model, k, seed, max(1, k)) for item in chunk]


def _random_chunks(model: RaspModel, k: int, seed: int, size: int) -> Iterator[list[list[Any]]]:
    """``random_inputs(model, k, seed)`` drawn ``size`` at a time: ``verify`` holds one batch, not
    all K (``--inputs 100000000000`` grew a list until memory ran out)."""
    rng = random.Random(seed)
    vocab = list(model.config["vocab"])
    n = int(model.config["max_len"])
    fixed = model.config.get("fixed_length")
    for start in range(0, k, size):
        yield [[rng.choice(vocab) for _ in range(fixed or (n - i % n))]
               for i in range(start, min(k, start + size))]


def resid_hook_names(n_layers: int) -> list[str]:
    """TransformerLens's residual-stream hook points in the runtime trace's order."""
    names = ["blocks.0.hook_resid_pre"]
    for li in range(n_layers):
        names += [f"blocks.{li}.hook_resid_mid", f"blocks.{li}.hook_resid_post"]
    return names


def padding_hooks(n_layers: int, attention_mask: torch.Tensor) -> list[tuple[str, Any]]:
    """Forward hooks that give PAD keys (``attention_mask == 0``) a score of -inf in every layer.

    TransformerLens 2.x/3.x applies ``attention_mask`` only in causal models; without these hooks
    a bidirectional model's heads read PAD positions and a padded batch gives wrong logits.  In a
    model that already masks them the hooks change nothing (-inf stays -inf)."""
    keep = attention_mask.bool()[:, None, None, :]  # [batch, 1 head, 1 query, key]

    def mask_pad_keys(scores: torch.Tensor, hook: Any = None) -> torch.Tensor:
        return scores.masked_fill(~keep.to(scores.device), float("-inf"))

    return [(f"blocks.{li}.attn.hook_attn_scores", mask_pad_keys) for li in range(n_layers)]


def run_padded(tl_model: Any, ids: torch.Tensor, attention_mask: torch.Tensor,
               names_filter: Any = None) -> tuple[torch.Tensor, Any]:
    """``tl_model.run_with_cache`` on a padded batch with PAD keys masked (see ``padding_hooks``).

    Only TransformerLens 2.x/3.x (``HookedTransformer``) needs the hooks; 4.x applies
    ``attention_mask`` itself and its bridge is run as it was before (untested here: 2.x is what
    the ``lens`` extra installs)."""
    _check_padded_arguments(tl_model, ids, attention_mask)
    with torch.no_grad():
        if _import_tl()[0] == "bridge":
            return tl_model.run_with_cache(ids, attention_mask=attention_mask, names_filter=names_filter)
        hooks = padding_hooks(int(tl_model.cfg.n_layers), attention_mask)
        with tl_model.hooks(fwd_hooks=hooks):
            return tl_model.run_with_cache(ids, attention_mask=attention_mask, names_filter=names_filter)


def _check_padded_arguments(tl_model: Any, ids: Any, attention_mask: Any) -> None:
    """run_padded's arguments, in words: otherwise a compiled model in place of the TransformerLens
    one fails on a missing ``cfg``, and a list of ids reads to TransformerLens as text to tokenize."""
    if isinstance(tl_model, RaspModel) or not hasattr(tl_model, "run_with_cache"):
        raise UserError(f"run_padded takes the TransformerLens model, got {_a(tl_model)}",
                        hint="tl_model = to_hooked_transformer(model); "
                             "run_padded(tl_model, ids, attention_mask)")
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.is_floating_point():
        got = (f"a {ids.dtype} tensor of shape {tuple(ids.shape)}" if isinstance(ids, torch.Tensor)
               else _a(ids))
        raise UserError(f"run_padded's ids must be a tensor of token ids [batch, positions], got {got}",
                        hint="ids, lengths = model.encode(batch) (BOS first, PAD after each input)")
    if not isinstance(attention_mask, torch.Tensor) or attention_mask.shape != ids.shape:
        got = (f"a tensor of shape {tuple(attention_mask.shape)}" if isinstance(attention_mask, torch.Tensor)
               else _a(attention_mask))
        raise UserError(f"run_padded's attention_mask must be a tensor of the ids' shape {tuple(ids.shape)}, "
                        f"1 on BOS and tokens and 0 on PAD, got {got}",
                        hint="attention_mask = (torch.arange(ids.shape[1]) <= lengths[:, None]).long()")


def _run_tl(tl_model: Any, ids: torch.Tensor, mask: torch.Tensor,
            hooks: list[str]) -> tuple[torch.Tensor, dict]:
    logits, cache = run_padded(tl_model, ids, mask, names_filter=lambda n: n in hooks)
    return logits, {h: cache[h] for h in hooks}


def verify_bytes_per_input(config: dict) -> int:
    """About the memory one input of ``verify``'s batches takes at the longest length: the
    runtime's trace and TransformerLens's cache (every residual hook and attention pattern), the
    work of one layer of each, and the differences taken.  sort at max_len 512 (3 layers, width
    4,627) is about 0.2 GB an input: 64 at once ran out of memory."""
    t = int(config.get("fixed_length") or config["max_len"]) + 1
    layers = config["layers"]
    n_layers = max(1, len(layers))
    heads = [int(lc.get("n_heads", 0)) for lc in layers]
    most_heads = max(heads + [1])  # TransformerLens gives every layer the most heads of any
    d_mlp = max([int(lc.get("d_mlp", 0)) for lc in layers] + [0])
    item = 8 if config.get("dtype") == "float64" or any(lc.get("mlp_dtype") for lc in layers) else 4
    residual = t * int(config.get("d_model", 1)) * (2 * (2 * n_layers + 1) + 6)
    patterns = t * t * (sum(heads) + 2 * n_layers * most_heads + 4 * most_heads)
    return item * (residual + patterns + 2 * t * d_mlp)


def verify_batch(config: dict, batch_size: int = 64) -> int:
    """The inputs ``verify`` runs at once: ``batch_size``, or fewer where that many would not fit
    in half the memory free now; a UserError when one input alone would not."""
    per_input = verify_bytes_per_input(config)
    free = available_memory()
    if free is None:
        return batch_size
    fits = free // 2 // per_input
    if fits < 1:
        raise UserError(f"verifying this model (max length {config['max_len']:,}, residual width "
                        f"{int(config.get('d_model', 1)):,}) needs about {per_input / 2**30:,.1f} GiB "
                        f"an input, more than half the {free / 2**30:,.1f} GiB free now",
                        hint="export without --verify, or verify a model compiled at a smaller --max-len")
    return max(1, min(batch_size, fits))


def _relative(diff: torch.Tensor, ours: torch.Tensor) -> float:
    """max |Δ| / max(1, max |value|): normwise, since a float32 sum's rounding scales with the
    largest terms in play (an MLP that writes a small number as a difference of large ones), and
    those stand in the same residual stream (0 for no entries)."""
    if not diff.numel():
        return 0.0
    return float(diff.max()) / max(1.0, float(ours.abs().max()))


def verify(model: RaspModel | str | os.PathLike, tl_model: Any | None = None, inputs: int | list = 64,
           seed: int = 0, batch_size: int = 64) -> dict[str, Any]:
    """Run the compiled model and its TransformerLens form on the same inputs and report the
    largest absolute difference of the logits and of every residual hook point (real positions
    only, BOS included; padding rows are not outputs), and the largest difference relative to
    max(1, the largest |value| at that hook point) (``max_rel_diff``: float rounding grows with the
    values in play, as a position or a length held as a number does at a long max_len).  The
    inputs run ``batch_size`` at a time, or fewer where memory is short (``verify_batch``)."""
    m = _as_model(model, "verify")
    batch_size = verify_batch(m.config, batch_size)  # before TransformerLens builds its copy
    if tl_model is None:
        tl_model = to_hooked_transformer(m)
    if isinstance(inputs, int):
        count, chunks = inputs, _random_chunks(m, inputs, seed, batch_size)
    else:
        batch = list(inputs)
        count, chunks = len(batch), (batch[i:i + batch_size] for i in range(0, len(batch), batch_size))
    n_layers = len(m.config["layers"])
    hooks = resid_hook_names(max(n_layers, 1))
    head_layers = [li for li, lc in enumerate(m.config["layers"]) if lc["n_heads"]]
    pattern_hooks = {li: f"blocks.{li}.attn.hook_pattern" for li in head_layers}
    per_hook = {h: 0.0 for h in hooks}
    per_pattern = {h: 0.0 for h in pattern_hooks.values()}
    max_logits = 0.0
    relative = 0.0  # max |Δ| / max(1, max |value|) of the logits, each hook point and pattern
    # mixed lengths in one batch, so the padded path a user runs (run_padded) is what is checked
    for chunk in chunks:
        ids, lengths = m.encode(chunk)
        with torch.no_grad():
            logits, residuals, patterns = m.module(ids, lengths, trace=True)
        valid = torch.arange(ids.shape[1]).unsqueeze(0) <= lengths.unsqueeze(1)  # BOS + tokens
        mask = valid.long()
        tl_logits, cache = _run_tl(tl_model, ids, mask, hooks + list(pattern_hooks.values()))
        real = valid.clone()
        real[:, 0] = False  # logits: BOS is not an output position
        diff = (tl_logits - logits).abs()[real]
        if diff.numel():  # a model may have no output logits at all (e.g. an empty value set)
            max_logits = max(max_logits, float(diff.max()))
            relative = max(relative, _relative(diff, logits[real]))
        if n_layers == 0:
            residuals = [residuals[0], residuals[0], residuals[0]]
        for h, r in zip(hooks, residuals, strict=True):
            diff = (cache[h] - r).abs()[valid]
            per_hook[h] = max(per_hook[h], float(diff.max()))
            relative = max(relative, _relative(diff, r[valid]))
        for li, h in pattern_hooks.items():
            # the runtime's heads of this layer are TL's first heads (the rest are zero padding)
            ours = patterns[li]
            diff = (cache[h][:, : ours.shape[1]] - ours).abs().amax(dim=(1, 3))  # [batch, query]
            per_pattern[h] = max(per_pattern[h], float(diff[valid].max()))
            relative = max(relative, per_pattern[h])  # attention weights are at most 1
    worst_hook = max(per_hook.values()) if per_hook else 0.0
    worst_pattern = max(per_pattern.values()) if per_pattern else 0.0
    return {"max_abs_diff": max(max_logits, worst_hook), "max_abs_diff_logits": max_logits,
            "max_abs_diff_residual": worst_hook, "max_abs_diff_pattern": worst_pattern,
            "max_rel_diff": relative,
            "inputs": count, "hooks": per_hook, "patterns": per_pattern,
            "transformer_lens": transformer_lens_version(), "dtype": m.config.get("dtype", "float32")}
