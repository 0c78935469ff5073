"""Issue 50's compile bar: every program of tracr's library (programs/tracr/) compiled at max
length 10, 20 and 40 in a warm process, median (and best) CPU seconds (``time.process_time``) of 3
compiles after one warm-up; the bar is shuffle-Dyck-1 and -2 at 20 and 40 each <= 0.12 s.  Each cell also
lists the plan search's candidates with their CPU seconds (``plans_tried``).

    .venv/bin/python bench/tracr_compile.py
    .venv/bin/python bench/tracr_compile.py --programs tracr/shuffle_dyck2 --lengths 40 --profile 25

``--profile K`` prints the K costliest functions (cProfile, cumulative) of one more compile per
cell.  Prints a table and writes bench/results/tracr_compile.json.
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
            if args.profile:
                prof = cProfile.Profile()
                prof.runcall(compile_program, program, list(s.vocab5), n)
                pstats.Stats(prof).sort_stats("cumulative").print_stats(args.profile)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join(["bench/tracr_compile.py", *sys.argv[1:]])
    args.out.write_text(json.dumps({"command": command, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
