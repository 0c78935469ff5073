"""tracr programs from InterpBench, compiled here and checked against the interpreter.

InterpBench (github.com/FlyingPumba/InterpBench) holds 131 tracr programs written against tracr's
API, each a case class with ``get_program()``, ``get_vocab()`` and ``get_max_seq_len()``.  This
script runs them from a local clone, unchanged: tracr's imports are redirected to
``rasp_compiler.pyapi`` (``tracr.rasp.rasp``) and ``rasp_compiler.pyapi.lib``
(``tracr.compiler.lib``), and the benchmark's base classes (which import its training stack) are
replaced by three small stand-ins below.  Nothing of InterpBench is copied here.

    git clone https://github.com/FlyingPumba/InterpBench /tmp/InterpBench
    nice -n 5 .venv/bin/python bench/interpbench.py --checkout /tmp/InterpBench
    .venv/bin/python bench/interpbench.py --checkout /tmp/InterpBench --causal --cases 8,21

Each case is compiled for max_len = get_max_seq_len() - 1 (InterpBench counts BOS in it) and run
on ``--inputs`` random inputs of every length up to that; with ``--causal`` only the cases that
declare ``supports_causal_masking()`` are compiled causally, and each position is compared with
the interpreter on the prefix up to it.  A case is *clean* when every input the interpreter
answers is answered alike by the model.  Writes bench/results/interpbench.json.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import random
import signal
import sys
import time
import types
from pathlib import Path
from typing import Any

from rasp_compiler import pyapi
from rasp_compiler.errors import UserError
from rasp_compiler.pyapi import lib

COMPILE_SECONDS = 120


# ------------------------------------------------------------------ stand-ins for the benchmark
class BenchmarkCase:
    """What a case class needs of InterpBench's base class (its defaults: length 10, causal)."""

    def get_max_seq_len(self) -> int:
        return 10

    def supports_causal_masking(self) -> bool:
        return True


def _identity(fn: Any) -> Any:
    return fn


def install(checkout: Path) -> None:
    """tracr's modules as aliases of ours; the benchmark's packages from the clone, except the
    three modules whose imports reach its training stack."""
    tracr, tracr_rasp, tracr_compiler = map(types.ModuleType, ("tracr", "tracr.rasp", "tracr.compiler"))
    tracr.rasp, tracr.compiler = tracr_rasp, tracr_compiler  # type: ignore[attr-defined]
    tracr_rasp.rasp, tracr_compiler.lib = pyapi, lib  # type: ignore[attr-defined]
    sys.modules.update({"tracr": tracr, "tracr.rasp": tracr_rasp, "tracr.rasp.rasp": pyapi,
                        "tracr.compiler": tracr_compiler, "tracr.compiler.lib": lib})
    root = checkout / "circuits_benchmark"
    for name, path in (("circuits_benchmark", root), ("circuits_benchmark.benchmark", root / "benchmark"),
                       ("circuits_benchmark.benchmark.cases", root / "benchmark" / "cases")):
        package = types.ModuleType(name)
        package.__path__ = [str(path)]  # type: ignore[attr-defined]
        sys.modules[name] = package
    stand_ins = {
        "benchmark_case": {"BenchmarkCase": BenchmarkCase},
        "tracr_benchmark_case": {"TracrBenchmarkCase": BenchmarkCase},
        "program_evaluation_type": {"causal_and_regular": _identity, "only_non_causal": _identity},
    }
    for short, names in stand_ins.items():
        module = types.ModuleType(f"circuits_benchmark.benchmark.{short}")
        module.__dict__.update(names)
        sys.modules[module.__name__] = module


