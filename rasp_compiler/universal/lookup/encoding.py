"""A compiled program as the input of a lookup UT: input-token and position embeddings, and the
program tokens placed before the input (one null token, then one token per lookup-table row).

Every consumer slot of the layout (a head's query, key and value code, an MLP op's input code, the
output) receives from every source written before it that source's image (``parts``): the
embedding's through the input embedding, a table row's through that row's program token, a
constant (MLP biases, folded ops) through the embedding of the ``one`` feature.  The encoding
never reads or writes the backbone's tensors: it needs only the class and its layout.

Files: one safetensors file holding ``token_embed``, ``pos_embed``, ``program_tokens``; its JSON
header holds the class, the SHA-256 of the backbone it was encoded for, the SHA-256 of its own
tensors, the vocabulary and the output decoding.  ``load`` refuses a file whose tensors do not
hash to the recorded value, and ``check_backbone`` one encoded for another backbone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from rasp_compiler.errors import ArtifactError, UserError
from rasp_compiler.runtime import weights_digest
from rasp_compiler.universal.artifact import read_artifact, write_deterministic
from rasp_compiler.universal.lookup.layout import K_NULL, K_PROG, U_IN, U_PROG, Layout, layout
from rasp_compiler.universal.lookup.parts import CompiledParts, read_parts
from rasp_compiler.universal.lookup.size_class import SizeClass
from rasp_compiler.universal.lookup.tables import MARGIN, Consumer, Lookups, lookups

ENCODING_FORMAT = "rasp-lookup-ut-encoding/1"
F64 = torch.float64
# the score that keeps attention heads off program tokens, and sends program tokens (and unused
# lookups) to the null token: far above any score a compiled model or a table row reaches (< 1e16)
BIG = 1e30
# a table's own rows score at least this above every other key of its lookup head
TABLE_CONSTANT = 10 * MARGIN


@dataclass
class ProgramEncoding:
    """What the program contributes to a run of the backbone."""

    size: SizeClass
    backbone_sha256: str
    token_embed: torch.Tensor      # (vocab + 2) x m: BOS at index vocab, PAD at vocab + 1
    pos_embed: torch.Tensor        # (max_len + 1) x m
    program_tokens: torch.Tensor   # R x m
    meta: dict = field(default_factory=dict)   # vocab, max_len, program, output decoding, tables

    @property
    def params(self) -> int:
        return int(self.token_embed.numel() + self.pos_embed.numel() + self.program_tokens.numel())

    @property
    def sha256(self) -> str:
        return weights_digest(self._tensors())

    def _tensors(self) -> dict[str, torch.Tensor]:
        return {"token_embed": self.token_embed, "pos_embed": self.pos_embed,
                "program_tokens": self.program_tokens}

    @property
    def out_width(self) -> int:
        """The program's output width (its logits are the backbone's first columns)."""
        out = self.meta.get("output") or {}
        return len(out.get("values", [])) if out.get("encoding") == "categorical" else 1

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """(batch, n + 1, m): the UT's input for token ids (batch, n + 1), BOS first."""
        return self.token_embed[ids] + self.pos_embed[: ids.shape[1]].unsqueeze(0)

    def check_backbone(self, backbone: Any) -> None:
        """Refuse to run this encoding on a backbone it was not encoded for."""
        if backbone.size.causal != self.size.causal:  # said in words (the digests differ too)
            mask = {True: "a causal", False: "a bidirectional (not causal)"}
            raise UserError(f"the program encoding was made for {mask[self.size.causal]} backbone, and this "
                            f"backbone is {mask[backbone.size.causal][2:]}",
                            hint="use a backbone of the encoding's class, or encode the program again "
                                 "for this one")
        # tensors_sha256: what an encoding saved before the causal mask counted in the backbone's
        # identity records (the masks agree, checked above)
        if self.backbone_sha256 not in (backbone.sha256, backbone.tensors_sha256):
            raise UserError("the program encoding was made for another backbone "
                            f"(backbone sha256 {self.backbone_sha256[:12]}…, this one "
                            f"{backbone.sha256[:12]}…)",
                            hint="encode the program again for this backbone's class")
        if self.token_embed.shape[1] != backbone.size.width:
            raise UserError(f"the program encoding has width {self.token_embed.shape[1]}, the backbone "
                            f"{backbone.size.width}")

    # ----- files ------------------------------------------------------------------------------
    def save(self, path: str | Path, force: bool = False) -> Path:
        """Write the encoding to ``path``; an existing file that is not a program encoding (a
        backbone's weights, a target, anything else) is replaced only with ``force``."""
        path = Path(path)
        if not force and path.is_file() and not path.is_symlink():
            kind = _format_of(path)
            if kind != ENCODING_FORMAT:
                raise UserError(f"{path} exists and is not a program encoding "
                                f"({'format ' + repr(kind) if kind else 'not a safetensors file'}); "
                                "it is not replaced",
                                hint="give another file name, or --force (force=True from Python) to "
                                     "replace it")
        header = {"class": self.size.as_json(), "backbone_sha256": self.backbone_sha256,
                  "sha256": self.sha256, "meta": self.meta}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_deterministic(path, self._tensors(),
                                {"format": ENCODING_FORMAT, "config": json.dumps(header, sort_keys=True)})
        except OSError as err:
            raise UserError(f"{path}: cannot write the program encoding ({err.strerror or err})") from None
        return path

    @classmethod
    def load(cls, path: str | Path) -> ProgramEncoding:
        path = Path(path)
        if not path.is_file():
            raise ArtifactError(f"no program encoding at {path}")
        tensors, header = read_artifact(path, ENCODING_FORMAT, "lookup UT program encoding")
        try:
            size = SizeClass.from_json(header.get("class"))
        except (UserError, TypeError) as err:
            raise ArtifactError(f"{path}: damaged class in the header ({err})") from None
        names = {"token_embed", "pos_embed", "program_tokens"}
        if set(tensors) != names or not all(t.dtype == F64 and t.ndim == 2 for t in tensors.values()):
            raise ArtifactError(f"{path}: expected float64 matrices {', '.join(sorted(names))}")
        backbone_sha = header.get("backbone_sha256")
        meta = header.get("meta")
        if not isinstance(backbone_sha, str) or not isinstance(meta, dict):
            raise ArtifactError(f"{path}: damaged header (backbone_sha256 or meta)")
        enc = cls(size, backbone_sha, tensors["token_embed"], tensors["pos_embed"], tensors["program_tokens"],
                  meta)
        if header.get("sha256") != enc.sha256:
            raise ArtifactError(f"{path}: the program encoding's tensors do not match the SHA-256 in "
                                "its header (edited or damaged); it is not run")
        m = size.width
        if any(t.shape[1] != m for t in tensors.values()) or \
                enc.token_embed.shape[0] > size.vocab + 2 or enc.pos_embed.shape[0] > size.max_len + 1 or \
                enc.program_tokens.shape[0] > size.program_tokens:
            raise ArtifactError(f"{path}: the encoding's shapes do not fit its class {size.describe()}")
        if not all(bool(torch.isfinite(t).all()) for t in tensors.values()):
            raise ArtifactError(f"{path}: the encoding holds NaN or inf")
        return enc


