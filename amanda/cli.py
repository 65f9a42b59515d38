"""The amanda command: look at, check, query and convert model files.

    amanda info model.onnx
    amanda validate model.yaml
    amanda select model.onnx "$..[?type=='MatMul']"
    amanda convert graph.yaml graph.onnx --namespace amanda/onnx/17 --outputs dense/Relu:activations
    amanda render model.onnx model.svg --depth 2
    amanda summary model.onnx
    amanda run model.onnx --input x=batch.npy --output out.npz
    amanda diff before.yaml after.yaml
    amanda optimize model.onnx -o fast.onnx [--passes fold_constants eliminate_dead_code]

Files are read and written by suffix (.yaml or .yml, .json, .onnx). validate exits with 1 when
it finds problems, diff when the models differ. Any error (a file that cannot be read or
written, a malformed document, a bad selector, a model ONNX would reject) and bad usage print
one line "amanda: error: ..." on stderr and exit with 2. "python -m amanda" runs the same
command. This text is the command's --help, so it stays plain text, without markup.
"""

from __future__ import annotations

import argparse
import collections
import sys
from collections.abc import Sequence
from typing import Any, cast

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
        from amanda.rewrite.mapping.convert import expose
        from amanda.rewrite.mapping.names import NameMap

        model = expose(model, NameMap({}, model), outputs)
    amanda.dump(model, args.target)
    print(f"wrote {args.target}")
    return 0


def _render(args: argparse.Namespace) -> int:
    model = _load(args.path)
    highlight = amanda.select(model, args.highlight) if args.highlight else None
    amanda.render(model, args.target, depth=args.depth, highlight=highlight, max_nodes=args.max_nodes)
    print(f"wrote {args.target}")
    return 0


def _summary(args: argparse.Namespace) -> int:
    print(amanda.summary(_load(args.path), depth=args.depth))
    return 0


def _diff(args: argparse.Namespace) -> int:
    changes = amanda.diff(_load(args.before), _load(args.after))
    print(changes)
    return 1 if changes else 0


def _optimize(args: argparse.Namespace) -> int:
    from amanda.passes import optimize

    result = optimize(_load(args.path), passes=args.passes, quiet=args.quiet)
    for report in result.reports:
        print(report)
    amanda.dump(result.model, args.output)
    print(f"wrote {args.output}")
    return 0


def _array(text: str) -> tuple[str, Any]:
    """``name=file.npy`` -> (name, the array), read without pickles."""
    import numpy as np

    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise FormatError(f"an input is NAME=FILE.npy, found {text!r}", expected="NAME=FILE.npy", found=text)
    try:
        value = np.load(path, allow_pickle=False)
    except (ValueError, EOFError, SyntaxError) as exc:
        raise FormatError(f"{path}: not a .npy array ({exc})", path=path, expected="a .npy file",
                          found=type(exc).__name__) from None
    if not isinstance(value, np.ndarray):
        raise FormatError(f"{path}: an .npz archive; give one .npy array per input", path=path,
                          expected="a .npy file", found="an .npz archive")
    return name, value


def _run(args: argparse.Namespace) -> int:
    import time

    import numpy as np

    model = _load(args.path)
    feeds = dict(_array(text) for text in args.input or ())
    fetches = list(args.fetch or model.output_names)
    with amanda.Session(model) as session:
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            values = session.run(fetches, feeds)
            times.append(time.perf_counter() - start)
    for name, value in zip(fetches, values):
        shown = f"{value.dtype}{list(value.shape)}" if isinstance(value, np.ndarray) else type(value).__name__
        print(f"{name}: {shown}")
    print(f"run: first {times[0] * 1e3:.2f} ms" + (f", median of {len(times)} {sorted(times)[len(times) // 2] * 1e3:.2f} ms"
                                                 if len(times) > 1 else ""), file=sys.stderr)
    if args.output:
        arrays = {name: value for name, value in zip(fetches, values) if isinstance(value, np.ndarray)}
        np.savez(args.output, **arrays)  # type: ignore[arg-type]  # numpy's stub types the keywords as bools
        print(f"wrote {args.output}")
    return 0


def _outputs(given: Sequence[str]) -> dict[str, str]:
    """``name=op:port`` or ``op:port`` (the output named like the endpoint) -> name -> endpoint."""
    found: dict[str, str] = {}
    for text in given:
        name, _, endpoint = text.rpartition("=")
        found[name or endpoint] = endpoint
    return found


