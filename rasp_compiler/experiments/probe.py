"""What a trained run's frozen heads do: where each head attends, and where the model errs.

For every layer and head, the share of query positions whose strongest attention weight lands on a
named role.  Every task has ``self`` (i), ``previous`` (i - 1) and ``first`` (position 0); k-hop adds
the hop pointers of ``data.khop_pointers``: ``hop j`` is sigma_j(i), the position whose token is
hop_j(x)[i], and ``hop j - 1`` the occurrence just before it (sigma_j(i) - 1, the position an
induction head matches on).  The textbook circuit for k hops in k + 1 layers is a previous-token
head, then one induction step per layer, so a run that has learnt it shows a ``previous`` head and
``hop j`` heads; a run stuck on a plateau does not.

Also, for k-hop, the accuracy against the pointer distance i - sigma_k(i): long pointers are where
a partly trained run fails.  Roles and shares are measured on fresh test-split inputs, never assumed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch

from rasp_compiler.atomic_dir import write_file
from rasp_compiler.errors import UserError, file_in_the_way
from rasp_compiler.experiments.data import IGNORE, dyck_batch, khop_batch, khop_pointers
from rasp_compiler.experiments.runfiles import load_checkpoint
from rasp_compiler.memory import available_memory

DISTANCE_BINS = ((1, 4), (4, 8), (8, 16), (16, 64))
SKIP = 8     # the first positions: every role coincides there, so they are left out of the shares


def _roles(tokens: np.ndarray, k: int | None, vocab: int) -> dict[str, np.ndarray]:
    """Role name -> the position (B, T) it names at every query position (-1: undefined)."""
    b, t = tokens.shape
    i = np.broadcast_to(np.arange(t), (b, t))
    roles = {"self": i.copy(), "previous": i - 1, "first": np.zeros((b, t), dtype=np.int64)}
    if k:
        ptr = khop_pointers(tokens, k, vocab)
        for j in range(1, k + 1):
            roles[f"hop {j}"] = ptr[j]
            roles[f"hop {j} - 1"] = np.where(ptr[j] >= 0, ptr[j] - 1, -1)
    return roles


def _check_memory(cfg, samples: int) -> None:
    """Every attention map of every sample is held at once (float32, then copied once by the role
    counts): refuse a --samples whose maps alone would not fit in this machine's memory."""
    from rasp_compiler.errors import UserError

    need = 2 * 4 * samples * cfg.layers * cfg.heads * cfg.seq_len ** 2
    total = available_memory()
    if total is None:
        return
    if need > total:
        fits = max(1, samples * total // need)
        raise UserError(f"--samples {samples:,} needs about {need / 2**30:,.0f} GiB for the attention "
                        f"maps, more than the {total / 2**30:.0f} GiB free now",
                        f"use --samples {fits:,} or fewer")


def probe(model: torch.nn.Module, meta: dict, samples: int = 256, seed: int = 7) -> dict:
    """Attention roles per layer and head, and (k-hop) accuracy by pointer distance."""
    run = meta["run"]
    task, k = run["task"], run.get("k")
    _check_memory(model.cfg, samples)
    rng = np.random.default_rng([seed, 3])
    if task == "khop":
        b = khop_batch(rng, samples, k, "test", length=run.get("khop_len", 64),
                       vocab=run.get("khop_vocab", 4))
    else:
        b = dyck_batch(rng, samples, "test")
    tokens = b.tokens
    model.eval()
    with torch.no_grad():
        x = torch.from_numpy(tokens)
        maps = [a.numpy() for a in model.attention_maps(x)]
        logits = model(x).numpy()
    t = tokens.shape[1]
    if task == "dyck1":          # padded after the query token: look up to it only
        lengths = (b.targets != IGNORE).argmax(axis=1) + 1
    else:
        lengths = np.full(len(tokens), t)
    valid = np.arange(t)[None] < lengths[:, None]
    valid[:, :SKIP] = False
    roles = _roles(tokens, k if task == "khop" else None, model.cfg.vocab)
    layers = []
    for li, a in enumerate(maps):
        heads = []
        for h in range(a.shape[1]):
            top = a[:, h].argmax(-1)
            shares = {}
            for name, pos in roles.items():
                defined = valid & (pos >= 0)
                shares[name] = round(float((top == pos)[defined].mean()) if defined.any() else 0.0, 4)
            heads.append({"layer": li, "head": h,          # from 0, as rasp compile and show count
                          "max_weight": round(float(a[:, h].max(-1)[valid].mean()), 4),
                          "roles": shares})
        layers.append(heads)
    out = {"run": _run_name(meta), "task": task, "k": k, "samples": samples, "seed": seed,
           "numbered_from": 0,
           "skipped_positions": SKIP, "heads": [h for layer in layers for h in layer]}
    pred = logits.argmax(-1)
    scored = b.targets != IGNORE
    out["accuracy"] = round(float((pred[scored] == b.targets[scored]).mean()), 4)
    if task == "khop":
        sigma = khop_pointers(tokens, k, model.cfg.vocab)[k]
        dist = np.arange(t)[None] - sigma
        ok = pred == b.targets
        rows = []
        for lo, hi in DISTANCE_BINS:
            m = scored & (sigma >= 0) & (dist >= lo) & (dist < hi)
            rows.append({"from": lo, "to": hi, "positions": int(m.sum()),
                         "accuracy": round(float(ok[m].mean()), 4) if m.any() else None})
        none = scored & (sigma < 0)
        rows.append({"from": None, "to": None, "positions": int(none.sum()),
                     "accuracy": round(float(ok[none].mean()), 4) if none.any() else None})
        out["by_distance"] = rows
    return out


def _run_name(meta: dict) -> str:
    from rasp_compiler.experiments.train import RunConfig
    fields = {k: v for k, v in meta["run"].items() if k in RunConfig.__dataclass_fields__}
    return RunConfig(**fields).name()


def probe_checkpoint(path: str | os.PathLike, samples: int = 256, seed: int = 7) -> dict:
    model, meta = load_checkpoint(path)
    return probe(model, meta, samples, seed)


def main_role(head: dict) -> tuple[str, float]:
    """The role a head's argmax lands on most often, and how often."""
    name = max(head["roles"], key=lambda r: head["roles"][r])
    return name, head["roles"][name]


def format_probe(p: dict) -> str:
    """A plain-text report: one line per head, then the accuracy by pointer distance."""
    names = list(p["heads"][0]["roles"]) if p["heads"] else []
    lines = [f"{p['run']}: test-split accuracy {p['accuracy']:.4f} on {p['samples']} inputs",
             f"share of query positions (from position {p['skipped_positions']} on) whose strongest "
             "attention lands on each role:",
             f"{'layer':>5} {'head':>4} {'max w':>6}  " + " ".join(f"{n:>9}" for n in names)
             + "  main role"]
    for h in p["heads"]:
        role, share = main_role(h)
        lines.append(f"{h['layer']:>5} {h['head']:>4} {h['max_weight']:>6.2f}  "
                     + " ".join(f"{h['roles'][n]:>9.2f}" for n in names) + f"  {role} ({share:.0%})")
    if "by_distance" in p:
        lines.append(f"accuracy by pointer distance i - sigma_{p['k']}(i):")
        for r in p["by_distance"]:
            label = "no occurrence" if r["from"] is None else f"{r['from']}-{r['to'] - 1}"
            acc = "—" if r["accuracy"] is None else f"{r['accuracy']:.4f}"
            lines.append(f"  {label:>13}: {acc} ({r['positions']} positions)")
    return "\n".join(lines)


PROBE_KEYS = {"run", "task", "samples", "heads"}  # what every probe's JSON holds


def check_probe_file(path: str | os.PathLike) -> None:
    """``save_probe`` replaces an existing file only if it is an earlier probe's JSON (without
    ``force``): --save onto a run's model.safetensors, or any other file, replaced it silently.
    (A link is replaced, never followed.)"""
    from rasp_compiler.bounded_json import load_json_file

    path = Path(path)
    if not path.is_file() or path.is_symlink():
        return
    try:
        doc = load_json_file(path) if path.stat().st_size <= 16 * 1024 * 1024 else None
    except (OSError, UserError):
        doc = None
    if not (isinstance(doc, dict) and PROBE_KEYS <= doc.keys()):
        raise UserError(f"--save {path} exists and is not an earlier probe's JSON; it is not replaced",
                        "give another file name, or --force (force=True from Python) to replace it")


def save_probe(p: dict, path: str | os.PathLike, force: bool = False) -> None:
    path = Path(path)
    if not force:
        check_probe_file(path)
    blocker = file_in_the_way(path.parent)  # mkdir would only say "File exists" or "Not a directory"
    if blocker is not None:
        raise UserError(f"{path}: cannot write the probe: {blocker} is a file, not a directory",
                        "write it inside a directory")
    text = json.dumps(p, indent=1) + "\n"
    # atomic, a directory named with a hint, a link replaced rather than written through
    write_file(path, lambda tmp: Path(tmp).write_text(text), example_name="probe.json")
