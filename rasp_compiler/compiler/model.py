"""The compiled model: the torch runtime model plus what the compiler knows about it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from rasp_compiler.compiler.report import ModelReport
from rasp_compiler.errors import UserError
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

    def apply(self, tokens: Any) -> NoReturn:
        """Not this model's: tracr's ``apply([BOS, *tokens])`` belongs to the model that
        ``rasp_compiler.pyapi.compiling.compile_rasp_to_model`` returns.  Here: ``run([tokens])``."""
        # a tracr habit; Python's AttributeError said nothing of run or of compile_rasp_to_model
        raise UserError("a model from compile_program has no apply: it runs a batch, "
                        "model.run([tokens]) (no BOS), or model.trace([tokens]) for its internals",
                        hint="for tracr's apply([BOS, ...tokens]) compile with rasp_compiler.pyapi."
                             "compiling.compile_rasp_to_model(program, vocab, max_seq_len)")
