"""The original RASP repository's own paper programs, compiled: depth against the original analysis.

``tests/data/paper_examples.rasp`` holds the listings of tech-srl/RASP's paper_examples.rasp
(histograms and sort with a hand-made BOS, reverse, Dyck-1 and Dyck-k), written for the original
REPL.  For each program and max length this prints layers, heads per layer, parameters, compile
time (CPU seconds) and agreement with the interpreter on random and edge inputs, beside the layer
count the original's analysis gives.  Writes bench/results/paper_programs.json.

    .venv/bin/python bench/paper_programs.py
    .venv/bin/python bench/paper_programs.py --programs dyck1_ptf --lengths 16 64
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rasp_compiler.compiler import compile_program  # noqa: E402
from rasp_compiler.compiler.checking import check_model, edge_inputs, random_inputs  # noqa: E402
from rasp_compiler.errors import UserError  # noqa: E402
from rasp_compiler.lang import program_from_source  # noqa: E402

SOURCE = ROOT / "tests" / "data" / "paper_examples.rasp"
RESULTS = ROOT / "bench" / "results" / "paper_programs.json"
# (output, vocabulary, layers in the original's analysis: the paper's Table 1 and the listing's
# own comment on dyck2).  The *_bos programs simulate a BOS token at position 0 by hand.
PROGRAMS = [
    ("reverse", "abc", 2),
    ("hist_nobos", "abc", 1),
    ("hist_bos", "abc", 1),
    ("sort_bos", "abc", 2),
    ("hist2_bos", "abc", 2),
    ("sort_by_most_freq", "abc", 3),
    ("dyck1_ptf", "()", 2),
    ("dyck2_ptf", "(){}", 4),
]
LENGTHS = [8, 16, 24, 40, 64]
SAMPLES = 200


def measure(name: str, vocab: str, max_len: int, source: str) -> dict:
    program = program_from_source(source, "paper_examples.rasp", output=name)
    c0 = time.process_time()
    try:
        model = compile_program(program, list(vocab), max_len)
    except UserError as err:  # refused with a clear error (recorded, not a disagreement)
        return {"program": name, "vocab": vocab, "max_len": max_len, "refused": err.message}
    compile_s = time.process_time() - c0
    inputs = random_inputs(list(vocab), max_len, SAMPLES, seed=0) + edge_inputs(list(vocab), max_len)
    res = check_model(model, program, inputs)
    return {"program": name, "vocab": vocab, "max_len": max_len, "layers": model.n_layers,
            "heads_per_layer": model.heads_per_layer, "params": model.params,
            "compile_s": round(compile_s, 3), "inputs_checked": res.inputs_checked,
            "inputs_agreeing": res.inputs_agreeing, "critical_path": model.config.get("critical_path")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", nargs="*", default=None, help="outputs of paper_examples.rasp")
    ap.add_argument("--lengths", nargs="*", type=int, default=LENGTHS)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    source = SOURCE.read_text(encoding="utf-8")
    chosen = [p for p in PROGRAMS if args.programs is None or p[0] in args.programs]
    rows = []
    print(f"{'program':18}{'N':>4}{'layers':>8}{'RASP':>6}  {'heads':18}{'params':>12}{'compile s':>11}"
          f"{'agree':>12}")
    for name, vocab, rasp_layers in chosen:
        for n in args.lengths:
            row = measure(name, vocab, n, source)
            row["rasp_layers"] = rasp_layers
            rows.append(row)
            if "refused" in row:
                print(f"{name:18}{n:>4}  refused: {row['refused'][:90]}", flush=True)
                continue
            print(f"{name:18}{n:>4}{row['layers']:>8}{rasp_layers:>6}  {str(row['heads_per_layer']):18}"
                  f"{row['params']:>12,}{row['compile_s']:>11.2f}"
                  f"{row['inputs_agreeing']:>6}/{row['inputs_checked']}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1) + "\n")
    bad = [r for r in rows if "refused" not in r and r["inputs_agreeing"] != r["inputs_checked"]]
    refused = sum("refused" in r for r in rows)
    print(f"\n{len(rows) - len(bad) - refused}/{len(rows)} cells agree on every input, {refused} refused "
          f"with a size error; wrote {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
