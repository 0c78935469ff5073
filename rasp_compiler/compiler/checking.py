"""Compare a compiled model with the reference interpreter on many inputs.

Categorical outputs must be equal; numerical outputs agree when
``|model - interpreter| <= TOLERANCE[dtype] * max(1, |interpreter|)``.  Inputs on which the
interpreter itself raises (e.g. a mean of strings) are outside the program's domain: they are
counted as ``inputs_undefined`` and not compared.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from rasp_compiler.errors import UserError
from rasp_compiler.graph.nodes import Program
from rasp_compiler.graph.semantics import OperatorError
from rasp_compiler.runtime import RaspModel

TOLERANCE = {"float32": 1e-4, "float64": 1e-9}
EXHAUSTIVE_LIMIT = 50_000
# A check's first batch is small, so that its time tells early how long the whole check will take
# (`rasp check` shows a progress bar from that); later batches take about BATCH_SECONDS each (a
# model at max_len 512 takes ~0.13 s an input: 256 of them were half a minute without a word).
FIRST_BATCH = 16
BATCH_SECONDS = 1.0


def next_batch_size(done: int, seconds: float, batch_size: int) -> int:
    """The size of a check's next batch, after ``done`` inputs took ``seconds``: FIRST_BATCH for
    the first, then as many as take about BATCH_SECONDS at the rate so far, 1 to ``batch_size``."""
    if done == 0:
        return min(FIRST_BATCH, batch_size)
    if seconds <= 0:
        return batch_size
    return max(1, min(batch_size, int(BATCH_SECONDS * done / seconds)))


@dataclass
class CheckResult:
    inputs_checked: int = 0
    inputs_agreeing: int = 0
    inputs_undefined: int = 0
    max_abs_error: float = 0.0
    failures: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.inputs_agreeing == self.inputs_checked


def count_inputs(vocab_size: int, max_len: int) -> int:
    return sum(vocab_size ** n for n in range(1, max_len + 1))


def exhaustive_inputs(vocab: list[Any], max_len: int) -> Iterable[list[Any]]:
    for n in range(1, max_len + 1):
        for combo in itertools.product(vocab, repeat=n):
            yield list(combo)


def edge_inputs(vocab: list[Any], max_len: int) -> list[list[Any]]:
    """All-equal tokens at every length (|vocab| × max_len inputs), and alternating pairs of the
    first four tokens at the longest length (C(min(|vocab|, 4), 2) inputs)."""
    out = [[t] * n for t in vocab for n in range(1, max_len + 1)]
    for a, b in itertools.combinations(vocab[:4], 2):
        out.append([a, b] * (max_len // 2) + [a] * (max_len % 2))
    return out


def random_inputs(vocab: list[Any], max_len: int, k: int, seed: int) -> list[list[Any]]:
    rng = random.Random(seed)
    return [[rng.choice(vocab) for _ in range(rng.randint(1, max_len))] for _ in range(k)]


def agree(got: list[Any], want: list[Any], numerical: bool, tol: float) -> tuple[bool, float]:
    if len(got) != len(want):
        return False, float("inf")
    err = 0.0
    ok = True
    for g, w in zip(got, want, strict=False):
        if numerical:
            try:
                e = abs(float(g) - float(w))
            except (TypeError, ValueError):
                return False, float("inf")
            if not math.isfinite(e):  # NaN would slip through max() and every comparison
                return False, float("inf")
            err = max(err, e)
            ok &= e <= tol * max(1.0, abs(float(w)))
        else:
            # False == 0 and True == 1 in Python, but they print differently (F / 0): a model that
            # answers 0 where the interpreter says False disagrees (docs/known-bugs.md #13)
            ok &= (g == w) and isinstance(g, bool) == isinstance(w, bool)
    return ok, err


def check_model(model: RaspModel, program: Program, inputs: Iterable[list[Any]], *,
                batch_size: int = 256, max_failures: int = 5,
                progress: Callable[[int], None] | None = None) -> CheckResult:
    from rasp_compiler.interpreter import run

    res = CheckResult()
    numerical = model.config["output"]["encoding"] == "numerical"
    tol = TOLERANCE[model.config["dtype"]]
    batch: list[list[Any]] = []
    start, done = time.monotonic(), 0
    limit = next_batch_size(0, 0.0, batch_size)

    def flush() -> None:
        nonlocal done, limit
        wants = []
        keep = []
        for x in batch:
            try:
                wants.append(run(program, x))
                keep.append(x)
            except (UserError, OperatorError):  # the interpreter refuses: outside the domain
                res.inputs_undefined += 1
        if keep:
            lengths = [len(x) for x in keep]
            logits = model.forward(keep)
            gots = model.decode(logits, lengths, strict=False)
            unclean = model.unclean(logits, lengths)
            # a model that flags inputs where the program may be undefined (several_keys) must
            # answer every input where it is defined: a flag there is a refusal, not an agreement
            flagged = model.flags(keep) if getattr(model, "several_keys_heads", None) else [None] * len(keep)
            for x, g, w, vague, flag in zip(keep, gots, wants, unclean, flagged, strict=False):
                ok, err = agree(g, w, numerical, tol)
                ok = ok and not vague and not flag  # `run` would refuse these: not an agreement
                res.inputs_checked += 1
                res.inputs_agreeing += ok
                if numerical and err != float("inf"):
                    res.max_abs_error = max(res.max_abs_error, err)
                if not ok and len(res.failures) < max_failures:
                    res.failures.append({"input": x, "model": g, "interpreter": w})
        if progress is not None:
            progress(len(batch))  # inputs done in this batch, checked or skipped
        done += len(batch)
        limit = next_batch_size(done, time.monotonic() - start, batch_size)
        batch.clear()

    for x in inputs:
        batch.append(x)
        if len(batch) >= limit:
            flush()
    if batch:
        flush()
    return res
