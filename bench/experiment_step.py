"""Training-step cost of the embedding experiments: fp32 against bf16 autocast (`--precision`).

Times the real training loop (`experiments.train.train`) on k-hop with the random backbone and
auxiliary hop heads, the configuration of the wide random 4-hop cells, at each width.  A step's
cost is the difference between a long and a short run divided by the extra steps, so set-up, the
test set and the final evaluation cancel out.  One CPU thread, as the grid runs.

    .venv/bin/python bench/experiment_step.py                     # widths 256 512, depth 5
    .venv/bin/python bench/experiment_step.py --widths 256 --layers 4 --k 3

Prints a table and writes bench/results/experiment_step.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

from rasp_compiler.experiments.train import RunConfig, train

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "experiment_step.json"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def seconds(cfg: RunConfig) -> float:
    t = time.process_time()
    train(cfg, progress=False)
    return time.process_time() - t


def step_cost(width: int, layers: int, k: int, precision: str, short: int, long: int) -> float:
    def cfg(steps: int) -> RunConfig:
        return RunConfig(task="khop", k=k, backbone="random", arch="attn-res-ln", width=width,
                         layers=layers, heads=4, steps=steps, batch=32, aux=True,
                         precision=precision, test_size=8, curve_points=1)
    return (seconds(cfg(long)) - seconds(cfg(short))) / (long - short)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--layers", type=int, default=5)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--short", type=int, default=10, help="steps of the short run (default 10)")
    ap.add_argument("--long", type=int, default=60, help="steps of the long run (default 60)")
    args = ap.parse_args()
    rows = []
    print(f"{'width':>6} {'fp32 s/step':>12} {'bf16 s/step':>12} {'speed-up':>9}")
    for w in args.widths:
        fp32 = step_cost(w, args.layers, args.k, "fp32", args.short, args.long)
        bf16 = step_cost(w, args.layers, args.k, "bf16", args.short, args.long)
        rows.append({"width": w, "layers": args.layers, "k": args.k, "fp32_seconds": round(fp32, 4),
                     "bf16_seconds": round(bf16, 4), "speedup": round(fp32 / bf16, 2)})
        print(f"{w:>6} {fp32:>12.3f} {bf16:>12.3f} {fp32 / bf16:>8.2f}x", flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": cpu_model(), "cpu_seconds": "one thread",
        "settings": {"task": "khop", "backbone": "random", "heads": 4, "batch": 32, "aux": True,
                     "short": args.short, "long": args.long},
        "rows": rows}, indent=1) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
