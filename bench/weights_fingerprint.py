"""Which compiled models a compiler change touches: weights_sha256, layers and parameters of every
shipped token program (``bench/shipped.py``, five-token vocabulary) at max length 5, 16 and 40, and
with ``--paper`` of the original repository's paper programs (``bench/paper_programs.py``'s list).

Run it before a change with ``--out``, after it with ``--compare``: it lists every cell whose
weights changed, with its layers and parameters before and after, and exits 1 where a change
added a layer or parameters (a change that keeps every value should only ever remove them).

    .venv/bin/python bench/weights_fingerprint.py --out /tmp/before.json
    .venv/bin/python bench/weights_fingerprint.py --compare /tmp/before.json
    .venv/bin/python bench/weights_fingerprint.py --paper --lengths 8 16 24 40 64 --out /tmp/p.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from paper_programs import PROGRAMS as PAPER  # noqa: E402
from paper_programs import SOURCE as PAPER_SOURCE  # noqa: E402
from shipped import PROGRAMS  # noqa: E402

from rasp_compiler.compiler import compile_program  # noqa: E402
from rasp_compiler.lang import load_program, program_from_source  # noqa: E402

LENGTHS = (5, 16, 40)


def fingerprint(lengths: tuple[int, ...] = LENGTHS, paper: bool = False) -> dict[str, dict]:
    if paper:
        source = PAPER_SOURCE.read_text(encoding="utf-8")
        programs = [(f"paper/{name}", program_from_source(source, "paper_examples.rasp", output=name),
                     vocab) for name, vocab, _ in PAPER]
    else:
        programs = [(s.name, load_program(str(s.file)), s.vocab5) for s in PROGRAMS]
    cells = {}
    for name, program, vocab in programs:
        for n in lengths:
            model = compile_program(program, list(vocab), n)
            cells[f"{name}@{n}"] = {"weights_sha256": model.config["weights_sha256"],
                                    "layers": model.n_layers, "params": model.params}
    return cells


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="write the fingerprint here")
    ap.add_argument("--compare", type=Path, help="compare with a fingerprint written before")
    ap.add_argument("--lengths", nargs="*", type=int, default=list(LENGTHS))
    ap.add_argument("--paper", action="store_true", help="the paper programs instead of the shipped ones")
    args = ap.parse_args()
    if not args.out and not args.compare:
        ap.error("give --out FILE, --compare FILE or both")
    cells = fingerprint(tuple(args.lengths), args.paper)
    if args.out:
        args.out.write_text(json.dumps(cells, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(cells)} cells to {args.out}")
    if not args.compare:
        return 0
    before = json.loads(args.compare.read_text())
    changed = [k for k in cells if k in before and cells[k]["weights_sha256"] != before[k]["weights_sha256"]]
    grew = []
    for k in changed:
        b, a = before[k], cells[k]
        print(f"{k:28} layers {b['layers']} -> {a['layers']}   params {b['params']:,} -> {a['params']:,}")
        if (a["layers"], a["params"]) > (b["layers"], b["params"]):
            grew.append(k)
    missing = sorted(set(cells) ^ set(before))
    print(f"{len(changed)} of {len(cells)} cells changed"
          + (f"; {len(grew)} grew: {', '.join(grew)}" if grew else "")
          + (f"; in one file only: {', '.join(missing)}" if missing else ""))
    return 1 if grew else 0


if __name__ == "__main__":
    sys.exit(main())
