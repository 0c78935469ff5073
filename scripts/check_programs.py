"""The main job: run every shipped program on its examples, then compile it and check the weights.

Each program's header comments drive it:
  # example: hello -> olleh             a string input and the expected output (characters)
  # example-json: [1, 2] -> [2, 1]      a JSON list input and the expected output
  # check: --vocab abc --max-len 6      the `rasp check` options (otherwise inferred: the
                                        examples' characters as vocabulary, max length 6)
Exit status 0 only if every example matches and every compiled model agrees with the interpreter.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rasp_compiler.cli import main as rasp_main  # noqa: E402
from rasp_compiler.errors import UserError  # noqa: E402
from rasp_compiler.interpreter import run  # noqa: E402
from rasp_compiler.lang import load_program  # noqa: E402

EXAMPLE = re.compile(r"^#\s*example:\s*(.*?)\s*->\s*(.*?)\s*$")
EXAMPLE_JSON = re.compile(r"^#\s*example-json:\s*(\[.*?\])\s*->\s*(\[.*?\])\s*$")
CHECK = re.compile(r"^#\s*check:\s*(.*?)\s*$")


def header(path: Path) -> tuple[list[tuple[list, list]], list[str] | None]:
    """The examples (input, expected) and the `# check:` options of a program file."""
    examples, check = [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        if m := EXAMPLE_JSON.match(line):
            examples.append((json.loads(m.group(1)), json.loads(m.group(2))))
        elif m := EXAMPLE.match(line):
            examples.append((list(m.group(1)), expected_output(m.group(2))))
        elif m := CHECK.match(line):
            check = shlex.split(m.group(1))
    return examples, check


def expected_output(text: str) -> list:
    """``olleh`` (one character per position) or a list such as ``[2, 0.5, true]``."""
    if not text.startswith("["):
        return list(text)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return [item.strip() for item in text[1:-1].split(",")]


def same(got: list, want: list) -> bool:
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        if isinstance(g, (int, float)) and isinstance(w, (int, float)) and not isinstance(g, bool):
            if abs(g - w) > 1e-9 * max(1.0, abs(w)):
                return False
        elif g != w and str(g) != str(w):
            return False
    return True


def check_args(path: Path, examples: list, check: list[str] | None) -> list[str]:
    if check is not None:
        return check
    vocab = sorted({str(t) for inputs, _ in examples for t in inputs})
    return ["--vocab", json.dumps(vocab), "--max-len", "6"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("programs", nargs="*", type=Path,
                        help="program files (default: programs/*.rasp and programs/tracr/*.rasp)")
    parser.add_argument("--no-compile", action="store_true", help="only run the examples in the interpreter")
    args = parser.parse_args()
    files = args.programs or sorted(ROOT.glob("programs/*.rasp")) + sorted(ROOT.glob("programs/tracr/*.rasp"))
    failures: list[str] = []
    rows = []
    for path in files:
        name = str(path.relative_to(ROOT)) if path.is_absolute() else str(path)
        examples, check = header(path)
        try:
            program = load_program(str(path))
        except UserError as err:
            print(err.render())
            failures.append(f"{name}: does not load")
            continue
        for inputs, want in examples:
            got = run(program, inputs)
            ok = same(got, want)
            print(f"{'ok  ' if ok else 'FAIL'} {name}: {inputs} -> {got}")
            if not ok:
                failures.append(f"{name}: example {inputs} gave {got}, expected {want}")
        if args.no_compile:
            continue
        options = check_args(path, examples, check)
        out = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(out):
            status = rasp_main(["check", str(path), *options, "--json"])
        seconds = time.perf_counter() - start
        try:
            report = json.loads(out.getvalue().strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            report = {}
        rows.append((name, report, seconds, status))
        if status != 0:
            failures.append(f"{name}: rasp check {' '.join(options)} failed")
    if rows:
        print()
        print(f"{'program':34} {'layers':>6} {'heads':>10} {'width':>6} {'params':>9} {'agree':>13} "
              f"{'max err':>9} {'seconds':>8}")
        for name, r, seconds, status in rows:
            heads = ",".join(map(str, r.get("heads_per_layer", []))) or "-"
            agree = f"{r.get('inputs_agreeing', '-')}/{r.get('inputs_checked', '-')}"
            err = r.get("max_abs_error")
            print(f"{name:34} {r.get('layers', '-'):>6} {heads:>10} {r.get('residual_width', '-'):>6} "
                  f"{r.get('params', '-'):>9} {agree:>13} {'-' if err is None else f'{err:.2g}':>9} "
                  f"{seconds:8.2f}{'' if status == 0 else '  FAILED'}")
    print()
    if failures:
        print(f"{len(failures)} problem(s):")
        for f in failures:
            print(f"  {f}")
        return 1
    checked = "" if args.no_compile else ", compiled models agree with the interpreter"
    print(f"all {len(files)} programs: examples match{checked}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
