"""Checking programs through one lookup-UT backbone: compile each, choose the smallest class that
holds them all (or take the one given), build or load its backbone once, encode every program and
run its inputs (``run``).  What ``rasp universal --with-mlps`` prints.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from rasp_compiler.errors import UserError
from rasp_compiler.universal.lookup.backbone import LookupBackbone, build_backbone
from rasp_compiler.universal.lookup.encoding import Analysed, ProgramEncoding, analyse, encode_program
from rasp_compiler.universal.lookup.run import ProgramRun, inputs_for, run_program, stated_length
from rasp_compiler.universal.lookup.size_class import SizeClass, parse_class, smallest_holding


@dataclass
class ProgramReport:
    """One program's line: what it needs, how it ran, or why it was refused."""

    program: str
    refused: str | None = None
    model: Any = None
    source: Any = None
    analysed: Analysed | None = None
    encoding: ProgramEncoding | None = None
    run: ProgramRun | None = None
    exhaustive: bool = False
    encode_seconds: float = 0.0

    def as_json(self, backbone: LookupBackbone | None) -> dict:
        out: dict = {"program": self.program}
        if self.refused is not None:
            out["refused"] = self.refused
            return out
        cfg = self.model.config
        d, layers = int(cfg["d_model"]), int(cfg["n_layers"])
        size = backbone.size
        out.update(self.run.as_json() if self.run is not None else {})
        out.update({
            "backbone_sha256": backbone.sha256, "class": size.as_json(),
            "backbone_params": backbone.params, "program_params": self.encoding.params,
            "program_params_nonzero": int(sum(int(torch.count_nonzero(t)) for t in
                                              (self.encoding.token_embed, self.encoding.pos_embed,
                                               self.encoding.program_tokens))),
            "compiled_params": int(sum(t.numel() for t in self.model.tensors.values())),
            "width": size.width, "compiled_width": d, "width_ratio": size.width / d,
            "fitted_width": self.analysed.needs.width, "fitted_width_ratio": self.analysed.needs.width / d,
            "depth": size.depth, "compiled_layers": layers,
            "depth_ratio": size.depth / layers if layers else None,  # a map of the tokens: no layer
            "program_tokens": self.encoding.program_tokens.shape[0], "needs": self.analysed.needs.as_json(),
            "folded_ops": self.encoding.meta["folded_ops"], "exhaustive": self.exhaustive,
            "encode_seconds": self.encode_seconds, "exact": self.exact})
        return out

    @property
    def exact(self) -> bool:
        return self.refused is None and self.run is not None and self.run.exact


@dataclass
class BatchReport:
    backbone: LookupBackbone | None
    programs: list[ProgramReport] = field(default_factory=list)

    def total(self) -> dict:
        ran = [p for p in self.programs if p.run is not None]
        worst = max((p.run.max_abs_logit_error for p in ran), default=0.0)
        return {"programs": len(self.programs), "exact": sum(p.exact for p in self.programs),
                "refused": sum(p.refused is not None for p in self.programs),
                "inputs_checked": sum(p.run.inputs_checked for p in ran),
                "inputs_agreeing": sum(p.run.inputs_agreeing for p in ran),
                "max_abs_logit_error": worst if math.isfinite(worst) else None,
                "class": self.backbone.size.as_json() if self.backbone else None,
                "backbone_sha256": self.backbone.sha256 if self.backbone else None}

    @property
    def ok(self) -> bool:
        return bool(self.programs) and all(p.exact for p in self.programs)


def compile_for_lookup(path: str, vocab: Any, max_len: int, output: str | None, causal: bool
                       ) -> tuple[Any, Any]:
    """(program, model compiled in float64) for the lookup UT; a program that states its input
    length (``# fixed-length: N``) is compiled for that length, as `rasp compile` compiles it."""
    from rasp_compiler.compiler import compile_program
    from rasp_compiler.lang import load_program

    fixed = stated_length(path, max_len)
    program = load_program(path, output=output or "out")
    return program, compile_program(program, vocab, max_len, dtype="float64", causal=causal,
                                    fixed_length=fixed)


