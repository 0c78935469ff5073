"""Issue 3's size-and-speed bar: compile every shipped classic and time it against the interpreter.

For every classic in ``bench/shipped.py`` at vocabulary size 5 and max length 5, 10, 20, 40, 64:
layers, heads per layer, residual width, parameters (and how many are non-zero), compile time
from the Python API (best of 3 to N=64, else 1), the compiled forward time for a batch of
1,024 inputs of length N (``model.run``, encoding and decoding included, in chunks of 256, torch on
one thread; and ``fwd``: the transformer module alone on pre-encoded token ids), and the
interpreter time for the same batch (timed on the first 128 inputs and scaled to 1,024).
The module runs twice, interleaved, median of 3 each: with every product dense (``paths="dense"``)
and on the paths the runtime chooses (``"auto"``: "sparse" in the tables; ``rasp eval --explain``),
so ``sparse x`` is dense time / sparse time in one process.  Each cell also records the plan
search's candidates with their CPU seconds (``plans_tried``; ``--markdown`` prints them).
Times are **CPU seconds of the process** (``time.process_time``): the bench machine is shared,
and wall time there measures the other jobs; wall times are in the JSON too.
Then: reverse at max length 80 and shuffle-Dyck-2 at 40 (tracr: 425 s and 420 s), the
``rasp compile`` process wall time including start-up, and a comparison with tracr's figures
(docs/references.md).

    nice -n 5 .venv/bin/python bench/compile_bench.py            # everything
    .venv/bin/python bench/compile_bench.py --programs reverse --lengths 5 10 --batch 64

Each program runs in its own process under a memory limit.  Prints tables and writes
bench/results/compile_bench.json.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from shipped import BY_NAME, PROGRAMS  # noqa: E402

RESULTS = HERE / "results" / "compile_bench.json"
LENGTHS = [5, 10, 20, 40, 64]
BATCH = 1024
CHUNK = 256
INTERP_SAMPLE = 128
MODULE_REPEATS = 3
MEMORY_LIMIT = 10 << 30
TIME_LIMIT = 1500

# tracr's figures (vocab 5), measured on this machine's kind: tracr-lessons.md and issue 3.
# name -> {N: (residual width, layers, dense params)}; None where not measured.
TRACR = {
    "tracr/reverse": {10: (71, 4, None), 20: (131, None, None), 40: (None, None, 3_600_000),
                      80: (491, None, 27_000_000)},
    "tracr/sort": {10: (85, None, None), 20: (155, None, None), 40: (None, None, 1_100_000)},
    "tracr/sort_freq": {10: (168, 5, None), 40: (1818, None, 90_000_000)},
    "tracr/shuffle_dyck2": {10: (70, 8, None), 40: (None, None, 32_500_000)},
}
TRACR_COMPILE = {("tracr/reverse", 80): 425.0, ("tracr/shuffle_dyck2", 40): 420.0,
                 ("tracr/shuffle_dyck1", 40): 148.0}


def _inputs(vocab: list, n: int, count: int, seed: int) -> list[list]:
    rng = random.Random(seed)
    return [[rng.choice(vocab) for _ in range(n)] for _ in range(count)]


def bench_program(name: str, lengths: list[int], batch: int, repeats: int | None = None) -> list[dict]:
    """All lengths of one program, in this process."""
    import torch

    from rasp_compiler.compiler import compile_program
    from rasp_compiler.compiler.checking import TOLERANCE, agree
    from rasp_compiler.interpreter import run
    from rasp_compiler.lang import load_program

    torch.set_num_threads(1)
    s = BY_NAME[name]
    vocab = list(s.vocab5)
    program = load_program(str(s.file))
    rows = []
    for n in lengths:
        row: dict = {"program": name, "max_len": n, "vocab_size": len(vocab)}
        try:
            times, walls = [], []
            for _ in range(repeats or (3 if n <= 64 else 1)):
                c0 = time.process_time()
                model = compile_program(program, vocab, n)
                times.append(time.process_time() - c0)
                walls.append(model.compile_seconds)
        except Exception as err:  # noqa: BLE001 - recorded, the bench goes on
            row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
            rows.append(row)
            continue
        row.update(layers=model.n_layers, heads_per_layer=model.heads_per_layer,
                   residual_width=model.residual_width, mlp_hidden=model.mlp_sizes, params=model.params,
                   nonzero_params=int(sum(int((t != 0).sum()) for t in model.tensors.values())),
                   compile_s=min(times), compile_wall_s=min(walls))
        xs = _inputs(vocab, n, batch, seed=n)
        model.run(xs[:8])  # warm-up
        t0, c0 = time.perf_counter(), time.process_time()
        outs = []
        with torch.inference_mode():
            for i in range(0, len(xs), CHUNK):
                outs += model.run(xs[i:i + CHUNK])
        row["forward_s"] = time.process_time() - c0
        row["forward_wall_s"] = time.perf_counter() - t0
        # the transformer alone: the whole batch of token ids in, logits out (no Python encoding /
        # decoding), on every product dense and on the paths the runtime chooses ("sparse"),
        # interleaved, median of MODULE_REPEATS each
        ids, lengths, values = model.encode_inputs(xs)
        times: dict[str, list[float]] = {"dense": [], "auto": []}
        with torch.inference_mode():
            for _ in range(MODULE_REPEATS):
                for paths, got in times.items():
                    model.module.paths = paths
                    model.module(ids[:2], lengths[:2], values=None if values is None else values[:2])
                    c0 = time.process_time()
                    model.module(ids, lengths, values=values)
                    got.append(time.process_time() - c0)
        model.module.paths = "auto"
        row["module_dense_s"] = statistics.median(times["dense"])
        row["module_s"] = statistics.median(times["auto"])
        row["sparse_speedup"] = row["module_dense_s"] / row["module_s"]
        row["paths"] = dict(collections.Counter(e["path"] for e in model.module.explain()))
        # the plan search: every candidate plan built, with its CPU seconds
        row["plans_tried"] = model.plans_tried
        sample = xs[:INTERP_SAMPLE]
        t0, c0 = time.perf_counter(), time.process_time()
        wants = [run(program, x) for x in sample]
        row["interp_s"] = (time.process_time() - c0) * len(xs) / len(sample)
        row["interp_wall_s"] = (time.perf_counter() - t0) * len(xs) / len(sample)
        row["interp_inputs_timed"] = len(sample)
        row["speedup"] = row["interp_s"] / row["forward_s"]
        row["module_speedup"] = row["interp_s"] / row["module_s"]
        row["module_dense_speedup"] = row["interp_s"] / row["module_dense_s"]
        numerical = model.config["output"]["encoding"] == "numerical"
        row["sample_agrees"] = all(agree(a, b, numerical, TOLERANCE[model.config["dtype"]])[0]
                                   for a, b in zip(outs[:len(wants)], wants, strict=True))
        rows.append(row)
    return rows


def isolated(name: str, lengths: list[int], batch: int, repeats: int = 0) -> list[dict]:
    cmd = [sys.executable, __file__, "--child", name, str(batch), str(repeats), *map(str, lengths)]

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIME_LIMIT, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return [{"program": name, "max_len": lengths[0], "error": f"timed out after {TIME_LIMIT} s"}]
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("[")]
    if r.returncode != 0 or not lines:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return [{"program": name, "max_len": lengths[0], "error": tail[:300]}]
    return json.loads(lines[-1])


def cli_wall(program: str, vocab: str, n: int, repeat: int = 3) -> float:
    """Wall time of a whole ``rasp compile`` process (interpreter start-up and imports included)."""
    out = Path("/tmp") / f"compile_bench_cli_{n}"
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "rasp_compiler.cli", "compile", program, "--vocab", vocab,
                            "--max-len", str(n), "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
        if r.returncode != 0:
            raise RuntimeError(r.stderr)
        best = min(best, time.perf_counter() - t0)
    return best


def print_table(rows: list[dict]) -> None:
    print(f"{'program':<22}{'N':>4}{'L':>3} {'heads':<13}{'width':>7}{'params':>13}{'nonzero':>11}"
          f"{'compile s':>10}{'run s/1024':>11}{'fwd s':>8}{'dense s':>8}{'sparse x':>9}{'interp s':>10}"
          f"{'speedup':>9}{'fwd x':>7}")
    for r in rows:
        if "error" in r:
            print(f"{r['program']:<22}{r['max_len']:>4}  ERROR {r['error'][:100]}")
            continue
        print(f"{r['program']:<22}{r['max_len']:>4}{r['layers']:>3} {str(r['heads_per_layer']):<13}"
              f"{r['residual_width']:>7}{r['params']:>13,}{r['nonzero_params']:>11,}{r['compile_s']:>10.3f}"
              f"{r['forward_s']:>11.3f}{r.get('module_s', float('nan')):>8.3f}"
              f"{r.get('module_dense_s', float('nan')):>8.3f}{r.get('sparse_speedup', float('nan')):>8.1f}x"
              f"{r['interp_s']:>10.2f}"
              f"{r['speedup']:>8.0f}x{r.get('module_speedup', float('nan')):>6.0f}x"
              + ("" if r["sample_agrees"] else "  DISAGREES"))


def markdown_table(rows: list[dict]) -> str:
    """The size-and-speed table of docs/compiler-results.md, from a results file's rows."""
    lines = ["| program | N | layers | heads | width | params | nonzero | compile s | run s / 1024 | "
             "module s (sparse) | module s (dense) | sparse × | interpreter s | run × | module × |",
             "|---" * 15 + "|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['program']} | {r['max_len']} | error: {r['error'][:80]} |" + " |" * 12)
            continue
        lines.append(f"| {r['program']} | {r['max_len']} | {r['layers']} | {r['heads_per_layer']} | "
                     f"{r['residual_width']} | {r['params']:,} | {r['nonzero_params']:,} | "
                     f"{r['compile_s']:.3f} | {r['forward_s']:.3f} | {r['module_s']:.3f} | "
                     f"{r.get('module_dense_s', float('nan')):.3f} | "
                     f"{r.get('sparse_speedup', float('nan')):.1f} | "
                     f"{r['interp_s']:.2f} | {r['speedup']:.0f} | {r['module_speedup']:.1f} |"
                     + ("" if r["sample_agrees"] else " DISAGREES"))
    return "\n".join(lines)


