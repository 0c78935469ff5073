"""Issue 50's compile bar: every program of tracr's library (programs/tracr/) compiled at max
length 10, 20 and 40 in a warm process, median (and best) CPU seconds (``time.process_time``) of 3
compiles after one warm-up; the bar is shuffle-Dyck-1 and -2 at 20 and 40 each <= 0.12 s.  Each cell also
lists the plan search's candidates with their CPU seconds (``plans_tried``).

    .venv/bin/python bench/tracr_compile.py
    .venv/bin/python bench/tracr_compile.py --programs tracr/shuffle_dyck2 --lengths 40 --profile 25

``--python-api`` builds each program through the Python API instead (``bench/tracr_cells.py``'s
calls, as ``bench/tracr_side_by_side.py`` does) and compiles it with ``compiling.
compile_rasp_to_model(program, vocab, max_seq_len=N, compiler_bos="BOS")``, the build inside each
timed compile.  ``--against REV`` also times the compiler of git revision REV in the same process,
its compiles interleaved with this checkout's (A, B, B, A, ...), and checks that both give the same
weights: the package is extracted with ``git archive`` to a temporary directory and renamed
``rasp_compiler_base`` (every ``rasp_compiler`` in its Python files), so that both load at once.

    .venv/bin/python bench/tracr_compile.py --python-api --lengths 10 20 40 --repeats 30 --against main

``--profile K`` prints the K costliest functions (cProfile, cumulative) of one more compile per
cell.  ``--stages`` prints, per cell, the CPU seconds of each stage of the deferred and the plain
candidate built by hand (``Analysis``, ``Lowering`` with ``schedule``, ``assemble``), best of the
repeats.  Prints a table and writes bench/results/tracr_compile.json.
"""

from __future__ import annotations

import argparse
import atexit
import cProfile
import importlib
import io
import json
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from shipped import BY_NAME, PROGRAMS  # noqa: E402

RESULTS = HERE / "results" / "tracr_compile.json"
BAR = {("tracr/shuffle_dyck1", 20): 0.12, ("tracr/shuffle_dyck1", 40): 0.12,
       ("tracr/shuffle_dyck2", 20): 0.12, ("tracr/shuffle_dyck2", 40): 0.12}


def main() -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", nargs="*", default=None)
    ap.add_argument("--lengths", nargs="*", type=int, default=[10, 20, 40])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--python-api", action="store_true",
                    help="build the programs through rasp_compiler.pyapi (bench/tracr_cells.py) and "
                         "compile them with compile_rasp_to_model")
    ap.add_argument("--against", metavar="REV",
                    help="also time git revision REV's compiler in this process, interleaved (A/B)")
    ap.add_argument("--profile", type=int, default=0, metavar="K")
    ap.add_argument("--stages", action="store_true", help="time each stage of the two candidates")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    torch.set_num_threads(1)
    names = args.programs or [p.name for p in PROGRAMS if p.name.startswith("tracr/")]
    base = baseline_package(args.against) if args.against else None
    rows = []
    if base is None:
        print(f"{'program':<22}{'N':>4}{'CPU s':>8}{'best':>7}{'bar':>6}  candidates (CPU s)")
    else:
        print(f"{'program':<22}{'N':>4}{args.against + ' ms':>12}{'this ms':>10}{'ratio':>7}  same weights")
    for name in names:
        for n in args.lengths:
            compile_once = compiler("rasp_compiler", name, n, args.python_api)
            model = compile_once()  # warm-up
            if base is not None:
                compile_base = compiler(base, name, n, args.python_api)
                same = compile_base().config["weights_sha256"] == model.config["weights_sha256"]
                times, base_times = interleaved(compile_once, compile_base, args.repeats)
                secs, before = statistics.median(times), statistics.median(base_times)
                rows.append({"program": name, "max_len": n, "cpu_s": secs, "cpu_s_all": times,
                             "against": args.against, "against_cpu_s": before,
                             "against_cpu_s_all": base_times, "same_weights": same})
                print(f"{name:<22}{n:>4}{before * 1e3:>12.2f}{secs * 1e3:>10.2f}{secs / before:>7.2f}  "
                      f"{'yes' if same else 'NO'}", flush=True)
                continue
            times = []
            for _ in range(args.repeats):
                c0 = time.process_time()
                model = compile_once()
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
            s = BY_NAME[name]
            if args.stages:
                from rasp_compiler.lang import load_program

                rows[-1]["stages"] = stages(load_program(str(s.file)), list(s.vocab5), n, args.repeats)
                print("    " + "; ".join(f"{name}: " + ", ".join(f"{k} {v:.3f}" for k, v in got.items())
                                       for name, got in rows[-1]["stages"].items()), flush=True)
            if args.profile:
                prof = cProfile.Profile()
                prof.runcall(compile_once)
                pstats.Stats(prof).sort_stats("cumulative").print_stats(args.profile)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join(["bench/tracr_compile.py", *sys.argv[1:]])
    args.out.write_text(json.dumps({"command": command, "rows": rows}, indent=1) + "\n")
    return 0


