"""Which compiled models a compiler change touches: weights_sha256, layers and parameters of every
shipped token program (``bench/shipped.py``, five-token vocabulary) at max length 5, 16 and 40, and
with ``--paper`` of the original repository's paper programs (``bench/paper_programs.py``'s list).

Run it before a change with ``--out``, after it with ``--compare``: it lists every cell whose
weights changed, with its layers and parameters before and after, and exits 1 where a change
added a layer or parameters (a change that keeps every value should only ever remove them).

    .venv/bin/python bench/weights_fingerprint.py --out /tmp/before.json
    .venv/bin/python bench/weights_fingerprint.py --compare /tmp/before.json
    .venv/bin/python bench/weights_fingerprint.py --paper --lengths 8 16 24 40 64 --out /tmp/p.json

``--numeric`` fingerprints the programs compiled numerically instead: every shipped program with a
``# check: --input-range`` line, at those options, and the simulator U (``rasp simulate``) at a
few sizes, each in float32 and float64.

``--random N`` fingerprints N programs of the differential generator (``random_source``) instead,
from seed ``--start``, at each length, over their own vocabulary; a refusal is a cell too (its
message).  ``--set NAME=VALUE`` lowers an ``analysis.limits`` (or ``lowering.limits``) size
limit first (``None`` turns DEFER_FROM off), so that small programs take the paths large ones
do: the plan search's redesign (5 Dec) was checked with these five runs, 1,100 programs, before
and after:

    --random 300 --start 12200000 --lengths 8 --set DEFER_FROM=50
    --random 200 --start 12300000 --lengths 12
    --random 200 --start 12400000 --lengths 8 --set LARGE_TABLE=60 LARGE_MLP=40 LARGE_MLP_PER_POSITION=4
    --random 200 --start 12500000 --lengths 8 --set DOMAIN_CAP=300 WIDE_DOMAIN_CAP=3000 DEFER_FROM=None
    --random 200 --start 12600000 --lengths 8 --set DOMAIN_CAP=300 WIDE_DOMAIN_CAP=3000 DEFER_FROM=40
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

from rasp_compiler.compiler import compile_program, compile_weights  # noqa: E402
from rasp_compiler.compiler.analysis import limits  # noqa: E402
from rasp_compiler.compiler.lowering import limits as lowering_limits  # noqa: E402
from rasp_compiler.errors import UserError  # noqa: E402
from rasp_compiler.lang import load_program, program_from_source  # noqa: E402
from rasp_compiler.testing import random_source  # noqa: E402

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


NUMERIC_SIMULATORS = ((2, 2, 1), (3, 2, 2), (3, 3, 1))  # U's (n, d, heads)


def numeric_fingerprint() -> dict[str, dict]:
    """The shipped programs over real-valued tokens at their ``# check:`` options, and U."""
    import re

    from rasp_compiler.simulator.build import build_simulator

    cells: dict[str, dict] = {}
    for path in sorted((ROOT / "programs").rglob("*.rasp")):
        text = path.read_text(encoding="utf-8")
        check = re.search(r"^# check:.*--input-range\s+(\S+)\s+(\S+)(.*)$", text, re.M)
        if check is None:
            continue
        rng = (float(check.group(1)), float(check.group(2)))
        rest = check.group(3)
        max_len = re.search(r"--max-len\s+(\d+)", rest)
        fixed = re.search(r"--fixed-length\s+(\d+)", rest)
        if max_len is None:  # as rasp check does: the first example's length, as a fixed length
            example = re.search(r"^# example-json:\s*(\[.*?\])\s*->", text, re.M)
            n = len(json.loads(example.group(1))) if example else 8
            max_len, fixed = n, n
        else:
            max_len, fixed = int(max_len.group(1)), int(fixed.group(1)) if fixed else None
        program = load_program(str(path))
        for dtype in ("float32", "float64"):
            built = compile_weights(program, None, max_len, dtype=dtype, fixed_length=fixed, input_range=rng)
            cells[f"{path.relative_to(ROOT)}@{dtype}"] = {"weights_sha256": built.config["weights_sha256"],
                                                          "layers": built.n_layers, "params": built.params}
    for n, d, heads in NUMERIC_SIMULATORS:
        for dtype in ("float32", "float64"):
            model = build_simulator(n, d, heads, dtype=dtype).model
            cells[f"simulator/n{n}d{d}h{heads}@{dtype}"] = {
                "weights_sha256": model.config["weights_sha256"], "layers": model.n_layers,
                "params": model.params}
    return cells


def random_fingerprint(count: int, start: int, lengths: tuple[int, ...]) -> dict[str, dict]:
    """Each generated program's weights digest, layers and parameters, or its refusal."""
    cells: dict[str, dict] = {}
    for seed in range(start, start + count):
        for n in lengths:
            gen = random_source.generate(seed, max_len=n)
            program = program_from_source(gen.source, f"<random {seed}>")
            try:
                built = compile_weights(program, list(gen.vocab), n)
            except UserError as err:
                cells[f"random/{seed}@{n}"] = {"weights_sha256": f"refused: {err.message}",
                                               "layers": 0, "params": 0}
                continue
            cells[f"random/{seed}@{n}"] = {"weights_sha256": built.config["weights_sha256"],
                                           "layers": built.n_layers, "params": built.params}
    return cells


def _set_limit(assignment: str) -> None:
    name, _, value = assignment.partition("=")
    for module in (limits, lowering_limits):
        if hasattr(module, name) and name.isupper():
            setattr(module, name, None if value == "None" else int(value))
            return
    raise SystemExit(f"--set: no size limit {name!r} in analysis.limits or lowering.limits")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="write the fingerprint here")
    ap.add_argument("--compare", type=Path, help="compare with a fingerprint written before")
    ap.add_argument("--lengths", nargs="*", type=int, default=list(LENGTHS))
    ap.add_argument("--paper", action="store_true", help="the paper programs instead of the shipped ones")
    ap.add_argument("--random", type=int, metavar="N", help="N generated programs instead")
    ap.add_argument("--numeric", action="store_true",
                    help="the programs over real-valued tokens and the simulator U instead")
    ap.add_argument("--start", type=int, default=12_200_000, help="first seed of --random")
    ap.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE",
                    help="lower an analysis.limits or lowering.limits size limit first (DEFER_FROM=None "
                         "turns it off)")
    args = ap.parse_args()
    if not args.out and not args.compare:
        ap.error("give --out FILE, --compare FILE or both")
    for assignment in args.set:
        _set_limit(assignment)
    if args.numeric:
        cells = numeric_fingerprint()
    elif args.random:
        cells = random_fingerprint(args.random, args.start, tuple(args.lengths))
    else:
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
