"""Partitioning: the pruned, flattened model cut into one container per device and stage,
joined by ``Send``/``Recv`` ops on the cut edges.

Pruning keeps exactly the ops the fetches need (data and control edges), stopping at feeds,
as a Session's plan does. Ops are then grouped by device; a device's ops are split into
*stages* wherever a value leaves the device and comes back, so the parts form an acyclic
graph and each part can run to completion once its inputs arrive. A part is an ordinary
container (inspectable, renderable, runnable by a Session): its children are the leaf ops it
runs, named by their paths in the model; its input ports are feeds (``feed.<i>``) and values
received from other parts (``chan.<j>``, entering through a ``Recv`` op); its output ports are
values sent to other parts (``chan.<j>``, leaving through a ``Send`` op) and fetches
(``fetch.<i>``). A control edge between devices travels as an empty token through a
``Send``/``Recv`` pair, so the order it imposes holds across devices. A ``Constant`` is not
sent: it is copied into every part that reads it (as TensorFlow's placer puts such generators
with their consumers), so a run moves only computed values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from amanda.containers import CONTROL, SELF, Container, Edge, Endpoint, Port, flatten, walk
from amanda.containers.records import Path, PortKey
from amanda.containers.refs import resolve_references
from amanda.errors import ArgumentError, ExecutionError, format_path
from amanda.exec.dist.placement import DEFAULT_DEVICE, devices_of
from amanda.exec.kernels.registry import kernel
from amanda.exec.resolve import FetchSpec, control_sources, data_source, resolve_feed, resolve_fetch

__all__ = ["DIST", "DONE", "Part", "Partitioning", "describe", "partition"]

DIST = "amanda/dist"  # the namespace of Send and Recv
DONE = "done"  # a part's named control port: fetching it runs every op of the part


@kernel("Send", family=DIST)
def send_kernel(attrs: Mapping[str, Any], value: Any = None) -> tuple:
    """Send: passes its value on to the part's output (an empty token for a control edge)."""
    return (np.zeros(0, np.bool_) if value is None else value,)


@kernel("Recv", family=DIST)
def recv_kernel(attrs: Mapping[str, Any], value: Any = None) -> tuple:
    """Recv: passes the value another part sent on to this part's ops."""
    return (value,)


class Part(NamedTuple):
    """One device's ops of one stage, as a container, and where its inputs come from.

    ``feeds``: input port -> the feed name it takes; ``receives``: input port -> (part index,
    that part's output port); ``fetches``: output port -> index in the fetch list.
    """

    number: int  # the part's place in the running order
    device: str
    stage: int
    container: Container
    feeds: Mapping[str, Any]
    receives: Mapping[str, tuple[int, str]]
    fetches: Mapping[str, int]

    @property
    def name(self) -> str:
        """``<device>/<stage>``."""
        return f"{self.device}/{self.stage}"


class Partitioning(NamedTuple):
    """The parts in an order that runs each after the parts it receives from, and for each
    fetch where its value comes from: ``("part", i, port)``, ``("feed", name)`` or ``("effect",)``."""

    parts: tuple[Part, ...]
    sources: tuple[tuple, ...]


class _Needs:
    """The pruned dataflow: for each needed op, where each input comes from."""

    def __init__(self, model: Container, fetches: Sequence[Any], feeds: Sequence[Any], phase: Any) -> None:
        self.flat = flat = flatten(model)
        self.fed_values: dict[Endpoint, Any] = {}
        self.fed_into: dict[PortKey, Any] = {}
        for name in feeds:
            kind, key = resolve_feed(model, flat, name, phase)
            if kind == "value":
                self.fed_values[key] = name
            else:
                for into in key:
                    self.fed_into[(into.path, into.port)] = name
        self.targets: list[FetchSpec] = [resolve_fetch(model, flat, f, phase) for f in fetches]
        self.inputs: dict[Path, list[tuple[str, str, Any]]] = {}  # op -> (port, kind, source)
        self.controls: dict[Path, list[Path]] = {}
        pending = []
        for kind, key in self.targets:
            if kind == "value" and key not in self.fed_values and key[0] is not SELF:
                pending.append(key[0])
            elif kind == "effect":
                pending.extend(key)
        while pending:
            path = pending.pop()
            if path in self.inputs:
                continue
            op = flat.ops[path]
            wired = self.inputs[path] = []
            for port in op.input_names:
                if (path, port) in self.fed_into:
                    wired.append((port, "feed", self.fed_into[(path, port)]))
                    continue
                source = data_source(flat, path, port, phase)
                if source is None:
                    continue
                if source in self.fed_values:
                    wired.append((port, "feed", self.fed_values[source]))
                elif source[0] is SELF:
                    raise ExecutionError.at(path, f"a feed for the model input {source[1]!r}", "none")
                else:
                    wired.append((port, "op", source))
                    pending.append(source[0])
            self.controls[path] = control_sources(flat, path, phase)
            pending.extend(self.controls[path])
        self.order = [p for p in flat.topological_order() if p in self.inputs]


