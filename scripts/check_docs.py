"""Re-run every command whose output README.md and docs/*.md show, and fail on drift.

    .venv/bin/python scripts/check_docs.py            # the fast examples (tests/test_docs_commands.py)
    .venv/bin/python scripts/check_docs.py --slow     # also those marked slow
    .venv/bin/python scripts/check_docs.py --list     # what would run, with each one's marker

The docs' convention: in a fenced block, a line ``$ COMMAND`` is followed by the lines it prints
(stdout and stderr together, as a terminal shows them), up to the next ``$`` line or the block's
end.  A block holding only a ``$ …`` line and followed by a Markdown table shows that table as the
command's output.  What runs, and how:

* ``rasp ARGS`` runs in this process through ``rasp_compiler.cli.main`` (``printf '…' | rasp …``
  feeds the printf text as stdin; ``rasp repl`` is fed the block's ``>>`` / ``..`` lines);
* ``python …`` / ``.venv/bin/python …`` runs as a subprocess of this interpreter;
* ``cat FILE`` compares FILE when the repository has it, and otherwise creates it from the lines
  shown (the page defines it: the tutorial's ``sort.rasp``, compiler.md's ``diff.rasp``).

Each page runs in one scratch directory whose entries link to the repository's top level, in page
order, so a page's ``rasp eval out/`` finds the model its ``rasp compile … -o out/`` wrote.

A marker on the line before a block's opening fence (blank lines between are allowed) applies to
every command of the block:

    <!-- check-docs: slow -->            runs only with --slow (it takes more than a few seconds)
    <!-- check-docs: skip REASON -->     never runs; REASON says why (and where it is tested)
    <!-- check-docs: setup COMMAND -->   runs COMMAND (`rasp …` or `python …`) first, unchecked: the
                                         set-up the prose describes

Output is compared line by line, exactly, after these normalisations (the only ones):

* a duration — a number followed by `` s`` or `` ms`` (``compile time: 0.009 s``, ``(12 s)``,
  ``0.410 ms an input``) — and the cells
  of a table column whose header ends in ``seconds`` become ``T``;
* the scratch directory's path becomes ``.``;
* a line ``...`` (indented or not) in the shown output stands for any number of printed lines;
* unless ``--exact``: rounding-sized numbers in e-notation with a negative exponent (``6.883e-15``,
  ``1.6183448026119152e-06``) match when within a factor of 100 of each other, since their digits
  depend on the CPU's floating-point kernels (issue 47 saw 1.585e-06 where this machine prints
  1.618e-06); the rest of the line must match exactly, and zero (``0.000e+00``) stays zero.
  ``--exact`` compares them as printed (run it on the machine that ran them before pasting one).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"<!--\s*check-docs:\s*(slow|skip|setup)\b\s*(.*?)\s*-->")
DURATION = re.compile(r"\b\d+(\.\d+)? (s|ms)\b")
ROUNDING = re.compile(r"\b(\d)(\.\d+)?e(-\d+)\b")


@dataclass
class Example:
    page: str            # path relative to the repository root
    line: int            # 1-based line of the `$ ` line
    command: str         # without the `$ `
    shown: list[str]     # the lines the page shows after it
    marker: str = ""     # "", "slow", "skip" or "setup"
    reason: str = ""     # a skip's reason, or a setup's command
    typed: list[str] = field(default_factory=list)  # `rasp repl`: the lines typed at its prompt

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def examples(root: Path = ROOT) -> list[Example]:
    """Every ``$ command`` with shown output in the pages, in page order."""
    found: list[Example] = []
    for page in pages(root):
        found += _page_examples(page.relative_to(root).as_posix(), page.read_text(encoding="utf-8"))
    return found


def _page_examples(page: str, text: str) -> list[Example]:
    lines = text.splitlines()
    found: list[Example] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        marker, reason = _marker_before(lines, i)
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
        body = lines[i + 1:end]
        starts = [k for k, ln in enumerate(body) if ln.startswith("$ ")]
        for n, k in enumerate(starts):
            stop = starts[n + 1] if n + 1 < len(starts) else len(body)
            shown = body[k + 1:stop]
            while shown and not shown[-1].strip():
                shown.pop()
            if not shown and len(starts) == 1 and len(body) == 1:
                shown = _table_after(lines, end + 1)
            command = body[k][2:].strip()
            ex = Example(page, i + 2 + k, command, shown, marker, reason)
            if command == "rasp repl":
                ex.typed = [ln[3:] for ln in shown if ln.startswith((">> ", ".. "))]
                ex.shown = [ln for ln in shown if not ln.startswith((">> ", ".. "))]
            if shown:
                found.append(ex)
        i = end + 1
    return found


def _marker_before(lines: list[str], fence: int) -> tuple[str, str]:
    j = fence - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    m = MARKER.search(lines[j]) if j >= 0 else None
    return (m.group(1), m.group(2)) if m else ("", "")


def _table_after(lines: list[str], start: int) -> list[str]:
    j = start
    while j < len(lines) and not lines[j].strip():
        j += 1
    table = []
    while j < len(lines) and lines[j].startswith("|"):
        table.append(lines[j])
        j += 1
    return table


# -- running ------------------------------------------------------------------------------------------

def scratch_dir(root: Path = ROOT) -> tempfile.TemporaryDirectory:
    """A directory whose entries link to the repository's top level (programs/, docs/, bench/…)."""
    tmp = tempfile.TemporaryDirectory(prefix="check-docs-")
    for entry in root.iterdir():
        if entry.name not in (".git", ".venv"):
            os.symlink(entry, Path(tmp.name) / entry.name)
    return tmp


