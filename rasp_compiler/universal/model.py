"""The universal transformer as a plain torch module: fixed weights as buffers, the program in E.

UT(X, E, U):  H_0 = X E  (E: d x m, the same for every token);
              H_l = [H_{l-1} +] sum_h softmax_c(H_{l-1} R_Q^{l,h} (H_{l-1} R_K^{l,h})^T) H_{l-1} R_V^{l,h};
              output H_L U.
R_V is stored in the cheapest exact form: ``identity`` (no tensor), ``diagonal`` (an m-vector of 0/1,
used by the path construction whose dense R_V would take hundreds of MB) or ``dense`` (m x m).
A looped UT stores one layer and applies it ``layers`` times.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn

from rasp_compiler.artifact_kinds import describe
from rasp_compiler.errors import ArtifactError, UserError
from rasp_compiler.universal.arguments import input_rows
from rasp_compiler.universal.artifact import (
    check_readable_copy,
    header_digest,
    read_artifact,
    saved_digest,
    write_deterministic,
)
from rasp_compiler.universal.attention import attention_weights, run_steps

UT_FORMAT = "rasp-universal-transformer/1"
VALUE_KINDS = ("identity", "diagonal", "dense")


@dataclass
class UTConfig:
    """Everything that defines a UT besides its tensors (the class it simulates and its shape)."""

    construction: str
    layers: int          # simulated layers (= loop count for a looped UT)
    heads: int
    dim: int             # width d of the targets it simulates
    m: int               # embedding width
    head_dim: int        # k: columns of each R_Q / R_K
    residual: bool
    causal: bool
    values: bool         # whether the class has value matrices
    looped: bool = False
    value_kind: str = "identity"
    seed: int | None = None
    extra: dict = field(default_factory=dict)

    @property
    def stored_layers(self) -> int:
        return 1 if self.looped else self.layers


class UniversalTransformer(nn.Module):
    """Fixed backbone.  ``forward(X, E, U=None)`` -> (output, attention (L, H, [batch,] n, n)).

    E may also be a stack (batch, d, m) with U (batch, m, d_out): one target per batch row.
    """

    def __init__(self, config: UTConfig, r_q: torch.Tensor, r_k: torch.Tensor,
                 r_v: torch.Tensor | None = None) -> None:
        super().__init__()
        if config.value_kind not in VALUE_KINDS:
            raise ArtifactError(f"unknown value kind {config.value_kind!r}")
        self.config = config
        shape = (config.stored_layers, config.heads, config.m, config.head_dim)
        for name, t in (("R_Q", r_q), ("R_K", r_k)):
            if tuple(t.shape) != shape:
                raise ArtifactError(f"{name} has shape {tuple(t.shape)}, expected {shape}")
        expected_v = {"identity": None, "diagonal": shape[:3],
                      "dense": shape[:3] + (config.m,)}[config.value_kind]
        if (r_v is None) != (expected_v is None) or (r_v is not None and tuple(r_v.shape) != expected_v):
            raise ArtifactError(f"R_V does not fit value kind {config.value_kind!r}: "
                                f"got {None if r_v is None else tuple(r_v.shape)}, expected {expected_v}")
        self.register_buffer("r_q", r_q)
        self.register_buffer("r_k", r_k)
        self.register_buffer("r_v", r_v)

    # ----- running -----------------------------------------------------------------------------
    def forward(self, X: torch.Tensor, E: torch.Tensor, U: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        return run_steps(self.steps(X, E, U), self.config.layers, self.config.heads)

    def steps(self, X: torch.Tensor, E: torch.Tensor, U: torch.Tensor | None = None
              ) -> Generator[torch.Tensor, None, torch.Tensor]:
        """``forward`` one head at a time: yields each head's attention matrix ([batch,] n, n),
        layer by layer, and returns the output, so that a check holds one head's n x n matrix at a
        time (all of them at n = 4,096 ran out of memory)."""
        cfg = self.config
        E = E.to(self.r_q.dtype)
        # E of shape (batch, d, m) runs a batch of targets at once (one per input row of X)
        if E.ndim not in (2, 3) or E.shape[-1] != cfg.m:
            raise UserError(f"embedding E must have shape (d, {cfg.m}), got {tuple(E.shape)}")
        X = input_rows(X, self.r_q.dtype)
        if X.shape[-1] != E.shape[-2]:
            raise UserError(f"input width {X.shape[-1]} does not match the embedding's {E.shape[-2]} rows")
        if U is not None:          # a wrong U was torch's "mat1 and mat2 shapes cannot be multiplied"
            U = torch.as_tensor(U)
            if U.ndim not in (2, E.ndim) or U.shape[-2] != cfg.m:
                want = f"({cfg.m}, d_out)" if E.ndim == 2 else f"(batch, {cfg.m}, d_out)"
                raise UserError(f"readout U must have shape {want}, got {tuple(U.shape)}",
                                hint="pass the U that encode(ut, target) returns with E")
        H = X @ E
        for l in range(cfg.layers):
            s = 0 if cfg.looped else l
            out = H if cfg.residual else torch.zeros_like(H)
            for h in range(cfg.heads):
                A = attention_weights(H @ self.r_q[s, h], H @ self.r_k[s, h], cfg.causal)
                yield A
                out = out + A @ self._values(H, s, h)
            H = out
        return H @ U.to(H.dtype) if U is not None else H

    def _values(self, H: torch.Tensor, s: int, h: int) -> torch.Tensor:
        kind = self.config.value_kind
        if kind == "identity":
            return H
        if kind == "diagonal":
            return H * self.r_v[s, h]
        return H @ self.r_v[s, h]

    # ----- weights -----------------------------------------------------------------------------
    def backbone_tensors(self) -> dict[str, torch.Tensor]:
        """The fixed weights by name (what is saved; what never depends on a target)."""
        out = {"R_Q": self.r_q, "R_K": self.r_k}
        if self.r_v is not None:
            out["R_V"] = self.r_v
        return out

    def save(self, directory: str | Path, force: bool = False) -> Path:
        """Write ``ut.safetensors`` (weights, config in the JSON header) and ``ut.json`` (readable),
        by the protocol of ``atomic_dir`` (a non-empty directory that holds no UT is refused
        unless ``force``)."""
        from rasp_compiler.atomic_dir import only_artifact_files, write_directory

        directory = Path(directory)
        config_json = json.dumps(asdict(self.config), sort_keys=True)
        tensors = {k: v.detach().contiguous().cpu() for k, v in self.backbone_tensors().items()}
        files = ("ut.safetensors", "ut.json")

        metadata = {"format": UT_FORMAT, "config": config_json,
                    "sha256": ut_digest(asdict(self.config), tensors)}

        def write(tmp: str) -> None:
            # not safetensors' save_file: it orders a metadata of two keys differently from one
            # save to the next, so the same UT saved twice differed in its header
            write_deterministic(Path(tmp) / "ut.safetensors", tensors, metadata)
            readable = json.dumps(asdict(self.config), indent=2, sort_keys=True) + "\n"
            (Path(tmp) / "ut.json").write_text(readable)

        write_directory(directory, write, artifact_files=files,  # ArtifactError, a UserError
                        is_ours=lambda path: only_artifact_files(path, files),
                        what="the universal transformer", force=force)
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> UniversalTransformer:
        directory = Path(directory)
        weights = directory / "ut.safetensors" if directory.is_dir() else directory
        if not weights.is_file():
            raise ArtifactError(f"no universal transformer at {directory} (expected ut.safetensors)",
                                hint=describe(directory) or "save one with rasp universal --construction "
                                     "C --layers L --dim d --save DIR")
        tensors, header = read_artifact(weights, UT_FORMAT, "universal transformer")
        check_readable_copy(weights, "ut.json", header)
        try:
            config = UTConfig(**header)
        except TypeError as err:
            raise ArtifactError(f"{weights}: damaged config header ({err})") from None
        _check_config_types(config, weights)
        if "R_Q" not in tensors or "R_K" not in tensors:
            raise ArtifactError(f"{weights}: missing R_Q or R_K")
        for name, t in tensors.items():
            if not t.is_floating_point():
                raise ArtifactError(f"{weights}: {name} has dtype {t.dtype}, expected a float dtype")
            if not bool(torch.isfinite(t).all()):
                raise ArtifactError(f"{weights}: the UT's weights hold NaN or inf values ({name})")
        ut = cls(config, tensors["R_Q"], tensors["R_K"], tensors.get("R_V"))
        _check_rebuilds(ut, weights)
        _check_digest(weights, header, tensors)
        return ut


def ut_digest(config: dict, tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 binding a UT's header config to its tensors (saved in the header as ``sha256``)."""
    return header_digest(UT_FORMAT, config, tensors)


