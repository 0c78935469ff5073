"""What a compiled model reports about itself: its shape, its layer plan, its summary.

Shared by ``CompiledWeights`` (before torch, what ``rasp compile`` prints) and ``CompiledModel``
(the torch model); each gives ``config``, ``params`` and ``compile_seconds``.
"""

from __future__ import annotations

from typing import Any


class ModelReport:
    """Read-outs of ``self.config`` (the model's config.json), ``self.params`` and
    ``self.compile_seconds`` (None for a model loaded from disk)."""

    @property
    def plan(self) -> list[dict]:
        return self.config["plan"]

    @property
    def residual_width(self) -> int:
        return int(self.config["d_model"])

    @property
    def n_layers(self) -> int:
        return int(self.config["n_layers"])

    @property
    def heads_per_layer(self) -> list[int]:
        return [lc["n_heads"] for lc in self.config["layers"]]

    @property
    def mlp_sizes(self) -> list[int]:
        return [lc["d_mlp"] for lc in self.config["layers"]]

    def stats(self) -> dict[str, Any]:
        return {"layers": self.n_layers, "heads_per_layer": self.heads_per_layer,
                "residual_width": self.residual_width, "mlp_hidden": self.mlp_sizes,
                "params": self.params,
                "compile_seconds": None if self.compile_seconds is None else round(self.compile_seconds, 4)}

    def summary(self) -> str:
        lines = [f"layers: {self.n_layers}   heads per layer: {self.heads_per_layer}   "
                 f"residual width: {self.residual_width}",
                 f"MLP hidden sizes: {self.mlp_sizes}   parameters: {self.params:,}"
                 + ("" if self.compile_seconds is None else f"   compile time: {self.compile_seconds:.3f} s")]
        for lp in self.plan:
            parts = []
            for h in lp["heads"]:
                nodes = ", ".join(h.get("nodes", [h["node"]]))
                sources = [src for src in h.get("sources", [h.get("source")]) if src]
                parts.append(f"head {h['head']}: {h['kind']} {nodes}"
                             + (f" ({', '.join(_short_sources(sources))})" if sources else ""))
            if lp["mlp"]:
                names = ", ".join(o["writes"] for o in lp["mlp"]["ops"])
                parts.append(f"mlp[{lp['mlp']['hidden']}]: {names}")
            lines.append(f"  layer {lp['layer']}: " + "; ".join(parts))
        path = self.config.get("critical_path") or []
        if path:
            lines.append("  depth forced by: " + " <- ".join(path))
        for note in self.config.get("notes", []):
            lines.append(f"  note: {note}")
        return "\n".join(lines)


def _short_sources(sources: list[str]) -> list[str]:
    """``a.rasp:3, a.rasp:4`` → ``a.rasp:3, 4`` (a shared head's lines, usually in one file)."""
    out, last_file = [], None
    for src in sources:
        file, _, line = src.rpartition(":")
        out.append(line if file == last_file else src)
        last_file = file
    return out
