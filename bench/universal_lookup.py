"""Issue 46's bars for the lookup UT: every shipped categorical program through one fixed backbone
per size class, exactness, width and depth overhead, and the programs over real numbers.

    .venv/bin/python bench/universal_lookup.py            # about 3 minutes on one thread
    .venv/bin/python bench/universal_lookup.py --quick    # inputs up to length 3 only (smoke run)

1. The ladder (max length 8): each program of bench/shipped.py (its three-token vocabulary; Dyck-2's
   has four) goes to the smallest of the classes small, medium, large that holds it; each class's
   backbone is built once and runs all its programs: all inputs up to length 5 and 500 random
   ones of lengths 6..8.  Decoded outputs against the interpreter and the compiled model, logits
   against the compiled model (float64).
2. The width bar (max length 16): reverse, sort and most_frequent in the class fitted to them.
3. Programs over real numbers (tokens_float): compiled numerically (--input-range), and over a
   finite vocabulary of numbers.
Writes bench/results/universal_lookup.json and docs/img/universal_lookup_width.png, and prints the
tables that docs/universal.md shows.  Timings: one thread; the UT and the compiled model run the
same batch one after the other (``run_program``), so their ratio is measured alike.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from shipped import PROGRAMS  # noqa: E402

from rasp_compiler.errors import UserError  # noqa: E402
from rasp_compiler.universal.lookup.backbone import build_backbone  # noqa: E402
from rasp_compiler.universal.lookup.batch import compile_for_lookup  # noqa: E402
from rasp_compiler.universal.lookup.encoding import analyse, encode_program  # noqa: E402
from rasp_compiler.universal.lookup.run import run_program  # noqa: E402
from rasp_compiler.universal.lookup.size_class import LADDER, fitted, smallest_holding  # noqa: E402

REAL = ["matmul", "maxmin", "softmax", "transpose"]
WIDTH_BAR = [("reverse", "programs/reverse.rasp"), ("sort", "programs/sort.rasp"),
             ("most_frequent", "programs/most_frequent.rasp")]


def inputs_for_bar(vocab: list, exhaustive: int, longest: int, sampled: int, seed: int = 0) -> list:
    rng = random.Random(seed)
    import itertools
    out = [list(t) for n in range(1, exhaustive + 1) for t in itertools.product(vocab, repeat=n)]
    if longest > exhaustive:
        out += [[rng.choice(vocab) for _ in range(rng.randint(exhaustive + 1, longest))]
                for _ in range(sampled)]
    return out


def layer_bound(analysed) -> int:
    """max over layers of 2 * (sum of the heads' score ranks), plus the output width: the query and
    key columns one layer's heads need at once (the argument in docs/universal.md)."""
    parts = analysed.parts
    per_layer = [sum(2 * int(torch.linalg.matrix_rank(h.query @ h.key.T)) for h in layer)
                 for layer in parts.heads]
    return max(per_layer + [0]) + parts.unembed.shape[1]


def row(name: str, vocab: list, model, analysed, size, backbone, enc, res, encode_s: float) -> dict:
    d, layers = int(model.config["d_model"]), int(model.config["n_layers"])
    needs = analysed.needs
    return {"program": name, "vocab": [str(v) for v in vocab], "class": size.name or "fitted",
            "class_sizes": size.as_json(), "backbone_sha256": backbone.sha256,
            "backbone_params": backbone.params, "program_params": enc.params,
            "compiled_params": int(sum(t.numel() for t in model.tensors.values())),
            "compiled_width": d, "compiled_layers": layers, "fitted_width": needs.width,
            "fitted_ratio": needs.width / d, "class_width": size.width, "class_ratio": size.width / d,
            "depth": size.depth, "depth_ratio": size.depth / layers,
            "program_tokens": enc.program_tokens.shape[0], "layer_bound": layer_bound(analysed),
            "needs": needs.as_json(), "folded_ops": enc.meta["folded_ops"], "encode_seconds": encode_s,
            **res.as_json()}


def ladder(quick: bool) -> list[dict]:
    backbones = {c.name: build_backbone(c) for c in LADDER}
    rows = []
    for shipped in PROGRAMS:
        vocab = list(shipped.vocab3)
        program, model = compile_for_lookup(str(shipped.file), vocab, 8, None, False)
        start = time.perf_counter()
        analysed = analyse(model)
        size = smallest_holding(analysed.needs)
        backbone = backbones[size.name]
        enc = encode_program(model, size, backbone.sha256, analysed)
        encode_s = time.perf_counter() - start
        inputs = inputs_for_bar(vocab, 3 if quick else 5, 3 if quick else 8, 500)
        res = run_program(backbone, enc, model, inputs, program)
        rows.append(row(shipped.name, vocab, model, analysed, size, backbone, enc, res, encode_s))
        print(f"  {shipped.name}: class {size.name}, {res.inputs_agreeing}/{res.inputs_checked}", flush=True)
    return rows


def width_bar(quick: bool) -> list[dict]:
    rows = []
    for name, path in WIDTH_BAR:
        vocab = list("abc")
        program, model = compile_for_lookup(str(ROOT / path), vocab, 16, None, False)
        start = time.perf_counter()
        analysed = analyse(model)
        size = fitted(analysed.needs)
        backbone = build_backbone(size)
        enc = encode_program(model, size, backbone.sha256, analysed)
        encode_s = time.perf_counter() - start
        inputs = inputs_for_bar(vocab, 3 if quick else 5, 16, 100 if quick else 500)
        res = run_program(backbone, enc, model, inputs, program)
        rows.append(row(name, vocab, model, analysed, size, backbone, enc, res, encode_s))
    return rows


def real_programs() -> list[dict]:
    from rasp_compiler.compiler import compile_program
    from rasp_compiler.lang import load_program

    out = []
    for name in REAL:
        path = ROOT / f"programs/{name}.rasp"
        entry: dict = {"program": name}
        try:   # over a continuum: the numerical compiler (--input-range, a fixed length)
            model = compile_program(load_program(str(path)), ["<number>"], 4, dtype="float64",
                                    input_range=(-2.0, 2.0), fixed_length=4)
            analyse(model)
            entry["input_range"] = "runs"
        except UserError as err:
            entry["input_range"] = f"refused: {err.message}"
        vocab = [0.5, 1.0, 2.0]
        try:   # over a finite vocabulary of numbers: a categorical program
            program, model = compile_for_lookup(str(path), vocab, 8, None, False)
            analysed = analyse(model)
            size = fitted(analysed.needs)
            backbone = build_backbone(size)
            enc = encode_program(model, size, backbone.sha256, analysed)
            res = run_program(backbone, enc, model, inputs_for_bar(vocab, 4, 8, 200), program)
            entry["finite_vocab"] = row(name, vocab, model, analysed, size, backbone, enc, res, 0.0)
        except UserError as err:
            entry["finite_vocab"] = f"refused: {err.message}"
        out.append(entry)
    return out


def plot(ladder_rows: list[dict], bar_rows: list[dict], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7.5, 5.2))
    d = [r["compiled_width"] for r in ladder_rows]
    ax.scatter(d, [r["fitted_width"] for r in ladder_rows], color="C0", label="fitted class, max length 8",
               zorder=3)
    colors = {"small": "C1", "medium": "C2", "large": "C3"}
    for name, color in colors.items():
        sel = [r for r in ladder_rows if r["class"] == name]
        width = sel[0]["class_width"] if sel else "-"
        ax.scatter([r["compiled_width"] for r in sel], [r["class_width"] for r in sel], facecolors="none",
                   edgecolors=color, label=f"ladder class {name} (m = {width})")
    ax.scatter([r["compiled_width"] for r in bar_rows], [r["fitted_width"] for r in bar_rows], marker="^",
               color="C4", label="fitted class, max length 16 (the bar's programs)", zorder=3)
    ax.scatter([r["compiled_width"] for r in ladder_rows + bar_rows],
               [r["layer_bound"] for r in ladder_rows + bar_rows], marker="x", color="grey", s=18,
               label="one layer's query + key columns + outputs (2 sum of score ranks + o)")
    seen = set()
    for r in bar_rows + sorted(ladder_rows, key=lambda r: -r["fitted_ratio"])[:3]:
        where = (r["compiled_width"], r["fitted_width"])
        if where in seen:
            continue
        seen.add(where)
        ax.annotate(r["program"] + (" (16)" if r in bar_rows else " (8)"), where, fontsize=7,
                    xytext=(4, -9), textcoords="offset points")
    xs = [5, 120]
    for k, style in ((1, ":"), (2, "--"), (8, "-")):
        ax.plot(xs, [k * x for x in xs], style, color="grey", lw=1)
        ax.annotate(f"m = {k} d", (xs[1], k * xs[1]), fontsize=8, color="grey", ha="right", va="bottom")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("compiled model's residual width d")
    ax.set_ylabel("lookup UT's residual width m")
    ax.set_title("Lookup UT width against program size (every shipped categorical program)")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=130)


