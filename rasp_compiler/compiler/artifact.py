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


# NumPy computes ``dtype.name`` in Python on every read (3 µs, a few per cent of a small compile
# with a dozen tensors); a model's tensors have one or two dtypes
_DTYPE_NAMES: dict[np.dtype, str] = {}


def weights_digest(tensors: dict[str, np.ndarray]) -> str:
    """``runtime.weights_digest`` of the same tensors as torch tensors (whose dtypes print as
    ``torch.float32``)."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = np.ascontiguousarray(tensors[name])
        dtype = _DTYPE_NAMES.get(t.dtype) or _DTYPE_NAMES.setdefault(t.dtype, t.dtype.name)
        h.update(f"{name}|torch.{dtype}|{tuple(t.shape)}|".encode())
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

        model = CompiledModel(self.config, {k: torch.from_numpy(v) for k, v in self.tensors.items()},
                              build_module=False)
        model.compile_seconds = self.compile_seconds
        model.analysis = self.analysis
        model.plans_tried = self.plans_tried
        model.compiled_program = self.compiled_program
        return model

    def save(self, directory: str, force: bool = False) -> None:
        """Write ``directory``/model.safetensors and config.json, as ``RaspModel.save`` does, by
        the protocol of ``atomic_dir`` (the old model or the new one, whole, at every instant;
        a non-empty directory that holds no model of ours is refused unless ``force``)."""
        from safetensors.numpy import save_file

        if not isinstance(directory, (str, os.PathLike)) or isinstance(os.fspath(directory), bytes):
            raise ArtifactError(f"a model directory is a path, not {type(directory).__name__}",
                                hint='e.g. weights.save("out/")')
        config = dict(self.config)
        config["weights_sha256"] = weights_digest(self.tensors)
        text = json.dumps(config, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ArtifactError(f"cannot save the model: its config holds text that is not valid "
                                f"UTF-8 ({err.object[err.start:err.end]!r})") from None
        tensors = {k: np.ascontiguousarray(v) for k, v in sorted(self.tensors.items())}
        # one metadata key: see RaspModel.save
        write_model_directory(directory, lambda path: save_file(
            tensors, path, metadata={"config_sha256": config_digest(config)}), text, force=force)
        self.config = config


def is_model_directory(directory: str) -> bool:
    """Whether ``directory`` holds a compiled model of ours (its config's format), or only a
    model's files (a damaged model, which a new compile may replace)."""
    from rasp_compiler.atomic_dir import holds_format, only_artifact_files

    return (holds_format(directory, CONFIG_FILE, FORMAT)
            or only_artifact_files(directory, (CONFIG_FILE, WEIGHTS_FILE)))


def check_model_destination(directory: str | os.PathLike, force: bool = False) -> None:
    """Refuse at once a destination ``save`` would refuse (a link, a file, a directory that holds
    something other than a model, without ``force``): ``rasp compile`` checks before compiling."""
    from rasp_compiler.atomic_dir import check_destination

    check_destination(directory, artifact_files=(CONFIG_FILE, WEIGHTS_FILE), is_ours=is_model_directory,
                      what="the model", force=force)


def write_model_directory(directory: str | os.PathLike, write_weights: Any, config_text: str,
                          force: bool = False) -> None:
    """A compiled model's two files, written by the ``atomic_dir`` protocol: ``write_weights(path)``
    writes model.safetensors, ``config_text`` is config.json.  ``RaspModel.save`` and
    ``CompiledWeights.save`` both write through here."""
    from safetensors import SafetensorError

    from rasp_compiler.atomic_dir import pause_for_tests, write_directory

    def write(tmp: str) -> None:
        try:
            write_weights(os.path.join(tmp, WEIGHTS_FILE))
        except SafetensorError as err:  # safetensors reports a failed write as its own error
            raise OSError(str(err)) from None
        pause_for_tests()
        with open(os.path.join(tmp, CONFIG_FILE), "w", encoding="utf-8") as fh:
            fh.write(config_text)

    write_directory(directory, write, artifact_files=(CONFIG_FILE, WEIGHTS_FILE),
                    is_ours=is_model_directory, what="the model", force=force)


def as_arrays(tensors: dict[str, np.ndarray], dtype_of: Any) -> dict[str, np.ndarray]:
    """The assembled float64 tensors, sorted by name, each C-contiguous in ``dtype_of(name)``
    (``"float32"`` or ``"float64"``)."""
    return {k: np.ascontiguousarray(v, dtype=np.dtype(dtype_of(k))) for k, v in sorted(tensors.items())}