def run_example(ex: Example, cwd: Path) -> list[str] | None:
    """The lines the command prints in ``cwd`` (None: nothing to compare, e.g. a file it created)."""
    if ex.marker == "setup":
        setup = shlex.split(ex.reason)
        if setup[0] == "python":
            done = subprocess.run([sys.executable, *setup[1:]], cwd=cwd, capture_output=True, text=True)
            code = done.returncode
        else:
            code = _rasp_in_process(setup[1:], "", cwd)[1] if setup[0] == "rasp" else 1
        if code != 0:
            raise ValueError(f"{ex.where}: the set-up `{ex.reason}` failed")
    argv = shlex.split(ex.command)
    if argv[0] == "cat" and len(argv) == 2:
        path = cwd / argv[1]
        if not path.exists():
            path.write_text("\n".join(ex.shown) + "\n", encoding="utf-8")
            return None
        return path.read_text(encoding="utf-8").splitlines()
    stdin = ""
    if "|" in argv:
        cut = argv.index("|")
        feed, argv = argv[:cut], argv[cut + 1:]
        if feed[0] != "printf" or len(feed) != 2:
            raise ValueError(f"{ex.where}: only `printf '…' | rasp …` pipes are understood")
        stdin = feed[1].encode("utf-8").decode("unicode_escape")
    if ex.command == "rasp repl":
        stdin = "".join(t + "\n" for t in ex.typed)
    if argv[0] == "rasp":
        return _rasp_in_process(argv[1:], stdin, cwd)[0]
    if argv[0] in ("python", "python3", ".venv/bin/python"):
        done = subprocess.run([sys.executable, *argv[1:]], cwd=cwd, input=stdin, capture_output=True,
                              text=True, timeout=3600)
        return (done.stdout + done.stderr).splitlines()
    raise ValueError(f"{ex.where}: no way to run `{ex.command}`; mark the block skip with a reason")


def _rasp_in_process(args: list[str], stdin: str, cwd: Path) -> tuple[list[str], int]:
    from rasp_compiler.cli import main

    out = io.StringIO()
    before, old_stdin = Path.cwd(), sys.stdin
    os.chdir(cwd)
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = main(args)
    finally:
        sys.stdin = old_stdin
        os.chdir(before)
    return out.getvalue().splitlines(), code


# -- comparing ----------------------------------------------------------------------------------------

