"""Names of fetches and feeds, resolved to values of the effective view.

A *value* is identified by where it is produced: ``Endpoint(leaf_path, output_port)``
for an op's output, ``Endpoint(SELF, input_name)`` for an input of the top container.
A feed may also override what one op input reads: :class:`Into` ``(leaf_path, port)``.

Fetches:

- a top output name (``"y"``): the value that output carries;
- a top named control port (``"train"``): every op bound to it, run for effects;
- an endpoint (``"block/dense:y"``, ``Endpoint``, ``(path, port)``): an output port of a
  leaf or a container gives its value, an input port the value flowing into it, port
  ``-1`` runs the op (every op of a container) for effects;
- a bare op path (``"block/update"``): run that op (or every op of that container) for
  its effects; its result is None.

Feeds: a top input name, or any endpoint. Feeding an output (of a leaf or a container)
replaces that value for every consumer, so nothing upstream of it needs to run;
feeding an op's input port replaces what that op reads there, and a container's input
port what the ops inside it read from that port.

>>> from amanda.containers import Container, flatten, op
>>> g = Container("G", "g", inputs=["x"], outputs=["y"], children=[op("Relu", "r", ["X"], ["Y"])],
...     edges=[("g:x", "r:X"), ("r:Y", "g:y")])
>>> resolve_fetch(g, flatten(g), "y", None), resolve_fetch(g, flatten(g), "r", None)
(FetchSpec(kind='value', key=Endpoint('r', 'Y')), FetchSpec(kind='effect', key=(('r',),)))
>>> resolve_feed(g, flatten(g), "r:X", None)
FeedSpec(kind='into', key=(Into(r:X),))
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from amanda.containers import CONTROL, SELF, Endpoint, FlatGraph
from amanda.containers.invariants import resolve_path
from amanda.containers.records import Junction, Path
from amanda.errors import ExecutionError, format_path

if TYPE_CHECKING:
    from amanda.containers import Container

__all__ = ["FeedSpec", "FetchSpec", "Into", "control_sources", "data_source", "is_top_name", "resolve_feed",
           "resolve_fetch"]


class FetchSpec(NamedTuple):
    """What one fetch resolves to: ``kind`` ``"value"`` with the ``key`` (an Endpoint) of the
    value it returns, or ``"effect"`` with the leaf paths it runs."""

    kind: str
    key: Any


class FeedSpec(NamedTuple):
    """What one feed resolves to: ``kind`` ``"value"`` with the ``key`` (an Endpoint) of the
    value it replaces, or ``"into"`` with the :class:`Into` op inputs it overrides."""

    kind: str
    key: Any


class Into(NamedTuple):
    """An op input port whose value a feed replaces: the leaf's ``path`` and the ``port``."""

    path: Path
    port: str

    def __repr__(self) -> str:
        return f"Into({format_path(self.path)}:{self.port})"


def _one(found: list[tuple[Endpoint, Any]], where: str) -> Endpoint | None:
    """The one source of ``found`` (``(source, attrs)`` pairs), None for none; an
    ExecutionError when producers differ by phase and no phase was chosen."""
    if len(found) > 1:
        phases = sorted(str(attrs.get("phase")) for _, attrs in found)
        raise ExecutionError(
            f"`{where}` has one producer per phase ({', '.join(phases)}); run with phase= one of them",
            path=where, expected="one producer", found=f"{len(found)} producers",
        )
    return found[0][0] if found else None


def data_source(flat: FlatGraph, path: Path, port: str, phase: Any) -> Endpoint | None:
    """The value read by input ``port`` of the leaf at ``path``, or None if nothing feeds it."""
    return _one(flat.view.feeding(Endpoint(path, port), phase), f"{format_path(path)}:{port}")


def control_sources(flat: FlatGraph, path: Path, phase: Any) -> list[Path]:
    """Leaf paths with a control edge into the op at ``path``."""
    return flat.view.control_sources(path, phase)


def _node(model: Container, path: Path) -> Container:
    node = model
    for name in path:
        node = node.child(name)
    return node


