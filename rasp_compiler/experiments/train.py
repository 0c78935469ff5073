"""The training loop: AdamW, linear warm-up + cosine decay, gradient clipping at 1.0.

Only parameters with ``requires_grad`` reach the optimiser (for frozen backbones: the token and
position tables and the unembedding).  Shows the running accuracy (a tqdm bar on a terminal, a line
per tenth of the run in a log), evaluates on the disjoint test set, and saves the checkpoint
(safetensors + JSON) and the training curve.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from rasp_compiler.errors import UserError, file_in_the_way
from rasp_compiler.experiments.data import (
    IGNORE,
    Batch,
    Stream,
    khop_targets,
    majority_baseline,
    task_spec,
    test_set,
)
from rasp_compiler.experiments.models import (
    EmbeddingProgrammedTransformer,
    ModelConfig,
    sparse_blocks,
    sparse_construction,
)
from rasp_compiler.experiments.names import (
    ARCHES,
    BACKBONES,
    CHECKPOINT_MINUTES,
    PRECISIONS,
    SPARSE_CONSTRUCTIONS,
)
from rasp_compiler.experiments.runfiles import (
    ResumeState,
    finished_run,
    load_checkpoint,  # noqa: F401  (read from here by users of the Python API)
    load_resume,
    refuse_foreign_config,
    remove_resume,
    remove_stale_temporaries,
    restore_rng,
    rng_state,
    save_checkpoint,
    save_resume,
)
from rasp_compiler.memory import available_memory
from rasp_compiler.universal.classes import shown_width

RESULT_KEYS = ("task", "k", "backbone", "arch", "seed", "width", "steps", "test_accuracy",
               "majority_baseline", "trainable_params", "frozen_params", "seconds")


@dataclass
class RunConfig:
    task: str = "dyck1"
    k: int | None = None
    backbone: str = "random"
    arch: str = "attn"
    width: int = 64
    layers: int = 2
    heads: int = 4
    steps: int = 6000
    batch: int = 64
    lr: float = 1e-2
    weight_decay: float = 1e-3
    warmup: float = 0.05            # fraction of the steps
    seed: int = 0
    device: str = "cpu"
    threads: int = 1
    test_size: int = 0              # 0: the task's default
    curve_points: int = 40
    khop_len: int = 64
    khop_vocab: int = 4
    bucket: bool = True             # Dyck-1: batches of similar length (less padding)
    emb_std: float = 0.5
    construction: str = "auto"      # sparse backbone only: auto, A, C or paths (see models.py)
    curriculum: int = 0             # k-hop: steps on each of hop_1 .. hop_{k-1} before hop_k
    aux: bool = False               # k-hop: auxiliary unembeddings trained on hop_1 .. hop_{k-1}
    precision: str = "fp32"         # training matmuls: fp32, or bf16 autocast (weights stay fp32)
    extra: dict = field(default_factory=dict)

    def stages(self) -> list[tuple[int | None, int]]:
        """(hop count or None for Dyck-1, steps) of each training stage, in order."""
        if self.task != "khop":
            return [(None, self.steps)]
        return [(j, self.curriculum) for j in range(1, self.k) if self.curriculum] + [(self.k, self.steps)]

    def total_steps(self) -> int:
        return sum(n for _, n in self.stages())

    def name(self) -> str:
        task = self.task if self.task == "dyck1" else f"khop{self.k}"
        backbone = self.backbone
        if backbone == "sparse" and self.construction != "auto":
            backbone = f"sparse-{self.construction}"
        cur = (f"_cur{self.curriculum}" if self.curriculum else "") + ("_aux" if self.aux else "")
        prec = "" if self.precision == "fp32" else f"_{self.precision}"
        return (f"{task}_{backbone}_{self.arch}_w{self.width}_L{self.layers}_H{self.heads}"
                f"_s{self.steps}{cur}_b{self.batch}_lr{self.lr:g}{prec}_seed{self.seed}")


def validate(cfg: RunConfig) -> None:
    if cfg.task not in ("dyck1", "khop"):
        raise UserError(f"unknown task {cfg.task!r}", "use dyck1 or khop")
    if cfg.task == "khop" and (cfg.k is None or cfg.k < 1):
        raise UserError("khop needs --k K with K >= 1")
    if cfg.backbone not in BACKBONES:
        raise UserError(f"unknown backbone {cfg.backbone!r}", "use " + " | ".join(BACKBONES))
    if cfg.arch not in ARCHES:
        raise UserError(f"unknown arch {cfg.arch!r}", "use " + " | ".join(ARCHES))
    for name in ("width", "layers", "heads", "steps", "batch"):
        if getattr(cfg, name) < 1:
            raise UserError(f"--{name} must be at least 1")
    if cfg.backbone != "sparse" and cfg.width % cfg.heads:
        raise UserError(f"--width {cfg.width} must be a multiple of --heads {cfg.heads}")
    if cfg.construction not in SPARSE_CONSTRUCTIONS:
        raise UserError(f"unknown sparse construction {cfg.construction!r}",
                        "use " + " | ".join(SPARSE_CONSTRUCTIONS))
    if cfg.construction != "auto" and cfg.backbone != "sparse":
        raise UserError("--construction applies to the sparse backbone only",
                        "drop --construction or use --backbone sparse")
    if cfg.backbone == "sparse":
        construction = sparse_construction(cfg.arch, cfg.construction)
        blocks = sparse_blocks(cfg.arch, cfg.layers, cfg.heads, cfg.construction)
        if cfg.width < blocks:
            raise UserError(f"--width {cfg.width} is too small for sparse construction "
                            f"{construction} with {cfg.layers} layers and {cfg.heads} heads: it "
                            f"needs at least {shown_width(blocks)} (one column per block)")
    if cfg.curriculum < 0:
        raise UserError("--curriculum must be at least 0")
    if cfg.curriculum and (cfg.task != "khop" or cfg.k < 2):
        raise UserError("--curriculum applies to k-hop with k >= 2 (it trains hop_1 .. hop_{k-1} "
                        "first)", "drop --curriculum")
    if cfg.aux and (cfg.task != "khop" or cfg.k < 2):
        raise UserError("--aux-hops applies to k-hop with k >= 2 (it adds heads for hop_1 .. "
                        "hop_{k-1})", "drop --aux-hops")
    if not cfg.lr > 0:
        raise UserError("--lr must be positive")
    if cfg.precision not in PRECISIONS:
        raise UserError(f"unknown precision {cfg.precision!r}", "use " + " | ".join(PRECISIONS))
    _check_memory(cfg)
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA device is available", "use --device cpu")
    if not (cfg.device == "cpu" or cfg.device.startswith("cuda")):
        raise UserError(f"unknown device {cfg.device!r}", "use cpu or cuda")


def estimated_bytes(cfg: RunConfig) -> int:
    """A rough upper estimate of a run's memory: fp32 weights with AdamW state, and the activations
    kept for the backward pass (the stream and every head's T x T attention, per layer)."""
    m, L, t = cfg.width, cfg.layers, 64 if cfg.task == "khop" else 61
    per_layer = 4 * m * m + (8 * m * m if cfg.arch == "attn-res-ln-mlp" else 0)
    weights = 4 * L * per_layer * (4 if cfg.backbone == "trained" else 1)   # + grads, Adam moments
    mlp = 4 if cfg.arch == "attn-res-ln-mlp" else 0
    activations = 4 * cfg.batch * L * (t * m * (8 + mlp) + 3 * cfg.heads * t * t)
    return weights + activations


def _check_memory(cfg: RunConfig) -> None:
    """Refuse a run that cannot fit in this machine's memory before allocating anything (a torch
    allocation failure would name no option, or the machine would swap for hours)."""
    if cfg.device != "cpu":
        return
    total = available_memory()
    if total is None:
        return
    need = estimated_bytes(cfg)
    if need > total:
        raise UserError(f"--width {cfg.width} with --layers {cfg.layers} and --batch {cfg.batch} needs "
                        f"about {need / 2**30:.0f} GiB, more than the {total / 2**30:.0f} GiB free now",
                        "use a smaller --width, --layers or --batch")


def lr_at(step: int, steps: int, cfg: RunConfig) -> float:
    """Step ``step`` of a stage of ``steps`` steps: linear warm-up, then cosine decay to 0."""
    warm = max(1, int(cfg.warmup * steps))
    if step < warm:
        return cfg.lr * (step + 1) / warm
    p = (step - warm) / max(1, steps - warm)
    return cfg.lr * 0.5 * (1.0 + math.cos(math.pi * p))


@torch.no_grad()
def evaluate(model: torch.nn.Module, b: Batch, device: torch.device, chunk: int = 512) -> float:
    model.eval()
    lengths = (b.targets != IGNORE).sum(axis=1)
    single = bool((lengths == 1).all())           # one label per sequence (Dyck-1): query rows only
    last = np.where(lengths > 0, b.targets.shape[1] - np.argmax((b.targets != IGNORE)[:, ::-1], axis=1), 0)
    order = np.argsort(last, kind="stable")        # similar lengths together: less padding
    correct = total = 0
    for i in range(0, len(order), chunk):
        idx = order[i:i + chunk]
        width = int(last[idx].max())
        tok = torch.from_numpy(np.ascontiguousarray(b.tokens[idx, :width])).to(device)
        tgt = torch.from_numpy(np.ascontiguousarray(b.targets[idx, :width])).to(device)
        if single:
            rows = (tgt != IGNORE).int().argmax(dim=1)
            pred = model(tok, rows).argmax(-1)
            correct += int((pred == tgt[torch.arange(len(idx), device=device), rows]).sum())
            total += len(idx)
            continue
        pred = model(tok).argmax(-1)
        scored = tgt != IGNORE
        correct += int((pred[scored] == tgt[scored]).sum())
        total += int(scored.sum())
    model.train()
    return correct / max(1, total)


def default_test_size(task: str) -> int:
    return 4096 if task == "dyck1" else 1024     # k-hop scores every position: 64x as many labels


def train(cfg: RunConfig, out: str | os.PathLike | None = None, progress: bool = True,
          backbone_weights: list[dict] | None = None, resume: bool = True,
          checkpoint_every: int = 0, checkpoint_minutes: float = CHECKPOINT_MINUTES,
          say_finished: bool | None = None) -> tuple[dict, dict]:
    """Train one configuration. Returns (result, curve); writes the checkpoint to ``out`` if given.
    ``progress`` shows it on stderr: a bar on a terminal, otherwise a line per tenth of the run.

    With ``out``, the run saves its state to ``out/resume.safetensors`` every ``checkpoint_every``
    steps (0: not by steps) and every ``checkpoint_minutes`` of wall time (0: not by time), and
    once more when training ends; with ``resume`` a run that finds such a state continues from it,
    bit-exactly: the weights it ends with are those of an uninterrupted run (``runfiles``).

    With a k-hop curriculum the run trains on hop_1, ..., hop_{k-1} targets (``cfg.curriculum``
    steps each) and then on hop_k (``cfg.steps``), each stage with a fresh optimiser and its own
    warm-up and cosine schedule; the inputs are the same k-hop sequences throughout.  The result's
    ``steps`` counts every stage, and its test accuracy is always on hop_k.

    With ``cfg.aux`` (k-hop) the model has k - 1 more unembeddings, read by nothing but extra
    losses: head j is trained on hop_j at every step, next to the hop_k loss.  They are trained
    parameters (counted in ``trainable_params``, saved with the checkpoint); the backbone stays
    frozen, and the test accuracy is the hop_k unembedding's.
    """
    validate(cfg)
    if out is not None:
        prepare_out(out)       # before training: an unwritable --out must not cost the whole run
        refuse_foreign_config(out)
        remove_stale_temporaries(out)
        finished = finished_run(out, asdict(cfg)) if resume else None
        if finished is not None:
            if progress if say_finished is None else say_finished:  # default: with the progress
                print(f"{cfg.name()}: already finished in {out}: its saved result (pass --no-resume "
                      "to train it again)", file=sys.stderr, flush=True)
            return finished
    t0, c0 = time.time(), time.process_time()
    torch.set_num_threads(max(1, cfg.threads))    # on cuda too: parallel runs share the host's cores
    device = torch.device(cfg.device)
    spec = task_spec(cfg.task, cfg.k, cfg.khop_len, cfg.khop_vocab)
    mcfg = ModelConfig(spec.vocab, spec.classes, spec.seq_len, cfg.width, cfg.layers, cfg.heads,
                       cfg.arch, cfg.backbone, cfg.seed, cfg.emb_std, cfg.construction,
                       aux=cfg.k - 1 if cfg.aux else 0)
    model = EmbeddingProgrammedTransformer(mcfg, backbone_weights).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    stream = Stream(spec, cfg.batch, cfg.seed, bucket=cfg.bucket, khop_len=cfg.khop_len)
    test = test_set(spec, cfg.test_size or default_test_size(cfg.task), khop_len=cfg.khop_len)
    n_probe = 1024 if cfg.task == "dyck1" else 128    # curve points: 1,024 / 8,192 labels
    total = cfg.total_steps()
    curve = {"step": [], "train_accuracy": [], "loss": [], "test_accuracy": [], "seconds": [],
             "cpu_seconds": []}
    if len(cfg.stages()) > 1:
        curve["hop"] = []      # which targets each curve point trains and tests on
    state = load_resume(out, asdict(cfg), cfg.name()) if out is not None and resume else None
    resumed_at = 0
    if state is not None:
        model.load_state_dict(state.model)
        stream.restore(state.stream)
        restore_rng(state.rng, state.tensors, device)
        curve = state.curve
        t0, c0 = t0 - state.seconds, c0 - state.cpu_seconds
        resumed_at = sum(n for _, n in cfg.stages()[:state.stage]) + state.step
    saver = None if out is None else _Checkpointer(out, cfg, checkpoint_every, checkpoint_minutes,
                                                   model, stream, curve, device, t0, c0)
    bar = None
    if progress and sys.stderr.isatty():
        from tqdm import tqdm
        bar = tqdm(total=total, initial=resumed_at, desc=cfg.name(), unit="step",
                   dynamic_ncols=True, leave=False)
    elif progress:
        bar = LineProgress(total, cfg.name(), initial=resumed_at)
    if state is not None and progress:
        print(f"{cfg.name()}: resumed at step {resumed_at:,} of {total:,} from {out}",
              file=sys.stderr, flush=True)
    done = 0
    for index, (hop, steps) in enumerate(cfg.stages()):
        if state is not None and index < state.stage:
            done += steps
            continue
        opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        start, running = 0, {"acc": None, "loss": None}
        if state is not None and index == state.stage:
            opt.load_state_dict({"state": state.optimizer,
                                 "param_groups": opt.state_dict()["param_groups"]})
            start, running = state.step, dict(state.running)
        probe = Batch(test.tokens[:n_probe], test.targets[:n_probe])
        if hop is not None and hop != cfg.k:
            probe = Batch(probe.tokens, khop_targets(probe.tokens, hop, spec.vocab))
        after_step = None if saver is None else partial(saver.after_step, index, done, opt, running)
        _train_stage(model, opt, params, stream, cfg, spec.classes, hop, steps, start, done, total,
                     probe, device, curve, bar, t0, c0, running, after_step)
        if saver is not None and index == len(cfg.stages()) - 1:
            saver.save(index, steps, opt, running)   # a kill while saving the result redoes no step
        done += steps
    if bar is not None:
        bar.close()
    test_acc = evaluate(model, test, device)
    trainable, frozen = model.param_counts()
    result = {
        "task": cfg.task, "k": cfg.k if cfg.task == "khop" else None, "backbone": cfg.backbone,
        "arch": cfg.arch, "seed": cfg.seed, "width": cfg.width, "steps": total,
        "test_accuracy": round(test_acc, 6), "majority_baseline": round(majority_baseline(test), 6),
        "trainable_params": trainable, "frozen_params": frozen,
        "seconds": round(time.time() - t0, 2),
    }
    curve["total_seconds"] = result["seconds"]
    curve["device"] = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    curve["total_cpu_seconds"] = round(time.process_time() - c0, 2)   # this process, all threads
    if out is not None:
        save_checkpoint(model, asdict(cfg), result, curve, out)
        remove_resume(out)
    return result, curve


class _Checkpointer:
    """Saves the run's resume state every ``every`` global steps and every ``minutes`` of wall
    time (either may be 0: off)."""

    def __init__(self, out, cfg: RunConfig, every: int, minutes: float, model, stream: Stream,
                 curve: dict, device: torch.device, t0: float, c0: float) -> None:
        self.out, self.cfg, self.every, self.seconds = out, cfg, every, 60.0 * minutes
        self.model, self.stream, self.curve, self.device = model, stream, curve, device
        self.t0, self.c0 = t0, c0
        self.last = time.monotonic()

    def after_step(self, stage: int, done: int, opt, running: dict, step: int) -> None:
        """Called after ``step`` steps of stage ``stage`` (``done`` steps before it)."""
        if (self.every and (done + step) % self.every == 0) or \
                (self.seconds and time.monotonic() - self.last >= self.seconds):
            self.save(stage, step, opt, running)

    def save(self, stage: int, step: int, opt, running: dict) -> None:
        rng, rng_tensors = rng_state(self.device)
        save_resume(self.out, asdict(self.cfg), ResumeState(
            stage=stage, step=step, model=self.model.state_dict(), optimizer=opt.state_dict()["state"],
            running=dict(running), curve=self.curve, stream=self.stream.state(),
            seconds=time.time() - self.t0, cpu_seconds=time.process_time() - self.c0, rng=rng,
            tensors=rng_tensors))
        self.last = time.monotonic()


class LineProgress:
    """Progress for a log file or a pipe, where tqdm's redrawn line would be one endless line:
    one plain line on stderr at every tenth of the run.  Has the part of tqdm's interface that
    the training loop uses."""

    def __init__(self, total: int, name: str, parts: int = 10, stream=None, initial: int = 0) -> None:
        self.total, self.name, self.parts = total, name, parts
        self.stream = stream if stream is not None else sys.stderr
        self.n, self.postfix = initial, ""
        self.shown = initial * parts // max(1, total)    # a resumed run: the tenths already passed
        self.start = time.monotonic()

    def set_postfix(self, **fields: str) -> None:
        self.postfix = ", ".join(f"{k} {v}" for k, v in fields.items())

    def update(self, n: int = 1) -> None:
        self.n += n
        part = self.n * self.parts // max(1, self.total)
        if part > self.shown:
            self.shown = part
            postfix = f", {self.postfix}" if self.postfix else ""
            print(f"{self.name}: step {self.n:,}/{self.total:,} ({100 * self.n // max(1, self.total)} %)"
                  f"{postfix}, {time.monotonic() - self.start:.0f} s", file=self.stream, flush=True)

    def close(self) -> None:
        pass


def prepare_out(out: str | os.PathLike, flag: str = "--out", what: str = "the checkpoint") -> None:
    """Create the directory ``out`` and make sure files can be written there, or raise a UserError
    naming ``flag``; called before training (which may take an hour) and before a grid's runs."""
    out = Path(out)
    blocker = file_in_the_way(out)  # mkdir would only say "File exists" or "Not a directory"
    if blocker is not None:
        which = "it is" if blocker == str(out) else f"{blocker} is"
        raise UserError(f"{flag} {out}: cannot write {what} there: {which} a file, not a directory",
                        f"choose a writable directory with {flag}")
    probe = out / f".write-test-{os.getpid()}"
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise UserError(f"{flag} {out}: cannot write {what} there ({err.strerror or err})",
                        f"choose a writable directory with {flag}") from None


def _check_finite_loss(loss: float, step: int, cfg: RunConfig) -> None:
    """A NaN or infinite loss leaves NaN weights behind: every later number would be garbage, so
    the run stops instead of reporting an accuracy and writing a checkpoint."""
    if not math.isfinite(loss):
        raise UserError(f"the training loss became {loss} at step {step + 1} (lr {cfg.lr:g}): the "
                        "run diverged and its weights are no longer finite",
                        "lower --lr (the defaults are 0.01 for frozen backbones, 0.001 for trained)")


def _train_stage(model, opt, params, stream: Stream, cfg: RunConfig, classes: int, hop: int | None,
                 steps: int, start: int, done: int, total: int, probe: Batch, device: torch.device,
                 curve: dict, bar, t0: float, c0: float, running: dict, after_step=None) -> None:
    """Steps ``start`` .. ``steps - 1`` of one stage, on one target (hop_``hop``, or Dyck-1 when
    None); appends to ``curve`` at global step ``done + step``.  ``running`` holds the running
    accuracy and loss (carried across a resume); ``after_step(n)`` is called after the stage's
    n-th step (the checkpoints)."""
    every = max(1, total // max(1, cfg.curve_points))
    relabel = hop is not None and hop != cfg.k
    single = cfg.task == "dyck1"
    # bf16 autocast halves a step on CPUs with AVX512-BF16 or AMX; the weights, the optimiser and
    # every evaluation stay in fp32, so test accuracies are those of the fp32 model that is saved
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.precision == "bf16")
    model.train()
    for step in range(start, steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, cfg)
        tok_np, tgt_np = stream.next()
        if relabel:
            tgt_np = khop_targets(tok_np, hop, model.cfg.vocab)
        tok = torch.from_numpy(tok_np).to(device, non_blocking=True)
        tgt = torch.from_numpy(tgt_np).to(device, non_blocking=True)
        with autocast:
            if single:    # Dyck-1: one label per string, the last layer only at the query position
                rows = (tgt != IGNORE).int().argmax(dim=1)
                logits = model(tok, rows)
                tgt = tgt[torch.arange(tgt.shape[0], device=device), rows]
                loss = F.cross_entropy(logits, tgt)
            elif model.aux_unembed:   # one stream, read by the hop_k head and one head per hop_j
                h = model.hidden(tok)
                logits = model.unembed(h)
                loss = F.cross_entropy(logits.reshape(-1, classes), tgt.reshape(-1),
                                       ignore_index=IGNORE)
                for j, head in enumerate(model.aux_unembed, start=1):
                    tj = torch.from_numpy(khop_targets(tok_np, j, model.cfg.vocab)).to(device)
                    loss = loss + F.cross_entropy(head(h).reshape(-1, classes), tj.reshape(-1))
            else:
                logits = model(tok)
                loss = F.cross_entropy(logits.reshape(-1, classes), tgt.reshape(-1),
                                       ignore_index=IGNORE)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 10 == 0 or step == steps - 1:
            with torch.no_grad():
                scored = tgt != IGNORE
                acc = float((logits.argmax(-1)[scored] == tgt[scored]).float().mean())
            lv = float(loss.detach())
            _check_finite_loss(lv, step, cfg)
            running["acc"] = acc if running["acc"] is None else 0.9 * running["acc"] + 0.1 * acc
            running["loss"] = lv if running["loss"] is None else 0.9 * running["loss"] + 0.1 * lv
        g = done + step + 1
        if g % every == 0 or step == steps - 1:
            curve["step"].append(g)
            curve["train_accuracy"].append(round(running["acc"], 5))
            curve["loss"].append(round(running["loss"], 5))
            curve["test_accuracy"].append(round(evaluate(model, probe, device), 5))
            curve["seconds"].append(round(time.time() - t0, 2))
            curve["cpu_seconds"].append(round(time.process_time() - c0, 2))
            if "hop" in curve:
                curve["hop"].append(hop)
        if bar is not None:
            bar.update(1)
            if step % 10 == 0:
                stage = {"hop": hop} if "hop" in curve else {}
                bar.set_postfix(acc=f"{running['acc']:.3f}", loss=f"{running['loss']:.3f}", **stage)
        if after_step is not None:
            after_step(step + 1)
