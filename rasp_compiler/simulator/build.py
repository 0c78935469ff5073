"""Generate U for (n, d, H): RASP source → the ordinary compiler → one transformer; run it."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from rasp_compiler.errors import InputError, UserError
from rasp_compiler.simulator.layout import SequenceLayout, shown
from rasp_compiler.simulator.source import generate_source

DEFAULT_RANGE = (-1.0, 1.0)
MAX_D = 32
MAX_LENGTH = 4096  # attention patterns are L x L per head: U's forward pass at 1,024 takes seconds


@dataclass
class Simulator:
    """A compiled U with its layout; ``model`` is a CompiledModel or a loaded RaspModel."""

    model: Any
    layout: SequenceLayout
    causal: bool
    source: str
    seconds: float = 0.0

    @property
    def dtype(self) -> str:
        return str(self.model.config["dtype"])

    def size(self) -> dict[str, Any]:
        cfg = self.model.config
        params = int(sum(t.numel() for t in self.model.tensors.values()))
        return {"layers": int(cfg["n_layers"]), "heads_per_layer": [lc["n_heads"] for lc in cfg["layers"]],
                "residual_width": int(cfg["d_model"]), "sequence_length": self.layout.length,
                "params": params}

    def tensors_for(self, seqs: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(ids, lengths, values) for a batch of checked sequences [B, L]."""
        seqs = np.atleast_2d(seqs)
        lo, hi = self.model.config["input"]["range"]
        for b, s in enumerate(seqs):
            self.layout.check_sequence(s)
            if s.min() < lo or s.max() > hi:  # the position and entry, as a non-finite value's error gives
                bad = int(np.nonzero((s < lo) | (s > hi))[0][0])
                which = "the input sequence" if len(seqs) == 1 else f"sequence {b}"
                raise InputError(f"{which} holds {shown(s[bad])} at position {bad} "
                                 f"({self.layout.entry_at(bad)}), outside the input range "
                                 f"[{shown(lo)}, {shown(hi)}] this U was generated for (its "
                                 "attention margins are sized for that range)",
                                 hint="generate U with a wider --input-range")
        B, L = seqs.shape
        ids = torch.zeros((B, L + 1), dtype=torch.long)
        ids[:, 0] = self.model.bos_id
        values = torch.zeros((B, L + 1), dtype=torch.float64)
        values[:, 1:] = torch.from_numpy(seqs)
        return ids, torch.full((B,), L, dtype=torch.long), values

    def run_sequences(self, seqs: np.ndarray) -> np.ndarray:
        """U's output sequences [B, L] (float64 copy of the model's dtype)."""
        ids, lengths, values = self.tensors_for(seqs)
        with torch.no_grad():
            out = self.model.module(ids, lengths, values=values)
        return out[:, 1:, 0].double().numpy()

    def trace_sequences(self, seqs: np.ndarray) -> tuple[np.ndarray, list[torch.Tensor], list[torch.Tensor]]:
        """U's output sequences, its residual stream after every sublayer and the attention
        pattern of its last layer (the softmax head: earlier layers' patterns are left empty, as
        ``check.read_intermediates`` reads none of them and U at n = 8, d = 32 has 65 heads of
        2,305² weights a layer)."""
        ids, lengths, values = self.tensors_for(seqs)
        with torch.no_grad():
            logits, residuals, patterns = self.model.module(
                ids, lengths, trace=True, values=values,
                trace_layers={int(self.model.config["n_layers"]) - 1})
        return logits[:, 1:, 0].double().numpy(), residuals, patterns

    def __call__(self, A: Any, V: Any, X: Any) -> np.ndarray:
        """T(X) [n, H*d] for one attention layer (A, V: [H, d, d]; X: [n, d])."""
        seq = self.layout.build(A, V, X)
        return self.layout.read_output(self.run_sequences(seq[None])[0])


def check_size(n: int, d: int, heads: int) -> SequenceLayout:
    """The layout of U for (n, d, heads), or a UserError when U would be too large to build.
    Called before anything is generated: the RASP source alone has d² lines (110 MB at d = 1000)."""
    layout = SequenceLayout(n, d, heads)
    too_big = ([f"its sequence length is {layout.length:,} (at most {MAX_LENGTH:,})"]
               if layout.length > MAX_LENGTH else [])
    if d > MAX_D:  # measured: d = 32 (n = 8, H = 1) is 84M parameters and 25 s; width grows as d²
        too_big.append(f"d = {d} is above {MAX_D} (U's width grows with d squared)")
    if too_big:
        raise UserError(f"U for n={n}, d={d}, H={heads} is too large to build: " + "; ".join(too_big),
                        hint="simulate a smaller layer: fewer rows n, a smaller d or fewer heads")
    return layout


