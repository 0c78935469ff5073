"""Running compiled programs through a lookup UT and checking them: logits against the compiled
model (float64), decoded outputs against the compiled model's and the reference interpreter's.

Inputs of one length run as one batch (at most ``BATCH`` inputs); the UT and the compiled model
run the same batch one after the other, so their times per input are measured alike.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from rasp_compiler.errors import UserError
from rasp_compiler.graph import Program
from rasp_compiler.runtime import ModelOutputError
from rasp_compiler.universal.compiled import same_output
from rasp_compiler.universal.lookup.backbone import LookupBackbone
from rasp_compiler.universal.lookup.encoding import ProgramEncoding

BATCH = 256


def inputs_for(vocab: list, max_len: int, limit: int, seed: int,
               fixed_length: int | None = None) -> tuple[list[list], bool]:
    """Every input up to ``max_len`` (of exactly ``fixed_length`` tokens, when given) when there are
    at most ``limit``, else ``limit`` random ones (lengths uniform in 1..max_len); and whether they
    are all of them."""
    lengths = [fixed_length] if fixed_length is not None else list(range(1, max_len + 1))
    total = sum(len(vocab) ** n for n in lengths)
    if total <= limit:
        return [list(t) for n in lengths for t in itertools.product(vocab, repeat=n)], True
    rng = random.Random(seed)
    return [[rng.choice(vocab) for _ in range(rng.choice(lengths))] for _ in range(limit)], False


def stated_length(path: str, max_len: int) -> int | None:
    """The input length ``path`` states with a ``# fixed-length: N`` line (matmul's shape), or None;
    one longer than ``max_len`` is a UserError.  `rasp compile` takes the line as its
    --fixed-length; the UT commands ignored it, compiled a model for every length and counted
    inputs the program does not take as agreeing."""
    from rasp_compiler.commands.run import fixed_length

    stated = fixed_length(path)
    if stated is not None and stated > max_len:
        raise UserError(f"{path} states '# fixed-length: {stated}': its inputs hold exactly {stated} "
                        f"tokens, more than --max-len {max_len}", hint=f"give --max-len {stated}")
    return stated


@dataclass
class ProgramRun:
    """How one program ran through the backbone."""

    inputs_checked: int = 0
    inputs_agreeing: int = 0            # decoded UT output == compiled model's == interpreter's
    agree_compiled: int = 0
    agree_interpreter: int = 0
    max_abs_logit_error: float = 0.0    # over every position, BOS included
    ut_seconds: float = 0.0
    compiled_seconds: float = 0.0
    undecodable: int = 0                # inputs whose UT logits the model's decoder refused
    first_disagreement: list | None = None

    @property
    def seconds_per_input(self) -> dict:
        n = max(1, self.inputs_checked)
        return {"ut": self.ut_seconds / n, "compiled": self.compiled_seconds / n}

    @property
    def exact(self) -> bool:
        return self.inputs_agreeing == self.inputs_checked and self.max_abs_logit_error <= LOGIT_TOLERANCE

    def as_json(self) -> dict:
        out = asdict(self)
        out.pop("ut_seconds"), out.pop("compiled_seconds")
        out["seconds_per_input"] = self.seconds_per_input
        if not math.isfinite(out["max_abs_logit_error"]):
            out["max_abs_logit_error"] = None
        return out


# the bar: logits within 1e-6 of the compiled model's, in float64
LOGIT_TOLERANCE = 1e-6


@dataclass
class _Batch:
    tokens: list[list]
    ids: torch.Tensor = field(repr=False)
    lengths: torch.Tensor = field(repr=False)


def _batches(model: Any, inputs: Sequence[Sequence[Any]]) -> list[_Batch]:
    by_length: dict[int, list] = {}
    for tokens in inputs:
        by_length.setdefault(len(tokens), []).append(list(tokens))
    out = []
    for n in sorted(by_length):
        group = by_length[n]
        for s in range(0, len(group), BATCH):
            part = group[s:s + BATCH]
            ids, lengths = model.encode(part)
            out.append(_Batch(part, ids, lengths))
    return out


def logits(backbone: LookupBackbone, encoding: ProgramEncoding, ids: torch.Tensor,
           prepared: list | None = None) -> torch.Tensor:
    """The program's logits (batch, 1 + n, outputs), BOS first, for token ids as the compiled
    model's ``encode`` gives them."""
    if prepared is None:  # run_program checked both once; a direct call ended in an einsum error
        _check_pair(backbone, encoding, "logits")
        encoding.check_backbone(backbone)
        _check_ids(encoding, ids)
    out = backbone(encoding.program_tokens, encoding.embed(ids), prepared=prepared)
    return out[..., :encoding.out_width]


def _check_pair(backbone: Any, encoding: Any, what: str) -> None:
    """The backbone and the encoding in their places (a None or a swapped pair ended in an
    AttributeError)."""
    for name, value, kind, made in (("backbone", backbone, LookupBackbone, "build_backbone(size)"),
                                    ("encoding", encoding, ProgramEncoding, "encode_program(...)")):
        if not isinstance(value, kind):
            raise UserError(f"{what}'s {name} must be a {kind.__name__}, got {type(value).__name__}",
                            hint=f"{made} makes one")


