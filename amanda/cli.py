"""The ``amanda`` command: look at, check, query and convert model files.

    amanda info model.onnx
    amanda validate model.yaml
    amanda select model.onnx '$..[?type==`MatMul`]'
    amanda convert model.onnx model.yaml [--namespace amanda/onnx/13]

Files are read and written by suffix (``.yaml``/``.yml``, ``.json``, ``.onnx``). Errors are
printed as one line naming what and where, with exit status 1; bad usage exits with 2.
"""

from __future__ import annotations

import argparse
import collections
import sys
from typing import Sequence

import amanda
from amanda.errors import AmandaError

__all__ = ["main"]


def _info(args: argparse.Namespace) -> int:
    model = amanda.load(args.path)
    flat = amanda.flatten(model)
    types = collections.Counter(op.type for op in flat.ops.values())
    print(f"{args.path}: {model.type or 'graph'} {model.name or ''}".rstrip())
    print(f"  namespace: {model.namespace or '-'}")
    print(f"  inputs:  {', '.join(model.input_names) or '-'}")
    print(f"  outputs: {', '.join(model.output_names) or '-'}")
    print(f"  ops: {len(flat.ops)}, edges: {len(flat.edges)}, children: {len(model.children)}")
    for op_type, count in types.most_common(args.top):
        print(f"    {count:6d}  {op_type}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    problems = amanda.validate(amanda.load(args.path))
    for problem in problems:
        print(problem)
    print(f"{args.path}: {len(problems)} problem{'s' * (len(problems) != 1)}")
    return 1 if problems else 0


def _select(args: argparse.Namespace) -> int:
    selection = amanda.select(amanda.load(args.path), args.selector)
    for path, node in selection:
        print(f"{'/'.join(path) or '$'}\t{node.type or ''}")
    print(f"{len(selection)} selected", file=sys.stderr)
    return 0


def _convert(args: argparse.Namespace) -> int:
    model = amanda.load(args.source)
    if args.namespace:
        model = amanda.convert(model, args.namespace)
    amanda.dump(model, args.target)
    print(f"wrote {args.target}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="amanda", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    info = commands.add_parser("info", help="summarise a model file")
    info.add_argument("path")
    info.add_argument("--top", type=int, default=10, help="how many op types to list")
    info.set_defaults(run=_info)
    validate = commands.add_parser("validate", help="check every op against its namespace")
    validate.add_argument("path")
    validate.set_defaults(run=_validate)
    select = commands.add_parser("select", help="print the paths a selector selects")
    select.add_argument("path")
    select.add_argument("selector")
    select.set_defaults(run=_select)
    convert = commands.add_parser("convert", help="rewrite a model in another format or namespace")
    convert.add_argument("source")
    convert.add_argument("target")
    convert.add_argument("--namespace", help="convert the ops to this namespace first")
    convert.set_defaults(run=_convert)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        return int(args.run(args))
    except AmandaError as error:
        print(f"amanda {args.command}: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