def print_table(title: str, rows: list[dict]) -> None:
    print(f"\n{title}")
    print(f"{'program':20} {'class':7} {'d':>4} {'L':>2} {'m fit':>6} {'x':>5} {'m cls':>6} {'x':>5} "
          f"{'bound':>5} {'depth':>5} {'rows':>5} {'inputs':>7} {'agree':>7} {'max err':>8} {'UT ms':>7} "
          f"{'comp ms':>7}")
    for r in rows:
        spi = r["seconds_per_input"]
        err = r["max_abs_logit_error"]
        print(f"{r['program']:20} {r['class']:7} {r['compiled_width']:4} {r['compiled_layers']:2} "
              f"{r['fitted_width']:6} {r['fitted_ratio']:5.2f} {r['class_width']:6} {r['class_ratio']:5.2f} "
              f"{r['layer_bound']:5} {r['depth_ratio']:5.1f} {r['program_tokens']:5} {r['inputs_checked']:7} "
              f"{r['inputs_agreeing']:7} "
              f"{'-' if err is None else f'{err:.1e}':>8} {1e3 * spi['ut']:7.3f} "
              f"{1e3 * spi['compiled']:7.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="inputs up to length 3 only")
    parser.add_argument("--out", default=str(ROOT / "bench/results/universal_lookup.json"))
    parser.add_argument("--figure", default=str(ROOT / "docs/img/universal_lookup_width.png"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    print("ladder, max length 8:")
    ladder_rows = ladder(args.quick)
    bar_rows = width_bar(args.quick)
    real = real_programs()
    classes = {}
    for r in ladder_rows:
        classes.setdefault(r["class"], {"sizes": r["class_sizes"], "backbone_sha256": set(), "programs": []})
        classes[r["class"]]["backbone_sha256"].add(r["backbone_sha256"])
        classes[r["class"]]["programs"].append(r["program"])
    for c in classes.values():
        c["backbone_sha256"] = sorted(c["backbone_sha256"])
    print_table("every shipped categorical program at max length 8, its ladder class (m cls) and its fitted "
                "class (m fit)", ladder_rows)
    print_table("the width bar: max length 16, fitted class", bar_rows)
    print("\nclasses:")
    for name, c in classes.items():
        sizes = c["sizes"]
        print(f"  {name}: width {build_backbone(LADDER[[x.name for x in LADDER].index(name)]).size.width}, "
              f"backbone sha256 {', '.join(h[:16] for h in c['backbone_sha256'])}, "
              f"{len(c['programs'])} programs "
              f"(L={sizes['layers']} H={sizes['heads']} T={sizes['tables']} k={sizes['head_width']} "
              f"o={sizes['out_width']} c={sizes['code_width']} rows={sizes['program_tokens']})")
    print("\nprograms over real numbers:")
    for e in real:
        fin = e["finite_vocab"]
        fin_text = fin if isinstance(fin, str) else (
            f"runs, {fin['inputs_agreeing']}/{fin['inputs_checked']} inputs agree, max logit error "
            f"{fin['max_abs_logit_error']}")
        print(f"  {e['program']}: --input-range: {e['input_range']}\n      vocab [0.5, 1, 2]: {fin_text}")
    exact = all(r["inputs_agreeing"] == r["inputs_checked"] and (r["max_abs_logit_error"] or 0) <= 1e-6
                for r in ladder_rows + bar_rows)
    total = {"programs": len(ladder_rows), "exact": exact, "classes": len(classes),
             "inputs_checked": sum(r["inputs_checked"] for r in ladder_rows),
             "seconds": time.perf_counter() - start, "quick": args.quick, "threads": 1}
    print(f"\ntotal: {total}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"ladder": ladder_rows, "width_bar": bar_rows, "real": real,
                                          "classes": classes, "total": total}, indent=1) + "\n")
    plot(ladder_rows, bar_rows, Path(args.figure))
    print(f"wrote {args.out} and {args.figure}")


if __name__ == "__main__":
    main()
