"""Whether a small weight should gather its columns: the module as it runs now (every weight on a
CPU may take the columns path, where its used rows and columns are a small share of it) against
the rule it replaced (a weight of fewer than ``--old-threshold`` entries, 4,096 until 7 Dec, ran
dense), per shipped program (``bench/shipped.py``, five-token vocabulary) and max length.

Both modules are built from one compile and run interleaved in one process on one thread: CPU
seconds (``time.process_time``) of a forward of ``--batch`` inputs of full length, median of
``--repeats``; the ratio is old / new (above 1: the gathers pay).  The logits of the two are
compared bit for bit (the paths' contract: tests/test_sparse_paths.py checks it in float64).

    .venv/bin/python bench/small_weights.py                          # 6 10 20 40, batch 256
    .venv/bin/python bench/small_weights.py --lengths 64 --batch 1024 --programs histogram sort

Prints a table and writes bench/results/small_weights.json.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import statistics
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from shipped import BY_NAME, PROGRAMS  # noqa: E402
from timing import interleaved_medians  # noqa: E402

RESULTS = HERE / "results" / "small_weights.json"


def prepared(model, old_threshold: int | None, ids, lengths, values):
    """A runtime Transformer for ``model``, its paths chosen by today's rule, or with weights under
    ``old_threshold`` entries kept dense (the rule before 7 Dec)."""
    import torch

    import rasp_compiler.runtime as runtime

    today = runtime._sparse_wanted

    def before(w, mode):
        why = today(w, mode)
        if why is None and w.numel() < old_threshold:
            return f"small ({w.numel():,} < {old_threshold:,} entries)"
        return why

    module = runtime.Transformer(model.config, model.tensors)
    runtime._sparse_wanted = before if old_threshold is not None else today
    try:
        with torch.inference_mode():
            module(ids[:1], lengths[:1], values=None if values is None else values[:1])  # prepares the paths
        module.explain()
    finally:
        runtime._sparse_wanted = today
    return module


def main() -> int:
    import torch

    from rasp_compiler.compiler import compile_program
    from rasp_compiler.errors import CompileWarning
    from rasp_compiler.lang import load_program

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", nargs="*", default=None)
    ap.add_argument("--lengths", nargs="*", type=int, default=[6, 10, 20, 40])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--old-threshold", type=int, default=1 << 12)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore", CompileWarning)
    names = args.programs or [p.name for p in PROGRAMS if p.file.suffix == ".rasp" and p.vocab5]
    rows = []
    print(f"{'program':<22}{'N':>4}{'before ms':>11}{'now ms':>9}{'ratio':>7}  paths changed  same logits")
    for name in names:
        s = BY_NAME[name]
        for n in args.lengths:
            model = compile_program(load_program(str(s.file)), list(s.vocab5), n)
            rng = random.Random(n)
            ids, lengths, values = model.encode_inputs(
                [[rng.choice(list(s.vocab5)) for _ in range(n)] for _ in range(args.batch)])
            old = prepared(model, args.old_threshold, ids, lengths, values)
            new = prepared(model, None, ids, lengths, values)
            with torch.inference_mode():
                same = torch.equal(old(ids, lengths, values=values), new(ids, lengths, values=values))
                medians = interleaved_medians({"before": functools.partial(old, ids, lengths, values=values),
                                               "now": functools.partial(new, ids, lengths, values=values)},
                                              args.repeats)
            before, now = medians["before"], medians["now"]
            changed = sum(a["path"] != b["path"] for a, b in zip(old.explain(), new.explain(), strict=True))
            rows.append({"program": name, "max_len": n, "batch": args.batch, "before_s": before, "now_s": now,
                         "ratio": before / now, "paths_changed": changed, "same_logits": same})
            print(f"{name:<22}{n:>4}{1e3 * before:>11.2f}{1e3 * now:>9.2f}{before / now:>7.2f}"
                  f"{changed:>15}  {same}", flush=True)
    changed = [r for r in rows if r["paths_changed"]]
    if changed:
        ratios = sorted(r["ratio"] for r in changed)
        print(f"\ncells whose paths changed: {len(changed)} of {len(rows)}; ratio before/now "
              f"{ratios[0]:.2f}-{ratios[-1]:.2f} (median {statistics.median(ratios):.2f}); "
              f"logits the same in {sum(r['same_logits'] for r in rows)} of {len(rows)} cells")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join(["bench/small_weights.py", *sys.argv[1:]])
    args.out.write_text(json.dumps({"command": command, "rows": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
