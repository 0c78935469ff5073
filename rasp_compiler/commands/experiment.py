"""``rasp experiment``: embedding-only training on Dyck-1 and k-hop induction, and the results grid."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from textwrap import fill

from rasp_compiler.commands.options import (
    SEED_HELP,
    check_at_least,
    check_finite,
    check_not_empty,
    check_seed,
)
from rasp_compiler.errors import UserError

EXAMPLES = {
    "experiment": """examples:
  # with no shape given, a run takes the measured settings that reach the paper's floor
  rasp experiment dyck1 --backbone sparse          # 99.6 % in the grid, about 1.5 CPU-minutes
  rasp experiment dyck1 --backbone random --settings base --steps 1500   # a quick small run
  rasp experiment khop --k 2 --backbone sparse --construction paths --heads 1 --layers 3 \\
      --width 176 --steps 12000 --curriculum 2000 --batch 32
  rasp experiment probe runs/experiments/NAME     # where the trained run's heads attend
  rasp experiment table --jobs 2                  # the resumable grid, then docs/experiments.md
""",
    "dyck1": """examples:
  rasp experiment dyck1 --backbone random          # the floor settings: width 256, 6,000 steps
  rasp experiment dyck1 --backbone random --width 64 --steps 6000 --json
  rasp experiment dyck1 --backbone sparse --construction paths --heads 2 --layers 2 --width 130
""",
    "khop": """examples:
  # the floor settings for 4-hop on the random UT: width 512, depth 5, auxiliary hop heads,
  # bf16 training matmuls (about 32 minutes on one CPU thread)
  rasp experiment khop --k 4 --backbone random
  rasp experiment khop --k 1 --backbone sparse --construction paths --heads 1 --layers 2 \\
      --width 80 --steps 6000 --batch 32
  # 2-hop with an auxiliary hop_1 unembedding trained alongside (test accuracy on hop_2)
  rasp experiment khop --k 2 --backbone sparse --construction paths --heads 1 --layers 3 \\
      --width 176 --steps 6000 --aux-hops --batch 32
  # or: train hop_1 for 2,000 steps first, then hop_2 for 12,000
  rasp experiment khop --k 2 --backbone sparse --construction paths --heads 1 --layers 3 \\
      --width 176 --steps 12000 --curriculum 2000 --batch 32
""",
    "probe": """examples:
  rasp experiment probe runs/experiments/khop1_sparse-paths_attn-res-ln_w80_L2_H1_s6000_b32_lr0.01_seed0
  rasp experiment probe RUN_DIR --samples 512 --json
  rasp experiment probe RUN_DIR --save docs/results/experiments/probes/NAME.json
