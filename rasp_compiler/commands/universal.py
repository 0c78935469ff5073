"""``rasp universal``: build fixed universal transformers, check them, and the width lower bound."""

from __future__ import annotations

import argparse
import json
import math
import sys

from rasp_compiler.commands.options import (
    SEED_HELP,
    check_at_least,
    check_finite,
    check_not_empty,
    check_seed,
)
from rasp_compiler.errors import UserError

EXAMPLES = """\
examples:
  rasp universal --construction sparse --layers 3 --dim 4 --check
  rasp universal --construction paths --layers 2 --heads 3 --dim 2 --residual --causal --check --json
  rasp universal --construction multihead --layers 4 --heads 2 --dim 8 --residual --save ut/mh
  rasp universal --load ut/mh --target my_target.safetensors --check
      # a target of ut/mh's class, saved in Python (no command writes one):
      #   Target.random(4, 2, 8, residual=True, values=False).save("my_target.safetensors")
  rasp universal --construction random --layers 4 --dim 8 --check --trials 20
  rasp universal --construction random --layers 2 --dim 4 --width 8 --head-dim 4 --check
      # below the width formula: a gradient fit, not exact; it reports the residual and exits 1
  rasp universal --program programs/frac_prevs.rasp --vocab helo --max-len 6
  rasp universal --program programs/histogram.rasp --vocab abc --attention-layer 0
  rasp universal --program programs/reverse.rasp --vocab abc --max-len 8 --with-mlps --check
      # any compiled program, MLPs included, through the fixed backbone of its size class
  rasp universal --programs programs/sort.rasp programs/reverse.rasp --vocab abc --with-mlps --check
      # several programs through one backbone: a line each (--json: a JSON line each), then a total
  rasp universal --program programs/sort.rasp --vocab abc --with-mlps --class small --check
      # refused: names what is too large and the class that holds it
  rasp universal lower-bound                      # table, H in 1..3, L in 1..5
  rasp universal lower-bound --heads 2 --layers 4 --residual --json

constructions and embedding widths m (d = target width, k = random head width, default d):
  sparse     one head, values, no residual          m = (2L+1) d
  looped     one shared layer applied L times       m = (2L+1) d
  multihead  H heads, no values (residual or not)   m = (HL+1) d
  paths      H heads with values                    m = d (1 + 2 sum_{l=1..L} H^l)
             ... with residual                      m = d (sum_{l=1..L} (H+1)^l + (H+1)^L)
  random     Gaussian; E by linear solves           m = 2 k H sum_{l<L} a^l  (a = H, H+1 with
             residual, 1 with --no-values); below that width or with k < d: gradient fit

The UT's weights never depend on the target: a target enters only through its embedding E (and U).
With --with-mlps the backbone is the lookup UT: per size class one fixed transformer, every compiled
attention head and MLP carried as a hard-attention lookup into program tokens placed before the
input; classes small, medium and large hold every shipped categorical program at max length 8.
A check of a few thousand inputs takes seconds; compiling and tabulating, well under a second
a program (dyck2 and shuffle_dyck2, the largest tables, a few seconds).
See docs/universal.md.
"""

FORMULA_TEXT = {"sparse": "(2L+1)d", "looped": "(2L+1)d", "multihead": "(HL+1)d"}
MAX_LENGTH = 4096   # 2 inputs x 4096^2 x 8 bytes = 268 MB per attention matrix (one head at a time)
BUILD_FLAGS = ("--construction", "--dim", "--causal", "--no-values", "--width", "--head-dim", "--seed")
CHECK_FLAGS = ("--check", "--trials", "--lengths", "--dtype", "--tolerance", "--save", "--load",
               "--target")
PROGRAM_FLAGS = ("--program", "--vocab", "--output", "--max-len", "--attention-layer", "--max-inputs")
LOOKUP_FLAGS = ("--with-mlps", "--programs", "--class", "--backbone", "--save-backbone", "--save-encoding",
                "--encoding")
