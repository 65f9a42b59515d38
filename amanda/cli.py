"""The ``amanda`` command: look at, check, query and convert model files.

    amanda info model.onnx
    amanda validate model.yaml
    amanda select model.onnx '$..[?type==`MatMul`]'
    amanda convert graph.yaml graph.onnx --namespace amanda/onnx/17 --outputs dense/Relu:activations

Files are read and written by suffix (``.yaml``/``.yml``, ``.json``, ``.onnx``). ``validate``
exits with 1 when it finds problems. Any error (a file that cannot be read or written, a
malformed document, a bad selector, a model ONNX would reject) and bad usage print one line
``amanda: error: ...`` on stderr and exit with 2.
"""

from __future__ import annotations

import argparse
import collections
import sys
from typing import Any, Sequence, cast

import amanda
from amanda.containers.container import Container
from amanda.errors import AmandaError, FormatError, QueryError

__all__ = ["main"]


def _load(path: str) -> Container:
    """The container a file holds; a document holding a port or an edge is an error."""
    model: Any = amanda.load(path)
    if not isinstance(model, Container):
        raise FormatError(
            f"{path}: expected a container (a graph or an op), found {type(model).__name__}",
            path=path,
            expected="a container",
            found=type(model).__name__,
        )
    return model


def _info(args: argparse.Namespace) -> int:
    model = _load(args.path)
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
    problems = amanda.validate(_load(args.path))
    for problem in problems:
        print(problem)
    print(f"{args.path}: {len(problems)} problem{'s' * (len(problems) != 1)}")
    return 1 if problems else 0


def _select(args: argparse.Namespace) -> int:
    selection = amanda.select(_load(args.path), args.selector)
    for path, node in selection:
        print(f"{'/'.join(path) or '$'}\t{node.type or ''}")
    print(f"{len(selection)} selected", file=sys.stderr)
    return 0


def _convert(args: argparse.Namespace) -> int:
    model = _load(args.source)
    outputs = _outputs(args.outputs or ())
    if args.namespace:
        model = cast(Container, amanda.convert(model, args.namespace, outputs=outputs or None))
    elif outputs:
        from amanda.namespaces.mapping.convert import expose
        from amanda.namespaces.mapping.names import NameMap

        model = expose(model, NameMap({}, model), outputs)
    amanda.dump(model, args.target)
    print(f"wrote {args.target}")
    return 0


def _outputs(given: Sequence[str]) -> dict[str, str]:
    """``name=op:port`` or ``op:port`` (the output named like the endpoint) -> name -> endpoint."""
    found: dict[str, str] = {}
    for text in given:
        name, _, endpoint = text.rpartition("=")
        found[name or endpoint] = endpoint
    return found


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
    convert.add_argument(
        "--outputs",
        nargs="+",
        metavar="[NAME=]OP:PORT",
        help="values (source endpoints such as dense/Relu:activations) to expose as outputs; "
        "without it a graph that declares no outputs exports every value no op reads",
    )
    convert.set_defaults(run=_convert)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0, 1 when ``validate`` finds problems, 2
    on any error, which is printed as one line on stderr).

    >>> main(["info", "no/such/file.yaml"])
    2
    """
    args = _parser().parse_args(argv)
    try:
        return int(args.run(args))
    except (AmandaError, OSError) as error:
        lines = str(error).splitlines() or [type(error).__name__]
        # a selector error's further lines draw a caret under the column its first line names
        text = lines[0] if isinstance(error, QueryError) else "; ".join(line.strip() for line in lines)
        print(f"amanda: error: {args.command}: {text}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