class _Commands:
    """Subcommands whose --help starts with the line the command list shows for them."""

    def __init__(self, actions: Any) -> None:
        self.actions = actions

    def add_parser(self, name: str, *, help: str) -> argparse.ArgumentParser:
        command = self.actions.add_parser(name, help=help, description=help[:1].upper() + help[1:] + ".")
        return cast(argparse.ArgumentParser, command)


_MODEL = "a model file: .yaml or .yml, .json or .onnx (read by its suffix)"


def _count(minimum: int) -> Any:
    """An argparse ``type`` accepting whole numbers of at least ``minimum``: anything else is a
    usage error that says what was expected (``--repeat 0``, ``--top -5``)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, found {text!r}")
        return value

    parse.__name__ = f"int >= {minimum}"
    return parse


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="amanda", description=__doc__.split("\n\n", 1)[0],
                                     epilog=__doc__.split("\n\n", 1)[1].rsplit(" This text", 1)[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = _Commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    info = commands.add_parser("info", help="summarise a model file")
    info.add_argument("path", help=_MODEL)
    info.add_argument("--top", type=_count(0), default=10, help="how many op types to list")
    info.set_defaults(run=_info)
    validate = commands.add_parser("validate", help="check every op against its namespace")
    validate.add_argument("path", help=_MODEL)
    validate.set_defaults(run=_validate)
    select = commands.add_parser("select", help="print the paths a selector selects")
    select.add_argument("path", help=_MODEL)
    select.add_argument("selector", help="a selector such as \"$..[?type=='MatMul']\" (docs/query.md)")
    select.set_defaults(run=_select)
    convert = commands.add_parser("convert", help="rewrite a model in another format or namespace")
    convert.add_argument("source", help=_MODEL)
    convert.add_argument("target", help="the file to write; its suffix picks the format")
    convert.add_argument("--namespace", help="convert the ops to this namespace first")
    convert.add_argument(
        "--outputs",
        nargs="+",
        metavar="[NAME=]OP:PORT",
        help="values (source endpoints such as dense/Relu:activations) to expose as outputs; "
        "without it a graph that declares no outputs exports every value no op reads",
    )
    convert.set_defaults(run=_convert)
    render = commands.add_parser("render", help="draw a model to SVG, PNG or PDF (needs Graphviz's dot)")
    render.add_argument("path", help=_MODEL)
    render.add_argument("target", help="the picture to write; its suffix picks the format")
    render.add_argument("--depth", type=_count(0), default=None, help="show containers as boxes below this depth")
    render.add_argument("--highlight", metavar="SELECTOR", help="colour what this selector selects")
    render.add_argument("--max-nodes", type=int, default=300,
                        help="boxes on the page at most (a larger level is grouped by name scope)")
    render.set_defaults(run=_render)
    summary = commands.add_parser("summary", help="layers with output types and parameter counts")
    summary.add_argument("path", help=_MODEL)
    summary.add_argument("--depth", type=_count(0), default=1, help="how many levels below the top to list")
    summary.set_defaults(run=_summary)
    run = commands.add_parser("run", help="run a model on .npy inputs and time it")
    run.add_argument("path", help=_MODEL)
    run.add_argument("--input", nargs="+", metavar="NAME=FILE.npy", help="one feed per model input")
    run.add_argument("--fetch", nargs="+", metavar="NAME", help="what to compute (default: the outputs)")
    run.add_argument("--output", metavar="FILE.npz", help="save the fetched arrays here")
    run.add_argument("--repeat", type=_count(1), default=1, help="run this many times and report the median")
    run.set_defaults(run=_run)
    diff = commands.add_parser("diff", help="structural differences by path; exit 1 if any")
    diff.add_argument("before", help=_MODEL)
    diff.add_argument("after", help="the model to compare it with")
    diff.set_defaults(run=_diff)
    optimize = commands.add_parser("optimize", help="fold constants, remove dead code, fuse ops; outputs unchanged")
    optimize.add_argument("path", help=_MODEL)
    optimize.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the optimised model")
    optimize.add_argument("--passes", nargs="+", metavar="PASS", help="passes to run, in order (default: all but "
                          "fuse_matmul_add; see docs/optimize.md)")
    optimize.add_argument("--quiet", action="store_true", help="no progress bar")
    optimize.set_defaults(run=_optimize)
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