""",
}

TASK_HELP = {
    "dyck1": "Dyck-1: is a parenthesis string balanced? (Zhong & Andreas' generator, label at '?')",
    "khop": "k-hop induction heads (Sanford, Hsu & Telgarsky), every position scored",
}


def _add_run_options(p: argparse.ArgumentParser, task: str) -> None:
    from rasp_compiler.experiments.names import ARCHES, BACKBONES, PRECISIONS, SPARSE_CONSTRUCTIONS

    if task == "khop":
        p.add_argument("--k", type=int, required=True, choices=(1, 2, 3, 4), help="number of hops")
        p.add_argument("--curriculum", type=int, default=0, metavar="STEPS",
                       help="train on hop_1, ..., hop_{k-1} for STEPS steps each (a fresh schedule "
                            "per stage) before the --steps on hop_k; k >= 2; default 0: none")
        p.add_argument("--aux-hops", action="store_true", dest="aux",
                       help="train k-1 auxiliary unembeddings on hop_1, ..., hop_{k-1} alongside "
                            "hop_k (extra losses on the same stream; the test reads hop_k's "
                            "unembedding only); k >= 2")
    p.add_argument("--backbone", choices=BACKBONES, default="random",
                   help="sparse {0,1} UT, random Gaussian UT (both frozen), or trained (all weights)")
    p.add_argument("--arch", choices=ARCHES, default=None,
                   help="attn (attention only), attn-res-ln (+ residual, layer norm), attn-res-ln-mlp "
                        "(+ frozen random MLP); default: attn for dyck1, attn-res-ln for khop")
    p.add_argument("--construction", choices=SPARSE_CONSTRUCTIONS, default="auto",
                   help="sparse backbone only: A (one head, no residual), C (H heads, residual, "
                        "identity values) or paths (H heads with 0/1 value masks, one block per "
                        "path of head choices, so the width grows as (H+1)^L: use 1 or 2 heads); "
                        "auto: A for attn, C otherwise")
    p.add_argument("--width", type=int, default=None, help="embedding width m (default: from --settings)")
    p.add_argument("--layers", type=int, default=None, help="layers L (default: from --settings)")
    p.add_argument("--heads", type=int, default=None, help="heads H (default: from --settings)")
    p.add_argument("--steps", type=int, default=None, help="training steps (default: from --settings)")
    p.add_argument("--batch", type=int, default=None,
                   help="batch size (default: from --settings; 64 for Dyck-1, 32 for k-hop)")
    p.add_argument("--lr", type=float, default=None,
                   help="peak learning rate (default: per task and backbone)")
    p.add_argument("--seed", type=int, default=0,
                   help=f"seed of data, embeddings and random backbone, {SEED_HELP} (default 0)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument("--settings", choices=("floor", "base"), default="floor",
                   help="what the options left out default to. floor (default): the cheapest "
                        "measured settings that reach the paper's floor for this task, k and "
                        "frozen backbone (docs/experiments.md lists them; they take from a few "
                        "minutes to about 45 on one CPU thread), used whole when no shape option "
                        "(--construction, --width, --layers, --heads) is given; otherwise, and "
                        "where there are none (the trained backbone, other architectures), base. "
                        "base: the grid's small settings (width 64, 2 layers, 4 heads), minutes "
                        "on a CPU")
    p.add_argument("--precision", choices=PRECISIONS, default=None,
                   help="training matmuls in fp32 or bf16 autocast: about 2x faster on CPUs with "
                        "AVX512-BF16 or AMX; weights and evaluation stay fp32 (default: fp32, "
                        "or what --settings floor gives)")
    p.add_argument("--threads", type=int, default=1,
                   help="CPU threads, at least 1 (default 1: these models are too small to gain "
                        "from more)")
    p.add_argument("--out", default=None,
                   help="checkpoint directory (default runs/experiments/NAME)")
    _add_checkpoint_options(p)
    p.add_argument("--no-resume", action="store_true",
                   help="start from step 0 even if --out holds this run, finished or unfinished "
                        "(it is overwritten); by default an unfinished run continues where it "
                        "stopped, bit-exactly, and a finished one gives its saved result; "
                        "a finished run of other settings there is refused, not replaced")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress on stderr (a bar on a terminal, otherwise a line per tenth of "
                        "the run)")
    p.set_defaults(func=_run, task=task)


def _add_checkpoint_options(p: argparse.ArgumentParser) -> None:
    from rasp_compiler.experiments.names import CHECKPOINT_MINUTES

    p.add_argument("--checkpoint-every", type=int, default=0, metavar="STEPS",
                   help="also save the resume state every STEPS steps (default 0: by time only)")
    p.add_argument("--checkpoint-minutes", type=float, default=CHECKPOINT_MINUTES, metavar="M",
                   help="save the resume state (weights, optimiser, RNG states, step) every M minutes "
                        f"of wall time, 0 for never (default {CHECKPOINT_MINUTES:g}); a killed run "
                        "run again with the same options continues from it")


TABLE_EXAMPLES = """examples:
  rasp experiment table --report-only                 rewrite docs/experiments.md and the plots from
                                                      the result files (seconds; trains nothing)
  rasp experiment table --dry-run                     list the grid's runs whose result is missing
  rasp experiment table --quick                       a small, short grid (minutes): runs/experiments-quick/
  rasp experiment table --seeds 0 --jobs 2            seed 0 of every missing run, two at a time
  rasp experiment table --ray                         every missing run as a task of a Ray instance
                                                      started here (all this machine's cores)
  rasp experiment table --ray HEAD:6379 --checkpoints /shared/runs
                                                      on a Ray cluster (`ray start --head` on HEAD)
  rasp experiment table --only 'khop2_.*' --time-budget 3600
                                                      the 2-hop runs, starting none after an hour"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "experiment", help="train embeddings of a frozen universal transformer (Dyck-1, k-hop)",
        description=fill("Program a frozen transformer by training only its token/position "
                         "embeddings and unembedding, on Dyck-1 or k-hop induction heads; or run "
                         "the whole grid."),
        epilog=EXAMPLES["experiment"], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="experiment_command", metavar="TASK")
    for task in ("dyck1", "khop"):
        _add_run_options(sub.add_parser(task, help=TASK_HELP[task], description=TASK_HELP[task],
                                        epilog=EXAMPLES[task],
                                        formatter_class=argparse.RawDescriptionHelpFormatter), task)
    t = sub.add_parser("table", help="run the grid (resumable) and write docs/experiments.md + plots",
                       description="Run every configuration of the grid whose result file is missing, "
                                   "then write the report and the plots from all result files.",
                       epilog=TABLE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--quick", action="store_true",
                   help="a small, short grid (minutes) written to runs/experiments-quick/")
    t.add_argument("--device", default="cpu", help="cpu or cuda")
    t.add_argument("--jobs", type=int, default=None,
                   help="runs in parallel, each on one CPU thread (default 1; with --ray, the CPUs "
                        "of the Ray cluster)")
    t.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="submit each run as a Ray task (pip install 'rasp-compiler[ray]'): to the "
                        "cluster at ADDRESS (HOST:6379, printed by `ray start --head`), or without "
                        "ADDRESS to a Ray instance started here; the result files are those of the "
                        "local path, written by this process (docs/experiments.md)")
    t.add_argument("--results", default=None, help="result directory (default docs/results/experiments)")
    t.add_argument("--doc", default=None, help="report path (default docs/experiments.md)")
    t.add_argument("--img", default=None, help="plot directory (default docs/img)")
    t.add_argument("--only", default=None,
                   help="run only grid entries whose name matches this regular expression "
                        "(the report uses all result files)")
    t.add_argument("--seeds", default=None,
                   help="run only these seeds, comma-separated (e.g. 0 first, then 1,2)")
    t.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                   help="start no run after this many seconds, a positive number (runs in flight "
                        "finish; the rest stay missing for the next invocation)")
    t.add_argument("--checkpoints", default=None, metavar="DIR",
                   help="where each run keeps its checkpoint and resume state, DIR/NAME (default "
                        "runs/experiments, with --quick runs/experiments-quick/checkpoints; with "
                        "--ray, a directory every node can write, shared for a killed run to resume "
                        "on another node)")
    _add_checkpoint_options(t)
    t.add_argument("--report-only", action="store_true", help="run nothing; rewrite the report")
    t.add_argument("--dry-run", action="store_true", help="list the missing runs and stop")
    t.add_argument("--force", action="store_true", help="replace --doc even where it is not an earlier "
                   "report of this command")
    t.set_defaults(func=_table)

    pr = sub.add_parser(
        "probe", help="where a trained run's frozen heads attend, and where it errs",
        description=fill("Load a run's checkpoint (a directory with model.safetensors and config.json, "
                    "as `rasp experiment dyck1|khop` writes) and measure, on fresh test-split "
                    "inputs, the share of positions whose strongest attention lands on each role: "
                    "self, previous, first and, for k-hop, each hop pointer sigma_j and the "
                    "occurrence before it. For k-hop it also gives the accuracy by pointer distance."),
        epilog=EXAMPLES["probe"], formatter_class=argparse.RawDescriptionHelpFormatter)
    pr.add_argument("run", help="checkpoint directory (e.g. runs/experiments/NAME)")
    pr.add_argument("--samples", type=int, default=256, help="test-split inputs (default 256)")
    pr.add_argument("--seed", type=int, default=7, help=f"seed of the probe inputs, {SEED_HELP} (default 7)")
    pr.add_argument("--json", action="store_true", help="print the probe as JSON")
    pr.add_argument("--save", default=None, metavar="FILE", help="also write the JSON to FILE")
    pr.add_argument("--force", action="store_true", help="with --save: replace a file that is not an "
                    "earlier probe's JSON")
    pr.set_defaults(func=_probe)

    def _no_task(args) -> int:
        p.print_help()
        return 2
    p.set_defaults(func=_no_task)