def compiler(package: str, name: str, n: int, python_api: bool) -> Callable[[], Any]:
    """One compile of ``name`` at max length ``n`` by ``package`` (``rasp_compiler`` or the
    baseline's), returning the compiled model: of the shipped .rasp file, or built through the
    Python API (each call builds the program again, as a tracr user's script does)."""
    if python_api:
        from tracr_cells import PROGRAMS as CELLS

        rasp = importlib.import_module(f"{package}.pyapi")
        lib = importlib.import_module(f"{package}.pyapi.lib")
        compiling = importlib.import_module(f"{package}.pyapi.compiling")
        cell = CELLS[name.removeprefix("tracr/")]

        def once() -> Any:
            program = cell.build(rasp, lib, n)
            return compiling.compile_rasp_to_model(program, set(cell.vocab), max_seq_len=n,
                                                   compiler_bos="BOS").model
        return once
    compile_program = importlib.import_module(f"{package}.compiler").compile_program
    s = BY_NAME[name]
    program = importlib.import_module(f"{package}.lang").load_program(str(s.file))
    return lambda: compile_program(program, list(s.vocab5), n)


def interleaved(this: Callable[[], Any], other: Callable[[], Any], repeats: int
                ) -> tuple[list[float], list[float]]:
    """CPU seconds of ``repeats`` calls of each, alternating which goes first (A B, B A, ...), so
    that a change in the machine's load falls on both alike."""
    times: dict[int, list[float]] = {0: [], 1: []}
    for r in range(repeats):
        for k in ((0, 1) if r % 2 == 0 else (1, 0)):
            c0 = time.process_time()
            (this, other)[k]()
            times[k].append(time.process_time() - c0)
    return times[0], times[1]


def baseline_package(rev: str) -> str:
    """The package at git revision ``rev``, importable as ``rasp_compiler_base`` (see the module
    docstring); the temporary directory is removed at exit."""
    tmp = Path(tempfile.mkdtemp(prefix="tracr_compile_"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    got = subprocess.run(["git", "-C", str(HERE.parent), "archive", rev, "rasp_compiler", "grammars"],
                         capture_output=True, check=False)
    if got.returncode:
        sys.exit(f"git archive {rev}: {got.stderr.decode(errors='replace').strip()}")
    with tarfile.open(fileobj=io.BytesIO(got.stdout)) as tar:
        tar.extractall(tmp, filter="data")
    package = tmp / "rasp_compiler_base"
    (tmp / "rasp_compiler").rename(package)
    for path in package.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        path.write_text(re.sub(r"\brasp_compiler\b", "rasp_compiler_base", text), encoding="utf-8")
    sys.path.insert(0, str(tmp))
    return "rasp_compiler_base"


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
