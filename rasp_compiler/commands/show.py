"""``rasp show``: draw a program as scheduled, or a compiled model running on one input."""

from __future__ import annotations

import argparse
import json
import os

from rasp_compiler.errors import InputError, UserError

EPILOG = """examples:
  rasp show programs/sort.rasp --vocab abc --max-len 8 -o plan.png
      the program graph, each node in the column of the sublayer that computes it, coloured by
      the head or MLP it was scheduled into
  rasp compile programs/sort.rasp --vocab abc --max-len 8 -o out/
  rasp show out/ --input abca -o trace.png
      every head's attention pattern on that input, titled with the select it implements, and the
      residual stream after each layer (rows: s-op:value)
  rasp show out/ --input abca -o trace.svg          (SVG; or --format svg)"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("show", help="draw a program's schedule or a model's attention and residuals",
                              description="Draw a program graph as scheduled (FILE.rasp), or a compiled "
                              "model's attention patterns and residual stream on one input (DIR).",
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="FILE.rasp|DIR", help="a program, or a compiled model directory")
    p.add_argument("--vocab", help="tokens (for a program): a string of characters or a JSON list")
    p.add_argument("--max-len", type=int, help="longest input (for a program)")
    p.add_argument("--output", metavar="NAME", default=None, help="the s-op to compile (default: out)")
    p.add_argument("--causal", action="store_true", help="compile with causal attention")
    p.add_argument("--dtype", choices=("float32", "float64"), default=None,
                   help="compile in this dtype (for a program; default float32)")
    p.add_argument("--input-range", nargs=2, type=float, metavar=("LO", "HI"), default=None,
                   help="real-valued tokens in [LO, HI] (for a program), compiled as 'rasp compile' does")
    p.add_argument("--fixed-length", type=int, metavar="N", default=None,
                   help="compile for inputs of exactly N tokens (for a program)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--input", metavar="TEXT", help="input string (for a model directory)")
    src.add_argument("--input-json", metavar="JSON", help="input as a JSON list (for a model directory)")
    p.add_argument("-o", "--out", required=True, metavar="FILE",
                   help="picture to write: .png or .svg (a suffix naming another picture format, "
                        ".gif or .pdf say, is refused)")
    p.add_argument("--format", choices=("png", "svg"), default=None,
                   help="picture format (default: from the -o suffix, else png); it must agree with "
                        "a .png or .svg suffix")
    p.add_argument("--json", action="store_true", help="print what was drawn as JSON")
    p.set_defaults(func=main)


FORMATS = ("png", "svg")
# suffixes of picture formats other than the two drawn: writing PNG or SVG bytes under one of these
# names would give a file that claims a format it is not in
OTHER_PICTURES = {"gif", "jpg", "jpeg", "jpe", "pdf", "eps", "ps", "tif", "tiff", "webp", "bmp", "svgz",
                  "pgf", "raw", "rgba", "ico", "heic", "heif", "avif", "jp2", "apng", "emf", "wmf", "xpm"}


def picture_format(path: str, fmt: str | None) -> str:
    """The format to write ``path`` in: ``fmt`` if given, else its suffix's, else png.  A suffix that
    names another picture format, or disagrees with ``fmt``, is a UserError."""
    suffix = os.path.splitext(path)[1].lower().lstrip(".")
    if suffix in OTHER_PICTURES:
        raise UserError(f"-o {path}: rasp show draws PNG or SVG, not {suffix.upper()}",
                        hint=f"use -o {os.path.splitext(path)[0]}.png (or .svg)")
    if suffix in FORMATS:
        if fmt and fmt != suffix:
            raise UserError(f"-o {path} names a .{suffix} file but --format is {fmt}",
                            hint=f"drop --format, or use -o {os.path.splitext(path)[0]}.{fmt}")
        return suffix
    return fmt or "png"


def main(args: argparse.Namespace) -> int:
    from rasp_compiler.commands.options import check_not_empty
    from rasp_compiler.viz.common import check_directory_of, refuse_replacing_a_non_picture

    check_not_empty(args, "out", "output", "vocab")
    fmt = picture_format(args.out, args.format)
    check_directory_of(args.out)
    refuse_replacing_a_non_picture(args.out)   # before compiling, as a directory is refused
    if not os.path.exists(args.target):
        from pathlib import Path

        from rasp_compiler.lang.elaborator import missing_file_hint

        raise UserError(f"{args.target}: no such file or directory",
                        hint=missing_file_hint(Path(args.target))
                        or "give a .rasp program or a directory written by 'rasp compile'")
    parent = os.path.dirname(args.target) or "."
    if os.path.basename(args.target) in ("config.json", "model.safetensors") and all(
            os.path.isfile(os.path.join(parent, name)) for name in ("config.json", "model.safetensors")):
        # it was read as a RASP program: "missing ';'" at config.json's last line, or a hint to
        # compile model.safetensors
        raise UserError(f"{args.target} is a file of the model directory {parent}, not a program",
                        hint=f"give the directory: rasp show {parent}/ --input ...")
    if os.path.isdir(args.target):
        result = show_model(args, fmt)
    else:
        result = show_program(args, fmt)
    if args.json:
        print(json.dumps(result, indent=1, ensure_ascii=False))
    else:
        unit = "px" if fmt == "png" else "pt"  # an SVG's size is its viewBox, in points
        print(f"wrote {args.out} ({result['width']}x{result['height']} {unit})")
    return 0


def show_program(args: argparse.Namespace, fmt: str) -> dict:
    from rasp_compiler.commands.compile import weights_from_args
    from rasp_compiler.lang import load_program
    from rasp_compiler.viz import draw_plan

    if args.input is not None or args.input_json is not None:
        raise UserError("--input draws a compiled model; give a model directory",
                        hint=f"rasp compile {args.target} --vocab ... --max-len ... -o out/ && "
                             "rasp show out/ --input ...")
    if args.input_range is None and (args.vocab is None or args.max_len is None):
        raise UserError("drawing a program's schedule needs --vocab and --max-len (it is compiled first)",
                        hint="or --input-range LO HI for a program over real-valued tokens")
    # the same compile as 'rasp compile' with these options, so the picture is of that model
    # (its weights only: the plan needs no torch)
    args.file, args.dtype = args.target, args.dtype or "float32"
    model = weights_from_args(args)
    program = load_program(args.target, output=args.output or "out")
    # the program as compiled (after the compiler's rewrites), where the categorical compiler ran
    drawn = model.compiled_program if model.compiled_program is not None else program
    pic = draw_plan(drawn, model.plan, args.out, fmt=fmt, residual=model.config.get("residual"),
                    title=f"{args.target}: {model.n_layers} layer{'s' * (model.n_layers != 1)}, "
                          f"residual width {model.residual_width}")
    return {"picture": args.out, "format": fmt, "width": pic.size_px[0], "height": pic.size_px[1],
            "labels": pic.labels, "units": pic.units,
            "captions": {str(column): lines for column, lines in pic.captions.items()},
            "placement": {n: {"column": p.column, "unit": p.unit, "fused": p.fused}
                          for n, p in pic.placement.items()}}


def show_model(args: argparse.Namespace, fmt: str) -> dict:
    from rasp_compiler.commands.run import parse_input_json
    from rasp_compiler.runtime import RaspModel
    from rasp_compiler.viz import draw_trace

    # a compiled model's vocabulary, length and output are fixed: options that would change them
    # are refused rather than ignored, so the picture is never of something other than asked
    given = [opt for opt, value in (("--vocab", args.vocab), ("--max-len", args.max_len),
                                    ("--output", args.output), ("--causal", args.causal or None),
                                    ("--dtype", args.dtype), ("--input-range", args.input_range),
                                    ("--fixed-length", args.fixed_length))
             if value is not None]
    if given:
        raise UserError(f"{', '.join(given)}: options for compiling a program, but {args.target} is a "
                        "compiled model, which keeps the settings it was compiled with",
                        hint=f"drop {', '.join(given)}, or compile again: rasp compile FILE.rasp ... -o DIR")
    if args.input is None and args.input_json is None:
        raise UserError("drawing a model needs an input: --input TEXT or --input-json LIST")
    tokens = list(args.input) if args.input is not None else parse_input_json(args.input_json)
    model = RaspModel.load(args.target)
    # clear errors for unknown tokens / too long / out-of-range numbers, before drawing; encode_inputs
    # also takes the real-valued tokens of a model compiled with --input-range
    try:
        model.encode_inputs([tokens])
    except InputError:
        if args.input is not None:  # refused: say so where the text was split into characters
            from rasp_compiler.commands.eval import check_characters

            check_characters(model, args.input, "--input", "--input-json")
        raise
    pic = draw_trace(model, tokens, args.out, fmt=fmt)
    return {"picture": args.out, "format": fmt, "width": pic.size_px[0], "height": pic.size_px[1],
            "heads": pic.head_titles, "residual_labels": pic.residual_labels, "stages": pic.stages,
            "row_scales": pic.row_scales}
