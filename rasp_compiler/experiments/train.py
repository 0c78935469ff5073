"""The training loop: AdamW, linear warm-up + cosine decay, gradient clipping at 1.0.

Only parameters with ``requires_grad`` reach the optimiser (for frozen backbones: the token and
position tables and the unembedding).  Shows a tqdm bar with the running accuracy, evaluates on the
disjoint test set, and saves the checkpoint (safetensors + JSON) and the training curve.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from rasp_compiler.errors import UserError
from rasp_compiler.experiments.data import IGNORE, Batch, Stream, majority_baseline, task_spec, test_set
from rasp_compiler.experiments.models import (
    EmbeddingProgrammedTransformer,
    ModelConfig,
    sparse_blocks,
    sparse_construction,
)
from rasp_compiler.experiments.names import ARCHES, BACKBONES, SPARSE_CONSTRUCTIONS

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
    extra: dict = field(default_factory=dict)

    def name(self) -> str:
        task = self.task if self.task == "dyck1" else f"khop{self.k}"
        backbone = self.backbone
        if backbone == "sparse" and self.construction != "auto":
            backbone = f"sparse-{self.construction}"
        return (f"{task}_{backbone}_{self.arch}_w{self.width}_L{self.layers}_H{self.heads}"
                f"_s{self.steps}_b{self.batch}_lr{self.lr:g}_seed{self.seed}")


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
                            f"needs at least {blocks} (one column per block)")
    if not cfg.lr > 0:
        raise UserError("--lr must be positive")
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA device is available", "use --device cpu")
    if not (cfg.device == "cpu" or cfg.device.startswith("cuda")):
        raise UserError(f"unknown device {cfg.device!r}", "use cpu or cuda")


def lr_at(step: int, cfg: RunConfig) -> float:
    warm = max(1, int(cfg.warmup * cfg.steps))
    if step < warm:
        return cfg.lr * (step + 1) / warm
    p = (step - warm) / max(1, cfg.steps - warm)
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
          backbone_weights: list[dict] | None = None) -> tuple[dict, dict]:
    """Train one configuration. Returns (result, curve); writes the checkpoint to ``out`` if given."""
    validate(cfg)
    t0, c0 = time.time(), time.process_time()
    torch.set_num_threads(max(1, cfg.threads))    # on cuda too: parallel runs share the host's cores
    device = torch.device(cfg.device)
    spec = task_spec(cfg.task, cfg.k, cfg.khop_len, cfg.khop_vocab)
    mcfg = ModelConfig(spec.vocab, spec.classes, spec.seq_len, cfg.width, cfg.layers, cfg.heads,
                       cfg.arch, cfg.backbone, cfg.seed, cfg.emb_std, cfg.construction)
    model = EmbeddingProgrammedTransformer(mcfg, backbone_weights).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    stream = Stream(spec, cfg.batch, cfg.seed, bucket=cfg.bucket, khop_len=cfg.khop_len)
    test = test_set(spec, cfg.test_size or default_test_size(cfg.task), khop_len=cfg.khop_len)
    n_probe = 1024 if cfg.task == "dyck1" else 128    # curve points: 1,024 / 8,192 labels
    probe = Batch(test.tokens[:n_probe], test.targets[:n_probe])
    classes = spec.classes
    every = max(1, cfg.steps // max(1, cfg.curve_points))
    curve = {"step": [], "train_accuracy": [], "loss": [], "test_accuracy": [], "seconds": [],
             "cpu_seconds": []}
    run_acc, run_loss = None, None
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=cfg.steps, desc=cfg.name(), unit="step", dynamic_ncols=True, leave=False)
    single = cfg.task == "dyck1"
    model.train()
    for step in range(cfg.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        tok_np, tgt_np = stream.next()
        tok = torch.from_numpy(tok_np).to(device, non_blocking=True)
        tgt = torch.from_numpy(tgt_np).to(device, non_blocking=True)
        if single:    # Dyck-1: one label per string, the last layer only at the query position
            rows = (tgt != IGNORE).int().argmax(dim=1)
            logits = model(tok, rows)
            tgt = tgt[torch.arange(tgt.shape[0], device=device), rows]
            loss = F.cross_entropy(logits, tgt)
        else:
            logits = model(tok)
            loss = F.cross_entropy(logits.reshape(-1, classes), tgt.reshape(-1), ignore_index=IGNORE)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 10 == 0 or step == cfg.steps - 1:
            with torch.no_grad():
                scored = tgt != IGNORE
                acc = float((logits.argmax(-1)[scored] == tgt[scored]).float().mean())
            lv = float(loss.detach())
            run_acc = acc if run_acc is None else 0.9 * run_acc + 0.1 * acc
            run_loss = lv if run_loss is None else 0.9 * run_loss + 0.1 * lv
        if (step + 1) % every == 0 or step == cfg.steps - 1:
            curve["step"].append(step + 1)
            curve["train_accuracy"].append(round(run_acc, 5))
            curve["loss"].append(round(run_loss, 5))
            curve["test_accuracy"].append(round(evaluate(model, probe, device), 5))
            curve["seconds"].append(round(time.time() - t0, 2))
            curve["cpu_seconds"].append(round(time.process_time() - c0, 2))
        if bar is not None:
            bar.update(1)
            if step % 10 == 0:
                bar.set_postfix(acc=f"{run_acc:.3f}", loss=f"{run_loss:.3f}")
    if bar is not None:
        bar.close()
    test_acc = evaluate(model, test, device)
    trainable, frozen = model.param_counts()
    result = {
        "task": cfg.task, "k": cfg.k if cfg.task == "khop" else None, "backbone": cfg.backbone,
        "arch": cfg.arch, "seed": cfg.seed, "width": cfg.width, "steps": cfg.steps,
        "test_accuracy": round(test_acc, 6), "majority_baseline": round(majority_baseline(test), 6),
        "trainable_params": trainable, "frozen_params": frozen,
        "seconds": round(time.time() - t0, 2),
    }
    curve["total_seconds"] = result["seconds"]
    curve["device"] = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    curve["total_cpu_seconds"] = round(time.process_time() - c0, 2)   # this process, all threads
    if out is not None:
        save_checkpoint(model, cfg, result, curve, out)
    return result, curve


def save_checkpoint(model: torch.nn.Module, cfg: RunConfig, result: dict, curve: dict,
                    out: str | os.PathLike) -> None:
    from safetensors.torch import save_file
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_file(tensors, str(out / "model.safetensors"))
    frozen = sorted(n for n, p in model.named_parameters() if not p.requires_grad)
    meta = {"run": asdict(cfg), "model": model.cfg.to_json(), "frozen": frozen}
    (out / "config.json").write_text(json.dumps(meta, indent=1) + "\n")
    (out / "curve.json").write_text(json.dumps(curve) + "\n")
    (out / "result.json").write_text(json.dumps(result, indent=1) + "\n")


def load_checkpoint(path: str | os.PathLike) -> tuple[EmbeddingProgrammedTransformer, dict]:
    """Rebuild a saved model (no pickle): the config from JSON, the weights from safetensors."""
    from safetensors.torch import load_file
    path = Path(path)
    try:
        meta = json.loads((path / "config.json").read_text())
        tensors = load_file(str(path / "model.safetensors"))
    except (OSError, ValueError) as err:
        from rasp_compiler.errors import ArtifactError
        raise ArtifactError(f"cannot read checkpoint {path}: {err}") from None
    mcfg = ModelConfig(**meta["model"])
    model = EmbeddingProgrammedTransformer(mcfg)
    model.load_state_dict(tensors)
    return model, meta
