"""Plot the embedding width m against depth L and heads H: formulas, measured, lower bound.

"Measured" means: the UT was built, a random target of the class was encoded, and UT(X, E) matched
T(X) to 1e-8; the plotted value is the width of that UT.  The lower bound is the exact rank of the
path-product span (d = 1).  All at d = 1, where the lower bound applies; every width is linear in d.

    .venv/bin/python bench/universal_plot.py
writes docs/img/universal_widths.png and bench/results/universal_widths.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from rasp_compiler.universal import Target, build_universal, encode, width_formula  # noqa: E402
from rasp_compiler.universal.lower_bound import path_span_rank  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LAYERS = (1, 2, 3, 4, 5)
HEADS = (1, 2, 3)
SERIES = [  # (label, construction, residual, values, heads allowed)
    ("sparse / looped", "sparse", False, True, (1,)),
    ("multihead (no values)", "multihead", True, False, HEADS),
    ("paths", "paths", False, True, HEADS),
    ("paths, residual", "paths", True, True, HEADS),
    ("random, k = d", "random", False, True, HEADS),
]


def measured_width(construction: str, L: int, H: int, residual: bool, values: bool) -> int | None:
    ut = build_universal(construction, L, H, 1, residual=residual, values=values, seed=0)
    target = Target.random(L, H, 1, seed=L * 10 + H, residual=residual, values=values)
    E, U = encode(ut, target)
    X = torch.randn(2, 9, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    err = float((ut(X, E, U)[0] - target(X)[0]).abs().max())
    return ut.config.m if err <= 1e-8 else None


def main() -> None:
    torch.set_num_threads(1)
    data = {"dim": 1, "layers": list(LAYERS), "series": [], "lower_bound": {}, "lower_bound_residual": {}}
    for H in HEADS:
        data["lower_bound"][H] = [path_span_rank(H, L) for L in LAYERS]
        data["lower_bound_residual"][H] = [path_span_rank(H, L, residual=True) for L in LAYERS]
    for label, c, residual, values, allowed in SERIES:
        for H in allowed:
            data["series"].append({
                "label": label, "construction": c, "heads": H, "residual": residual,
                "formula": [width_formula(c, L, H, 1, residual, values) for L in LAYERS],
                "measured": [measured_width(c, L, H, residual, values) for L in LAYERS]})
    fig, axes = plt.subplots(1, len(HEADS), figsize=(13, 4.2), sharey=True)
    colors = dict(zip([s[0] for s in SERIES], ["C0", "C1", "C2", "C3", "C4"], strict=True))
    for ax, H in zip(axes, HEADS, strict=True):
        for s in data["series"]:
            if s["heads"] != H:
                continue
            wide = s["construction"] == "sparse"  # same formula as paths at H = 1: draw it underneath
            ax.plot(LAYERS, s["formula"], "-", color=colors[s["label"]], lw=5 if wide else 1.5,
                    alpha=0.45 if wide else 1.0, label=f"{s['label']} (formula)")
            ax.plot(LAYERS, [m if m is not None else float("nan") for m in s["measured"]], "o",
                    color=colors[s["label"]], mfc="none", ms=8)
        ax.plot(LAYERS, data["lower_bound"][H], "k--", label="lower bound with values: rank = H^L")
        ax.plot(LAYERS, data["lower_bound_residual"][H], "k:",
                label="lower bound with values + residual: (H+1)^L")
        ax.set_yscale("log")
        ax.set_xticks(LAYERS)
        ax.set_xlabel("layers L")
        ax.set_title(f"H = {H} head{'s' if H > 1 else ''}, d = 1")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("embedding width m")
    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    handles.append(plt.Line2D([], [], marker="o", mfc="none", color="gray", ls=""))
    labels.append("measured (built, encoded, checked)")
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    img = ROOT / "docs" / "img" / "universal_widths.png"
    img.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(img, dpi=110)
    out = ROOT / "bench" / "results" / "universal_widths.json"
    out.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {img} and {out}")
    for s in data["series"]:
        ok = all(m == f for m, f in zip(s["measured"], s["formula"], strict=True))
        print(f"  {s['label']:<22} H={s['heads']}  formula {s['formula']}  measured==formula: {ok}")


if __name__ == "__main__":
    main()