def _format_of(path: Path) -> str | None:
    """The ``format`` a safetensors file's header names, or None for any other file."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            kind = (f.metadata() or {}).get("format")
    except Exception:  # not a safetensors file (safetensors raises its own error types)
        return None
    return kind if isinstance(kind, str) else ""


# ----- encoding a compiled model -----------------------------------------------------------------
def program_needs(parts: CompiledParts, found: Lookups) -> SizeClass:
    """The sizes a class must have to hold this compiled program."""
    model = parts.model
    widths = [h.query.shape[1] for layer in parts.heads for h in layer]
    per_layer = [sum(1 for t in found.tables if t.kind == "op" and t.layer == l) for l in range(parts.layers)]
    return SizeClass(layers=parts.layers, heads=max([len(h) for h in parts.heads] + [1]),
                     tables=max(per_layer + [0]), head_width=max(widths + [1]),
                     out_width=parts.unembed.shape[1],
                     code_width=max([c.columns for c in found.codes.values()] + [1]),
                     vocab=len(model.vocab), max_len=model.max_len,
                     program_tokens=1 + sum(t.rows for t in found.tables), causal=parts.causal,
                     name="needs")


@dataclass
class Analysed:
    """A compiled model read for the lookup UT, and the sizes it needs."""

    parts: CompiledParts
    found: Lookups
    needs: SizeClass


def check_model(model: Any, what: str) -> None:
    """A compiled model (``compile_program``'s CompiledModel, or any RaspModel), not a path or a
    program: those ended in AttributeErrors ("'str' object has no attribute 'config'")."""
    from rasp_compiler.runtime import RaspModel

    if not isinstance(model, RaspModel):
        raise UserError(f"{what} takes a compiled model, got {type(model).__name__}",
                        hint="compile_program(load_program(FILE), vocab, max_len, dtype='float64') "
                             "compiles one in this process (the lookup UT needs its analysis)")


def analyse(model: Any) -> Analysed:
    """Everything a compiled model contributes, and the sizes it needs."""
    check_model(model, "analyse")
    parts = read_parts(model)
    found = lookups(parts)
    return Analysed(parts, found, program_needs(parts, found))


def encode_program(model: Any, size: SizeClass, backbone_sha256: str, analysed: Analysed | None = None
                   ) -> ProgramEncoding:
    """The encoding of a compiled model for a class (refused, naming what is too large, when the
    class cannot hold it).  ``backbone_sha256`` is recorded so that the encoding only ever runs on
    that backbone."""
    from rasp_compiler.universal.lookup.size_class import as_class, smallest_holding

    check_model(model, "encode_program")
    size = as_class(size, "encode_program", causal=bool(model.config.get("causal", False)))
    if not (isinstance(backbone_sha256, str) and len(backbone_sha256) == 64):  # None was recorded
        raise UserError(f"encode_program's backbone_sha256 must be the backbone's SHA-256 (64 hex digits), "
                        f"got {backbone_sha256!r}"[:300], hint="build_backbone(size).sha256")
    if analysed is not None and not isinstance(analysed, Analysed):
        raise UserError(f"encode_program's analysed must be analyse(model)'s result, got "
                        f"{type(analysed).__name__}")
    analysed = analysed or analyse(model)
    parts, found, needs = analysed.parts, analysed.found, analysed.needs
    problems = size.too_small(needs)
    if problems:
        would = smallest_holding(needs)
        raise ClassTooSmall(f"the class {size.describe()} cannot hold "
                            f"{model.config.get('program') or 'the program'}: " + "; ".join(problems),
                            hint=f"use --class {would.name if would.name != 'fitted' else would.spec()}"
                                 f" (the smallest class that holds it: {would.describe()})")
    lay = layout(size)
    columns = {c.slot: _columns(c, lay) for c in found.consumers}
    E = _input_embedding(parts, found.consumers, columns, lay)
    prefix = _program_tokens(parts, found, columns, lay)
    meta = {"program": model.config.get("program"),
            "model_weights_sha256": model.config.get("weights_sha256"), "vocab": model.config["vocab"],
            "max_len": model.max_len, "output": model.config["output"],
            "tables": [{"layer": t.layer, "kind": t.kind, "feature": t.name, "rows": t.rows}
                       for t in found.tables],
            "folded_ops": [op.feature for layer in parts.ops for op in layer if op.strategy == "fold"]}
    return ProgramEncoding(size, backbone_sha256, parts.token_embed @ E, parts.pos_embed @ E, prefix, meta)


class ClassTooSmall(UserError):
    """A program needs more than the size class holds."""


def _columns(c: Consumer, lay: Layout) -> list[int]:
    kind, w = c.slot[0], c.image.shape[1]
    if kind == "out":
        return list(lay.out[:w])
    if kind == "lq":
        return [lay.lq[c.slot[1]][c.slot[2]]]
    return list(getattr(lay, kind)[c.slot[1]][c.slot[2]][:w])


def _input_embedding(parts: CompiledParts, consumers: list[Consumer], columns: dict, lay: Layout
                     ) -> torch.Tensor:
    """E (d x m): the UT's input embedding is the compiled one times E."""
    one = parts.features["one"]["start"]
    E = torch.zeros(parts.d, lay.m, dtype=F64)
    E[one, U_IN] = 1.0
    constants = parts.constants()
    for c in consumers:
        cols = columns[c.slot]
        E[:, cols] += parts.transfer(0, c.time) @ c.image
        for time, vector in constants:
            if time < c.time:
                E[one, cols] += vector @ parts.transfer(time, c.time) @ c.image
    E[one, list(lay.out[:parts.unembed.shape[1]])] += parts.unembed_bias
    return E


def _program_tokens(parts: CompiledParts, found: Lookups, columns: dict, lay: Layout) -> torch.Tensor:
    size = lay.size
    null = torch.zeros(lay.m, dtype=F64)
    null[U_PROG], null[K_PROG], null[K_NULL] = 1.0, -BIG, BIG
    used = {(t.layer, t.kind, t.index) for t in found.tables}
    for l in range(size.layers):   # a lookup with no table attends to the null token: adds 0
        for h in range(size.heads):
            if (l, "head", h) not in used:
                null[lay.rk[l][h][1]] = TABLE_CONSTANT
        for j in range(size.tables):
            if (l, "op", j) not in used:
                null[lay.lk[l][j][1]] = TABLE_CONSTANT
    rows = [null[None]]
    c = size.code_width
    for t in found.tables:
        block = torch.zeros(t.rows, lay.m, dtype=F64)
        block[:, U_PROG], block[:, K_PROG] = 1.0, -BIG
        if t.kind == "head":
            patterns, constant = lay.rk[t.layer][t.index]
            cols = [patterns[slot[2]] for slot in t.slots]
        else:
            patterns, constant = lay.lk[t.layer][t.index]
            cols = [patterns[0] if slot[0] == "lq" else patterns[1 + slot[1] * c + slot[2]]
                    for slot in t.slots]
        block[:, cols] = 2 * t.scale * t.query
        block[:, constant] = TABLE_CONSTANT - t.scale * (t.query ** 2).sum(dim=1)
        for con in found.consumers:
            if con.time > 2 * t.layer + 2:
                block[:, columns[con.slot]] += t.written @ parts.transfer(t.time, con.time) @ con.image
        rows.append(block)
    return torch.cat(rows)
