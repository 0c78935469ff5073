"""Parse + elaboration time of generated RASP programs from 1 KB to 1 MB (issue 49).

The program is a chain of statements `v_i = (v_{i-1} + i) % 7;` over `indices` (each a node of
the graph), repeated until the file has the size asked for; the time is that of
``rasp_compiler.lang.program_from_source`` (parse, elaborate, finalize), best of --repeat runs.
A close-to-linear growth shows as a time per KB that stays about level across the sizes.

    .venv/bin/python bench/large_programs.py --sizes 1 10 100 1000 --repeat 2

Prints a table; writes bench/results/large_programs.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def program_of(kilobytes: int) -> tuple[str, int]:
    lines, i, size = ["v0 = indices;"], 0, 14
    while size < kilobytes * 1024:
        i += 1
        line = f"v{i} = (v{i - 1} + {i % 97}) % 7;"
        lines.append(line)
        size += len(line) + 1
    lines.append(f"v{i};")
    return "\n".join(lines) + "\n", i


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 10, 100, 1000], help="sizes in KB")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=str(ROOT / "bench/results/large_programs.json"))
    args = ap.parse_args()

    from rasp_compiler.errors import UserError
    from rasp_compiler.lang import program_from_source

    rows = []
    print(f"{'KB':>6} {'statements':>10} {'seconds':>9} {'ms per KB':>10}  result")
    for kb in args.sizes:
        text, n = program_of(kb)
        best, result = float("inf"), "ok"
        for _ in range(args.repeat):
            start = time.process_time()
            try:
                program_from_source(text, "large.rasp", output="out")
            except UserError as err:
                result = "refused: " + str(err).splitlines()[0][:80]
            best = min(best, time.process_time() - start)
        rows.append({"kilobytes": kb, "bytes": len(text), "statements": n, "cpu_seconds": round(best, 3),
                     "ms_per_kb": round(1000 * best / (len(text) / 1024), 3), "result": result})
        r = rows[-1]
        print(f"{kb:>6} {n:>10} {r['cpu_seconds']:>9} {r['ms_per_kb']:>10}  {result}")
    Path(args.json).write_text(json.dumps({"command": " ".join(["bench/large_programs.py"] + sys.argv[1:]),
                                           "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
