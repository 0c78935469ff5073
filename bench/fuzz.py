"""Fuzz `rasp run` and `rasp compile` with mutants of every shipped program (issue 49).

Mutations (seeded, so a run is reproducible): token edits (delete, duplicate, swap, replace),
deep nesting (thousands of parentheses or brackets), huge literals and powers, long identifiers,
NUL bytes, invalid UTF-8 and files of 1 MB.  Each mutant runs through the command line's ``main``
in a forked child of this process (torch is imported once, here) with RLIMIT_CPU at 10 s; the
child's CPU time and peak RSS come from ``wait4``.  Counted: tracebacks, runs past 10 s of CPU,
peak RSS past 2 GB, children that died (a signal), and failures whose message names no location
(no ``FILE:LINE``).  Every counted mutant is written to --failures DIR with the command to rerun it.

    .venv/bin/python bench/fuzz.py --run 2000 --compile 300 --seed 0 --jobs 2

Prints a table; writes bench/results/fuzz.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CPU_LIMIT_S = 10
RSS_LIMIT_BYTES = 2 << 30
TOKEN = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|[0-9]+(?:\.[0-9]*)?|\"[^\"\n]*\"|==|!=|<=|>=|\S")
POOL = ["(", ")", "[", "]", "{", "}", ",", ";", "=", "+", "-", "*", "/", "^", "%", "<", "==", "and",
        "not", "if", "else", "for", "in", "def", "return", "select", "aggregate", "indices", "length",
        "tokens", "tokens_int", "tokens_float", "selector_width", "range", "0", "1", "-1", "2.5",
        '"a"', "True", "load", "draw", "x", "out", "999999999999"]


def programs() -> list[Path]:
    return sorted(p for p in (ROOT / "programs").rglob("*.rasp"))


def mutate(text: str, rng: random.Random) -> tuple[str, bytes]:
    """One mutant of ``text``: (the kind of mutation, the mutant's bytes)."""
    kind = rng.choice(["token", "token", "token", "nesting", "literal", "power", "identifier", "nul",
                       "utf8", "megabyte"])
    tokens = [m for m in TOKEN.finditer(text)]
    if not tokens:
        return kind, text.encode()
    at = rng.choice(tokens)
    a, b = at.span()
    if kind == "token":
        edits = 1 + rng.randrange(3)
        out = text
        for _ in range(edits):
            toks = list(TOKEN.finditer(out)) or [at]
            t = rng.choice(toks)
            s, e = t.span()
            op = rng.randrange(4)
            if op == 0:
                out = out[:s] + out[e:]
            elif op == 1:
                out = out[:s] + t.group() + " " + out[s:]
            elif op == 2:
                u = rng.choice(toks)
                out = out[:s] + u.group() + out[e:]
            else:
                out = out[:s] + rng.choice(POOL) + out[e:]
        return kind, out.encode()
    if kind == "nesting":
        n = rng.choice([100, 1000, 10_000, 100_000])
        o, c = rng.choice([("(", ")"), ("[", "]"), ("-", ""), ("not ", "")])
        return kind, (text[:a] + o * n + at.group() + c * n + text[b:]).encode()
    if kind == "literal":
        digits = rng.choice([400, 4300, 4301, 20_000, 200_000])
        return kind, (text[:a] + "9" * digits + text[b:]).encode()
    if kind == "power":
        power = rng.choice(["10 ^ 100000000", "9 ^ 9 ^ 9", "2 ^ 65536 * 2 ^ 65536", "1e308 * 1e308",
                            "99999999999999999999 * 99999999999999999999 ^ 200", "(0 - 10) ^ 0.5",
                            "range(99999999999999999999)", '"ab" * 1000000000', "1e999"])
        return kind, (text[:a] + "(" + power + ")" + text[b:]).encode()
    if kind == "identifier":
        name = "x" * rng.choice([100, 10_000, 1_000_000])
        return kind, (text[:a] + name + text[b:]).encode()
    if kind == "nul":
        return kind, (text[:a] + "\0" + text[a:]).encode()
    if kind == "utf8":
        return kind, text[:a].encode() + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xfe\xfe"]) + \
            text[a:].encode()
    # megabyte: the program repeated to 1 MB, or a 1 MB line
    if rng.random() < 0.5:
        body = (text + "\n") * (1_000_000 // max(1, len(text)) + 1)
    else:
        body = text + "\nq = " + " + ".join(["indices"] * 125_000) + ";\n"
    return kind, body.encode()


def example_args(text: str) -> list[str]:
    m = re.search(r"^# example-json: (.*?) ->", text, re.M)
    return ["--input-json", m.group(1)] if m else ["--input", "abcab"]


def compile_args(text: str, out: str) -> list[str]:
    if "tokens_float" in text:
        return ["--input-range", "-1", "1", "--max-len", "4", "-o", out]
    return ["--vocab", "abc012", "--max-len", "4", "-o", out]


def child(argv: list[str], out_path: str, err_path: str) -> None:
    """In the forked child: limits, redirected output, the command line's main; never returns."""
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT_S, CPU_LIMIT_S + 1))
    # address space: what the parent holds (torch) plus 3 GB, so that a runaway allocation fails
    # here instead of swapping the machine; the RSS bar (2 GB) is measured, not enforced
    vm = int(re.search(r"VmSize:\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (vm + (3 << 30), vm + (3 << 30)))
    for fd, path in ((1, out_path), (2, err_path)):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(f, fd)
        os.close(f)
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.stdin = open(os.devnull)
    code = 1
    try:
        from rasp_compiler.cli import main

        code = main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # what a user would see: the traceback, as the interpreter prints it
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code or 0)


def located(err: str, path: str) -> bool:
    """The failure names the program file (FILE or FILE:LINE), or is about an option or input."""
    return path in err or "--" in err or "input" in err


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=int, default=2000)
    ap.add_argument("--compile", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--failures", default=str(ROOT / "bench/results/fuzz_failures"))
    ap.add_argument("--json", default=str(ROOT / "bench/results/fuzz.json"))
    args = ap.parse_args()

    import torch  # imported once here: every forked child has it

    import rasp_compiler.cli  # noqa: F401
    import rasp_compiler.compiler  # noqa: F401
    import rasp_compiler.lang  # noqa: F401
    torch.set_num_threads(1)

    progs = programs()
    texts = {p: p.read_text(encoding="utf-8") for p in progs}
    work = tempfile.mkdtemp(prefix="rasp-fuzz-")
    fails_dir = Path(args.failures)
    fails_dir.mkdir(parents=True, exist_ok=True)
    jobs = []
    for command, n in (("run", args.run), ("compile", args.compile)):
        for i in range(n):
            rng = random.Random(f"{args.seed}-{command}-{i}")
            prog = progs[i % len(progs)]
            kind, data = mutate(texts[prog], rng)
            jobs.append((command, i, prog, kind, data))

    counts = {c: {"mutants": 0, "ok": 0, "user_error": 0, "traceback": 0, "over_cpu": 0, "over_rss": 0,
                  "died": 0, "unlocated": 0, "max_cpu_s": 0.0, "max_rss_mb": 0.0}
              for c in ("run", "compile")}
    failures = []
    running: dict[int, tuple] = {}
    start = time.time()

    def reap(block: bool) -> None:
        pid, status, usage = os.wait4(-1, 0 if block else os.WNOHANG)
        if pid == 0:
            return
        command, i, prog, kind, data, path, out_path, err_path = running.pop(pid)
        cpu = usage.ru_utime + usage.ru_stime
        rss = usage.ru_maxrss * 1024
        err = Path(err_path).read_text(encoding="utf-8", errors="replace")
        c = counts[command]
        c["mutants"] += 1
        c["max_cpu_s"] = max(c["max_cpu_s"], round(cpu, 2))
        c["max_rss_mb"] = max(c["max_rss_mb"], round(rss / 2**20, 1))
        found = []
        if os.WIFSIGNALED(status):
            found.append("over_cpu" if os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL)
                         and cpu >= CPU_LIMIT_S - 0.5 else "died")
        elif cpu > CPU_LIMIT_S:
            found.append("over_cpu")
        if rss > RSS_LIMIT_BYTES:
            found.append("over_rss")
        if "Traceback (most recent call last)" in err:
            found.append("traceback")
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
        if not found and code != 0 and not located(err, path):
            found.append("unlocated")
        for f in found:
            c[f] += 1
        if not found:
            c["ok" if code == 0 else "user_error"] += 1
        else:
            name = f"{command}-{i:04d}-{prog.stem}-{kind}"
            (fails_dir / f"{name}.rasp").write_bytes(data)
            argv = _argv(command, fails_dir / f"{name}.rasp", texts[prog], work)
            (fails_dir / f"{name}.txt").write_text(
                f"found: {', '.join(found)}; cpu {cpu:.1f} s; rss {rss / 2**20:.0f} MB\n"
                f"rerun: rasp {' '.join(repr(a) if ' ' in a else a for a in argv)}\n\n{err[-4000:]}")
            failures.append({"mutant": name, "found": found, "cpu_s": round(cpu, 2)})
        for p in (path, out_path, err_path):
            with_suppress(os.remove, p)

    for command, i, prog, kind, data in jobs:
        while len(running) >= args.jobs:
            reap(True)
        path = os.path.join(work, f"m{command}{i}.rasp")
        Path(path).write_bytes(data)
        argv = _argv(command, Path(path), texts[prog], work + f"/out{i}")
        out_path, err_path = path + ".out", path + ".err"
        pid = os.fork()
        if pid == 0:
            child(argv, out_path, err_path)
        running[pid] = (command, i, prog, kind, data, path, out_path, err_path)
    while running:
        reap(True)

    wall = time.time() - start
    header = f"{'command':8} {'mutants':>7} {'ok':>5} {'error':>6} {'trace':>6} {'>10s':>5} {'>2GB':>5} " \
             f"{'died':>5} {'unloc':>6} {'max cpu s':>9} {'max MB':>7}"
    print(header)
    for command, c in counts.items():
        print(f"{command:8} {c['mutants']:>7} {c['ok']:>5} {c['user_error']:>6} {c['traceback']:>6} "
              f"{c['over_cpu']:>5} {c['over_rss']:>5} {c['died']:>5} {c['unlocated']:>6} "
              f"{c['max_cpu_s']:>9} {c['max_rss_mb']:>7}")
    print(f"wall {wall:.0f} s; {len(failures)} counted mutants in {fails_dir}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({
        "command": " ".join(["bench/fuzz.py"] + sys.argv[1:]), "seed": args.seed, "jobs": args.jobs,
        "cpu_limit_s": CPU_LIMIT_S, "rss_limit_bytes": RSS_LIMIT_BYTES, "counts": counts,
        "failures": failures, "wall_s": round(wall, 1)}, indent=1) + "\n")
    bad = sum(c["traceback"] + c["over_cpu"] + c["over_rss"] + c["died"] for c in counts.values())
    return 1 if bad else 0


def _argv(command: str, path: Path, original: str, out: str) -> list[str]:
    if command == "run":
        return ["run", str(path), *example_args(original)]
    return ["compile", str(path), *compile_args(original, out)]


def with_suppress(fn, *a) -> None:
    try:
        fn(*a)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())
