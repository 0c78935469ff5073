"""Interpreter baseline: how long `rasp run` takes on every shipped program.

For each program in programs/ and programs/tracr/ and each input length, this loads the program
once (parse + elaborate, timed separately) and then times `interpreter.run` on a random input of
that length, the median of --repeat runs.  It also times one whole `rasp run` process (start-up
included) on a short input.  These are the figures compiled models are measured against.

    .venv/bin/python bench/interp_bench.py                  # lengths 8 64 512, repeat 3
    .venv/bin/python bench/interp_bench.py --lengths 8 64 --repeat 5

Prints a table and writes bench/results/interp_bench.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "programs"
RESULTS = ROOT / "bench" / "results" / "interp_bench.json"

# tokens each program is meant for (anything else is still legal, but exercises less)
ALPHABETS = {
    "dyck1": "()", "dyck2": "(){}", "tracr/shuffle_dyck1": "()", "tracr/shuffle_dyck2": "(){}",
    "pair_balance": "()", "tracr/pair_balance": "()", "parity": "01", "count": "hel",
    "frac_prevs": "hel", "tracr/frac_prevs": "ab",
}


def program_names() -> list[str]:
    names = sorted(p.stem for p in PROGRAMS.glob("*.rasp"))
    return names + sorted(f"tracr/{p.stem}" for p in (PROGRAMS / "tracr").glob("*.rasp"))


def make_input(name: str, n: int, rng: random.Random) -> list:
    text = (PROGRAMS / f"{name}.rasp").read_text(encoding="utf-8")
    if "tokens_float" in text:
        return [round(rng.uniform(-5, 5), 3) for _ in range(n)]
    if "tokens_int" in text:
        if "sort_unique" in name:  # its keys must be distinct
            return rng.sample(range(-10 * n, 10 * n), n)
        return [rng.randint(-9, 9) for _ in range(n)]
    alphabet = ALPHABETS.get(name, "abcde")
    return [rng.choice(alphabet) for _ in range(n)]


def time_cli(repeat: int) -> float | None:
    """Median wall time of one `rasp run` process on reverse.rasp, start-up included (None, with
    the error printed, when the command fails)."""
    exe = Path(sys.executable).with_name("rasp")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "rasp_compiler.cli"]
    cmd += ["run", str(PROGRAMS / "reverse.rasp"), "--input", "hello"]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            print(f"`rasp run` failed (exit {res.returncode}):\n{res.stderr.strip()[-2000:]}",
                  file=sys.stderr)
            return None
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[8, 64, 512],
                        help="input lengths to time (default: 8 64 512)")
    parser.add_argument("--repeat", type=int, default=5,
                        help="timed runs per cell (default 5); the table shows the best, "
                             "the JSON also the median")
    parser.add_argument("--programs", nargs="*", help="only these programs (e.g. reverse tracr/sort)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON results")
    args = parser.parse_args(argv)

    from rasp_compiler import interpreter
    from rasp_compiler.lang import load_program, program_from_source

    # the first load also builds the LALR parser: time it once, apart from the per-program loads
    start = time.perf_counter()
    program_from_source("indices;")
    first_load_s = time.perf_counter() - start
    print(f"parser build + first load: {first_load_s * 1e3:.0f} ms")

    names = args.programs or program_names()
    rng = random.Random(0)
    rows = []
    header = "".join(f"{'n=' + str(n) + ' (ms)':>13}" for n in args.lengths)
    print(f"interpreter time per input, best of {args.repeat} (after one warm-up run)")
    print(f"{'program':<24}{'load (ms)':>10}{header}")
    for name in names:
        start = time.perf_counter()
        prog = load_program(str(PROGRAMS / f"{name}.rasp"))
        load_s = time.perf_counter() - start
        row = {"program": name, "load_s": load_s, "run_s": {}, "run_min_s": {}}
        for n in args.lengths:
            inp = make_input(name, n, rng)
            interpreter.run(prog, inp)  # warm-up: first-call caches are not the steady state
            times = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                interpreter.run(prog, inp)
                times.append(time.perf_counter() - start)
            row["run_s"][str(n)] = statistics.median(times)
            row["run_min_s"][str(n)] = min(times)
        rows.append(row)
        # the table shows the best of --repeat runs: on a shared machine the minimum is the
        # least disturbed figure (the JSON keeps the median too)
        cells = "".join(f"{row['run_min_s'][str(n)] * 1e3:>13.2f}" for n in args.lengths)
        print(f"{name:<24}{load_s * 1e3:>10.1f}{cells}", flush=True)

    cli_s = time_cli(args.repeat)
    if cli_s is not None:
        print(f"\n`rasp run programs/reverse.rasp --input hello` (one process, start-up included): "
              f"{cli_s * 1e3:.0f} ms (median of {args.repeat})")

    result = {
        "what": "interpreter time per input (run_s: median, run_min_s: best of repeat runs, after "
                "one warm-up), program load time (parse + elaborate), and one `rasp run` process",
        "first_load_s": first_load_s,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor_count": os.cpu_count(),
        "lengths": args.lengths,
        "repeat": args.repeat,
        "programs": rows,
        "cli_process_s": cli_s,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
