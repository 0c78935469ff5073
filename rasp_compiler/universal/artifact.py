"""Reading the universal module's safetensors artifacts (UT backbones, targets) safely."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from rasp_compiler.errors import ArtifactError


def read_artifact(path: Path, fmt: str, what: str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The tensors and the parsed JSON ``config`` header of a file written with format ``fmt``;
    anything unreadable, of another format or with a damaged header is an ArtifactError."""
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise ArtifactError(f"{path} is not a readable safetensors file: {err}") from None
    if meta.get("format") != fmt:
        raise ArtifactError(f"{path} is not a {what} (format {meta.get('format')!r}, expected {fmt!r})")
    try:
        config = json.loads(meta["config"])
    except (KeyError, ValueError, TypeError) as err:
        raise ArtifactError(f"{path}: damaged {what} header ({err})") from None
    if not isinstance(config, dict):
        raise ArtifactError(f"{path}: damaged {what} header (not a JSON object)")
    return tensors, config
