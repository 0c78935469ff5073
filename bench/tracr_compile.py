"""Issue 50's compile bar: every program of tracr's library (programs/tracr/) compiled at max
length 10, 20 and 40 in a warm process, median (and best) CPU seconds (``time.process_time``) of 3
compiles after one warm-up; the bar is shuffle-Dyck-1 and -2 at 20 and 40 each <= 0.12 s.  Each cell also
lists the plan search's candidates with their CPU seconds (``plans_tried``).

    .venv/bin/python bench/tracr_compile.py
    .venv/bin/python bench/tracr_compile.py --programs tracr/shuffle_dyck2 --lengths 40 --profile 25

``--profile K`` prints the K costliest functions (cProfile, cumulative) of one more compile per
cell.  ``--stages`` prints, per cell, the CPU seconds of each stage of the deferred and the plain
candidate built by hand (``Analysis``, ``Lowering`` with ``schedule``, ``assemble``), best of the
repeats.  Prints a table and writes bench/results/tracr_compile.json.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from shipped import BY_NAME, PROGRAMS  # noqa: E402

RESULTS = HERE / "results" / "tracr_compile.json"
BAR = {("tracr/shuffle_dyck1", 20): 0.12, ("tracr/shuffle_dyck1", 40): 0.12,
       ("tracr/shuffle_dyck2", 20): 0.12, ("tracr/shuffle_dyck2", 40): 0.12}


def main() -> int:
    import torch

    from rasp_compiler.compiler import compile_program
    from rasp_compiler.lang import load_program

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", nargs="*", default=None)
    ap.add_argument("--lengths", nargs="*", type=int, default=[10, 20, 40])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", type=int, default=0, metavar="K")
    ap.add_argument("--stages", action="store_true", help="time each stage of the two candidates")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    torch.set_num_threads(1)
    names = args.programs or [p.name for p in PROGRAMS if p.name.startswith("tracr/")]
    rows = []
    print(f"{'program':<22}{'N':>4}{'CPU s':>8}{'best':>7}{'bar':>6}  candidates (CPU s)")
    for name in names:
        s = BY_NAME[name]
        program = load_program(str(s.file))
        for n in args.lengths:
            compile_program(program, list(s.vocab5), n)  # warm-up
            times = []
            for _ in range(args.repeats):
                c0 = time.process_time()
                model = compile_program(program, list(s.vocab5), n)
                times.append(time.process_time() - c0)
            secs, bar = statistics.median(times), BAR.get((name, n))
            tried = model.plans_tried or []
            rows.append({"program": name, "max_len": n, "cpu_s": secs, "cpu_best_s": min(times),
                         "cpu_s_all": times, "bar_s": bar,
                         "meets_bar": None if bar is None else secs <= bar, "layers": model.n_layers,
                         "params": model.params, "plans_tried": tried})
            cands = ", ".join(f"{t['strategy']} {t.get('cpu_seconds', 0):.3f}" for t in tried)
            print(f"{name:<22}{n:>4}{secs:>8.3f}{min(times):>7.3f}{'' if bar is None else bar:>6}  {cands}",
                  flush=True)
            if args.stages:
                rows[-1]["stages"] = stages(program, list(s.vocab5), n, args.repeats)
                print("    " + "; ".join(f"{name}: " + ", ".join(f"{k} {v:.3f}" for k, v in got.items())
                                       for name, got in rows[-1]["stages"].items()), flush=True)
            if args.profile:
                prof = cProfile.Profile()
                prof.runcall(compile_program, program, list(s.vocab5), n)
                pstats.Stats(prof).sort_stats("cumulative").print_stats(args.profile)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join(["bench/tracr_compile.py", *sys.argv[1:]])
    args.out.write_text(json.dumps({"command": command, "rows": rows}, indent=1) + "\n")
    return 0


def stages(program, vocab: list, n: int, repeats: int) -> dict[str, dict[str, float]]:
    """CPU seconds of the analysis, the lowering (with the schedule) and the assembly of the
    deferred candidate (``limits.DEFER_FROM``) and the plain one, each the best of ``repeats``."""
    from rasp_compiler.compiler import rewritten
    from rasp_compiler.compiler.analysis import Analysis, limits
    from rasp_compiler.compiler.assemble import assemble
    from rasp_compiler.compiler.lowering import Lowering
    from rasp_compiler.compiler.schedule import schedule

    prog = rewritten(program, n)
    out = {}
    for name, defer in (("deferred", limits.DEFER_FROM), ("plain", None)):
        best = {"analysis": float("inf"), "lowering": float("inf"), "assembly": float("inf")}
        for _ in range(repeats):
            c0 = time.process_time()
            an = Analysis(prog, vocab, n, defer_from=defer)
            c1 = time.process_time()
            low = Lowering(an)
            plan = schedule(low)
            c2 = time.process_time()
            assemble(an, low, plan, dtype="float32", causal=False)
            c3 = time.process_time()
            for key, secs in (("analysis", c1 - c0), ("lowering", c2 - c1), ("assembly", c3 - c2)):
                best[key] = min(best[key], secs)
        out[name] = best
    return out


if __name__ == "__main__":
    sys.exit(main())
