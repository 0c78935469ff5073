"""``rasp eval``: run a saved compiled model on one input."""

from __future__ import annotations

import argparse
import json

EPILOG = """examples:
  rasp eval out/ --input abca
  rasp eval out/ --input-json '["a", "b"]' --json      -> {"output": [...]}"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("eval", help="run a compiled model on an input",
                              description="Run a model written by 'rasp compile' (torch + safetensors "
                              "only) and print the decoded output.", epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="DIR", help="directory with model.safetensors and config.json")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", metavar="TEXT", help="input string; its characters are the tokens")
    src.add_argument("--input-json", metavar="JSON", help="input as a JSON list")
    p.add_argument("--json", action="store_true", help='print {"output": [...]}')
    p.add_argument("--device", default="cpu", metavar="cpu|cuda",
                   help="where the network runs (default cpu)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from rasp_compiler.commands.run import parse_input_json
    from rasp_compiler.runtime import RaspModel

    model = RaspModel.load(args.model).to(args.device)
    inputs = list(args.input) if args.input is not None else parse_input_json(args.input_json)
    out = model.run([inputs])[0]
    if args.json:
        print(json.dumps({"output": out}))
    else:
        try:
            from rasp_compiler.lang.format import format_value
            print(format_value(out))
        except Exception:
            print(out)
    return 0
