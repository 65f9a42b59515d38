"""``amanda.model(inputs, outputs)``: the ops built between symbolic values, as one container
that owns them and their edges (Keras's ``Model(inputs, outputs)``).

>>> x = Input("x", "float32", ("batch", 4))
>>> m = model([x], {"y": ops.Relu(x)}, name="net")
>>> m.input_names, m.output_names, [c.type for c in m.children], m.namespace
(('x',), ('y',), ['Relu'], 'amanda/onnx/17')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from amanda.build.builder import DEFAULT_NAMESPACE, ops
from amanda.build.values import Call, Input, Value
from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge, Endpoint, Port
from amanda.errors import ArgumentError
from amanda.types.tensor_type import to_attrs

__all__ = ["model"]
_ = (Input, ops)  # the doctest's names


def _outputs(outputs: Any) -> list[tuple[str, Value]]:
    if isinstance(outputs, Value):
        return [(outputs.name.rpartition(".")[2] if outputs.producer else outputs.name, outputs)]
    if isinstance(outputs, Mapping):
        items = list(outputs.items())
    elif isinstance(outputs, Sequence) and not isinstance(outputs, (str, bytes)):
        items = [(v.name.rpartition(".")[2] if isinstance(v, Value) and v.producer else getattr(v, "name", "?"), v)
                 for v in outputs]
    else:
        raise ArgumentError.at("outputs", "a Value, a list of Values or a mapping name -> Value", type(outputs).__name__)
    for name, value in items:
        if not isinstance(value, Value) or not isinstance(name, str) or not name:
            raise ArgumentError.at("outputs", "Values named by non-empty strings", repr((name, value)))
    names = [n for n, _ in items]
    if len(set(names)) != len(names):
        raise ArgumentError.at("outputs", "distinct output names (pass a mapping to name them)", repr(names))
    return items


def _check_inputs(inputs: Any) -> None:
    if isinstance(inputs, Value) or isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
        raise ArgumentError.at("inputs", "a list of Values made by amanda.Input", type(inputs).__name__)
    for value in inputs:
        if not isinstance(value, Value) or value.producer is not None:
            raise ArgumentError.at("inputs", "Values made by amanda.Input", repr(value))


def _calls(wanted: list[tuple[str, Value]]) -> list[Call]:
    """Every op the outputs depend on, producers before consumers (an iterative post-order)."""
    order: list[Call] = []
    seen: set[int] = set()
    stack: list[tuple[Call, bool]] = [(v.producer, False) for _, v in reversed(wanted) if v.producer is not None]
    while stack:
        call, expanded = stack.pop()
        if expanded:
            order.append(call)
            continue
        if id(call) in seen:
            continue
        seen.add(id(call))
        stack.append((call, True))
        stack.extend((v.producer, False) for _, v in reversed(call.inputs) if v.producer is not None)
    return order


def _source(value: Value) -> Endpoint:
    return Endpoint(SELF, value.name) if value.producer is None else Endpoint((value.producer.op.name,), value.port)


def model(inputs: Sequence[Value], outputs: Any, name: str | None = None) -> Container:
    """A container of every op between ``inputs`` and ``outputs`` (a Value, a list, or a mapping
    from output name to Value), in the namespace they were built in."""
    _check_inputs(inputs)
    wanted = _outputs(outputs)
    order = _calls(wanted)
    given = {id(v) for v in inputs}
    edges = []
    for call in order:
        for port, value in call.inputs:
            if value.producer is None and id(value) not in given:
                raise ArgumentError.at((call.op.name, port), f"an input among {[v.name for v in inputs]}",
                                       f"the input {value.name!r}, which inputs= does not list")
            edges.append(Edge(_source(value), Endpoint((call.op.name,), port)))
    edges += [Edge(_source(value), Endpoint(SELF, out)) for out, value in wanted]
    out_ports = [Port(out, attrs=to_attrs(value.type)) for out, value in wanted]
    in_ports = [Port(v.name, attrs=to_attrs(v.type)) for v in inputs]
    namespaces = {c.op.attrs.get("namespace") for c in order} or {DEFAULT_NAMESPACE}
    attrs = {"namespace": namespaces.pop()} if len(namespaces) == 1 else {}
    return Container("Model", name or "model", inputs=in_ports, outputs=out_ports, children=[c.op for c in order],
                     edges=edges, attrs=attrs)