def _run(args) -> int:
    import dataclasses

    from rasp_compiler.experiments.grid import FLOORS, floor_settings, run_config
    from rasp_compiler.experiments.models import sparse_construction
    from rasp_compiler.experiments.runfiles import refuse_other_finished_run
    from rasp_compiler.experiments.train import train

    check_seed(args)
    check_at_least(args, 1, "width", "layers", "heads", "steps", "batch", "threads")
    check_at_least(args, 0, "curriculum", "checkpoint_every")
    check_finite(args, "checkpoint_minutes")
    check_finite(args, "lr", positive=True)
    check_not_empty(args, "out", "device")  # --out '' trained into runs/experiments/NAME instead
    _check_threads(args.threads)
    arch = args.arch or ("attn" if args.task == "dyck1" else "attn-res-ln")
    k = getattr(args, "k", None)
    shaped = args.construction != "auto" or any(getattr(args, name) is not None
                                                 for name in ("width", "layers", "heads"))
    # a shape the user gives is theirs to finish: the floor settings come whole or not at all
    recipe = None if shaped or args.settings == "base" else \
        floor_settings(args.task, k, args.backbone, arch)
    overrides = dict(recipe or {})
    overrides.update({name: getattr(args, name) for name in ("width", "layers", "heads", "steps",
                                                             "batch", "lr", "precision")
                      if getattr(args, name) is not None})
    if args.construction != "auto":
        overrides["construction"] = args.construction
    if getattr(args, "curriculum", 0):
        overrides["curriculum"] = args.curriculum
    if getattr(args, "aux", False):
        overrides["aux"] = True
    cfg = run_config(args.task, k, args.backbone, arch, args.seed, device=args.device,
                     threads=args.threads, **overrides)
    if (args.heads not in (None, 1) and cfg.backbone == "sparse"
            and sparse_construction(cfg.arch, cfg.construction) == "A"):
        raise UserError(f"--heads {args.heads} does not apply: the sparse construction A has one head",
                        hint="--construction C or paths for several heads, or drop --heads")
    if cfg.backbone == "sparse" and sparse_construction(cfg.arch, cfg.construction) == "A":
        # the base settings' 4 heads were recorded and printed (H=4) for a backbone of one head
        cfg = dataclasses.replace(cfg, heads=1)
    out = args.out or f"runs/experiments/{cfg.name()}"
    if not args.json:
        key = (args.task, k if args.task == "khop" else None, args.backbone)
        print(f"settings: floor (measured to reach the paper's {100 * FLOORS[key]:.1f} %)" if recipe
              else "settings: base", file=sys.stderr)
    if not args.no_resume:
        # a finished run of other settings there was replaced without a word (the grid's runs
        # each have their own directory, and retrain one whose settings moved on)
        refuse_other_finished_run(out, dataclasses.asdict(cfg), cfg.name())
    result, _ = train(cfg, out=out, progress=not args.no_progress, resume=not args.no_resume,
                      checkpoint_every=args.checkpoint_every,
                      checkpoint_minutes=args.checkpoint_minutes,
                      # with --no-progress too: its summary's seconds are the saved run's, no training
                      say_finished=True)
    if args.json:
        print(json.dumps(result))
    else:
        k = f" k={cfg.k}" if cfg.k else ""
        backbone = cfg.backbone + (f" ({cfg.construction})" if cfg.construction != "auto" else "")
        cur = (f" curriculum={cfg.curriculum}/hop" if cfg.curriculum else "") + \
            (f" aux-hops=1..{cfg.k - 1}" if cfg.aux else "")
        print(f"{cfg.task}{k} backbone={backbone} arch={cfg.arch} width={cfg.width} "
              f"L={cfg.layers} H={cfg.heads} steps={cfg.steps}{cur} lr={cfg.lr} "
              f"precision={cfg.precision} seed={cfg.seed}")
        print(f"test accuracy {result['test_accuracy']:.4f}  (majority baseline "
              f"{result['majority_baseline']:.4f})")
        print(f"trainable parameters {result['trainable_params']}, frozen {result['frozen_params']}; "
              f"{result['seconds']:.1f} s; checkpoint in {out}")
    return 0