def _check_ids(encoding: ProgramEncoding, ids: Any) -> None:
    """Token ids as the compiled model's ``encode`` gives them: (batch, 1 + n), BOS first, each an
    index of the encoding's token table, n at most the compiled max length."""
    rows, positions = encoding.token_embed.shape[0], encoding.pos_embed.shape[0]
    if not isinstance(ids, torch.Tensor) or ids.ndim != 2 or ids.dtype not in (torch.int64, torch.int32):
        raise UserError(f"ids must be a 2-D integer tensor (batch, 1 + n), got "
                        f"{type(ids).__name__ if not isinstance(ids, torch.Tensor) else tuple(ids.shape)}"
                        f"{'' if not isinstance(ids, torch.Tensor) else ' ' + str(ids.dtype)}",
                        hint="ids, lengths = model.encode(batch) gives them, BOS first")
    if ids.shape[1] > positions:
        raise UserError(f"ids hold {ids.shape[1] - 1} tokens after BOS, more than the {positions - 1} "
                        "the program was encoded for")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= rows):
        raise UserError(f"ids must be between 0 and {rows - 1} (the encoding's token table), got "
                        f"{int(ids.min())}..{int(ids.max())}",
                        hint="ids, lengths = model.encode(batch) gives them, BOS first")


def run_program(backbone: LookupBackbone, encoding: ProgramEncoding, model: Any,
                inputs: Sequence[Sequence[Any]], program: Any = None,
                progress: Callable[[int], None] | None = None) -> ProgramRun:
    """Run every input through the backbone and the compiled model and compare; with
    ``program`` also against the reference interpreter.  ``progress`` hears the number of inputs
    done after each batch."""
    from rasp_compiler.interpreter import run as interpret
    from rasp_compiler.universal.lookup.encoding import check_model

    _check_pair(backbone, encoding, "run_program")
    check_model(model, "run_program")
    if isinstance(inputs, (str, bytes)) or not hasattr(inputs, "__len__"):
        raise UserError(f"run_program's inputs must be a list of inputs (each a list of tokens or a "
                        f"string), got {type(inputs).__name__}", hint='e.g. [list("ab"), list("ba")]')
    if not len(inputs):  # zero inputs checked counted as exact
        raise UserError("run_program got no inputs: nothing would be checked",
                        hint="give at least one input (inputs_for(vocab, max_len, ...) draws them)")
    encoding.check_backbone(backbone)
    if program is not None and not isinstance(program, Program):
        # a file name or source text reached interpret() inside the try below: every input then
        # "disagreed with the interpreter", with no word of why
        raise UserError(f"run_program's program must be a parsed Program, got {type(program).__name__}",
                        hint="program_from_source(source) (rasp_compiler.lang.elaborator) parses one; "
                             "or pass None to compare with the compiled model only")
    result = ProgramRun()
    prepared = backbone.prepare(encoding.program_tokens)
    with torch.no_grad():
        for batch in _batches(model, inputs):
            start = time.perf_counter()
            ut = logits(backbone, encoding, batch.ids, prepared)
            mid = time.perf_counter()
            ref = model.module(batch.ids, batch.lengths).double()
            result.ut_seconds += mid - start
            result.compiled_seconds += time.perf_counter() - mid
            result.max_abs_logit_error = max(result.max_abs_logit_error, _worst(ut - ref))
            lengths = [len(t) for t in batch.tokens]
            ours = _decode(model, ut[:, 1:], lengths)
            theirs = _decode(model, ref[:, 1:], lengths)
            for r, tokens in enumerate(batch.tokens):
                result.inputs_checked += 1
                result.undecodable += ours[r] is None
                compiled_ok = ours[r] is not None and theirs[r] is not None and \
                    same_output(ours[r], theirs[r])
                interp_ok = True
                if program is not None:
                    try:
                        expected = list(interpret(program, list(tokens)))
                    except Exception:   # the program has no answer here: the UT's cannot agree
                        expected = None
                    interp_ok = ours[r] is not None and expected is not None and \
                        same_output(ours[r], expected)
                result.agree_compiled += compiled_ok
                result.agree_interpreter += interp_ok
                if compiled_ok and interp_ok:
                    result.inputs_agreeing += 1
                elif result.first_disagreement is None:
                    result.first_disagreement = [tokens, ours[r], theirs[r]]
            if progress is not None:
                progress(len(batch.tokens))
    return result


def _worst(diff: torch.Tensor) -> float:
    worst = float(diff.abs().max()) if diff.numel() else 0.0
    return worst if math.isfinite(worst) else math.inf


def _decode(model: Any, logits: torch.Tensor, lengths: list[int]) -> list:
    """Decoded outputs, None for an input the decoder refuses (an unclean or non-finite output)."""
    try:
        return model.decode(logits, lengths)
    except ModelOutputError:
        out = []
        for r, n in enumerate(lengths):
            try:
                out.append(model.decode(logits[r:r + 1], [n])[0])
            except ModelOutputError:
                out.append(None)
        return out
