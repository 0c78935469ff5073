"""Reading the universal module's safetensors artifacts (UT backbones, targets) safely."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from rasp_compiler.atomic_dir import write_file
from rasp_compiler.bounded_json import load_json_text
from rasp_compiler.errors import ArtifactError


def read_artifact(path: Path, fmt: str, what: str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The tensors and the parsed JSON ``config`` header of a file written with format ``fmt``;
    anything unreadable, of another format or with a damaged header is an ArtifactError."""
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise ArtifactError(f"{path} is not a readable safetensors file: {err}",
                            hint=f"give the {what} file as rasp saved it (safetensors)") from None
    if meta.get("format") != fmt:
        raise ArtifactError(f"{path} is not a {what} (format {meta.get('format')!r}, expected {fmt!r})",
                            hint=f"give the {what} file as rasp saved it")
    if not isinstance(meta.get("config"), str):
        raise ArtifactError(f"{path}: damaged {what} header (no config)")
    # bounded: a config of 100,000 nested "[" raised RecursionError (a traceback) here
    config = load_json_text(meta["config"], f"{path}: the {what} header's config", error=ArtifactError)
    if not isinstance(config, dict):
        raise ArtifactError(f"{path}: damaged {what} header (not a JSON object)")
    return tensors, config


def header_digest(fmt: str, config: dict, tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 binding a file's header config to its tensors (saved in the header as ``sha256``):
    a hand-edited field (``causal`` flipped) no longer matches.  Not a signature: an editor may
    recompute it, as the compiled model's digests."""
    import hashlib

    from rasp_compiler.runtime import weights_digest

    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{fmt}|{text}|{weights_digest(tensors)}".encode()).hexdigest()


def saved_digest(path: Path) -> str | None:
    """The ``sha256`` a file's header records (None: saved before it was written, 7 Dec); the
    file was read already (``read_artifact``), so this header read does not fail."""
    with safe_open(str(path), framework="pt") as f:
        digest = (f.metadata() or {}).get("sha256")
    return digest if isinstance(digest, str) else None


_DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.int64: "I64", torch.int32: "I32",
           torch.bool: "BOOL", torch.uint8: "U8"}


def write_deterministic(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> None:
    """A safetensors file whose bytes depend only on ``tensors`` and ``metadata``: tensors and
    metadata keys in sorted order (safetensors' own writer orders a metadata of several keys
    differently from one call to the next)."""
    header: dict[str, Any] = {"__metadata__": dict(sorted(metadata.items()))}
    offset, blobs = 0, []
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        data = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(len(text).to_bytes(8, "little"))
            f.write(text)
            for data in blobs:
                f.write(data)

    write_file(path, write)  # beside it, renamed over it: never half-written, never through a link


def check_readable_copy(weights: Path, name: str, header: dict[str, Any]) -> None:
    """The readable JSON written beside ``weights`` (``ut.json``, ``backbone.json``) is a copy of
    the header, never read back; one that says otherwise (edited, or copied from another
    artifact) would tell a reader another class than the one that runs, so it is refused.
    Absent, it is not needed."""
    copy = weights.parent / name
    if weights.name == name or not copy.is_file():
        return
    try:
        text = copy.read_bytes()
    except OSError:
        return
    try:
        doc = load_json_text(text, f"{copy}", error=ArtifactError) if len(text) <= 1 << 20 else None
    except ArtifactError:
        doc = None
    if doc != header:
        raise ArtifactError(f"{copy} does not describe what {weights.name} holds (edited, or copied from "
                            f"another artifact); {weights.name}'s header is what runs",
                            hint=f"delete {name}, or save the artifact again")