def _generators(needs: _Needs) -> frozenset[Path]:
    """The Constant ops that are copied into each part that reads them instead of being
    sent on every run (as TensorFlow's placer puts a generator with its consumer): those
    with no inputs, in no control edge and not fetched."""
    ordering = {p for preds in needs.controls.values() for p in preds}
    fetched = {key[0] for kind, key in needs.targets if kind == "value"}
    return frozenset(p for p in needs.order if needs.flat.ops[p].type == "Constant" and not needs.inputs[p]
                     and not needs.controls[p] and p not in ordering and p not in fetched)


def _copied_into(needs: _Needs, copied: frozenset[Path], source: Path, there: str, here: str) -> bool:
    """Whether ``source`` (on device ``there``) is copied into a part on device ``here`` rather
    than read across parts: a copied Constant, or a Variable of the same device (the same uid,
    so the same state key)."""
    return source in copied or (needs.flat.ops[source].type == "Variable" and there == here)


def _stages(needs: _Needs, devices: Mapping[Path, str], copied: frozenset[Path]) -> dict[Path, int]:
    """A stage per op: a value crossing to another device raises the stage by one."""
    stage: dict[Path, int] = {}
    for path in needs.order:
        # a Variable or a copied Constant is copied into each part that uses it: it orders nothing
        preds = [s[0] for _, kind, s in needs.inputs[path]
                 if kind == "op" and needs.flat.ops[s[0]].type != "Variable" and s[0] not in copied] \
            + needs.controls[path]
        stage[path] = max((stage[p] + (devices[p] != devices[path]) for p in preds), default=0)
    return stage


class _Builder:
    """Collects one part's children, edges and boundary ports."""

    def __init__(self, device: str, stage: int) -> None:
        self.device, self.stage = device, stage
        self.children: dict[str, Container] = {}
        self.edges: list[Edge] = []
        self.inputs: list[Port] = []
        self.outputs: list[Port] = []
        self.feeds: dict[str, Any] = {}
        self.receives: dict[str, tuple[int, str]] = {}
        self.fetches: dict[str, int] = {}
        self.received: dict[Any, str] = {}  # channel key -> Recv child name
        self.sent: dict[Any, str] = {}  # channel key -> output port

    def edge(self, src: tuple, dst: tuple) -> None:
        self.edges.append(Edge(Endpoint(*src), Endpoint(*dst)))

    def add_op(self, name: str, op: Container) -> None:
        self.children[name] = op

    def feed_port(self, feed: Any) -> str:
        for port, name in self.feeds.items():
            if name == feed:
                return port
        port = f"feed.{len(self.feeds)}"
        self.feeds[port] = feed
        self.inputs.append(Port(port, attrs={"feed": str(feed)}))
        return port

    def recv(self, key: Any, source: tuple[int, str]) -> str:
        """The Recv child that delivers channel ``key`` here (made on first use)."""
        if key not in self.received:
            port = source[1]
            name = f"recv {port}"
            self.inputs.append(Port(port))
            self.receives[port] = source
            self.add_op(name, Container("Recv", name, inputs=["value"], outputs=["value"],
                                        attrs={"namespace": DIST, "device": self.device}))
            self.edge((SELF, port), ((name,), "value"))
            self.received[key] = name
        return self.received[key]

    def send(self, key: Any, channels: list, src: tuple | None) -> str:
        """The output port that carries ``key`` out through a Send (made on first use)."""
        if key not in self.sent:
            port = f"chan.{len(channels)}"
            channels.append(key)
            name = f"send {port}"
            inputs = ["value"] if src is not None else []
            self.add_op(name, Container("Send", name, inputs=inputs, outputs=["value"],
                                        attrs={"namespace": DIST, "device": self.device}))
            if src is not None:
                self.edge(src, ((name,), "value"))
            self.edge(((name,), "value"), (SELF, port))
            self.outputs.append(Port(port))
            self.sent[key] = port
        return self.sent[key]


def _name(path: Path) -> str:
    """A part's child name for the model op at ``path``."""
    return "/".join(path)


