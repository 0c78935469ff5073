"""Issue 50's small-model bar: the compiled module's forward against a plain torch module of the
same matrix shapes.

For every shipped program (``bench/shipped.py``, five-token vocabulary) at max length 10, 20 and
40: a batch of 256 inputs of length N through ``RaspModel.module`` (the runtime's chosen paths)
and through ``PlainTransformer``, a nanoGPT-style module built from the same tensors (token and
position embeddings, per layer q/k/v as one product each, scores / sqrt(d_head), padding masked,
softmax, W_O, then relu MLP, all dense; a float64 MLP in a float32 model runs wide as the runtime
does), on one CPU thread.  Both run interleaved in one process, CPU seconds
(``time.process_time``) of each forward, median of ``--repeats``; the ratio is ours / plain (bar:
<= 1.2).  The plain module's logits are checked against ours (the same network, within 1e-5 of
the logit scale) so that the comparison is of one computation.

    .venv/bin/python bench/forward_overhead.py                       # every program, 10 20 40
    .venv/bin/python bench/forward_overhead.py --programs sort --lengths 10

Prints a table and writes bench/results/forward_overhead.json.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from shipped import BY_NAME, PROGRAMS  # noqa: E402

RESULTS = HERE / "results" / "forward_overhead.json"
BAR = 1.2


def plain_transformer(config: dict, tensors: dict):
    """A plain torch module with the compiled model's matrices, run dense (no runtime tricks)."""
    import torch

    class PlainTransformer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            t = tensors
            self.tok, self.pos = t["embed.token"], t["embed.pos"]
            self.layers = []
            for li, lc in enumerate(config["layers"]):
                attn = mlp = None
                if lc["n_heads"]:
                    h, d, e = t[f"layers.{li}.attn.W_Q"].shape
                    qkv = [t[f"layers.{li}.attn.{n}"].permute(1, 0, 2).reshape(d, h * e).contiguous()
                           for n in ("W_Q", "W_K", "W_V")]
                    attn = (*qkv, t[f"layers.{li}.attn.W_O"].reshape(h * e, d).contiguous(), h, e)
                if lc["d_mlp"]:
                    if f"layers.{li}.mlp.W_gate" in t:
                        raise ValueError("gated MLPs (numerical inputs) are not in this comparison")
                    mlp = tuple(t[f"layers.{li}.mlp.{n}"] for n in ("W_in", "b_in", "W_out", "b_out"))
                self.layers.append((attn, mlp))
            self.w_u, self.b_u = t["unembed.W_U"], t["unembed.b_U"]

        def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            b, n = ids.shape
            x = self.tok[ids] + self.pos[:n]
            pad = (torch.arange(n) > lengths.unsqueeze(1))[:, None, None, :]
            for attn, mlp in self.layers:
                if attn is not None:
                    wq, wk, wv, wo, h, e = attn
                    q, k, v = ((x @ w).view(b, n, h, e).transpose(1, 2) for w in (wq, wk, wv))
                    att = (q @ k.transpose(-1, -2)) / math.sqrt(e)
                    att = att.masked_fill(pad, torch.finfo(x.dtype).min).softmax(dim=-1)
                    x = x + (att @ v).transpose(1, 2).reshape(b, n, h * e) @ wo
                if mlp is not None:
                    w_in, b_in, w_out, b_out = mlp
                    xw = x.to(w_in.dtype)
                    x = (xw + (torch.relu(xw @ w_in + b_in) @ w_out + b_out)).to(x.dtype)
            return x @ self.w_u + self.b_u

    return PlainTransformer()


def bench_cell(name: str, n: int, batch: int, repeats: int) -> dict:
    import torch

    from rasp_compiler.compiler import compile_program
    from rasp_compiler.lang import load_program

    s = BY_NAME[name]
    vocab = list(s.vocab5)
    model = compile_program(load_program(str(s.file)), vocab, n)
    plain = plain_transformer(model.config, model.tensors)
    rng = random.Random(n)
    ids, lengths, values = model.encode_inputs([[rng.choice(vocab) for _ in range(n)] for _ in range(batch)])
    times: dict[str, list[float]] = {"ours": [], "plain": []}
    runs = {"ours": lambda: model.module(ids, lengths, values=values), "plain": lambda: plain(ids, lengths)}
    with torch.inference_mode():
        ours, theirs = runs["ours"](), runs["plain"]()  # warm-up, and the same network?
        scale = float(model.config["output"].get("logit_scale", 1.0))
        differs = float((ours - theirs).abs().max()) / scale
        for _ in range(repeats):
            for key, run in runs.items():
                c0 = time.process_time()
                run()
                times[key].append(time.process_time() - c0)
    ours_s, plain_s = statistics.median(times["ours"]), statistics.median(times["plain"])
    return {"program": name, "max_len": n, "batch": batch, "params": model.params,
            "ours_s": ours_s, "plain_s": plain_s, "ratio": ours_s / plain_s,
            "max_logit_difference_over_scale": differs, "same_network": differs < 1e-5,
            "paths": sorted({e["path"] for e in model.module.explain()})}


def main() -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", nargs="*", default=None)
    ap.add_argument("--lengths", nargs="*", type=int, default=[10, 20, 40])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    torch.set_num_threads(1)
    names = args.programs or [p.name for p in PROGRAMS]
    rows = []
    print(f"{'program':<22}{'N':>4}{'params':>11}{'ours ms':>10}{'plain ms':>10}{'ratio':>7}  paths")
    for name in names:
        for n in args.lengths:
            r = bench_cell(name, n, args.batch, args.repeats)
            rows.append(r)
            flag = "" if r["ratio"] <= BAR else "  OVER THE BAR"
            flag += "" if r["same_network"] else "  LOGITS DIFFER"
            print(f"{name:<22}{n:>4}{r['params']:>11,}{1e3 * r['ours_s']:>10.2f}{1e3 * r['plain_s']:>10.2f}"
                  f"{r['ratio']:>7.2f}  {'/'.join(r['paths'])}{flag}", flush=True)
    worst = max(rows, key=lambda r: r["ratio"])
    over = [r for r in rows if r["ratio"] > BAR]
    print(f"\nworst: {worst['program']} at {worst['max_len']}, {worst['ratio']:.2f}x; "
          f"{len(over)} of {len(rows)} cells over {BAR}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join(["bench/forward_overhead.py", *sys.argv[1:]])
    args.out.write_text(json.dumps({"command": command, "batch": args.batch, "repeats": args.repeats,
                                    "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
