"""Which compiled models a compiler change touches: weights_sha256, layers and parameters of every
shipped token program (``bench/shipped.py``, five-token vocabulary) at max length 5, 16 and 40.

Run it before a change with ``--out``, after it with ``--compare``: it lists every cell whose
weights changed, with its layers and parameters before and after, and exits 1 where a change
added a layer or parameters (a change that keeps every value should only ever remove them).

    .venv/bin/python bench/weights_fingerprint.py --out /tmp/before.json
    .venv/bin/python bench/weights_fingerprint.py --compare /tmp/before.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from shipped import PROGRAMS  # noqa: E402

from rasp_compiler.compiler import compile_program  # noqa: E402
from rasp_compiler.lang import load_program  # noqa: E402

LENGTHS = (5, 16, 40)


def fingerprint(lengths: tuple[int, ...] = LENGTHS) -> dict[str, dict]:
    cells = {}
    for shipped in PROGRAMS:
        program = load_program(str(shipped.file))
        for n in lengths:
            model = compile_program(program, list(shipped.vocab5), n)
            cells[f"{shipped.name}@{n}"] = {"weights_sha256": model.config["weights_sha256"],
                                            "layers": model.n_layers, "params": model.params}
    return cells


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="write the fingerprint here")
    ap.add_argument("--compare", type=Path, help="compare with a fingerprint written before")
    ap.add_argument("--lengths", nargs="*", type=int, default=list(LENGTHS))
    args = ap.parse_args()
    if not args.out and not args.compare:
        ap.error("give --out FILE, --compare FILE or both")
    cells = fingerprint(tuple(args.lengths))
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