def _check_digest(path: Path, header: dict, tensors: dict[str, torch.Tensor]) -> None:
    """A random UT's tensors are not rebuilt at load (``_check_rebuilds``), so its header is bound
    to them by a digest: an edited field (``causal`` flipped, another ``seed`` or ``dim``) loaded
    and ran as another class without a word.  A {0,1} construction is rebuilt from its config,
    which checks more; one saved before the digest (7 Dec) still loads."""
    saved = saved_digest(path)
    if saved is None and header.get("construction") != "random":
        return
    rebuild = ("rebuild it with the rasp universal --construction random options it was made with "
               "(--layers, --heads, --dim, --seed, ...) and --save DIR")
    if saved is None:
        raise ArtifactError(f"{path}: a random UT saved without the digest that binds its header to its "
                            "weights (saved before 7 Dec), so an edit could not be told", hint=rebuild)
    if saved != ut_digest(header, tensors):
        raise ArtifactError(f"{path}: the header's config does not match the digest saved with the "
                            "weights (the header or the weights were edited or damaged)", hint=rebuild)


# field -> the types a saved config may hold (JSON has no tuples; bool is not an int here)
_CONFIG_TYPES = {"construction": (str,), "layers": (int,), "heads": (int,), "dim": (int,), "m": (int,),
                 "head_dim": (int,), "residual": (bool,), "causal": (bool,), "values": (bool,),
                 "looped": (bool,), "value_kind": (str,), "seed": (int, type(None)), "extra": (dict,)}


