"""``rasp export``: a compiled model as a TransformerLens model (state dict + config JSON)."""

from __future__ import annotations

import argparse
import json
import os

from rasp_compiler.commands.options import SEED_HELP, check_at_least, check_finite, check_seed, refuse_unless
from rasp_compiler.errors import UserError

EPILOG = """examples:
  rasp compile programs/reverse.rasp --vocab abc --max-len 8 -o out/
  rasp export out/ --format transformer-lens -o model_tl.pt --verify
  rasp export out/ -o model_tl.pt --verify --inputs 500 --json

Writes model_tl.pt (TransformerLens's HookedTransformer state dict: plain tensors, load it with
torch.load(..., weights_only=True)) and model_tl.json (the config under "cfg", token ids, output
values, residual labels, the layer plan, the one input length of a --fixed-length model
("fixed_length", null otherwise) and how to load it in TransformerLens 2.x/3.x and 4.x).
An earlier export there is replaced; other files named so are kept unless --force.
--verify runs the compiled model and the TransformerLens model on K random inputs and reports the
largest difference of the logits, of every residual hook point (blocks.L.hook_resid_pre/mid/post)
and of every attention pattern (blocks.L.attn.hook_pattern); it exits 1 when one exceeds --tolerance.
Inputs of mixed lengths share a batch, padded and masked as run_padded() does: TransformerLens 2.x/3.x
ignores attention_mask in bidirectional models, so pass a padded batch through run_padded().
Needs the optional extra: pip install -e .[lens]"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("export", help="export a compiled model to TransformerLens",
                              description="Export a compiled model directory to TransformerLens.",
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="DIR", help="a compiled model directory (from 'rasp compile')")
    p.add_argument("--format", choices=("transformer-lens",), default="transformer-lens",
                   help="export format (default: transformer-lens)")
    p.add_argument("-o", "--out", required=True, metavar="FILE.pt", help="the state dict to write; the "
                   "config goes beside it as FILE.json")
    p.add_argument("--verify", action="store_true", help="compare both models on random inputs")
    p.add_argument("--inputs", type=int, default=None, metavar="K", help="random inputs for --verify "
                   "(default 200)")
    p.add_argument("--seed", type=int, default=None,
                   help=f"seed of the random inputs of --verify, {SEED_HELP} (default 0)")
    p.add_argument("--tolerance", type=float, default=None, metavar="EPS",
                   help="--verify fails (exit 1) when a logit, residual or attention value differs by more "
                        "than EPS x max(1, the largest |value| there) (default 1e-4 for float32, 1e-9 for "
                        "float64)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--force", action="store_true", help="replace FILE.pt and FILE.json even where they "
                   "are not an earlier export (another checkpoint, another JSON file)")
    p.set_defaults(func=main)


VERIFY_INPUTS = 200  # --inputs' default
# float rounding of the same weights; a real mismatch (a wrong head, a lost scale) is far larger
DEFAULT_TOLERANCE = {"float32": 1e-4, "float64": 1e-9}


def _check_not_model_files(model_dir: str, paths: tuple[str, ...]) -> None:
    """-o DIR/config.pt would write DIR/config.json over the compiled model's own config."""
    own = {os.path.realpath(os.path.join(model_dir, name)) for name in ("config.json", "model.safetensors")}
    for path in paths:
        if os.path.realpath(path) in own:
            raise UserError(f"-o would overwrite {path}, a file of the compiled model being exported",
                            hint="write the export elsewhere, e.g. -o model_tl.pt")


def main(args: argparse.Namespace) -> int:
    from rasp_compiler.export.transformer_lens import (
        _import_tl,
        check_replaceable,
        save_transformer_lens,
        verify,
        verify_batch,
    )
    from rasp_compiler.runtime import RaspModel

    if os.path.isfile(args.model) and args.model.endswith(".rasp"):
        raise UserError(f"{args.model} is a program, not a compiled model",
                        hint=f"compile it first: rasp compile {args.model} --vocab ... --max-len ... -o out/")
    check_at_least(args, 1, "inputs")
    check_seed(args)
    check_finite(args, "tolerance")
    if not args.verify:  # they only shape --verify's comparison: without it they did nothing
        refuse_unless(args, "--verify", {"inputs": None, "seed": None, "tolerance": None})
    args.inputs = VERIFY_INPUTS if args.inputs is None else args.inputs
    args.seed = 0 if args.seed is None else args.seed
    if os.path.basename(args.out) == ".pt":  # torch cannot name a zip archive ".pt"
        raise UserError(f"-o {args.out}: give the file a name before .pt", hint="e.g. -o model_tl.pt")
    if not args.out.endswith(".pt"):
        raise UserError(f"-o {args.out}: the TransformerLens state dict is written as a .pt file",
                        hint="e.g. -o model_tl.pt")
    _check_not_model_files(args.model, (args.out, os.path.splitext(args.out)[0] + ".json"))
    if not args.force:  # before loading anything
        check_replaceable(args.out)
    model = RaspModel.load(args.model)
    _import_tl()  # a clear error before writing anything when TransformerLens is missing
    if args.verify:  # a model too large to verify in this memory is refused before it is exported
        verify_batch(model.config)
    pt_path, json_path = save_transformer_lens(model, args.out, force=args.force)
    result: dict = {"format": args.format, "weights": pt_path, "config": json_path}
    if args.verify:
        from rasp_compiler.export.transformer_lens import load_transformer_lens

        tl_model, _ = load_transformer_lens(pt_path)  # check the files as written, not the memory copy
        report = verify(model, tl_model, args.inputs, seed=args.seed)
        result.update(report)
        tol = args.tolerance if args.tolerance is not None else DEFAULT_TOLERANCE.get(report["dtype"], 1e-4)
        result["tolerance"], result["ok"] = tol, result["max_rel_diff"] <= tol
    if args.json:
        print(json.dumps(result, indent=1))
        return _verdict(result)
    print(f"wrote {pt_path} and {json_path}")
    fixed = model.config.get("fixed_length")
    if fixed is not None:
        print(f"note: the model was compiled for inputs of exactly {fixed} tokens (--fixed-length); the "
              f"TransformerLens model does not refuse other lengths, it answers them wrongly "
              f"({json_path} records fixed_length)")
    if args.verify:
        of = f" of length {fixed}" if fixed is not None else ""
        print(f"verified on {result['inputs']} random inputs{of} (TransformerLens "
              f"{result['transformer_lens']}, "
              f"{result['dtype']}): max |Δ logits| = {result['max_abs_diff_logits']:.3g}, "
              f"max |Δ residual| = {result['max_abs_diff_residual']:.3g}, "
              f"max |Δ attention pattern| = {result['max_abs_diff_pattern']:.3g}; relative to "
              f"max(1, max |value|): {result['max_rel_diff']:.3g}")
        for hook, diff in {**result["hooks"], **result["patterns"]}.items():
            print(f"  {hook:28s} {diff:.3g}")
    return _verdict(result)


def _verdict(result: dict) -> int:
    """0, or a UserError (exit 1, one error line) when --verify found the TransformerLens model
    computing something else; the report is printed first so the hook that differs is named."""
    if result.get("ok", True):
        return 0
    raise UserError(f"the TransformerLens model differs from the compiled model by "
                    f"{result['max_rel_diff']:.3g} x max(1, max |value|), more than --tolerance "
                    f"{result['tolerance']:g} (the files were written)",
                    hint="the hook points above show the first layer that differs")
