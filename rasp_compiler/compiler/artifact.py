"""A compiled model as its config and NumPy tensors: its report, its files, and the torch model.

``rasp compile`` stops here: writing ``model.safetensors`` and ``config.json`` needs NumPy and
safetensors only, and importing torch is most of the command's time (1.5-1.9 s of 2.5-3 s on a
2-core machine).  The files are byte for byte those ``runtime.RaspModel.save`` writes from the
same weights: the digests below repeat the runtime's, which must stay importable with torch and
safetensors alone, so it cannot import them from here (tests/test_artifact.py holds the two to
the same bytes).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rasp_compiler.compiler.report import ModelReport
from rasp_compiler.errors import ArtifactError

if TYPE_CHECKING:
    from rasp_compiler.compiler.analysis import Analysis
    from rasp_compiler.compiler.model import CompiledModel
    from rasp_compiler.graph.nodes import Program

FORMAT = "rasp-compiler-model/1"  # runtime.FORMAT
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"


def config_digest(config: dict) -> str:
    """``runtime.config_digest``."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def weights_digest(tensors: dict[str, np.ndarray]) -> str:
    """``runtime.weights_digest`` of the same tensors as torch tensors (whose dtypes print as
    ``torch.float32``)."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = np.ascontiguousarray(tensors[name])
        h.update(f"{name}|torch.{t.dtype.name}|{tuple(t.shape)}|".encode())
        if t.size:
            h.update(t.view(np.uint8))
    return h.hexdigest()


@dataclass(eq=False, repr=False)
class CompiledWeights(ModelReport):
    """What the compiler built, before torch: ``config`` (with ``weights_sha256``) and one
    C-contiguous array per tensor, in its dtype."""

    config: dict
    tensors: dict[str, np.ndarray]
    analysis: Analysis | None = None
    compile_seconds: float | None = None
    # every plan the compiler built for it: strategy, seconds, layers, parameters, outcome
    # (``compiler.plans``); not saved
    plans_tried: list[dict] | None = None
    # the program the plan is of: the one given, after the compiler's rewrites (``rewrites.
    # rewritten``; its output as a number where the plan search took that); None for a program
    # compiled numerically (``--input-range``) and for a model loaded from disk
    compiled_program: Program | None = None

    def __repr__(self) -> str:  # not the tensors: a large model's would fill a screen
        return (f"CompiledWeights(layers={self.n_layers}, heads_per_layer={self.heads_per_layer}, "
                f"residual_width={self.residual_width}, params={self.params:,})")

    @property
    def params(self) -> int:
        return int(sum(t.size for t in self.tensors.values()))

    def model(self) -> CompiledModel:
        """The torch model of these weights (sharing their memory)."""
        import torch

        from rasp_compiler.compiler.model import CompiledModel

        model = CompiledModel(self.config, {k: torch.from_numpy(v) for k, v in self.tensors.items()})
        model.compile_seconds = self.compile_seconds
        model.analysis = self.analysis
        model.plans_tried = self.plans_tried
        model.compiled_program = self.compiled_program
        return model

    def save(self, directory: str) -> None:
        """Write ``directory``/model.safetensors and config.json, as ``RaspModel.save`` does."""
        from safetensors import SafetensorError
        from safetensors.numpy import save_file

        if not isinstance(directory, (str, os.PathLike)) or isinstance(os.fspath(directory), bytes):
            raise ArtifactError(f"a model directory is a path, not {type(directory).__name__}",
                                hint='e.g. weights.save("out/")')
        directory = os.fspath(directory)
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise ArtifactError(f"{directory}: cannot write the model there: it is a file, not a "
                                "directory", hint="give a directory to write the model to")
        config = dict(self.config)
        config["weights_sha256"] = weights_digest(self.tensors)
        text = json.dumps(config, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ArtifactError(f"cannot save the model: its config holds text that is not valid "
                                f"UTF-8 ({err.object[err.start:err.end]!r})") from None
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as err:
            raise ArtifactError(f"{directory}: cannot write the model ({err.strerror or err})") from None
        tensors = {k: np.ascontiguousarray(v) for k, v in sorted(self.tensors.items())}
        try:  # one metadata key: see RaspModel.save
            save_file(tensors, os.path.join(directory, WEIGHTS_FILE),
                      metadata={"config_sha256": config_digest(config)})
            with open(os.path.join(directory, CONFIG_FILE), "w", encoding="utf-8") as fh:
                fh.write(text)
        except (OSError, SafetensorError) as err:
            why = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
            why = why.rsplit("error: ", 1)[-1].split(" (os error")[0]
            raise ArtifactError(f"{directory}: cannot write the model ({why})") from None
        self.config = config


def as_arrays(tensors: dict[str, np.ndarray], dtype_of: Any) -> dict[str, np.ndarray]:
    """The assembled float64 tensors, sorted by name, each C-contiguous in ``dtype_of(name)``
    (``"float32"`` or ``"float64"``)."""
    return {k: np.ascontiguousarray(v, dtype=np.dtype(dtype_of(k))) for k, v in sorted(tensors.items())}