def _check_config_types(config: UTConfig, path: Path) -> None:
    """A hand-edited header (``"causal": "no"``, ``"layers": "3"``, ``"heads": -2``) is an
    ArtifactError here, not a KeyError or a wrong shape message later."""
    for name, types in _CONFIG_TYPES.items():
        value = getattr(config, name)
        if type(value) not in types:
            raise ArtifactError(f"{path}: damaged config header ({name} = {value!r})")
        if type(value) is int and name != "seed" and value < 1:
            raise ArtifactError(f"{path}: damaged config header ({name} = {value!r}, expected >= 1)")


def _check_rebuilds(ut: UniversalTransformer, path: Path) -> None:
    """A {0,1} construction depends only on its config, so the loaded tensors must be exactly the
    ones the config builds: the encoder trusts that layout, and a changed entry or a config that
    names another class would make every encoding silently wrong.  (Random UTs are taken as
    saved: their tensors are the record, and a torch RNG change must not make them unloadable.)"""
    from rasp_compiler.universal.api import fixed_backbone  # api imports this module

    cfg = ut.config
    if cfg.construction == "random":
        return
    try:
        ref = fixed_backbone(cfg.construction, cfg.layers, cfg.heads, cfg.dim, residual=cfg.residual,
                             causal=cfg.causal)
    except UserError as err:
        raise ArtifactError(f"{path}: the config does not describe a {cfg.construction} UT "
                            f"({err.message})") from None
    theirs = {k: v.double() for k, v in ut.backbone_tensors().items()}
    ours = ref.backbone_tensors()
    same_config = asdict(ref.config) == asdict(cfg)
    if not same_config or theirs.keys() != ours.keys() or not all(
            theirs[k].shape == ours[k].shape and torch.equal(theirs[k], ours[k]) for k in ours):
        raise ArtifactError(f"{path}: the weights are not those of the {cfg.construction} construction "
                            "its config describes (edited or damaged)",
                            "rebuild it: rasp universal --construction ... --save DIR")