def _check_threads(threads: int) -> None:
    """More threads than cores only makes a run slower (193 s instead of 3 s for 5 steps with
    --threads 10000 on 2 cores), so it is refused rather than silently accepted."""
    import os

    cores = os.cpu_count() or 1
    if threads > cores:
        raise UserError(f"--threads {threads} is more than this machine's {cores} CPU cores",
                        f"use --threads 1 to {cores}")


REPORT_MARK = "<!-- generated by `rasp experiment table"  # the report's own second line


def _check_report_file(doc: str) -> None:
    """--doc replaces a file only if it is an earlier report (it starts with the report's marker):
    --doc README.md, or a model's file, was replaced after the runs."""
    path = Path(doc)
    if path.is_dir():
        raise UserError(f"--doc {doc} is a directory, not a file",
                        hint=f"give the report's file name, e.g. {path / 'experiments.md'}")
    if not path.is_file() or path.is_symlink():
        return
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return  # unreadable: writing it says why
    if REPORT_MARK not in head and path.stat().st_size:
        raise UserError(f"--doc {doc} exists and is not an earlier report of rasp experiment table; "
                        "it is not replaced", hint="give another --doc, or --force to replace it")


def _table(args) -> int:
    from rasp_compiler.experiments import grid, report
    from rasp_compiler.experiments.train import prepare_out

    check_at_least(args, 1, "jobs")
    check_at_least(args, 0, "checkpoint_every")
    check_finite(args, "time_budget", positive=True)
    check_finite(args, "checkpoint_minutes")
    check_not_empty(args, "only", "seeds", "results", "doc", "img", "device")
    if args.report_only:  # it runs nothing: options choosing or pacing runs would be ignored
        given = [flag for flag, on in (("--dry-run", args.dry_run), ("--only", args.only),
                                       ("--seeds", args.seeds), ("--time-budget", args.time_budget),
                                       ("--jobs", args.jobs is not None),
                                       ("--ray", args.ray is not None)) if on]
        if given:
            raise UserError(f"--report-only runs nothing, so {', '.join(given)} would do nothing",
                            hint=f"drop {', '.join(given)}, or drop --report-only")
    if args.dry_run:  # it lists the missing runs: options pacing or placing runs were ignored
        given = [flag for flag, on in (("--time-budget", args.time_budget),
                                       ("--jobs", args.jobs is not None),
                                       ("--ray", args.ray is not None),
                                       ("--checkpoints", args.checkpoints is not None),
                                       ("--checkpoint-every", args.checkpoint_every)) if on]
        if given:
            raise UserError(f"--dry-run lists the missing runs and runs none, so {', '.join(given)} "
                            "would do nothing", hint=f"drop {', '.join(given)}, or drop --dry-run")
    if args.quick:
        configs = grid.quick_grid(device=args.device)
        results = args.results or "runs/experiments-quick/results"
        doc = args.doc or "runs/experiments-quick/experiments.md"
        img = args.img or "runs/experiments-quick/img"
        # beside the quick grid's other files, as --quick's help says (they went to runs/experiments)
        checkpoints = args.checkpoints or "runs/experiments-quick/checkpoints"
    else:
        configs = grid.full_grid(device=args.device)
        results = args.results or "docs/results/experiments"
        doc = args.doc or "docs/experiments.md"
        img = args.img or "docs/img"
        checkpoints = args.checkpoints or "runs/experiments"
    if args.only:
        import re
        try:
            pattern = re.compile(args.only)
        except re.error as err:
            raise UserError(f"--only: bad regular expression: {err}") from None
        configs = [c for c in configs if pattern.search(c.name())]
    if args.seeds:
        try:
            seeds = {int(x) for x in args.seeds.split(",")}
        except ValueError:
            raise UserError(f"--seeds: expected comma-separated integers, got {args.seeds!r}") from None
        if min(seeds) < 0:
            raise UserError(f"--seeds: seeds are at least 0, got {args.seeds!r}")
        configs = [c for c in configs if c.seed in seeds]
    if (args.only or args.seeds) and not configs:  # a typo: "0 of 0 runs", then the report rewritten
        chosen = " and ".join(f"{flag} {value}" for flag, value in
                              (("--only", args.only), ("--seeds", args.seeds)) if value)
        verb = "select" if args.only and args.seeds else "selects"
        raise UserError(f"{chosen} {verb} no run of the {'quick ' if args.quick else ''}grid",
                        hint="--dry-run without --only and --seeds lists the runs still missing")
    # --dry-run counted every run missing (the other modes check it as a place to write, below)
    if (args.dry_run or args.report_only) and Path(results).exists() and not Path(results).is_dir():
        raise UserError(f"--results {results} is a file, not the directory of the grid's result files",
                        hint="give the directory the grid writes its result files to")
    if args.report_only and not Path(results).is_dir():  # a typo would rewrite the report from 0 runs
        raise UserError(f"--results {results}: no such directory, so there is nothing to report",
                        hint="give the directory the grid wrote its result files to")
    if not args.dry_run:   # the grid writes these only after hours of runs: check them first
        if not args.report_only:
            prepare_out(results, "--results", "the results")
        prepare_out(Path(doc).parent, "--doc", "the report")
        if not args.force:
            _check_report_file(doc)
        prepare_out(img, "--img", "the plots")
    if args.dry_run:
        missing = grid.missing(configs, results)
        for c in missing:
            print(c.name())
        for path in grid.damaged(configs, results):
            print(f"{path} is damaged (not a complete result): counted as missing", file=sys.stderr)
        print(f"{len(missing)} of {len(configs)} runs missing", file=sys.stderr)
        return 0
    if not args.report_only:
        grid.run_grid(configs, results, jobs=args.jobs or (None if args.ray is not None else 1),
                      progress=sys.stderr.isatty(), ray=args.ray is not None,
                      ray_address=args.ray or None,
                      time_budget=args.time_budget, checkpoints=checkpoints,
                      checkpoint_every=args.checkpoint_every,
                      checkpoint_minutes=args.checkpoint_minutes,
                      # with --no-progress too: its summary's seconds are the saved run's, no training
                      say_finished=True)
    report.write_report(results, doc, img, quick=args.quick)
    print(f"wrote {doc} and plots in {img}")
    return 0


