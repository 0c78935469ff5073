"""The lookup UT's fixed backbone: 2L residual attention layers whose weights depend only on the
size class (``layout.py`` names the columns).  Layer 2l is the attention layer of compiled layer l
(H heads), layer 2l+1 its lookup layer (H + T heads: one re-encoding each head's output, one per MLP table).

Every head h of a layer has 0/1 ``R_Q`` and ``R_K`` (m x head width) and a value map that copies
columns: ``R_V[h][j] = i`` adds column i of the attended stream into column j (-1: nothing), which
is a 0/1 m x m matrix stored as its one index per column.  The readout ``U`` (m x o) selects the
output columns.  No scaling, no MLP, no layer norm:

    H <- H + sum_h softmax_c(H R_Q^h (H R_K^h)^T) H[:, R_V^h]        output = H U

The program's tokens (the prefix) are never changed by any layer (their queries always land on the
null token, whose copied columns are zero), so ``forward`` takes them as fixed keys and values and
computes queries only at the input positions; ``forward(..., fixed_prefix=False)`` runs the plain
transformer over the whole sequence, every position a query, which tests use to show the two
agree.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from torch import nn

from rasp_compiler.artifact_kinds import describe
from rasp_compiler.errors import ArtifactError, UserError
from rasp_compiler.runtime import weights_digest
from rasp_compiler.universal.artifact import check_readable_copy, read_artifact, write_deterministic
from rasp_compiler.universal.lookup.layout import K_NULL, K_PROG, U_IN, U_PROG, Layout, layout
from rasp_compiler.universal.lookup.size_class import SizeClass

BACKBONE_FORMAT = "rasp-lookup-ut-backbone/1"
BACKBONE_FILE = "backbone.safetensors"
F64 = torch.float64
MAX_WIDTH = 20_000


class LookupBackbone(nn.Module):
    """The fixed weights of one size class (``build_backbone``)."""

    def __init__(self, size: SizeClass, tensors: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.size = size
        self.layout: Layout = layout(size)
        self.tensors = tensors
        self._digest: str | None = None
        self._tensors_digest: str | None = None
        self._move_cache: dict[int, list] = {}

    # ----- identity ---------------------------------------------------------------------------
    @property
    def sha256(self) -> str:
        """The backbone's identity: SHA-256 of the fixed tensors (names, dtypes, shapes and bytes),
        and for a causal class of the causal mask too, which no tensor holds: a causal and a
        bidirectional backbone of the same sizes have the same tensors but compute different
        things, and an encoding made for one must not run on the other.  (A bidirectional
        backbone's digest is that of its tensors alone, as before.)"""
        if self._digest is None:
            digest = self.tensors_sha256
            if self.size.causal:
                digest = hashlib.sha256(f"{BACKBONE_FORMAT} causal {digest}".encode()).hexdigest()
            self._digest = digest
        return self._digest

    @property
    def tensors_sha256(self) -> str:
        """SHA-256 of the fixed tensors alone: ``sha256`` before 7 Dec, which a causal backbone's
        or encoding's file saved then records (accepted where the class says causal)."""
        if self._tensors_digest is None:
            self._tensors_digest = weights_digest(self.tensors)
        return self._tensors_digest

    @property
    def params(self) -> int:
        return int(sum(t.numel() for t in self.tensors.values()))

    # ----- running ----------------------------------------------------------------------------
    def forward(self, prefix: torch.Tensor, inputs: torch.Tensor, fixed_prefix: bool = True,
                prepared: list | None = None) -> torch.Tensor:
        """Outputs (batch, n, o) at the input positions.  ``prefix`` (R x m) is the program's
        tokens, ``inputs`` (batch, n, m) the embedded inputs (BOS first).  ``prepared`` is
        ``prepare(prefix)``, to reuse over many calls."""
        if not fixed_prefix:
            seq = torch.cat([prefix.expand(inputs.shape[0], -1, -1), inputs], dim=1)
            return self.run_all(seq)[:, prefix.shape[0]:] @ self.tensors["U"]
        prepared = prepared if prepared is not None else self.prepare(prefix)
        x = inputs
        for i in range(self.size.depth):
            x = x + self._layer(i, x, prepared[i])
        return x @ self.tensors["U"]

    def run_all(self, seq: torch.Tensor) -> torch.Tensor:
        """The plain transformer over the whole sequence (batch, N, m), every position a query;
        returns the last stream.  (``forward`` gives the same outputs with the prefix fixed.)"""
        empty = [(seq.new_zeros(h, 0, self.tensors[f"layers.{i}.R_K"].shape[-1]), [None] * h)
                 for i, h in enumerate(self._heads())]
        for i in range(self.size.depth):
            seq = seq + self._layer(i, seq, empty[i])
        return seq

    def prepare(self, prefix: torch.Tensor) -> list:
        """Per layer, the prefix's keys (heads, R, width) and, per head, the prefix columns its
        value map copies: they never change (no layer writes a program token's stream), so they
        are computed once."""
        return [(torch.einsum("rm,hmw->hrw", prefix, self.tensors[f"layers.{i}.R_K"]),
                 [prefix[:, src] for _, src in self._moves(i)]) for i in range(self.size.depth)]

    def _moves(self, i: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per head of layer i, (destination, source) columns of its value map R_V."""
        if i not in self._move_cache:
            r_v = self.tensors[f"layers.{i}.R_V"]
            dsts = [(r_v[h] >= 0).nonzero().flatten() for h in range(r_v.shape[0])]
            self._move_cache[i] = [(dst, r_v[h][dst]) for h, dst in enumerate(dsts)]
        return self._move_cache[i]

    def _heads(self) -> list[int]:
        return [self.tensors[f"layers.{i}.R_Q"].shape[0] for i in range(self.size.depth)]

    def _layer(self, i: int, x: torch.Tensor, prepared: tuple
               ) -> torch.Tensor:
        """What layer i adds at the positions of ``x`` (batch, n, m), which come after the prefix
        (its keys and rows ``prepared``) in the sequence."""
        r_q, r_k = self.tensors[f"layers.{i}.R_Q"], self.tensors[f"layers.{i}.R_K"]
        keys_pre, rows_pre = prepared
        r = keys_pre.shape[1]
        out = torch.zeros_like(x)
        n = x.shape[1]
        future = torch.ones(n, n, dtype=torch.bool).triu(1) if self.size.causal else None
        for h, (dst, src) in enumerate(self._moves(i)):
            q = x @ r_q[h]
            scores = q @ (x @ r_k[h]).transpose(-1, -2)
            if future is not None:
                scores = scores.masked_fill(future, float("-inf"))
            if r:
                scores = torch.cat([q @ keys_pre[h].transpose(-1, -2), scores], dim=-1)
            weights = torch.softmax(scores, dim=-1)
            if not dst.numel():
                continue
            mixed = weights[..., r:] @ x[..., src]
            if r and bool(weights[..., :r].any()):
                mixed = mixed + _sparse_times(weights[..., :r], rows_pre[h])
            out[..., dst] += mixed
        return out

    # ----- files ------------------------------------------------------------------------------
    def save(self, directory: str | Path, force: bool = False) -> Path:
        """``backbone.safetensors`` (tensors, the class in the JSON header) and ``backbone.json``,
        by the protocol of ``atomic_dir`` (a non-empty directory that holds no backbone is
        refused unless ``force``)."""
        from rasp_compiler.atomic_dir import only_artifact_files, write_directory

        directory = Path(directory)
        header = {"class": self.size.as_json(), "sha256": self.sha256}
        files = (BACKBONE_FILE, "backbone.json")

        def write(tmp: str) -> None:
            write_deterministic(Path(tmp) / BACKBONE_FILE, self.tensors,
                                {"format": BACKBONE_FORMAT, "config": json.dumps(header, sort_keys=True)})
            (Path(tmp) / "backbone.json").write_text(json.dumps(header, indent=2, sort_keys=True) + "\n")

        write_directory(directory, write, artifact_files=files,  # ArtifactError, a UserError
                        is_ours=lambda path: only_artifact_files(path, files),
                        what="the backbone", force=force)
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> LookupBackbone:
        """A saved backbone; refused unless its tensors are exactly those its class builds."""
        directory = Path(directory)
        path = directory / BACKBONE_FILE if directory.is_dir() else directory
        if not path.is_file():
            raise ArtifactError(f"no lookup UT backbone at {directory} (expected {BACKBONE_FILE})",
                                hint=describe(directory) or "save one with rasp universal --with-mlps "
                                     "--program FILE --vocab V --save-backbone DIR")
        tensors, header = read_artifact(path, BACKBONE_FORMAT, "lookup UT backbone")
        check_readable_copy(path, "backbone.json", header)
        try:
            size = SizeClass.from_json(header.get("class"))
        except (UserError, TypeError) as err:
            raise ArtifactError(f"{path}: damaged class in the header ({err})") from None
        ref = build_backbone(size)
        same = tensors.keys() == ref.tensors.keys() and all(
            tensors[k].dtype == t.dtype and tensors[k].shape == t.shape and torch.equal(tensors[k], t)
            for k, t in ref.tensors.items())
        if not same or header.get("sha256") not in (ref.sha256, ref.tensors_sha256):
            raise ArtifactError(f"{path}: the weights are not those of the class its header names "
                                f"({size.describe()}): edited or damaged",
                                hint="build it again: rasp universal --with-mlps --class ... "
                                     "--save-backbone DIR")
        return ref


def _sparse_times(weights: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """weights (..., R) @ rows (R, w) as a sparse product.  On the prefix the weights are exactly
    0 but for one row per lookup query (the others underflow), so this is the same sums without
    their zero terms: a lookup costs a gather, not R x w multiplications per query."""
    flat = weights.reshape(-1, weights.shape[-1])
    product = torch.sparse.mm(flat.to_sparse(), rows)
    return product.reshape(*weights.shape[:-1], rows.shape[1])


def build_backbone(size: SizeClass | str) -> LookupBackbone:
    """The backbone of a class: a deterministic function of (L, H, T, k, o, c, causal).  ``size``
    is a SizeClass, or a class name or sizes as ``--class`` takes them."""
    from rasp_compiler.universal.lookup.size_class import as_class

    size = as_class(size, "build_backbone")
    size.validate()
    if size.width > MAX_WIDTH:
        raise UserError(f"the class {size.describe()} has width m = {size.width:,}, above the "
                        f"supported {MAX_WIDTH:,}")
    lay = layout(size)
    m, H, T, k, c = lay.m, size.heads, size.tables, size.head_width, size.code_width
    tensors: dict[str, torch.Tensor] = {}
    for l in range(size.layers):
        # attention layer: query [q, u_in, u_prog] . key [key, k_prog, k_null]; copy vp -> ho
        r_q, r_k = torch.zeros(H, m, k + 2, dtype=F64), torch.zeros(H, m, k + 2, dtype=F64)
        r_v = torch.full((H, m), -1, dtype=torch.long)
        for h in range(H):
            for j in range(k):
                r_q[h, lay.q[l][h][j], j] = r_k[h, lay.key[l][h][j], j] = 1.0
            r_q[h, U_IN, k] = r_k[h, K_PROG, k] = 1.0
            r_q[h, U_PROG, k + 1] = r_k[h, K_NULL, k + 1] = 1.0
            r_v[h, list(lay.ho[l][h])] = torch.tensor(lay.vp[l][h])
        tensors.update({f"layers.{2 * l}.R_Q": r_q, f"layers.{2 * l}.R_K": r_k, f"layers.{2 * l}.R_V": r_v})
        # lookup layer: query [pattern coordinates, u_in, u_prog] . key [patterns, constant, k_null];
        # each lookup copies the consumer columns read after this layer
        width = H * c + 3
        r_q, r_k = torch.zeros(H + T, m, width, dtype=F64), torch.zeros(H + T, m, width, dtype=F64)
        r_v = torch.full((H + T, m), -1, dtype=torch.long)
        down = torch.tensor(lay.downstream(l), dtype=torch.long)
        for j in range(H + T):
            if j < H:   # re-encode head j's output: query its c code columns
                patterns, constant = lay.rk[l][j]
                queried = list(lay.ho[l][j])
            else:       # MLP table: the op's code, then every head's code columns
                patterns, constant = lay.lk[l][j - H]
                queried = [lay.lq[l][j - H]] + [col for h in range(H) for col in lay.ho[l][h]]
            for a, (qc, kc) in enumerate(zip(queried, patterns, strict=True)):
                r_q[j, qc, a] = r_k[j, kc, a] = 1.0
            r_q[j, U_IN, width - 2] = r_k[j, constant, width - 2] = 1.0
            r_q[j, U_PROG, width - 1] = r_k[j, K_NULL, width - 1] = 1.0
            r_v[j, down] = down
        tensors.update({f"layers.{2 * l + 1}.R_Q": r_q, f"layers.{2 * l + 1}.R_K": r_k,
                        f"layers.{2 * l + 1}.R_V": r_v})
    readout = torch.zeros(m, size.out_width, dtype=F64)
    readout[list(lay.out), range(size.out_width)] = 1.0
    tensors["U"] = readout
    return LookupBackbone(size, tensors)