def check_programs(paths: list[str], vocab: Any, max_len: int, *, output: str | None = None,
                   causal: bool = False, class_text: str | None = None, backbone_dir: str | None = None,
                   save_backbone: str | None = None, force: bool = False,
                   encodings: dict[str, str] | None = None,
                   save_encodings: dict[str, str] | None = None, check: bool = True,
                   max_inputs: int = 2000, seed: int = 0, keep_going: bool = True,
                   stage: Callable[[str], None] | None = None,
                   progress: Callable[[int, int], Callable[[int], None]] | None = None) -> BatchReport:
    """Compile, class, backbone, encode and check ``paths``.  A program that cannot be compiled
    or carried is a refused line when ``keep_going``, else its UserError is raised.  ``stage``
    hears each step; ``progress(total, index)`` gives the callback that hears inputs done."""
    stage = stage or (lambda text: None)
    reports = []
    for path in paths:
        rep = ProgramReport(program=path)
        try:
            stage(f"compiling {path}")
            rep.source, rep.model = compile_for_lookup(path, vocab, max_len, output, causal)
            stage(f"tabulating {path}")
            rep.analysed = analyse(rep.model)
        except UserError as err:
            if not keep_going:
                raise
            rep.refused = err.message
        reports.append(rep)
    size = _choose_class(reports, class_text, backbone_dir, causal)
    stage("building the backbone" if backbone_dir is None else f"loading the backbone from {backbone_dir}")
    backbone = _backbone(size, backbone_dir)
    if save_backbone:
        backbone.save(save_backbone, force=force)
    report = BatchReport(backbone, reports)
    for index, rep in enumerate(reports):
        if rep.refused is not None:
            continue
        try:
            stage(f"encoding {rep.program}")
            start = time.perf_counter()
            given = (encodings or {}).get(rep.program)
            if given:
                rep.encoding = ProgramEncoding.load(given)
                rep.encoding.check_backbone(backbone)
                _check_same_program(rep.encoding, rep.model, given)
            else:
                rep.encoding = encode_program(rep.model, backbone.size, backbone.sha256, rep.analysed)
            rep.encode_seconds = time.perf_counter() - start
            if save_encodings and rep.program in save_encodings:
                rep.encoding.save(save_encodings[rep.program], force=force)
            if check:
                inputs, rep.exhaustive = inputs_for(rep.model.vocab, max_len, max_inputs, seed,
                                                    rep.model.config.get("fixed_length"))
                stage(f"checking {rep.program}")
                hear = progress(len(inputs), index) if progress else None
                rep.run = run_program(backbone, rep.encoding, rep.model, inputs, rep.source, progress=hear)
        except UserError as err:
            if not keep_going:
                raise
            rep.refused = err.message
    return report


def _choose_class(reports: list[ProgramReport], class_text: str | None, backbone_dir: str | None,
                  causal: bool) -> SizeClass:
    if backbone_dir is not None:
        loaded = LookupBackbone.load(backbone_dir).size
        if class_text is not None and parse_class(class_text, causal).backbone_key() != loaded.backbone_key():
            raise UserError(f"--backbone {backbone_dir} holds class {loaded.describe()}, not the --class "
                            f"{class_text} asked for", hint="drop --class: with --backbone the class "
                                                            "comes from the file")
        return loaded
    if class_text is not None:
        return parse_class(class_text, causal)
    needs = [r.analysed.needs for r in reports if r.analysed is not None]
    if not needs:
        return smallest_holding(_smallest(causal))
    return smallest_holding(_join(needs))


def _smallest(causal: bool) -> SizeClass:
    return SizeClass(1, 1, 0, 1, 1, 1, 1, 1, 1, causal, "needs")


def _join(needs: list[SizeClass]) -> SizeClass:
    """The sizes that hold every one of ``needs``."""
    keys = ("layers", "heads", "tables", "head_width", "out_width", "code_width", "vocab", "max_len",
            "program_tokens")
    data = {k: max(getattr(n, k) for n in needs) for k in keys}
    return SizeClass(**data, causal=needs[0].causal, name="needs")


def _backbone(size: SizeClass, directory: str | None) -> LookupBackbone:
    if directory is not None:
        return LookupBackbone.load(directory)
    return build_backbone(size)


def _check_same_program(encoding: ProgramEncoding, model: Any, path: str) -> None:
    """A saved encoding is checked against the model compiled now: it must be of the same compiled
    weights (compiling is deterministic), vocabulary, length and output; else it would be run and
    compared as another program."""
    meta, cfg = encoding.meta, model.config
    if encoding.size.causal != bool(cfg.get("causal", False)):  # the same weights either way
        raise UserError(f"{Path(path)}: the saved encoding is of the program compiled "
                        f"{'with' if encoding.size.causal else 'without'} --causal, and this run "
                        f"compiles it {'with' if cfg.get('causal') else 'without'}",
                        hint=f"{'add' if encoding.size.causal else 'drop'} --causal, or encode it again")
    if meta.get("model_weights_sha256") != cfg.get("weights_sha256") or meta.get("vocab") != cfg["vocab"] \
            or meta.get("max_len") != model.max_len or meta.get("output") != cfg["output"]:
        raise UserError(f"{Path(path)}: the saved encoding is of another program or compile "
                        f"(program {meta.get('program')}, vocab {meta.get('vocab')}, max len "
                        f"{meta.get('max_len')}; its compiled weights differ from this one's)",
                        hint="encode it again: rasp universal --with-mlps --program FILE "
                             "--save-encoding FILE")