def _probe(args) -> int:
    from rasp_compiler.experiments.probe import check_probe_file, format_probe, probe_checkpoint, save_probe
    from rasp_compiler.experiments.runfiles import RESUME_FILE

    check_at_least(args, 1, "samples")
    check_seed(args)
    check_not_empty(args, "save")
    run = Path(args.run)
    if not (run / "config.json").is_file() or not (run / "model.safetensors").is_file():
        if (run / RESUME_FILE).is_file():  # a killed run: "not a run checkpoint" sent users elsewhere
            raise UserError(f"{run} holds an unfinished run (its {RESUME_FILE}, no final weights yet)",
                            "run the same `rasp experiment dyck1|khop` command again: it continues "
                            "from that state and writes the weights the probe reads")
        from rasp_compiler.artifact_kinds import describe

        held = describe(run)  # a UT or a backbone directory: say which, as the other loaders do
        raise UserError(f"{run} is not a run checkpoint (no config.json and model.safetensors)",
                        (f"{held}; " if held else "")
                        + "pass the directory a `rasp experiment dyck1|khop` run wrote (its --out)")
    if args.save and not args.force:  # before the probe runs
        check_probe_file(args.save)
    elif args.force and not args.save:
        raise UserError("--force applies only with --save", "add --save FILE, or drop --force")
    result = probe_checkpoint(run, samples=args.samples, seed=args.seed)
    if args.save:
        save_probe(result, args.save, force=args.force)
    print(json.dumps(result) if args.json else format_probe(result))
    return 0
