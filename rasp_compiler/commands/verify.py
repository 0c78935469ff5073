"""``rasp verify DIR PROGRAM``: recompile a program with the options a saved model records and
compare the weights byte for byte.

The two digests a model directory holds bind its files together (a truncated, swapped or
accidentally edited file is refused at load), but anyone who edits a model can recompute them:
they are not a signature.  ``verify`` answers the question the digests cannot, "is this model what
this program compiles to?", since compiling is deterministic (the same program and options give
byte-identical weights).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

EPILOG = """examples:
  rasp verify out/ programs/reverse.rasp
  rasp verify hist/ prog.rasp --output hist          # the --output the model was compiled with

The vocabulary, max length, dtype, causal attention, fixed length, input range and grid and the
excluded denominators are read from DIR's config.json; an option given here overrides the
recorded one.  Exit status 0 when every tensor and the config match, 1 otherwise (or when DIR
cannot be loaded)."""

# config keys that do not come from the program and options: where the program file was, and the
# weights' digest (compared through the weights themselves)
_NOT_COMPARED = ("program", "weights_sha256")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("verify", help="check that a saved model is what a program compiles to",
                              description="Recompile PROGRAM with the options DIR's config records and "
                              "compare the weights and config byte for byte.",
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", metavar="DIR", help="the model directory (model.safetensors + config.json)")
    p.add_argument("file", metavar="PROGRAM", help="the .rasp program it should be compiled from")
    p.add_argument("--output", metavar="NAME", default=None, help="the s-op compiled (default: out)")
    p.add_argument("--vocab", help="override the recorded vocabulary")
    p.add_argument("--max-len", type=int, default=None, help="override the recorded max length")
    p.add_argument("--dtype", choices=("float32", "float64"), default=None,
                   help="override the recorded dtype")
    p.add_argument("--causal", action="store_true", default=None, help="compile with causal attention")
    p.set_defaults(func=main)


def recorded_options(config: dict) -> dict[str, Any]:
    """The compile options a saved model's config records, as ``compile_weights`` keywords."""
    spec = config.get("input") or {}
    guards = config.get("guards") or []
    options: dict[str, Any] = {
        "vocab": None if spec.get("kind") == "numerical" else list(config["vocab"]),
        "max_len": config["max_len"], "dtype": config["dtype"], "causal": bool(config["causal"]),
        "fixed_length": config.get("fixed_length"),
    }
    if spec.get("kind") == "numerical":
        options["input_range"] = tuple(spec["range"])
        if spec.get("grid") is not None:
            options["input_grid"] = repr(float(spec["grid"]))
        if guards:
            options["min_denominator"] = float(guards[0]["eps"])
    return options


def _without_path(config: dict) -> dict:
    """``config`` with the program's path (recorded as given to the compiler, and in every source
    location of the plan) replaced by one placeholder, and the directory of every other file's
    source location (a file it `load`s, recorded by its absolute path) dropped: where the files
    were is not what they are."""
    import json
    import re

    path = config.get("program")
    text = json.dumps(config, sort_keys=True)
    if isinstance(path, str) and path:
        text = text.replace(json.dumps(path)[1:-1], "<PROGRAM>")
    # `/tmp/a/helper.rasp:3` -> `helper.rasp:3`: a copy of the program and its helpers elsewhere (a
    # colleague's checkout) compiled the same tensors and was said to be another program
    text = re.sub(r'[^"\s(,]*/([^/"\s(,]+\.rasp:\d)', r"\1", text)
    return json.loads(text)


def differences(saved: dict, config: dict, tensors: dict[str, Any], fresh: Any) -> list[str]:
    """What differs between a saved model (its config, its tensors as torch tensors) and the
    freshly compiled weights ``fresh`` (a ``CompiledWeights``), first the tensors."""
    import numpy as np

    out = []
    names, fresh_names = set(tensors), set(fresh.tensors)
    for name in sorted(names - fresh_names):
        out.append(f"the model has a tensor {name} the program does not compile to")
    for name in sorted(fresh_names - names):
        out.append(f"the model lacks the tensor {name}")
    for name in sorted(names & fresh_names):
        a = tensors[name].detach().cpu().contiguous().numpy()
        b = np.ascontiguousarray(fresh.tensors[name])
        if a.dtype != b.dtype or a.shape != b.shape:
            out.append(f"{name} is {a.dtype} {list(a.shape)}, the program compiles to {b.dtype} "
                       f"{list(b.shape)}")
        elif a.tobytes() != b.tobytes():
            width = a.dtype.itemsize  # values whose bytes differ (a NaN counts once, as a value)
            as_bytes = (a.reshape(-1).view(np.uint8).reshape(-1, width),
                        b.reshape(-1).view(np.uint8).reshape(-1, width))
            differ = int((as_bytes[0] != as_bytes[1]).any(axis=1).sum())
            out.append(f"{name} differs in {differ:,} of {a.size:,} values")
    saved, config = _without_path(saved), _without_path(config)
    for key in sorted((set(saved) | set(config)) - set(_NOT_COMPARED)):
        if saved.get(key) != config.get(key):
            out.append(f"config.json's {key!r} differs")
    return out