def _boundary_source(flat: FlatGraph, path: Path, port: str, side: str, phase: Any) -> Endpoint:
    """The value at a container's boundary port (``side`` ``"out"`` for an output, ``"in"``
    for the value entering an input); an op's output is its own value."""
    if side == "out" and path in flat.ops:
        return Endpoint(path, port)
    if side == "in" and not path:
        return Endpoint(SELF, port)
    found = _one(flat.view.feeding(Junction(path, port, side), phase), f"{format_path(path)}:{port}")
    if found is None:
        kind = "output" if side == "out" else "input"
        raise ExecutionError.at(path, f"a value reaching {kind} `{port}`", "no edge feeding it")
    return found


def _port_name(node: Container, port: Any, where: Any) -> str | int:
    if isinstance(port, int) and port != CONTROL:
        if 0 <= port < len(node.outputs):
            return node.outputs[port].name
        raise ExecutionError.at(where, f"an output index below {len(node.outputs)}", str(port))
    return port


def _endpoint(model: Container, item: Any) -> tuple[Any, Container, Any]:
    try:
        endpoint = item if isinstance(item, Endpoint) else Endpoint.of(item)
    except (TypeError, ValueError) as exc:
        raise ExecutionError.at(model.name, "an endpoint 'op:port', Endpoint(path, port) or (path, port)",
                                repr(item)) from exc
    path = resolve_path(model, endpoint[0])
    if path is None:
        raise ExecutionError.at(model.name, "an existing op path", repr(endpoint[0]))
    node = model if path is SELF else _node(model, path)
    return path, node, _port_name(node, endpoint[1], endpoint[0])


def _inputs_inside(model: Container, path: Path, port: str) -> tuple[Into, ...]:
    """Leaf inputs inside the container at ``path`` that read its input ``port``."""
    from amanda.containers import flatten

    inner = flatten(_node(model, path))
    return tuple(Into(path + tuple(ep[0]), ep[1]) for ep in inner.inputs.get(port, ()))


def _leaves(flat: FlatGraph, path: Path) -> tuple[Path, ...]:
    """The leaf ops at or inside ``path``."""
    return (path,) if path in flat.ops else tuple(flat.view.inside(path))


def _named_control_sources(model: Container, flat: FlatGraph, path: Path, port: str) -> tuple[Path, ...]:
    """The leaf ops a named control ``port`` of the container at ``path`` runs: those linked to
    it, and where a container's own named control port is linked, the ops that port runs (a
    layer's ``train`` port runs its updates, not its ops of other phases)."""
    node = model if not path else _node(model, path)
    paths: list[tuple] = []
    for edge in node.edges:
        if edge[1][0] is SELF and edge[1][1] == port and edge[0][0] is not SELF:
            source = path + tuple(edge[0][0])
            inner = edge[0][1]
            if source not in flat.ops and isinstance(inner, str) and inner in _node(model, source).control_names:
                paths.extend(_named_control_sources(model, flat, source, inner))
            else:
                paths.extend(_leaves(flat, source))
    return tuple(paths)


def is_top_name(model: Container, item: Any) -> bool:
    """Whether a fetch or feed ``item`` is read as a name rather than as an ``"op:port"``
    endpoint: a string without ``:``, or the whole name of a top input, output or control port
    (``"input:0"``, ``"grad/onnx::MatMul_1"``), which wins over the endpoint it also spells.

    >>> from amanda.containers import Container
    >>> g = Container("G", "g", inputs=["input:0"], outputs=["y"])
    >>> is_top_name(g, "input:0"), is_top_name(g, "y"), is_top_name(g, "r:Y")
    (True, True, False)
    """
    if not isinstance(item, str):
        return False
    return ":" not in item or item in model.input_names or item in model.output_names or item in model.control_names


