"""Replay the original RASP REPL's recorded sessions through `rasp repl` and compare what it prints.

tech-srl/RASP records its REPL's output for each test session: ``tests/in/NAME.txt`` is piped into
``RASP_support/REPL.py`` from the repository root and the output saved as ``tests/tgt/NAME.txt``
(``.github/workflows/tests/`` holds a second set).  This script pipes each input into ``rasp repl``
from the same directory, drops the original's banner and its ``>>``/``..`` prompts (it prints them
even when reading a pipe; ours prints none then), and reports per session whether the output is
the same, with a diff where it is not.  It needs a checkout of tech-srl/RASP (not shipped here):

    .venv/bin/python bench/original_repl.py --root ~/RASP --in ~/RASP/tests/in --tgt ~/RASP/tests/tgt

Writes bench/results/original_repl.json.  Differences in error wording are expected: ours name the
file, line and column and give a hint (docs/language.md lists the deliberate differences).
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "original_repl.json"
RASP = Path(sys.executable).with_name("rasp")
PROMPTS = re.compile(r"^(?:>> |\.\. )+")


def recorded(text: str) -> list[str]:
    """The original's output without its two banner lines and its prompts."""
    out = []
    for line in text.split("\n")[2:]:
        stripped = PROMPTS.sub("", line)
        if stripped or not line:  # a line that held only prompts is dropped
            out.append(stripped)
    while out and not out[-1]:
        out.pop()
    return out


def replayed(session: Path, root: Path) -> list[str]:
    with session.open() as stdin:
        run = subprocess.run([str(RASP), "repl"], stdin=stdin, capture_output=True, text=True, cwd=root)
    out = (run.stdout + run.stderr).split("\n")
    while out and not out[-1]:
        out.pop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, required=True, help="the directory the sessions run from")
    ap.add_argument("--in", dest="inputs", type=Path, required=True, help="the sessions (NAME.txt)")
    ap.add_argument("--tgt", type=Path, required=True, help="the original's recorded outputs (NAME.txt)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    sessions = sorted(p for p in args.inputs.glob("*.txt") if (args.tgt / p.name).exists())
    if not sessions:
        ap.error(f"no session in {args.inputs} has a recorded output in {args.tgt}")
    results = {}
    for session in sessions:
        want = recorded((args.tgt / session.name).read_text())
        got = replayed(session, args.root)
        diff = list(difflib.unified_diff(want, got, "original", "ours", lineterm="", n=0))
        results[session.stem] = {"matches": want == got, "diff": diff}
        print(f"{session.stem:32s} {'matches' if want == got else f'differs ({len(diff)} diff lines)'}")
    matching = sum(r["matches"] for r in results.values())
    print(f"{matching} of {len(results)} sessions print what the original printed")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": " ".join(sys.argv), "matching": matching,
                                    "sessions": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
