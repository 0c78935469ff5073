"""Draw U's layer plan (docs/figures/simulator_plan.png) from a real compiled U's config.

    .venv/bin/python docs/figures/simulator_plan.py [--n 3 --d 3 --heads 1]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

from rasp_compiler.simulator import build_simulator  # noqa: E402


def _box(ax, x, y, w, h, text, color):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02", fc=color, ec="black", lw=0.8))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=7.5, wrap=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--d", type=int, default=3)
    ap.add_argument("--heads", type=int, default=1)
    args = ap.parse_args()
    sim = build_simulator(args.n, args.d, args.heads)
    plan = sim.model.config["plan"]
    fig, ax = plt.subplots(figsize=(13, 5))
    ax.set_xlim(0, 13)
    ax.set_ylim(-0.3, 4.6)
    ax.axis("off")
    _box(ax, 0.1, 1.6, 1.5, 1.2, "embedding\nvalue -> 1 dim\npositions -> folded\nindex maps", "#eeeeee")
    x = 1.9
    for lp in plan:
        heads = lp["heads"]
        col_w = 3.6
        ax.text(x + col_w / 2, 4.4, f"layer {lp['layer']}", ha="center", fontsize=10, weight="bold")
        if heads:
            lines = []
            for h in heads[:8]:
                nodes = h.get("nodes") or [h["node"]]
                what = nodes[0] if len(nodes) == 1 else \
                    f"{nodes[0]}..{nodes[-1]} (one key, {len(nodes)} values)"
                lines.append(f"{h['kind'].replace('_', ' ')}: {what}")
            if len(heads) > 8:
                lines.append(f"... {len(heads)} heads in all")
            _box(ax, x, 2.3, col_w - 0.3, 1.9, f"attention: {len(heads)} head(s)\n" + "\n".join(lines),
                 "#cfe2ff" if heads[0]["kind"] == "aggregate" else "#ffd8a8")
        if lp["mlp"]:
            ops = lp["mlp"]["ops"]
            names = ", ".join(o["writes"] for o in ops)
            _box(ax, x, 0.2, col_w - 0.3, 1.7,
                 f"gated MLP ({lp['mlp']['hidden']} units)\nexact products:\n{names}",
                 "#d3f9d8")
        x += col_w
    ax.set_title(f"U for n={args.n}, d={args.d}, H={args.heads}: {len(plan)} layers, heads per layer "
                 f"{[len(lp['heads']) for lp in plan]}, residual width {sim.model.config['d_model']}",
                 fontsize=10)
    out = Path(__file__).with_suffix(".png")
    fig.savefig(out, dpi=130, bbox_inches="tight")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