def resolve_fetch(model: Container, flat: FlatGraph, item: Any, phase: Any) -> FetchSpec:
    """``FetchSpec("value", key)`` or ``FetchSpec("effect", leaf paths)`` for one fetch."""
    if is_top_name(model, item):
        if item in model.output_names:
            return FetchSpec("value", _top_output(model, flat, item, phase))
        if item in model.control_names:
            return FetchSpec("effect", _named_control_sources(model, flat, (), item))
        if item in model.input_names:
            return FetchSpec("value", Endpoint(SELF, item))
        path = resolve_path(model, item)
        if path is None or path is SELF:
            raise ExecutionError.at(
                model.name, f"a top output ({', '.join(model.output_names) or 'none'}), an endpoint "
                "'op:port' or an op path", repr(item))
        return FetchSpec("effect", _leaves(flat, path))
    path, node, port = _endpoint(model, item)
    if path is SELF:
        if port in model.output_names:
            return FetchSpec("value", _top_output(model, flat, port, phase))
        if port in model.input_names:
            return FetchSpec("value", Endpoint(SELF, port))
        if port == CONTROL:
            return FetchSpec("effect", _leaves(flat, ()))
        if port in model.control_names:
            return FetchSpec("effect", _named_control_sources(model, flat, (), port))
        raise ExecutionError.at(model.name, "a port of the top container", repr(port))
    if port == CONTROL:
        return FetchSpec("effect", _leaves(flat, path))
    if port in node.output_names:
        return FetchSpec("value", _boundary_source(flat, path, port, "out", phase))
    if port in node.input_names:
        if node.is_op:
            source = data_source(flat, path, port, phase)
            if source is None:
                raise ExecutionError.at(path, f"a value flowing into `{port}`", "no producer")
            return FetchSpec("value", source)
        return FetchSpec("value", _boundary_source(flat, path, port, "in", phase))
    if port in node.control_names:
        return FetchSpec("effect", _named_control_sources(model, flat, path, port))
    raise ExecutionError.at(path, f"a port of `{format_path(path)}` ({_ports(node)})", repr(port))


def _ports(node: Container) -> str:
    return ", ".join([*node.input_names, *node.output_names, *node.control_names]) or "none"


def _top_output(model: Container, flat: FlatGraph, name: str, phase: Any) -> Endpoint:
    found = _one(flat.view.feeding(Endpoint(SELF, name), phase), f"{model.name}:{name}")
    if found is None:
        raise ExecutionError.at(model.name, f"a value reaching output `{name}`", "no edge feeding it")
    return found


def resolve_feed(model: Container, flat: FlatGraph, item: Any, phase: Any) -> FeedSpec:
    """``FeedSpec("value", key)`` for a fed value, or ``FeedSpec("into", Into keys)`` for fed op inputs."""
    if is_top_name(model, item):
        if item in model.input_names:
            return FeedSpec("value", Endpoint(SELF, item))
        if item in model.output_names:
            return FeedSpec("value", _top_output(model, flat, item, phase))
        raise ExecutionError.at(
            model.name, f"a top input ({', '.join(model.input_names) or 'none'}) or an endpoint 'op:port'",
            repr(item))
    path, node, port = _endpoint(model, item)
    if path is SELF:
        if port in model.input_names:
            return FeedSpec("value", Endpoint(SELF, port))
        if port in model.output_names:
            return FeedSpec("value", _top_output(model, flat, port, phase))
        raise ExecutionError.at(model.name, "a data port of the top container", repr(port))
    if port in node.output_names:
        return FeedSpec("value", _boundary_source(flat, path, port, "out", phase))
    if port in node.input_names:
        if node.is_op:
            return FeedSpec("into", (Into(path, port),))
        return FeedSpec("into", _inputs_inside(model, path, port))
    raise ExecutionError.at(path, f"a data port of `{format_path(path)}` ({_ports(node)})", repr(port))


def normalize(item: Any) -> Any:
    """A hashable form of a fetch or feed name (lists become tuples)."""
    if isinstance(item, list):
        return tuple(item)
    return item


def normalize_all(items: Iterable[Any]) -> tuple:
    """Every name made hashable."""
    return tuple(normalize(i) for i in items)
