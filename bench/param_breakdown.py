"""Where a compiled model's parameters go: embedding, each layer's heads (per head, with the s-ops
it writes) and MLP, and the unembedding, with the residual width that multiplies them all.

    .venv/bin/python bench/param_breakdown.py programs/matmul.rasp --input-range -9 9 --fixed-length 14
    .venv/bin/python bench/param_breakdown.py --matmul-k 2 3

``--matmul-k K...`` breaks down the 3 x k times k x 4 listing of ``tests/data/published_style``
and ``programs/matmul.rasp`` (r = 3, c = 4) at each k, as ``bench/published_listings.py`` compiles
them (float32, inputs in -9..9, length 7k).  Prints a table per model; ``--json`` writes them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def breakdown(config: dict, tensors: dict) -> dict[str, Any]:
    """Parameters by part: ``embed``, ``unembed``, and per layer its heads (split evenly over the
    heads, which share one d_head) and its MLP.  The parts add up to the model's parameters."""
    size = {name: int(t.size) for name, t in tensors.items()}
    out: dict[str, Any] = {"d_model": config["d_model"], "n_layers": config["n_layers"],
                           "embed": sum(v for k, v in size.items() if k.startswith("embed.")),
                           "unembed": sum(v for k, v in size.items() if k.startswith("unembed.")),
                           "layers": []}
    for li, (lc, lp) in enumerate(zip(config["layers"], config["plan"], strict=False)):
        attn = sum(v for k, v in size.items() if k.startswith(f"layers.{li}.attn."))
        mlp = sum(v for k, v in size.items() if k.startswith(f"layers.{li}.mlp."))
        heads = [{"writes": h["writes"], "node": h["node"], "blocks": len(h["blocks"]),
                  "params": attn // max(1, lc["n_heads"])} for h in lp["heads"]]
        out["layers"].append({"layer": li, "n_heads": lc["n_heads"], "d_head": lc["d_head"],
                              "attn": attn, "d_mlp": lc["d_mlp"], "mlp": mlp, "heads": heads,
                              "mlp_ops": [{"writes": o["writes"], "units": o["units"][1] - o["units"][0]}
                                          for o in (lp["mlp"] or {}).get("ops", [])]})
    out["total"] = out["embed"] + out["unembed"] + sum(x["attn"] + x["mlp"] for x in out["layers"])
    out["residual"] = [{"feature": r["feature"], "size": r["size"]} for r in config["residual"]]
    return out


def show(name: str, b: dict[str, Any]) -> None:
    print(f"\n## {name}: {b['total']:,} parameters, d_model {b['d_model']}, {b['n_layers']} layers")
    print(f"embed {b['embed']:,}   unembed {b['unembed']:,}")
    for lay in b["layers"]:
        print(f"layer {lay['layer']}: {lay['n_heads']} heads x d_head {lay['d_head']} = {lay['attn']:,}; "
              f"MLP {lay['d_mlp']} units = {lay['mlp']:,}")
        for h in lay["heads"]:
            print(f"    head -> {h['writes'][:70]} ({h['blocks']} score blocks)")
        for o in lay["mlp_ops"]:
            print(f"    mlp  -> {o['writes'][:70]} ({o['units']} units)")
    kinds: dict[str, int] = {}
    for r in b["residual"]:
        key = r["feature"].split(".")[0] if "." in r["feature"] else "(s-op)"
        kinds[key] = kinds.get(key, 0) + r["size"]
    top = sorted(kinds.items(), key=lambda kv: -kv[1])[:12]
    print("residual columns by owner: " + ", ".join(f"{k} {v}" for k, v in top))


def main() -> None:
    from rasp_compiler.compiler import compile_weights
    from rasp_compiler.lang import program_from_source

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("program", nargs="?", type=Path)
    ap.add_argument("--input-range", nargs=2, type=float, default=(-9.0, 9.0))
    ap.add_argument("--fixed-length", type=int)
    ap.add_argument("--matmul-k", nargs="*", type=int, default=[])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    todo: list[tuple[str, str, str, int]] = []
    if args.program:
        todo.append((str(args.program), args.program.read_text(), args.program.name, args.fixed_length))
    if args.matmul_k:
        import published_listings as pl

        text = (ROOT / "tests/data/published_style/matmul_3xk_kx4.rasp").read_text()
        spec = pl.BY_NAME["matmul_3xk_kx4"]
        for k in args.matmul_k:
            n = 7 * k
            hand = pl.Listing(spec.name, spec.names, spec.tokens, n, spec.input_range, spec.reference,
                              program="matmul.rasp", shape={"r": 3, "k": k, "c": 4})
            todo.append((f"listing k={k}", pl.listing_source(text, "matmul_3xk_kx4", spec.tokens),
                         "matmul_3xk_kx4", n))
            todo.append((f"programs/matmul.rasp k={k}", pl.program_source(hand) or "", "matmul.rasp", n))
    results = {}
    for name, text, label, n in todo:
        w = compile_weights(program_from_source(text, label), None, n, fixed_length=n,
                            input_range=tuple(args.input_range))
        b = breakdown(w.config, w.tensors)
        assert b["total"] == w.params, (b["total"], w.params)
        show(name, b)
        results[name] = b
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