def normalise(lines: list[str], cwd: Path | None = None) -> list[str]:
    masked_columns: set[int] = set()
    out = []
    for ln in lines:
        if cwd is not None:
            ln = ln.replace(str(cwd) + "/", "").replace(str(cwd), ".")
        if ln.startswith("|"):
            cells = ln.split("|")
            if any(c.strip().endswith("seconds") for c in cells):
                masked_columns = {k for k, c in enumerate(cells) if c.strip().endswith("seconds")}
            elif not set(ln) <= set("|-: "):
                cells = ["T" if k in masked_columns else c for k, c in enumerate(cells)]
            ln = "|".join(cells)
        ln = DURATION.sub(lambda m: f"T {m.group(2)}", ln)
        out.append(ln)
    return out


def same_line(shown: str, got: str, exact: bool = False) -> bool:
    """Equal, except that (unless ``exact``) rounding-sized numbers need only be within a factor
    of 100 of each other."""
    if exact or shown == got:
        return shown == got
    if ROUNDING.sub("?", shown) != ROUNDING.sub("?", got):
        return False
    pairs = zip(ROUNDING.finditer(shown), ROUNDING.finditer(got), strict=True)
    return all(0.01 <= float(a.group(0)) / float(b.group(0)) <= 100 for a, b in pairs)


def matches(shown: list[str], got: list[str], exact: bool = False) -> bool:
    """Line by line; a shown ``...`` line stands for any run of printed lines."""
    cut = next((k for k, ln in enumerate(shown) if ln.strip() == "..."), None)
    if cut is None:
        return len(shown) == len(got) and all(same_line(a, b, exact) for a, b in zip(shown, got, strict=True))
    head, tail = shown[:cut], shown[cut + 1:]
    if not matches(head, got[:len(head)], exact):
        return False
    rest = got[len(head):]
    return any(matches(tail, rest[k:], exact) for k in range(len(rest) + 1))


@dataclass
class Outcome:
    example: Example
    ok: bool
    seconds: float
    got: list[str] | None
    diff: str = ""


def check_page(todo: list[Example], exact: bool = False) -> list[Outcome]:
    """Run one page's examples (in order, in one scratch directory)."""
    outcomes = []
    with scratch_dir() as tmp:
        cwd = Path(tmp)
        for ex in todo:
            start = time.process_time()
            got = run_example(ex, cwd)
            seconds = time.process_time() - start
            if got is None:
                outcomes.append(Outcome(ex, True, seconds, None))
                continue
            shown, printed = normalise(ex.shown), normalise(got, cwd)
            ok = matches(shown, printed, exact)
            diff = "" if ok else _diff(shown, printed)
            outcomes.append(Outcome(ex, ok, seconds, got, diff))
    return outcomes


def _diff(shown: list[str], got: list[str]) -> str:
    import difflib

    return "\n".join(difflib.unified_diff(shown, got, "shown in the docs", "printed now", lineterm=""))


def selected(slow: bool, only: str | None = None) -> dict[str, list[Example]]:
    """The examples to run, by page: never the skipped ones, the slow ones only if asked."""
    by_page: dict[str, list[Example]] = {}
    for ex in examples():
        if ex.marker == "skip" or ex.marker == "slow" and not slow:
            continue
        if only and only not in ex.page:
            continue
        by_page.setdefault(ex.page, []).append(ex)
    return by_page


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--slow", action="store_true", help="also run the blocks marked slow")
    ap.add_argument("--exact", action="store_true", help="compare rounding-sized numbers digit by digit")
    ap.add_argument("--page", help="only pages whose path contains this")
    ap.add_argument("--list", action="store_true", help="list the examples and their markers, run nothing")
    args = ap.parse_args(argv)
    if args.list:
        for ex in examples():
            if not args.page or args.page in ex.page:
                print(f"{ex.where:28} {ex.marker or 'fast':5} {ex.command[:90]}"
                      + (f"  ({ex.reason})" if ex.reason else ""))
        return 0
    failed = total = 0
    for todo in selected(args.slow, args.page).values():
        for outcome in check_page(todo, args.exact):
            total += 1
            status = "ok   " if outcome.ok else "DRIFT"
            ex = outcome.example
            print(f"{status} {outcome.seconds:7.2f} s  {ex.where:28} {ex.command[:80]}")
            if not outcome.ok:
                failed += 1
                print(outcome.diff)
    print(f"{total - failed}/{total} documented commands print what the docs show"
          + ("" if args.slow else " (slow ones left out: --slow runs them)"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