DEFAULTS = {"values": True, "seed": 0, "trials": 10, "lengths": "1,2,3,5,8,13,21,32",
            "dtype": "float64", "max_len": 5, "max_inputs": 2000, "check": False, "causal": False,
            "residual": False, "with_mlps": False}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "universal", help="fixed universal transformers: build, save, check; width lower bound",
        description="Build a fixed universal transformer (UT) for a class of attention-only targets "
                    "(L layers, H heads, width d), encode random or saved targets into its input "
                    "embedding E, and check UT(X, E) = T(X).  'rasp universal lower-bound' computes "
                    "the width lower bound under attention matching.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", nargs="?", choices=["lower-bound"], metavar="lower-bound",
                   help="compute the rank of the path-product span (d = 1) instead of building a UT")
    g = p.add_argument_group("class and construction")
    g.add_argument("--construction", choices=["sparse", "looped", "multihead", "paths", "random"],
                   help="sparse: 0/1 blocks, 1 head, no residual; looped: the same, one shared layer "
                        "applied L times; multihead: H heads, no values; paths: H heads with values "
                        "(0/1 value masks, residual allowed); random: Gaussian R_Q, R_K, R_V "
                        "(docs/universal.md; required to build, paths with --program)")
    g.add_argument("--layers", "-L", type=int, help="target layers L")
    g.add_argument("--heads", "-H", type=int, help="heads per layer H (default 1 when building)")
    g.add_argument("--dim", "-d", type=int, help="target width d")
    g.add_argument("--residual", action="store_true", help="targets (and the UT) have a residual stream")
    g.add_argument("--causal", action="store_true", help="causal attention mask")
    g.add_argument("--no-values", dest="values", action="store_false",
                   help="random only: a class without value matrices (R_V = I)")
    g.add_argument("--width", type=int, metavar="M", help="random only: embedding width m (default: formula)")
    g.add_argument("--head-dim", type=int, metavar="K", help="random only: head width k (default: d)")
    g.add_argument("--seed", type=int, default=0,
                   help=f"seed of the random backbone and targets, {SEED_HELP} (default 0)")
    c = p.add_argument_group("checking and files")
    c.add_argument("--check", action="store_true", help="encode random targets and compare UT with target")
    c.add_argument("--trials", type=int, default=10, help="random targets to check (default 10)")
    c.add_argument("--lengths", default="1,2,3,5,8,13,21,32",
                   help="comma-separated sequence lengths (default 1,2,3,5,8,13,21,32)")
    c.add_argument("--dtype", choices=["float64", "float32"], default="float64", help="UT precision")
    c.add_argument("--tolerance", type=float,
                   help="max error accepted by --check, finite and >= 0 (default 1e-10, random 1e-8, "
                        "float32 1e-4); a NaN or inf output always fails")
    c.add_argument("--save", metavar="DIR", help="save the UT (ut.safetensors + ut.json) to DIR")
    c.add_argument("--force", action="store_true",
                   help="with --save or --save-backbone: write into a non-empty directory that holds "
                        "something else (the artifact's files are replaced, other files kept); with "
                        "--save-encoding: replace a file that is not a program encoding")
    c.add_argument("--load", metavar="DIR", help="use a saved UT instead of building one")
    c.add_argument("--target", metavar="FILE", help="check this saved target (safetensors) instead of "
                                                    "random ones")
    r = p.add_argument_group("a RASP-compiled target (the attention-only class: no MLPs)")
    r.add_argument("--program", metavar="FILE", help="compile this RASP program and run it through a UT "
                                                     "(default construction: paths)")
    r.add_argument("--vocab", help="tokens for --program: a string of characters or a JSON list")
    r.add_argument("--output", metavar="NAME", default=None,
                   help="the s-op of --program to compile "
                        "(default: out, the value of its last expression or assignment)")
    r.add_argument("--max-len", type=int, default=5, help="longest input for --program (default 5)")
    r.add_argument("--attention-layer", type=int, metavar="N",
                   help="simulate only attention sublayer N of the compiled model (MLPs elsewhere allowed)")
    r.add_argument("--max-inputs", type=int, default=2000,
                   help="inputs checked for --program: all up to --max-len if at most this many, "
                        "else this many random ones (default 2000)")
    u = p.add_argument_group("programs with MLPs: the lookup UT (one fixed backbone per size class)")
    u.add_argument("--with-mlps", action="store_true",
                   help="run --program (or --programs) through the lookup UT: MLPs included, the program "
                        "entering only as input embeddings and program tokens")
    u.add_argument("--programs", nargs="+", metavar="FILE",
                   help="several programs through ONE backbone (the smallest class holding all): a line "
                        "each, then a total (implies --with-mlps)")
    u.add_argument("--class", dest="size_class", metavar="NAME|SIZES",
                   help="the size class: small, medium, large, or L=..,H=..,T=..,k=..,o=..,c=..,vocab=..,"
                        "len=..,rows=.. (default: the smallest that holds the program)")
    u.add_argument("--backbone", metavar="DIR",
                   help="use the backbone saved in DIR (checked against its class)")
    u.add_argument("--save-backbone", metavar="DIR", help="save the backbone (safetensors + JSON) to DIR")
    u.add_argument("--save-encoding", metavar="FILE", help="save the program's encoding (safetensors)")
    u.add_argument("--encoding", metavar="FILE",
                   help="run this saved encoding of --program instead of encoding it again (a tampered "
                        "file, or one made for another backbone, is refused)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "lower-bound":
        return _lower_bound(args)
    check_seed(args)
    check_at_least(args, 1, "layers", "heads", "dim", "width", "head_dim", "trials", "max_len", "max_inputs")
    check_at_least(args, 0, "attention_layer")
    check_finite(args, "tolerance")
    check_not_empty(args, "program", "vocab", "output", "save", "load", "target", "size_class", "backbone",
                    "save_backbone", "save_encoding", "encoding")
    if args.with_mlps or args.programs:
        from rasp_compiler.commands.universal_lookup import run_lookup

        return run_lookup(args, _refuse, single_thread)
    _refuse(args, LOOKUP_FLAGS, "without --with-mlps")
    if args.program:
        return _program(args)
    # the options of --program, and those of a check, would be ignored where they do not apply
    _refuse(args, PROGRAM_FLAGS[1:], "without --program")
    if not args.check and not args.target:
        _refuse(args, ("--trials", "--lengths", "--tolerance", "--dtype"), "without --check or --target")
    if args.target:
        _refuse(args, ("--trials",), "with --target (it checks the one saved target)")
    return _build(args)


# ----- lower bound -----------------------------------------------------------------------------
def _lower_bound(args: argparse.Namespace) -> int:
    from rasp_compiler.universal.lower_bound import MAX_PATHS, lower_bound_table

    for name in ("heads", "layers"):
        v = getattr(args, name)
        if v is not None and not 1 <= v <= 8:
            raise UserError(f"--{name} must be between 1 and 8 for the lower bound (got {v})")
    ignored = [flag for flag in BUILD_FLAGS + CHECK_FLAGS + PROGRAM_FLAGS if _given(args, flag)]
    if ignored:
        raise UserError(f"'rasp universal lower-bound' takes only --heads, --layers, --residual and "
                        f"--json, not {', '.join(ignored)}")
    heads = (args.heads,) if args.heads else (1, 2, 3)
    layers = (args.layers,) if args.layers else (1, 2, 3, 4, 5)
    base = max(heads) + int(args.residual)
    paths = base ** max(layers)
    if paths > MAX_PATHS:  # it named no option, though the table's default layers 1..5 may be the cause
        fit = max((n for n in range(1, 9) if base ** n <= MAX_PATHS), default=0)
        a = f"H+1 = {base}" if args.residual else f"H = {base}"
        raise UserError(f"{paths:,} paths is too many for the exact rank computation (at most "
                        f"{MAX_PATHS:,}, about 20 s; the time grows as the cube): "
                        f"({a}) ^ (L = {max(layers)})",
                        hint=f"with --heads {max(heads)}, give --layers {fit} or fewer" if fit
                        else "fewer --heads")
    rows = lower_bound_table(heads, layers, args.residual)
    if args.json:
        print(json.dumps(rows[0] if len(rows) == 1 else rows))
        return 0
    a = "(H+1)" if args.residual else "H"
    print(f"rank of the path-product span, d = 1, attention matching, residual "
          f"{'on' if args.residual else 'off'} (expected {a}^L): a lower bound on the width m")
    print("  H \\ L " + "".join(f"{l:>8}" for l in layers))
    for h in heads:
        print(f"  {h:<6}" + "".join(f"{r['rank']:>8}" for r in rows if r["heads"] == h))
    return 0


# ----- build / check ---------------------------------------------------------------------------
def _lengths(text: str) -> tuple[int, ...]:
    try:
        out = tuple(int(x) for x in text.split(","))   # an empty item ('1,,2') is a typo, not a skip
    except ValueError:
        raise UserError(f"--lengths must be comma-separated integers, got {text!r}") from None
    if min(out) < 1:
        raise UserError(f"--lengths must be positive integers, got {text!r}")
    if max(out) > MAX_LENGTH:
        raise UserError(f"--lengths: {max(out)} is longer than the {MAX_LENGTH} this check supports "
                        "(it compares n x n attention matrices in float64)")
    return out


def _given(args: argparse.Namespace, flag: str) -> bool:
    """Whether the user set option ``flag`` (a value other than its default)."""
    name = flag[2:].replace("-", "_")
    name = "values" if name == "no_values" else name    # --no-values sets args.values to False
    name = "size_class" if name == "class" else name     # --class is args.size_class
    return getattr(args, name) != DEFAULTS.get(name)


def _refuse(args: argparse.Namespace, flags: tuple[str, ...], why: str) -> None:
    """Options that would be silently ignored in this mode are an error instead."""
    given = [flag for flag in flags if _given(args, flag)]
    if given:
        raise UserError(f"{', '.join(given)} cannot be used {why}")


def _check_loaded(args: argparse.Namespace, cfg) -> None:
    """With --load the class comes from the file: a class option that disagrees with it would be
    silently ignored, and the user would believe another class was checked."""
    saved = {"construction": cfg.construction, "layers": cfg.layers, "heads": cfg.heads, "dim": cfg.dim,
             "width": cfg.m, "head_dim": cfg.head_dim}
    wrong = [f"--{k.replace('_', '-')} {getattr(args, k)} (saved: {v})" for k, v in saved.items()
             if getattr(args, k) is not None and getattr(args, k) != v]
    wrong += [f"--{k} (saved: {k} off)" for k in ("residual", "causal")
              if getattr(args, k) and not getattr(cfg, k)]
    if not args.values and cfg.values:
        wrong.append("--no-values (saved: values on)")
    if wrong:
        raise UserError(f"--load {args.load}: the saved UT is another class than asked for: "
                        f"{'; '.join(wrong)}",
                        "drop those options: with --load the class comes from the file")


def _build(args: argparse.Namespace) -> int:
    import torch

    from rasp_compiler.universal import Target, UniversalTransformer, build_universal, width_formula
    from rasp_compiler.universal.check import CheckReport, check_class, compare

    target = Target.load(args.target) if args.target else None
    if args.load:
        ut = UniversalTransformer.load(args.load)   # refuses NaN/inf and edited 0/1 weights
        _check_loaded(args, ut.config)
    else:
        if target is not None:  # take the class from the target where options are missing
            args.layers = args.layers or target.layers
            args.heads = args.heads or target.heads
            args.dim = args.dim or target.dim
            args.residual = args.residual or target.residual
            args.causal = args.causal or target.causal
        missing = [f"--{n}" for n in ("construction", "layers", "dim") if getattr(args, n) is None]
        if missing:
            raise UserError(f"missing {', '.join(missing)}",
                            hint="e.g. rasp universal --construction sparse --layers 2 --dim 4 --check "
                                 "(or 'rasp universal lower-bound')")
        if args.construction != "random" and not args.values:
            raise UserError("--no-values is for --construction random (multihead never has values)")
        ut = build_universal(args.construction, args.layers, args.heads or 1, args.dim,
                             residual=args.residual, causal=args.causal,
                             values=args.values and args.construction != "multihead",
                             m=args.width, head_dim=args.head_dim, seed=args.seed)
    cfg = ut.config
    if args.save:
        ut.save(args.save, force=args.force)
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    lengths = _lengths(args.lengths)
    formula = width_formula(cfg.construction, cfg.layers, cfg.heads, cfg.dim, cfg.residual, cfg.values,
                            cfg.head_dim)
    report = CheckReport(cfg.construction, cfg.layers, cfg.heads, cfg.dim, cfg.m, formula, None, None)
    if args.check or target is not None:
        if target is not None or args.trials == 1:
            from rasp_compiler.commands.compile import CompileStatus
            from rasp_compiler.universal.check import trial_target

            ut = ut.to(dtype)
            one, seed = (target, args.seed) if target is not None else trial_target(ut, args.seed, 0)
            # one target: no bar could move, so its steps are shown (a random UT near its width
            # cap spends tens of seconds solving for E)
            status = CompileStatus(doing="checking")
            try:
                err, att, enc = compare(ut, one, lengths, seed=seed, stage=status)
            finally:
                status.close()
            report.max_abs_error, report.attention_max_diff, report.trials = err, att, 1
            report.non_finite = int(not (math.isfinite(err) and math.isfinite(att)))
            report.methods, report.max_fit_residual = {enc.method: 1}, enc.residual
        else:
            from rasp_compiler.commands.check import CheckProgress

            with CheckProgress(args.trials, "checking", unit="target") as bar:  # stderr, a terminal only
                report = check_class(cfg.construction, cfg.layers, cfg.heads, cfg.dim,
                                     residual=cfg.residual, causal=cfg.causal, trials=args.trials,
                                     seed=args.seed, lengths=lengths, dtype=dtype, ut=ut, progress=bar)
    tol = args.tolerance
    if tol is None:
        tol = 1e-4 if dtype == torch.float32 else (1e-8 if cfg.construction == "random" else 1e-10)
    ok = report.max_abs_error is None or (not report.non_finite and report.max_abs_error <= tol)
    if args.json:
        print(json.dumps(report.as_json()))
    else:
        _print_text(ut, report, args, lengths, tol, ok, target is not None)
    if report.non_finite:
        what = "the given target" if target is not None else f"{report.non_finite} of {report.trials} " \
                                                               "random targets"
        raise UserError(f"the UT's output is not finite (NaN or inf) on {what}",
                        hint="its weights or E overflow " + args.dtype
                             + (": try --dtype float64" if args.dtype == "float32" else ""))
    if not ok:   # with --json too: on stderr, beside the JSON, or exit 1 came without a reason
        print(f"error: max |UT(X,E) - T(X)| = {report.max_abs_error:.3e} is above the tolerance {tol:g}",
              file=sys.stderr)
    return 0 if ok else 1


def _print_text(ut, report, args, lengths, tol, ok, given_target) -> None:
    import torch

    cfg = ut.config
    on = {True: "on", False: "off"}
    loaded = f" (loaded from {args.load})" if args.load else ""
    print(f"universal transformer: {cfg.construction}{loaded}")
    print(f"  class      L={cfg.layers} H={cfg.heads} d={cfg.dim}  values {on[cfg.values]}  residual "
          f"{on[cfg.residual]}  causal {on[cfg.causal]}")
    formula = FORMULA_TEXT.get(cfg.construction, "formula")
    print(f"  width      m = {cfg.m}   {formula} = {report.m_formula}"
          + ("" if cfg.m == report.m_formula else "   (below formula: E comes from a gradient fit)"
             if cfg.m < report.m_formula else ""))
    # count_nonzero: (t != 0).sum() made an int64 copy of R_V (4.5 GB at L=2, H=8, m = 5,904)
    nz = sum(int(torch.count_nonzero(t)) for t in ut.backbone_tensors().values())
    kind = "Gaussian" if cfg.construction == "random" else "{0,1}"
    print(f"  weights    {kind}, R_V {cfg.value_kind}, {nz} nonzero entries"
          + (f", seed {cfg.seed}" if cfg.seed is not None else ""))
    if args.save:
        print(f"  saved      {args.save}/ut.safetensors, ut.json")
    if report.max_abs_error is None:
        print("  (add --check to encode random targets and compare)")
        return
    what = "the given target" if given_target else f"{report.trials} random targets"
    print(f"  checked    {what}, lengths {','.join(map(str, lengths))}, UT in {args.dtype}")
    methods = ", ".join(f"{k} x{v}" for k, v in report.methods.items())
    residual = (f" (largest residual of the encoding conditions {report.max_fit_residual:.2e})"
                if cfg.construction == "random" else "")
    print(f"  encoding   {methods}{residual}")
    verdict = "ok" if ok else "FAILED"
    print(f"  max |UT(X,E) - T(X)|      {_num(report.max_abs_error)}   {verdict} (tolerance {tol:g})")
    print(f"  max attention difference  {_num(report.attention_max_diff)}")


def _num(x: float) -> str:
    return f"{x:.3e}" if math.isfinite(x) else "not finite (NaN or inf)"


# ----- a RASP-compiled target ------------------------------------------------------------------
def single_thread() -> None:
    """One torch thread for the checks of compiled programs: their tensors are one input's, a few
    positions wide, and a second thread only waits on the first.  Two threads on a loaded machine
    made ``--program docs/examples/shift_twice.rasp --max-len 6`` take 40 s instead of 6 s (each
    softmax of a 7 x 7 matrix waited milliseconds for the other thread)."""
    import torch

    torch.set_num_threads(1)


def _program(args: argparse.Namespace) -> int:
    from rasp_compiler.commands.check import CheckProgress
    from rasp_compiler.commands.compile import CompileStatus, parse_vocab
    from rasp_compiler.compiler import compile_program
    from rasp_compiler.lang import load_program
    from rasp_compiler.universal import build_universal, width_formula
    from rasp_compiler.universal.compiled import (
        SUBLAYER_TOL,
        attention_target,
        run_sublayer_through_ut,
        run_through_ut,
    )
    from rasp_compiler.universal.lookup.run import inputs_for, stated_length

    _refuse(args, CHECK_FLAGS + ("--layers", "--heads", "--dim", "--residual", "--no-values"),
            "with --program (its class comes from the compiled model, and it checks every input up "
            "to --max-len)")
    if not args.vocab:
        raise UserError("--program needs --vocab (the tokens the model is compiled for)")
    single_thread()
    fixed = stated_length(args.program, args.max_len)  # as rasp compile takes the file's line
    program = load_program(args.program, output=args.output or "out")
    status = CompileStatus()
    try:
        model = compile_program(program, parse_vocab(args.vocab), args.max_len, dtype="float64",
                                causal=args.causal, fixed_length=fixed, progress=status)
    finally:
        status.close()
    layers = None if args.attention_layer is None else [args.attention_layer]
    if layers is not None and not 0 <= args.attention_layer < model.n_layers and model.n_layers:
        raise UserError(f"--attention-layer {args.attention_layer} is out of range: the model has layers "
                        f"0..{model.n_layers - 1}")
    target = attention_target(model, layers, with_unembedding=layers is None)
    construction = args.construction or "paths"
    if construction in ("sparse", "looped", "multihead"):  # the hint of class_problem names --residual
        raise UserError(f"the {construction} construction cannot simulate a compiled model: it has a "
                        "residual stream and value matrices"
                        + (", and more than one head in a layer" if target.heads > 1 else ""),
                        hint="use --construction paths (the default with --program) or random")
    ut = build_universal(construction, target.layers, target.heads, target.dim, residual=True,
                         causal=target.causal, values=True, m=args.width, head_dim=args.head_dim,
                         seed=args.seed)
    inputs, exhaustive = inputs_for(model.vocab, args.max_len, args.max_inputs, args.seed, fixed)
    with CheckProgress(len(inputs), "checking") as bar:     # stderr, a terminal only
        if layers is None:
            res = run_through_ut(model, ut, inputs, program, progress=bar)
        else:
            res = run_sublayer_through_ut(model, args.attention_layer, ut, inputs, progress=bar)
    cfg = ut.config
    out = {"construction": construction, "layers": cfg.layers, "heads": cfg.heads, "dim": cfg.dim,
           "m": cfg.m, "m_formula": width_formula(construction, cfg.layers, cfg.heads, cfg.dim, True, True,
                                                  cfg.head_dim),
           "max_abs_error": res.max_logit_error, "attention_max_diff": res.attention_max_diff,
           "program": args.program, "attention_layer": args.attention_layer, "inputs": res.inputs,
           "outputs_agree": res.decoded_agree if layers is None else None,
           "interpreter_agree": res.interpreter_agree}
    if args.json:
        print(json.dumps(out))
    else:
        what = "whole model" if layers is None else f"attention sublayer {args.attention_layer} only"
        print(f"compiled {args.program} (vocab {len(model.vocab)} tokens, max len {args.max_len}): "
              f"{model.n_layers} layer(s), heads {model.heads_per_layer}, MLPs {model.mlp_sizes}, "
              f"residual width {model.residual_width}")
        print(f"  target ({what}): L={target.layers} H={target.heads} d={target.dim}, residual, values")
        print(f"  UT: {construction}, m = {cfg.m} (formula {out['m_formula']})")
        span = f"of length {fixed}" if fixed is not None else f"up to length {args.max_len}"
        print(f"  {res.inputs} inputs ({'all' if exhaustive else 'random'} {span})")
        quantity = "logits" if layers is None else "stream after the sublayer"
        print(f"  max |UT - compiled model| ({quantity})  {res.max_logit_error:.3e}")
        print(f"  max attention difference  {res.attention_max_diff:.3e}")
        if layers is None:
            print(f"  decoded outputs equal to the compiled model's: {res.decoded_agree}/{res.inputs}; "
                  f"to the interpreter's: {res.interpreter_agree}/{res.inputs}")
    if res.decoded_agree is None:  # one sublayer: its stream is the result
        ok = res.max_logit_error <= SUBLAYER_TOL
        if not ok:  # with --json too (beside the JSON)
            print(f"error: the UT's stream after attention sublayer {args.attention_layer} differs from "
                  f"the compiled model's by {res.max_logit_error:.3e} (more than {SUBLAYER_TOL:g})",
                  file=sys.stderr)
        return 0 if ok else 1
    ok = res.decoded_agree == res.inputs and (res.interpreter_agree in (None, res.inputs))
    if not ok:  # with --json too (beside the JSON)
        agree = [n for n in (res.decoded_agree, res.interpreter_agree) if n is not None]
        wrong = res.inputs - min(agree)
        print(f"error: the UT's decoded outputs are wrong on {wrong} of {res.inputs} inputs",
              file=sys.stderr)
    return 0 if ok else 1