def check_range(input_range: tuple[float, float], dtype: str) -> None:
    """Refuse a range so narrow that U's products fall below the dtype's normal numbers: the
    products x·a, x·v of entries up to r = max|LO|, |HI| are at most r², and below the smallest
    normal number every one is subnormal, with an error relative to T of up to u_min / r²
    (float32 over [-1e-20, 1e-20]: a max rel error of 1.1e-4 against the 5e-6 bar, which only
    --check told; a saved U answered with it silently)."""
    r = max(abs(float(v)) for v in input_range)
    tiny = float(np.finfo(np.float32 if dtype == "float32" else np.float64).tiny)
    if 0 < r and r * r < tiny:
        raise UserError(f"--input-range {shown(input_range[0])} {shown(input_range[1])} is too narrow "
                        f"for {dtype}: the products of its entries (at most {r * r:.3g}) are below the "
                        f"smallest normal {dtype} number ({tiny:.3g}) and lose their relative precision",
                        hint=("--dtype float64, or " if dtype == "float32" else "")
                        + "rescale the layer's entries to a normal size")


def build_simulator(n: int, d: int, heads: int, *, causal: bool = False, dtype: str = "float64",
                    input_range: tuple[float, float] = DEFAULT_RANGE, plan: str = "windows",
                    progress: Callable[[str], None] | None = None) -> Simulator:
    """Generate U's RASP source for (n, d, heads) and compile it (fixed length, real inputs).
    ``plan``: "windows" (default, heads [d, 2d+1, 1]) or "direct" (heads [d*d+2d, 1], for comparison)."""
    from rasp_compiler.compiler import compile_program
    from rasp_compiler.lang.elaborator import program_from_source

    start = time.perf_counter()
    layout = check_size(n, d, heads)
    n, d, heads = layout.n, layout.d, layout.heads  # plain ints (a NumPy integer is not JSON)
    if type(causal).__name__ not in ("bool", "bool_"):  # causal="no" built a causal U, and stored "no"
        raise InputError(f"causal must be True or False, got {causal!r}")
    causal = bool(causal)
    if input_range is not None and all(np.isfinite(np.asarray(input_range, dtype=float))):
        check_range(input_range, dtype)  # a non-finite or reversed range: the compiler's own error
    source = generate_source(n, d, heads, causal, plan, dtype=dtype, input_range=input_range)
    program = program_from_source(source, file=f"<U n={n} d={d} H={heads}>")
    L = layout.length
    model = compile_program(program, None, L, dtype=dtype, fixed_length=L, input_range=input_range,
                            progress=progress)
    model.config["simulator"] = {"n": n, "d": d, "heads": heads, "causal": causal, "plan": plan,
                                 "input_range": list(input_range), "sequence_length": L}
    return Simulator(model, layout, causal, source, time.perf_counter() - start)


def load_simulator(directory: str) -> Simulator:
    """A U saved by ``rasp simulate -o DIR``."""
    from rasp_compiler.artifact_kinds import describe
    from rasp_compiler.errors import ArtifactError
    from rasp_compiler.runtime import RaspModel

    for name in ("config.json", "model.safetensors"):  # the runtime's own hint names rasp compile
        if not os.path.isfile(os.path.join(directory, name)):
            raise ArtifactError(f"{os.path.join(directory, name)} does not exist",
                                hint=describe(directory)
                                or "generate U with rasp simulate --n N --d D --heads H -o DIR")
    model = RaspModel.load(directory)
    spec = model.config.get("simulator")
    if not isinstance(spec, dict):
        raise ArtifactError(f"{directory} holds a compiled model, but not a simulator U",
                            hint="generate one with rasp simulate --n N --d D --heads H -o DIR")
    sizes = [spec.get(k) for k in ("n", "d", "heads")]
    causal = spec.get("causal", False)
    if not all(type(v) is int and v >= 1 for v in sizes) or type(causal) is not bool:
        raise ArtifactError(f"{directory}/config.json: the simulator block is not valid "
                            f"(n, d, heads {sizes}, causal {causal!r})",
                            hint="the files were edited: generate U again")
    # The input range sizes U's margins and gates its inputs (tensors_for): an edit of the runtime's
    # copy alone let out-of-range entries through to a wrong answer, so both copies must agree.
    model_range = (model.config.get("input") or {}).get("range")
    if spec.get("input_range") != model_range:
        raise ArtifactError(f"{directory}/config.json: the simulator's input range "
                            f"{spec.get('input_range')} is not the model's input range {model_range}",
                            hint="the files were edited: generate U again")
    layout = SequenceLayout(*sizes)
    if layout.length != model.config.get("fixed_length"):
        raise ArtifactError(f"{directory}/config.json: the simulator block (n={sizes[0]}, d={sizes[1]}, "
                            f"heads={sizes[2]}) does not match the model it describes",
                            hint="the files were edited: generate U again")
    return Simulator(model, layout, causal, "")
