"""The compiled model: the torch runtime model plus what the compiler knows about it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rasp_compiler.compiler.report import ModelReport
from rasp_compiler.runtime import RaspModel

if TYPE_CHECKING:
    from rasp_compiler.compiler.analysis import Analysis
    from rasp_compiler.graph.nodes import Program


class CompiledModel(RaspModel, ModelReport):
    """A runtime model plus what the compiler knows about it (plan, timing, analysis)."""

    compile_seconds: float | None = None  # None for a model loaded from disk: the time is not saved
    analysis: Analysis | None = None
    plans_tried: list[dict] | None = None  # ``CompiledWeights.plans_tried``; None when loaded
    compiled_program: Program | None = None  # ``CompiledWeights.compiled_program``

    @property
    def params(self) -> int:
        return int(sum(t.numel() for t in self.tensors.values()))