def plans_table(rows: list[dict]) -> str:
    """Each cell's candidate plans: strategy, CPU seconds, layers, parameters, outcome."""
    lines = ["| program | N | candidate plan | CPU s | layers | params | outcome |", "|---" * 7 + "|"]
    for r in rows:
        for t in r.get("plans_tried") or []:
            params = "" if t.get("params") is None else f"{t['params']:,}"
            lines.append(f"| {r['program']} | {r['max_len']} | {t['strategy']} | "
                         f"{t.get('cpu_seconds', 0):.3f} | {'' if t['layers'] is None else t['layers']} | "
                         f"{params} | {t['outcome']} |")
    return "\n".join(lines)


def comparison(rows: list[dict], extra: list[dict]) -> list[dict]:
    by = {(r["program"], r["max_len"]): r for r in rows + extra if "error" not in r}
    out = []
    for name, cells in TRACR.items():
        for n, (width, layers, params) in cells.items():
            r = by.get((name, n))
            if r is None:
                continue
            out.append({"program": name, "max_len": n, "tracr_width": width, "width": r["residual_width"],
                        "width_ratio": r["residual_width"] / width if width else None,
                        "tracr_layers": layers, "layers": r["layers"],
                        "tracr_params": params, "params": r["params"],
                        "params_ratio": r["params"] / params if params else None})
    for (name, n), secs in TRACR_COMPILE.items():
        r = by.get((name, n))
        if r is not None:
            out.append({"program": name, "max_len": n, "tracr_compile_s": secs, "compile_s": r["compile_s"],
                        "compile_speedup": secs / r["compile_s"]})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", nargs="*", default=None)
    ap.add_argument("--lengths", nargs="*", type=int, default=LENGTHS)
    ap.add_argument("--batch", type=int, default=BATCH)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--repeats", type=int, default=0,
                    help="compiles per cell, best kept (default 3 to N=64, 1 above)")
    ap.add_argument("--no-extras", action="store_true",
                    help="only the table: skip the N=80 compiles, the CLI timings and the tracr comparison")
    ap.add_argument("--markdown", type=Path, metavar="JSON",
                    help="print the docs' table from a results file (e.g. bench/results/compile_bench.json) "
                         "and run nothing")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.markdown:
        rows = json.loads(args.markdown.read_text())["rows"]
        print(markdown_table(rows) + "\n\n" + plans_table(rows))
        return 0
    if args.child:
        name, batch, repeats, *lengths = args.child
        print(json.dumps(bench_program(name, [int(x) for x in lengths], int(batch), int(repeats) or None)))
        return 0
    names = args.programs or [p.name for p in PROGRAMS if p.classic]
    start = time.perf_counter()
    rows: list[dict] = []
    for name in names:
        got = isolated(name, args.lengths, args.batch, args.repeats)
        rows += got
        print_table(got)
    if args.no_extras:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"rows": rows, "batch": args.batch, "command": " ".join(sys.argv),
                                        "seconds": round(time.perf_counter() - start)}, indent=1) + "\n")
        return 0
    print("\nThe two compiles tracr needs minutes for:")
    extra = isolated("tracr/reverse", [80], args.batch) + isolated("reverse", [80], args.batch) \
        + [r for r in rows if r["program"] == "tracr/shuffle_dyck2" and r["max_len"] == 40]
    if not any(r["program"] == "tracr/shuffle_dyck2" and r["max_len"] == 40 for r in rows):
        extra += isolated("tracr/shuffle_dyck2", [40], args.batch)
    print_table(extra)
    print("\n`rasp compile` process wall time (start-up included, best of 3):")
    cli = []
    for prog, vocab, n in (("programs/reverse.rasp", "abcde", 64),
                           ("programs/tracr/sort_freq.rasp", "abcde", 64),
                           ("programs/dyck2.rasp", "(){}a", 64),
                           ("programs/tracr/shuffle_dyck2.rasp", "(){}a", 40)):
        secs = cli_wall(prog, vocab, n)
        cli.append({"program": prog, "max_len": n, "wall_s": secs})
        print(f"  {prog:<36} N={n:<3} {secs:.2f} s")
    comp = comparison(rows, extra)
    print("\nAgainst tracr (vocab 5; ratio = ours / tracr):")
    for c in comp:
        if "compile_s" in c:
            print(f"  {c['program']:<22} N={c['max_len']:<3} compile {c['compile_s']:.3f} s vs tracr "
                  f"{c['tracr_compile_s']:.0f} s ({c['compile_speedup']:,.0f}x faster)")
            continue
        parts = [f"  {c['program']:<22} N={c['max_len']:<3}"]
        if c["tracr_width"]:
            parts.append(f"width {c['width']} vs {c['tracr_width']} ({c['width_ratio']:.2f})")
        if c["tracr_layers"]:
            parts.append(f"layers {c['layers']} vs {c['tracr_layers']}")
        if c["tracr_params"]:
            parts.append(f"params {c['params']:,} vs {c['tracr_params']:,} ({100 * c['params_ratio']:.1f} %)")
        print("  ".join(parts))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "long_compiles": extra, "cli_wall": cli, "vs_tracr": comp,
                                    "batch": args.batch, "command": " ".join(sys.argv),
                                    "seconds": round(time.perf_counter() - start)}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
