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
from amanda.containers.arguments import brief, expect_mapping, expect_str
from amanda.containers.compose import exposed_controls
from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge, Endpoint, Port
from amanda.errors import ArgumentError
from amanda.types.tensor_type import to_attrs

__all__ = ["apply", "calls_in_order", "model"]
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
            raise ArgumentError.at("outputs", "Values named by non-empty strings", brief((name, value)))
    names = [n for n, _ in items]
    if len(set(names)) != len(names):
        raise ArgumentError.at("outputs", "distinct output names (pass a mapping to name them)", brief(names))
    return items


def _check_inputs(inputs: Any) -> None:
    if isinstance(inputs, Value) or isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
        raise ArgumentError.at("inputs", "a list of Values made by amanda.Input", type(inputs).__name__)
    for value in inputs:
        if not isinstance(value, Value) or value.producer is not None:
            raise ArgumentError.at("inputs", "Values made by amanda.Input", brief(value))


def calls_in_order(wanted: list[tuple[str, Value]], stop: frozenset[int] | set[int] = frozenset()) -> list[Call]:
    """Every op the ``(name, Value)`` outputs depend on, producers before consumers (an
    iterative post-order, so arbitrarily deep graphs work), not looking past values whose id is
    in ``stop``.

    >>> x = Input("x", "float32", ("n",))
    >>> [c.op.type for c in calls_in_order([("y", ops.Neg(ops.Relu(x)))])]
    ['Relu', 'Neg']
    """
    order: list[Call] = []
    seen: set[int] = set()
    stack: list[tuple[Call, bool]] = [(v.producer, False) for _, v in reversed(wanted)
                                      if v.producer is not None and id(v) not in stop]
    while stack:
        call, expanded = stack.pop()
        if expanded:
            order.append(call)
            continue
        if id(call) in seen:
            continue
        seen.add(id(call))
        stack.append((call, True))
        stack.extend((v.producer, False) for _, v in reversed(call.inputs)
                     if v.producer is not None and id(v) not in stop)
    return order


def _names(order: list[Call], parent: str) -> dict[int, str]:
    """A child name per call: its op's name, suffixed where two calls share one (a layer
    applied twice, or two layers of the same default name) or it is the parent's."""
    names: dict[int, str] = {}
    taken: set[str] = {parent}
    for call in order:
        base = call.op.name or call.op.type or "op"
        own = {kid.name for kid in call.op.children}  # a layer may not be named like its own child
        name, count = base, 1
        while name in taken or (name != base and name in own):
            name, count = f"{base}_{count}", count + 1
        taken.add(name)
        names[id(call)] = name
    return names


def _data_edges(inputs: Sequence[Value], wanted: list, order: list, names: dict[int, str]) -> list[Edge]:
    """The model's data edges: into each call's ports and onto the model's outputs; an
    ArgumentError for a call that reads an input ``inputs`` does not list."""
    given = {id(v) for v in inputs}

    def source(value: Value) -> Endpoint:
        return Endpoint(SELF, value.name) if value.producer is None else Endpoint((names[id(value.producer)],), value.port)

    edges = []
    for call in order:
        for port, value in call.inputs:
            if value.producer is None and id(value) not in given:
                raise ArgumentError.at((call.op.name, port), f"an input among {[v.name for v in inputs]}",
                                       f"the input {value.name!r}, which inputs= does not list")
            edges.append(Edge(source(value), Endpoint((names[id(call)],), port)))
    edges += [Edge(source(value), Endpoint(SELF, out)) for out, value in wanted]
    return edges


def model(inputs: Sequence[Value], outputs: Any, name: str | None = None, *, type: str = "Model",
          attrs: Mapping[str, Any] | None = None) -> Container:
    """A container of every op between ``inputs`` and ``outputs`` (a Value, a list, or a mapping
    from output name to Value), in the namespace they were built in; ``type`` and ``attrs``
    (added to the namespace) are the container's own. Ops (or layers) that share a name are
    suffixed ``_1``, ``_2`` … in build order."""
    _check_inputs(inputs)
    expect_str(name, "name", "a model name", optional=True)
    expect_str(type, "type", "a container type")
    expect_mapping(attrs, "attrs", "a mapping of attribute names to values", optional=True)
    wanted = _outputs(outputs)
    order = calls_in_order(wanted)
    names = _names(order, name or "model")
    edges = _data_edges(inputs, wanted, order, names)
    out_ports = [Port(out, attrs=to_attrs(value.type)) for out, value in wanted]
    in_ports = [Port(v.name, attrs=to_attrs(v.type)) for v in inputs]
    namespaces = {c.op.attrs.get("namespace") for c in order} or {DEFAULT_NAMESPACE}
    own = {"namespace": namespaces.pop()} if len(namespaces) == 1 else {}
    children = [c.op.with_name(names[id(c)]) for c in order]
    controls = exposed_controls(children, [p.name for p in (*in_ports, *out_ports)])
    exposed = {p.name for p in controls}
    edges += [Edge(Endpoint((c.name,), n), Endpoint(SELF, n)) for c in children for n in c.control_names
              if n in exposed]
    return Container(type, name or "model", inputs=in_ports, outputs=out_ports, children=children, edges=edges,
                     attrs={**own, **(attrs or {})}, controls=controls)


def apply(layer: Container, *values: Value) -> Value | tuple[Value, ...]:
    """``layer`` applied to symbolic values, one per input port: its outputs as Values (a tuple
    when it has several), typed by inferring the layer's types from the values' types. This is
    what ``layer(value)`` does.

    >>> x = Input("x", "float32", ("batch", 4))
    >>> inner = Input("x", "float32")
    >>> act = model([inner], {"y": ops.Relu(inner)}, name="act")
    >>> act(x).type
    float32[batch,4]
    """
    from amanda.types import infer_types

    if len(values) != len(layer.inputs) or not all(isinstance(v, Value) for v in values):
        raise ArgumentError.at((layer.name or "layer",), f"{len(layer.inputs)} Values for inputs {list(layer.input_names)}",
                               f"{len(values)} arguments ({', '.join(type(v).__name__ for v in values)})")
    types = infer_types(layer, {p.name: v.type for p, v in zip(layer.inputs, values)})
    if types.problems:
        problem = types.problems[0]
        where = problem.path if isinstance(problem.path, tuple) else (problem.path,)
        raise ArgumentError.at((layer.name or "layer", *where), problem.expected, problem.found)
    call = Call(layer, tuple((p.name, v) for p, v in zip(layer.inputs, values)))
    label = layer.name or layer.type or "layer"
    outs = tuple(Value(call, p.name, types.get(((), p.name)), f"{label}.{p.name}") for p in layer.outputs)
    return outs[0] if len(outs) == 1 else outs
