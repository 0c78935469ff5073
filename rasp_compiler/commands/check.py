"""``rasp check``: compile a program and compare the model with the interpreter."""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time

from rasp_compiler.commands.options import SEED_HELP, check_seed, check_tokens_or_range
from rasp_compiler.errors import UserError

EPILOG = """examples:
  rasp check programs/reverse.rasp --vocab abc --max-len 6 --exhaustive
  rasp check programs/sort.rasp --vocab abcde --max-len 64 --samples 2000 --json

Inputs checked: --exhaustive, every input of every length up to --max-len; --samples K, K random
inputs (random length and tokens) plus the edge inputs: |vocab| x max-len all-equal inputs (every
token at every length; |vocab| with --fixed-length) and C(min(|vocab|, 4), 2) alternating pairs
at the longest length, each distinct input checked once (--samples 300 --vocab abc --max-len 512
checks 300 + 1,539 edge inputs).
Without either, every input is checked when there are at most 50,000 of them, else 1,000 random
inputs plus the edge inputs. With --input-range LO HI: K (default 1,000) random inputs plus 3
corner inputs a length (all LO, all HI, alternating; none for integer tokens).
Numerical outputs agree within 1e-4 (float32) / 1e-9 (float64) times max(1, |value|).
On a terminal, a check that will take more than about 2 s (timed on its first inputs) shows a
progress bar on stderr.
Exit status 0 only if every input agrees."""


# The estimated seconds of a check from which `rasp check` shows a progress bar on a terminal.  It
# was a count (2,000 inputs, at ~1 ms an input), but at max_len 512 an input takes ~0.13 s: 1,837
# inputs ran for 8 minutes without a word.
PROGRESS_AFTER = 2.0
# The most inputs one check takes (--samples, or --exhaustive's count): all are held in memory, and
# the interpreter takes about 1 ms an input; --samples 100,000,000 ran out of memory.
MAX_SAMPLES = 1_000_000
MAX_SAMPLE_TOKENS = 20_000_000  # --samples x --max-len: the drawn inputs are held at once