class _Cut:
    """The parts being built: one builder per (device, stage), in running order."""

    def __init__(self, model: Container, needs: _Needs, default: str) -> None:
        self.needs = needs
        self.devices = devices_of(model, default)
        self.copied = _generators(needs)
        self.stage = _stages(needs, self.devices, self.copied)
        self.effective = {p: a for p, _, a in walk(model) if p in needs.inputs}
        first: dict[tuple[str, int], int] = {}
        for i, path in enumerate(needs.order):
            if path not in self.copied:
                first.setdefault(self.key(path), i)
        # a part only receives from parts of lower stages, so stage order is a running order
        keys = sorted(first, key=lambda k: (k[1], first[k]))
        self.builders = {key: _Builder(*key) for key in keys}
        self.index_of = {key: i for i, key in enumerate(keys)}
        self.channels: list = []

    def key(self, path: Path) -> tuple[str, int]:
        """The (device, stage) of the part that runs the op at ``path``."""
        return (self.devices[path], self.stage[path])

    def copy(self, path: Path, device: str) -> Container:
        """The op at ``path`` as a part's child on ``device``."""
        return self.needs.flat.ops[path].evolve(name=_name(path), attrs={**self.effective[path], "device": device})

    def place(self, path: Path) -> None:
        """Add the op at ``path`` to its part, with its inputs and control predecessors wired."""
        here = self.builders[self.key(path)]
        here.add_op(_name(path), self.copy(path, self.devices[path]))
        for port, kind, source in self.needs.inputs[path]:
            if kind == "feed":
                here.edge((SELF, here.feed_port(source)), ((_name(path),), port))
            else:
                self._wire_value(here, path, port, source)
        for pred in self.needs.controls[path]:
            self._wire_control(here, path, pred)

    def _wire_value(self, here: _Builder, path: Path, port: str, source: tuple) -> None:
        """An op's input from another op: an edge within the part, else through Send/Recv."""
        there_key = self.key(source[0])
        if _copied_into(self.needs, self.copied, source[0], there_key[0], here.device):
            here.add_op(_name(source[0]), self.copy(source[0], here.device))
            there_key = (here.device, here.stage)
        if there_key == (here.device, here.stage):
            here.edge(((_name(source[0]),), source[1]), ((_name(path),), port))
            return
        out = self.builders[there_key].send(source, self.channels, ((_name(source[0]),), source[1]))
        recv = here.recv(source, (self.index_of[there_key], out))
        here.edge(((recv,), "value"), ((_name(path),), port))

    def _wire_control(self, here: _Builder, path: Path, pred: Path) -> None:
        """A control edge: within the part, else an empty token through Send/Recv."""
        there_key = self.key(pred)
        if there_key == (here.device, here.stage):
            here.edge(((_name(pred),), CONTROL), ((_name(path),), CONTROL))
            return
        token = ("control", pred)
        there = self.builders[there_key]
        if token not in there.sent:
            out = there.send(token, self.channels, None)
            there.edge(((_name(pred),), CONTROL), ((f"send {out}",), CONTROL))
        recv = here.recv(token, (self.index_of[there_key], there.sent[token]))
        here.edge(((recv,), CONTROL), ((_name(path),), CONTROL))

    def sources(self) -> tuple[tuple, ...]:
        """For each fetch, where its value comes from (a part's new output port for an op's)."""
        sources: list[tuple] = []
        for i, (kind, key) in enumerate(self.needs.targets):
            if kind == "effect":
                sources.append(("effect",))
            elif key in self.needs.fed_values:
                sources.append(("feed", self.needs.fed_values[key]))
            else:
                owner = self.builders[self.key(key[0])]
                port = f"fetch.{i}"
                owner.outputs.append(Port(port))
                owner.edge(((_name(key[0]),), key[1]), (SELF, port))
                owner.fetches[port] = i
                sources.append(("part", self.index_of[(owner.device, owner.stage)], port))
        return tuple(sources)

    def parts(self) -> tuple[Part, ...]:
        """The built parts, each with a ``done`` control port every one of its ops signals."""
        parts = []
        for key, b in self.builders.items():
            # every op signals the part's "done" control port, so fetching it runs them all
            done = [Edge(Endpoint((child,), CONTROL), Endpoint(SELF, DONE)) for child in b.children]
            container = Container("Part", f"{b.device}/{b.stage}", inputs=b.inputs, outputs=b.outputs,
                                  children=list(b.children.values()), edges=b.edges + done,
                                  attrs={"device": b.device}, controls=[DONE])
            parts.append(Part(self.index_of[key], b.device, b.stage, container, b.feeds, b.receives, b.fetches))
        return tuple(parts)


def partition(model: Container, fetches: Sequence[Any], feeds: Sequence[Any] = (), *, phase: Any = None,
              default: str = DEFAULT_DEVICE) -> Partitioning:
    """Cut ``model``, pruned to ``fetches`` given ``feeds`` (names as ``Session.run`` takes
    them), into per-device parts joined by Send/Recv ops."""
    if not isinstance(model, Container):
        raise ArgumentError.at("model", "a Container", type(model).__name__)
    if isinstance(fetches, (str, bytes)) or not isinstance(fetches, Sequence):
        raise ArgumentError.at("fetches", "a list of fetch names", repr(fetches))
    model = resolve_references(model)  # parts hold ops without their calls: give them the values
    cut = _Cut(model, _Needs(model, list(fetches), list(feeds), phase), default)
    for path in cut.needs.order:
        if path not in cut.copied:
            cut.place(path)
    sources = cut.sources()  # adds the fetch ports: before the parts are built
    return Partitioning(cut.parts(), sources)


def describe(partitioning: Partitioning) -> str:
    """One line per part: its name, op count and what it receives from which part."""
    lines = []
    for part in partitioning.parts:
        takes = ", ".join(f"{port}<-{partitioning.parts[i].name}" for port, (i, _) in part.receives.items())
        lines.append(f"{part.name}: {len(part.container.children)} ops" + (f"; receives {takes}" if takes else ""))
    return "\n".join(lines) or format_path(None)
