"""``rasp universal --with-mlps``: compiled programs, MLPs included, through the lookup UT's fixed
backbone (``rasp_compiler.universal.lookup``).  The work is in ``lookup.batch``; this module
checks the options and prints."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from rasp_compiler.errors import UserError

# options of the other modes of ``rasp universal``, which would be silently ignored here
IGNORED = ("--construction", "--layers", "--heads", "--dim", "--residual", "--no-values", "--width",
           "--head-dim", "--trials", "--lengths", "--dtype", "--tolerance", "--save", "--load", "--target",
           "--attention-layer")


def run_lookup(args: argparse.Namespace, refuse: Callable, single_thread: Callable) -> int:
    from rasp_compiler.commands.check import CheckProgress
    from rasp_compiler.commands.compile import CompileStatus, parse_vocab
    from rasp_compiler.universal.lookup.batch import check_programs

    refuse(args, IGNORED, "with --with-mlps (the lookup UT's class comes from the programs or --class)")
    if args.program and args.programs:
        raise UserError("give --program FILE or --programs FILE..., not both")
    paths = list(args.programs or ([args.program] if args.program else []))
    if not paths:
        raise UserError("--with-mlps needs --program FILE or --programs FILE...",
                        hint="e.g. rasp universal --program programs/reverse.rasp --vocab abc --with-mlps "
                             "--check")
    if not args.vocab:
        raise UserError("--with-mlps needs --vocab (the tokens the programs are compiled for)")
    if len(paths) > 1 and (args.save_encoding or args.encoding):
        raise UserError("--save-encoding and --encoding take one program (--program FILE)")
    if args.backbone and (args.save_backbone and args.save_backbone == args.backbone):
        raise UserError("--save-backbone names the directory --backbone reads from")
    vocab = parse_vocab(args.vocab)
    single_thread()
    status = CompileStatus(doing="universal")
    bars: list = []

    def progress(total: int, index: int) -> CheckProgress:
        status("checking")
        bars.append(CheckProgress(total, f"checking {paths[index]}"))
        return bars[-1]
    try:
        report = check_programs(
            paths, vocab, args.max_len, output=args.output, causal=args.causal, class_text=args.size_class,
            backbone_dir=args.backbone, save_backbone=args.save_backbone, force=getattr(args, "force", False),
            encodings={paths[0]: args.encoding} if args.encoding else None,
            save_encodings={paths[0]: args.save_encoding} if args.save_encoding else None,
            check=args.check, max_inputs=args.max_inputs, seed=args.seed, keep_going=len(paths) > 1,
            stage=status, progress=progress)
    finally:
        for bar in bars:
            bar.close()
        status.close()
    if args.json:
        for rep in report.programs:
            print(json.dumps(rep.as_json(report.backbone)))
        if len(paths) > 1:
            print(json.dumps({"total": report.total()}))
    else:
        _print_text(report, args)
    failed = _failed(report, args.check)
    if failed:  # in text and --json mode: exit 1 never comes without a word on stderr
        print(f"error: {failed}", file=sys.stderr)
        return 1
    return 0


def _failed(report, checked: bool) -> str | None:
    """What failed, in one line: the programs refused and (with --check) those the lookup UT ran
    but not exactly; None when none did."""
    refused = [r.program for r in report.programs if r.refused is not None]
    inexact = [r.program for r in report.programs if checked and r.refused is None and not r.exact]
    total = len(report.programs)
    parts = [f"{len(names)} of {total} program{'s' if total > 1 else ''} {what} ({', '.join(names)})"
             for names, what in ((refused, "refused"), (inexact, "not exact through the lookup UT"))
             if names]
    return "; ".join(parts) or None


def _print_text(report, args) -> None:
    bb = report.backbone
    size = bb.size
    print(f"lookup UT, class {size.describe()}")
    print(f"  backbone   width m = {size.width}, depth {size.depth} (attention + lookup per layer), "
          f"{bb.params:,} fixed parameters, sha256 {bb.sha256}")
    if args.save_backbone:
        print(f"  saved      {args.save_backbone}/backbone.safetensors, backbone.json")
    for rep in report.programs:
        if rep.refused is not None:
            print(f"{rep.program}: refused: {rep.refused}")
            continue
        info = rep.as_json(bb)
        print(f"{rep.program}: compiled d = {info['compiled_width']}, {info['compiled_layers']} layer(s); "
              f"UT width {info['width_ratio']:.2f}x (fitted class {info['fitted_width_ratio']:.2f}x), depth "
              f"{'n/a' if info['depth_ratio'] is None else format(info['depth_ratio'], '.1f') + 'x'}; "
              f"{info['program_tokens']} program tokens, "
              f"{info['program_params']:,} encoding entries")
        if args.save_encoding:  # as --save-backbone's line says where the backbone went
            print(f"  saved      {args.save_encoding}")
        if rep.run is None:
            continue
        r = rep.run
        what = f"all {r.inputs_checked} inputs" if rep.exhaustive else f"{r.inputs_checked} random inputs"
        spi = r.seconds_per_input
        fixed = rep.model.config.get("fixed_length")
        span = f"of length {fixed}" if fixed is not None else f"up to length {args.max_len}"
        print(f"  {what} {span}: decoded outputs equal to the "
              f"compiled model's {r.agree_compiled}, to the interpreter's {r.agree_interpreter}; "
              f"max |logit error| {r.max_abs_logit_error:.3e}; {1e3 * spi['ut']:.3f} ms an input "
              f"(compiled model {1e3 * spi['compiled']:.3f} ms)")
        if not rep.exact:
            print(f"  NOT EXACT: first disagreement {r.first_disagreement}", file=sys.stderr)
    if not args.check and any(r.refused is None for r in report.programs):
        # as the fixed UT says it: without --check nothing ran, and the output did not say so
        print("  (add --check to run the inputs through the backbone and compare)")
    if len(report.programs) > 1:
        t = report.total()
        err = "n/a" if t["max_abs_logit_error"] is None else f"{t['max_abs_logit_error']:.3e}"
        print(f"total: {t['programs']} programs, {t['exact']} exact, {t['refused']} refused; "
              f"{t['inputs_agreeing']}/{t['inputs_checked']} inputs agreeing; max |logit error| {err}")