class CheckProgress:
    """A check's progress bar (tqdm, on stderr), shown only on a terminal and only once the time
    of the inputs done so far says the whole check will take more than PROGRESS_AFTER seconds.
    Called with the number of inputs done in each batch.  ``rasp eval --inputs`` and ``rasp
    universal --check`` (``unit="target"``) show theirs with it too."""

    clock = staticmethod(time.monotonic)

    def __init__(self, total: int, desc: str, unit: str = "input") -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.done = 0
        self.bar = None
        self.terminal = sys.stderr.isatty()
        self.start = self.clock()

    def __call__(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.terminal and 0 < self.done < self.total:
            elapsed = self.clock() - self.start
            if elapsed * self.total / self.done > PROGRESS_AFTER:
                from tqdm import tqdm
                self.bar = tqdm(total=self.total, initial=self.done, desc=self.desc, unit=self.unit,
                                leave=False, dynamic_ncols=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> "CheckProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def register(subparsers: argparse._SubParsersAction) -> None:
    from rasp_compiler.commands.compile import add_model_options

    p = subparsers.add_parser("check", help="compile a program and compare it with the interpreter",
                              description="Compile a RASP program and check the compiled model against "
                              "the reference interpreter.", epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_options(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--exhaustive", action="store_true", help="every input up to --max-len")
    mode.add_argument("--samples", type=int, metavar="K",
                      help="K random inputs of all lengths, plus the edge inputs: |vocab| x max-len "
                      "all-equal ones and up to 6 alternating ones (real-valued: 3 corners a length)")
    p.add_argument("--seed", type=int, default=None,
                   help=f"seed of the random inputs ({SEED_HELP}; default 0; not with --exhaustive)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--device", default="cpu", metavar="cpu|cuda",
                   help="where the compiled model runs (default cpu); the interpreter runs on the CPU")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    check_seed(args)
    import torch

    from rasp_compiler.commands.compile import compile_from_args, parse_vocab
    from rasp_compiler.compiler.checking import (
        EXHAUSTIVE_LIMIT,
        check_model,
        count_inputs,
        edge_inputs,
        exhaustive_inputs,
        random_inputs,
    )
    from rasp_compiler.lang import load_program

    if args.samples is not None and args.samples < 1:
        raise UserError(f"--samples must be at least 1, got {args.samples}")
    if args.samples is not None and args.samples > MAX_SAMPLES:  # all are drawn and kept at once
        raise UserError(f"--samples {args.samples:,} is more than the {MAX_SAMPLES:,} a check takes",
                        hint="several runs with different --seed")
    if args.samples is not None and isinstance(args.max_len, int) and \
            args.samples * args.max_len > MAX_SAMPLE_TOKENS:  # 1M inputs at 512 took 6.5 GB to draw
        fits = MAX_SAMPLE_TOKENS // args.max_len
        raise UserError(f"--samples {args.samples:,} at --max-len {args.max_len} draws up to "
                        f"{args.samples * args.max_len:,} tokens, more than the {MAX_SAMPLE_TOKENS:,} "
                        "a check holds at once", hint=f"use --samples {fits:,} or fewer, in several "
                        "runs with different --seed")
    if args.exhaustive and args.seed is not None:  # it would be ignored: no input is drawn
        raise UserError("--seed draws random inputs, and --exhaustive checks every input",
                        hint="drop --seed, or use --samples K instead of --exhaustive")
    args.seed = 0 if args.seed is None else args.seed
    check_tokens_or_range(args)
    if getattr(args, "input_range", None) is not None:  # real-valued tokens
        from rasp_compiler.commands.real_options import main_check

        # the real-valued check draws its inputs: refuse what it would ignore
        if args.exhaustive:
            raise UserError("--exhaustive needs a vocabulary: real-valued inputs (--input-range) are "
                            "sampled", hint="use --samples K")
        return main_check(args)
    torch.set_num_threads(max(1, min(4, torch.get_num_threads())))
    if args.vocab is None:
        raise UserError("--vocab is required (or --input-range LO HI for real-valued tokens)")
    vocab = parse_vocab(args.vocab)
    if args.exhaustive and isinstance(args.max_len, int):  # refuse before spending the compile
        given = getattr(args, "fixed_length", None)
        _refuse_exhaustive(len(vocab) ** given if given else count_inputs(len(vocab), args.max_len))
    model = compile_from_args(args)
    program = load_program(args.file, output=args.output or "out")
    # a model for one input length (--fixed-length) refuses every other length: check that one only
    fixed = model.config.get("fixed_length")
    total = len(vocab) ** fixed if fixed else count_inputs(len(vocab), args.max_len)
    if args.exhaustive:
        _refuse_exhaustive(total)
    if args.exhaustive or (args.samples is None and total <= EXHAUSTIVE_LIMIT):
        mode = "exhaustive"
        inputs = ([list(x) for x in itertools.product(vocab, repeat=fixed)] if fixed
                  else list(exhaustive_inputs(vocab, args.max_len)))
        drawn = len(inputs)
    elif fixed:
        mode = "random"
        rng = random.Random(args.seed)
        inputs = [[rng.choice(vocab) for _ in range(fixed)] for _ in range(args.samples or 1000)]
        edges = [x for x in edge_inputs(vocab, fixed) if len(x) == fixed]
    else:
        mode = "random"
        inputs = random_inputs(vocab, args.max_len, args.samples or 1000, args.seed)
        edges = edge_inputs(vocab, args.max_len)
    if mode == "random":
        n_random, n_edge = len(inputs), len(edges)
        inputs += edges
        drawn = len(inputs)
        # short random inputs repeat, and edge inputs may be among them: count each input once
        inputs = [list(x) for x in dict.fromkeys(tuple(x) for x in inputs)]
    model.to(args.device)
    with CheckProgress(len(inputs), f"checking ({mode})") as bar:
        res = check_model(model, program, inputs, progress=bar)
    stats = model.stats()
    report = {"layers": stats["layers"], "heads_per_layer": stats["heads_per_layer"],
              "residual_width": stats["residual_width"], "mlp_hidden": stats["mlp_hidden"],
              "params": stats["params"], "mode": mode, "inputs_checked": res.inputs_checked,
              "inputs_agreeing": res.inputs_agreeing, "inputs_undefined": res.inputs_undefined,
              "max_abs_error": res.max_abs_error, "compile_seconds": stats["compile_seconds"],
              "output_encoding": model.config["output"]["encoding"], "device": str(model.device),
              "failures": res.failures}
    if mode == "random":
        report.update(inputs_random=n_random, inputs_edge=n_edge)
    if args.json:
        print(json.dumps(report))
    else:
        print(model.summary())
        print(f"{mode}: {res.inputs_agreeing}/{res.inputs_checked} inputs agree"
              + (f", max abs error {res.max_abs_error:.3g}"
                 if report["output_encoding"] == "numerical" else "")
              + (f" ({res.inputs_undefined} inputs where the interpreter raises were skipped)"
                 if res.inputs_undefined else "")
              + (f" ({n_random} random + {n_edge} edge inputs"
                 + (f"; {drawn - len(inputs)} repeated among the {drawn} were checked once"
                    if drawn > len(inputs) else "") + ")"
                 if mode == "random" else ""))
        for f in res.failures:
            print(f"  disagree on {f['input']!r}: model {f['model']!r}, interpreter {f['interpreter']!r}")
    failed = check_failure(res.inputs_checked, res.inputs_checked - res.inputs_agreeing, res.inputs_undefined)
    if failed:  # in text and --json mode: exit 1 never comes without a word on stderr
        print(failed.render(), file=sys.stderr)
        return 1
    return 0


def check_failure(checked: int, disagreeing: int, undefined: int, flagged: int = 0) -> UserError | None:
    """Why a check fails, as the one error line ``rasp check`` prints on stderr (beside its report,
    also with --json); None when it passes.  A check of no input fails: it showed nothing."""
    if disagreeing:
        return UserError(f"the model disagrees with the interpreter on {disagreeing:,} of {checked:,} inputs")
    if checked == 0:
        why = [f"the interpreter raises on {undefined:,}" if undefined else "",
               f"the model flagged {flagged:,} (outside its stated guarantee)" if flagged else ""]
        return UserError("no input was checked" + (": " + ", ".join(filter(None, why)) if any(why) else ""),
                         hint="the program is undefined on every input tried (its compile notes say "
                              "where); other inputs: --seed, --samples or --max-len" if undefined else None)
    return None


def _refuse_exhaustive(total: int) -> None:
    """A UserError when ``total`` inputs are more than --exhaustive checks; a count too long to
    read is shown as a power of ten."""
    if total > MAX_SAMPLES:
        shown = f"{total:,}" if total < 10 ** 15 else f"about 10^{len(str(total)) - 1}"
        raise UserError(f"--exhaustive would check {shown} inputs, more than the {MAX_SAMPLES:,} "
                        "it checks", hint="use --samples K")