# ------------------------------------------------------------------ one case
def same(a: Any, b: Any) -> bool:
    """Equal, or numbers within 1e-6 (a mean is float arithmetic in the model; a boolean the
    interpreter picks from one key compares as 0/1)."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)
    return a == b


def check_case(number: int, inputs: int, causal: bool) -> dict[str, Any]:
    module = importlib.import_module(f"circuits_benchmark.benchmark.cases.case_{number}")
    cls = next(v for v in vars(module).values()
               if isinstance(v, type) and issubclass(v, BenchmarkCase) and v.__module__ == module.__name__)
    case = cls()
    if causal and not case.supports_causal_masking():
        return {"case": number, "status": "not causal"}
    program, vocab = case.get_program(), case.get_vocab()
    max_len = case.get_max_seq_len() - 1
    rng = random.Random(number)
    tokens = sorted(vocab, key=repr)
    batch = [[rng.choice(tokens) for _ in range(rng.randint(1, max_len))] for _ in range(inputs)]
    expected = []
    for xs in batch:
        try:
            expected.append([pyapi.evaluate(program, xs[:i + 1])[i] for i in range(len(xs))] if causal
                            else list(pyapi.evaluate(program, xs)))
        except UserError:
            expected.append(None)  # the interpreter raises: nothing to compare
    start = time.perf_counter()
    signal.alarm(COMPILE_SECONDS)
    try:
        model = pyapi.compile_program(program, vocab, max_len, causal=causal)
    except UserError as err:
        return {"case": number, "status": "refused", "why": err.message.splitlines()[0]}
    finally:
        signal.alarm(0)
    seconds = time.perf_counter() - start
    answered = [(xs, want) for xs, want in zip(batch, expected, strict=True) if want is not None]
    got = model.run([xs for xs, _ in answered]) if answered else []
    wrong = [{"input": xs, "interpreter": want, "model": out}
             for (xs, want), out in zip(answered, got, strict=True)
             if len(want) != len(out) or not all(same(a, b) for a, b in zip(want, out, strict=True))]
    stats = model.stats()
    return {"case": number, "status": "disagree" if wrong else "clean", "max_len": max_len,
            "vocab": len(vocab), "compared": len(answered), "agree": len(answered) - len(wrong),
            "layers": stats["layers"], "params": stats["params"], "compile_seconds": round(seconds, 3),
            "disagreements": wrong[:3]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkout", required=True, type=Path, help="a clone of FlyingPumba/InterpBench")
    ap.add_argument("--cases", help="comma-separated case numbers (default: every case_N.py)")
    ap.add_argument("--inputs", type=int, default=200, help="random inputs per case (default 200)")
    ap.add_argument("--causal", action="store_true", help="compile causally (the cases that allow it)")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "interpbench.json")
    args = ap.parse_args()
    cases_dir = args.checkout / "circuits_benchmark" / "benchmark" / "cases"
    if not cases_dir.is_dir():
        ap.error(f"{cases_dir} does not exist: give --checkout a clone of FlyingPumba/InterpBench")
    install(args.checkout)

    def timeout(*_: Any) -> None:
        raise TimeoutError(f"compiling took more than {COMPILE_SECONDS} s")
    signal.signal(signal.SIGALRM, timeout)
    numbers = ([int(c) for c in args.cases.split(",")] if args.cases else
               sorted(int(p.stem[5:]) for p in cases_dir.glob("case_*.py")))
    results = []
    print(f"{'case':>5} {'status':<10} {'L':>3} {'|V|':>4} {'layers':>6} {'params':>11} {'agree':>9}  note")
    for number in numbers:
        try:
            r = check_case(number, args.inputs, args.causal)
        except Exception as err:  # noqa: BLE001 - a crash is a finding: report it and go on
            r = {"case": number, "status": "crash", "why": f"{type(err).__name__}: {err}"}
        results.append(r)
        size = (f"{r['max_len']:>3} {r['vocab']:>4} {r['layers']:>6} {r['params']:>11,} "
                f"{r['agree']:>5}/{r['compared']:<3}" if "params" in r else " " * 37)
        print(f"{number:>5} {r['status']:<10} {size}  {r.get('why', '')[:90]}", flush=True)
    counts: dict[str, int] = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print("totals:", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": " ".join(sys.argv[1:]), "causal": args.causal,
                                    "inputs": args.inputs, "counts": counts, "cases": results},
                                   indent=1, default=repr) + "\n")
    return 1 if counts.get("disagree") or counts.get("crash") else 0


if __name__ == "__main__":
    sys.exit(main())