def main(args: argparse.Namespace) -> int:
    from rasp_compiler.commands.compile import parse_vocab
    from rasp_compiler.commands.options import check_not_empty
    from rasp_compiler.compiler import compile_weights
    from rasp_compiler.lang import load_program
    from rasp_compiler.runtime import RaspModel

    check_not_empty(args, "output")
    model = RaspModel.load(args.dir)  # its own digests and checks first: a damaged file is refused
    options = recorded_options(model.config)
    recorded = dict(options)
    if args.vocab is not None:
        options["vocab"] = parse_vocab(args.vocab)
    if args.max_len is not None:
        options["max_len"] = args.max_len
    if args.dtype is not None:
        options["dtype"] = args.dtype
    if args.causal:
        options["causal"] = True
    program = load_program(args.file, output=args.output or "out")
    vocab = options.pop("vocab")
    max_len = options.pop("max_len")
    fresh = compile_weights(program, vocab, max_len, **options)
    # the config as save() writes it, less the digest it adds
    fresh_config = dict(fresh.config)
    simulator = _simulator_block(model.config, args.file)
    if simulator is not None:
        fresh_config["simulator"] = simulator
    found = differences(model.config, fresh_config, model.tensors, fresh)
    if found:
        shown = "\n".join(f"  {line}" for line in found[:10])
        more = f"\n  ... and {len(found) - 10} more" if len(found) > 10 else ""
        # an option given here that the model does not record: the mismatch is that option's
        overridden = [f"--{key.replace('_', '-')} (it records {_short(recorded[key])}, given {_short(value)})"
                      for key, value in (("vocab", vocab), ("max_len", max_len),
                                         ("dtype", options["dtype"]), ("causal", options["causal"]))
                      if value != recorded[key]]
        hint = ((f"the model records other options than those given: {'; '.join(overridden)}; drop "
                 "an option to use what the model records") if overridden else None) or \
            _output_hint(args, model.config, fresh_config) or _simulator_hint(model.config) or \
            _python_hint(model.config, found) or (
            "the model was edited, or compiled from another program or with other options "
            "(--output NAME, as given to rasp compile)")
        which = "the options it records" + (" and those given here" if overridden else "")
        print(f"error: {args.dir} is not what {args.file} compiles to with {which}:\n"
              f"{shown}{more}\n  hint: {hint}", file=sys.stderr)
        return 1
    n = sum(t.numel() for t in model.tensors.values())
    used = ", ".join(f"{k}={v!r}" for k, v in {"vocab": vocab, "max_len": max_len, **options}.items()
                     if v is not None and (k != "vocab" or len(v) <= 20))
    print(f"{args.dir} matches {args.file}: {len(model.tensors)} tensors ({n:,} values) byte for byte, "
          f"and the config\n  compiled with: {used}")
    return 0


def _python_hint(saved: dict, found: list[str]) -> str | None:
    """A model compiled from Python (rasp_compiler.pyapi) against its to_source text: the tensors
    match, but its plan names Python lines and its `tokens` reads the input as given; the hint
    blamed an edit or another program."""
    if saved.get("program") != "<python>" or not all(line.startswith("config.json's") for line in found):
        return None
    return ("every tensor matches: the model was compiled from Python (rasp_compiler.pyapi), so its "
            "config records Python source lines and, where it says tokens_as_given, reads `tokens` as "
            "given, where a .rasp file's tokens reads strings; compile the .rasp file itself to verify "
            "against it")


def _short(value: Any) -> str:
    """An option's value for a message: a long vocabulary cut after 8 tokens."""
    if isinstance(value, list) and len(value) > 8:
        return repr(value[:8])[:-1] + f", ... ({len(value):,} tokens)]"
    return repr(value)


def _output_hint(args: argparse.Namespace, saved: dict, fresh: dict) -> str | None:
    """When no --output was given and the model's output is another s-op of the program (it was
    compiled with --output NAME): say which, rather than list every tensor as different."""
    from rasp_compiler.errors import UserError
    from rasp_compiler.lang import load_program

    node = (saved.get("output") or {}).get("node")
    compiled = (fresh.get("output") or {}).get("node")
    if args.output is not None or not isinstance(node, str) or node == compiled:
        return None
    try:
        load_program(args.file, output=node)
    except UserError:  # not a name of the program: nothing to suggest
        return None
    return (f"the model outputs '{node}', not the program's result: add --output {node} if it was "
            "compiled with it")


def _simulator_block(saved: dict, path: str) -> dict | None:
    """The 'simulator' block of a U saved by ``rasp simulate -o`` (how ``rasp simulate --model``
    reads it) when PROGRAM is the source ``rasp simulate`` generates for that block; None otherwise.
    The block is added after compiling, so `rasp verify U/ u.rasp` of the very --emit-rasp file
    reported "config.json's 'simulator' differs" and blamed an edit."""
    from rasp_compiler.errors import UserError
    from rasp_compiler.simulator.source import generate_source

    spec = saved.get("simulator")
    if not isinstance(spec, dict):
        return None
    try:
        source = generate_source(spec["n"], spec["d"], spec["heads"], spec["causal"], spec["plan"],
                                 dtype=saved["dtype"], input_range=tuple(spec["input_range"]))
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (KeyError, TypeError, ValueError, OSError, UserError):  # an edited block: reported as differing
        return None
    return dict(spec) if text == source else None


def _simulator_hint(saved: dict) -> str | None:
    spec = saved.get("simulator")
    if not isinstance(spec, dict):
        return None
    sizes = " ".join(f"--{key} {spec.get(key)}" for key in ("n", "d", "heads"))
    return (f"the model is rasp simulate's U (n={spec.get('n')}, d={spec.get('d')}, H={spec.get('heads')}); "
            f"its simulator block is checked against the source rasp simulate generates for it: "
            f"rasp simulate {sizes} --emit-rasp FILE writes that source")
