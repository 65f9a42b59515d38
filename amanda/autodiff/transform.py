"""``grad(model, loss, wrt)``: reverse-mode differentiation as a pure transform.

The answer is a new container that holds ``model`` unchanged as a child (under its own name) and the
backward ops beside it, built by the rules of :mod:`amanda.autodiff.rules` from builder ops.
Its outputs are the loss and one gradient per ``wrt`` entry, named ``grad/<path>`` (a weight)
or ``grad/<path>.<port>`` (any other endpoint). Only ops on a path from ``wrt`` to the loss
are differentiated; contributions of several consumers are summed; each backward op carries
``grad_of: <forward path>``.

>>> import numpy as np, amanda
>>> from amanda import Input, ops
>>> x = Input("x", "float64", (2, 3))
>>> w = ops.Constant(value=np.full((3, 1), 2.0), name="w")
>>> net = amanda.model([x], {"loss": ops.ReduceSum(ops.MatMul(x, w), keepdims=0)})
>>> g = grad(net, "loss", ["w"])
>>> g.output_names
('loss', 'grad/w')
>>> with amanda.Session(g) as s:
...     s.run(["grad/w"], {"x": np.ones((2, 3))})[0].ravel().tolist()
[2.0, 2.0, 2.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from amanda.autodiff.node import Node, const, zeros_like
from amanda.autodiff.rules import RULES, rule_for
from amanda.build import ops
from amanda.build.builder import DEFAULT_NAMESPACE
from amanda.build.model import calls_in_order
from amanda.build.values import Value
from amanda.containers import CONTROL, SELF, Container, Edge, Endpoint, Port, bind, flatten, walk
from amanda.containers.arguments import brief, expect_container, expect_str
from amanda.containers.invariants import resolve_path
from amanda.containers.phases import check_phase, computations
from amanda.containers.refs import resolve_references
from amanda.containers.update import target_paths
from amanda.errors import AmandaError, ArgumentError, PathError, SchemaError, format_path
from amanda.namespaces.name import NamespaceName
from amanda.ops.registry import entry
from amanda.rewrite.mapping import convert
from amanda.types import infer_types, to_attrs

__all__ = ["checked_phase", "differentiate", "grad", "namespace_of", "wrt_endpoints"]


class _Pass:
    """The state of one reverse pass: forward values, gradient contributions, built calls."""

    def __init__(self, model: Container, phase: Any, loss: str) -> None:
        self.model = model
        self.loss = loss
        self.forward = model.name  # the child holding the forward model keeps its name
        bound = bind(model, phase) if phase is not None else model
        bound = resolve_references(bound)  # a call's body ops with the call's attribute values
        self.flat = flatten(bound)
        self.types = infer_types(bound)
        self.source: dict[tuple, Endpoint] = {}  # (op path, input port) -> producing endpoint
        self.consumers: dict[Endpoint, list[tuple]] = {}
        for edge in self.flat.edges:
            if edge.src[1] == CONTROL or edge.dst[0] is SELF:
                continue
            self.source[(edge.dst[0], edge.dst[1])] = edge.src
            self.consumers.setdefault(edge.src, []).append(edge.dst[0])
        self.values: dict[Endpoint, Value] = {}
        self.edges_of: dict[str, Endpoint] = {}  # placeholder name -> endpoint in the answer
        self.contributions: dict[Endpoint, list[Value]] = {}
        self.summed: dict[Endpoint, Value | None] = {}
        self.grad_of: dict[int, str] = {}

    def value(self, src: Endpoint) -> Value:
        """The builder value standing for a forward endpoint (made once)."""
        found = self.values.get(src)
        if found is not None:
            return found
        path, port = src
        if path is SELF:
            type_, constant, at = self.types.input((), port), None, Endpoint(SELF, port)
        else:
            op = self.flat.ops[path]
            type_ = self.types.output(path, port)
            constant = op.attrs.get("value") if op.type == "Constant" else None
            at = Endpoint((self.forward, *path), port)
        name = f"@{len(self.edges_of)}"
        self.edges_of[name] = at
        made = self.values[src] = Value(None, name, type_, name, constant)
        return made

    def total(self, src: Endpoint) -> Value | None:
        """The summed gradient of a forward endpoint (None: nothing contributed)."""
        if src in self.summed:
            return self.summed[src]
        parts = self.contributions.get(src, [])
        total = None if not parts else parts[0] if len(parts) == 1 else ops.Sum(*parts)
        if len(parts) > 1:
            self._tag(total, format_path(src[0]) if src[0] is not SELF else "input")
        self.summed[src] = total
        return total

    def _tag(self, value: Any, where: str) -> None:
        """Mark every call made for ``value`` since the forward values with ``grad_of``."""
        stack = [value]
        while stack:
            v = stack.pop()
            call = v.producer if isinstance(v, Value) else None
            if call is None or id(call) in self.grad_of:
                continue
            self.grad_of[id(call)] = where
            stack.extend(w for _, w in call.inputs)


def _wrt_endpoints(model: Container, wrt: Any) -> list[tuple[str, Endpoint]]:
    """(output name, forward endpoint) per entry of ``wrt``: op paths (their first output),
    ``"path:port"`` strings, Endpoints, input names, or a Selection of ops."""
    items = [wrt] if isinstance(wrt, (str, Endpoint)) or hasattr(wrt, "paths") else wrt
    if not isinstance(items, (list, tuple)):
        raise ArgumentError.at("wrt", "a path, an endpoint, a Selection or a list of them", type(wrt).__name__)
    found: list[tuple[str, Endpoint]] = []
    for item in items:
        if hasattr(item, "paths"):
            found += [(f"grad/{'/'.join(p)}", Endpoint(p, model.descendant(p).outputs[0].name)) for p in item.paths]
        elif isinstance(item, str) and item in model.input_names:  # wins over 'op:port' ("input:0")
            found.append((f"grad/{item}", Endpoint(SELF, item)))
        elif isinstance(item, Endpoint) or (isinstance(item, str) and ":" in item and not _names_op(model, item)):
            end = item if isinstance(item, Endpoint) else Endpoint(*_split(model, item))
            label = end.port if end.op is SELF else f"{'/'.join(end.op)}.{end.port}"
            found.append((f"grad/{label}", end))
        elif isinstance(item, (str, tuple)):
            for p in target_paths(model, item):
                node = model.descendant(p)
                if not node.outputs:
                    raise PathError.at(format_path(p), "an op with an output", "none")
                found.append((f"grad/{'/'.join(p)}", Endpoint(p, node.outputs[0].name)))
        else:
            raise ArgumentError.at("wrt", "paths, endpoints or a Selection", brief(item))
    return found


def _names_op(model: Container, text: str) -> bool:
    """Whether ``text`` is the path of an op whose name holds ``:`` (``onnx::MatMul_1``)."""
    path = resolve_path(model, text)
    return path is not None and path is not SELF


def _split(model: Container, text: str) -> tuple:
    path, _, port = text.rpartition(":")
    if path in ("", model.name):
        return SELF, port
    (resolved,) = target_paths(model, path)
    node = model.descendant(resolved)
    if port.lstrip("-").isdigit():
        port = node.outputs[int(port)].name
    elif port not in node.output_names:
        raise PathError.at(f"{path}:{port}", f"an output port among {list(node.output_names)}", repr(port))
    return resolved, port


def _leaf_endpoint(flat: Any, model: Container, end: Endpoint) -> Endpoint:
    """A container's output followed inside to the leaf that produces it."""
    if end.op is SELF or tuple(end.op) in flat.ops:
        return Endpoint(end.op, end.port)
    node = model.descendant(end.op)
    for edge in node.edges:
        if edge.dst[0] is SELF and edge.dst[1] == end.port:
            inner = Endpoint(tuple(end.op) + tuple(edge.src[0]) if edge.src[0] is not SELF else SELF, edge.src[1])
            return _leaf_endpoint(flat, model, inner)
    raise PathError.at(format_path(end.op), f"a producer of output {end.port!r}", "none")


def _reachable(p: _Pass, seeds: set, order: Sequence[tuple], loss_op: Any) -> tuple[set, set]:
    """Forward endpoints that depend on ``wrt``; ops the loss depends on."""
    varying = set(seeds)
    for path in order:
        op = p.flat.ops[path]
        if any(p.source.get((path, port.name)) in varying for port in op.inputs):
            varying.update(Endpoint(path, out.name) for out in op.outputs)
    needed: set = set()
    stack = [loss_op] if loss_op is not SELF else []
    while stack:
        path = stack.pop()
        if path in needed:
            continue
        needed.add(path)
        for port in p.flat.ops[path].inputs:
            src = p.source.get((path, port.name))
            if src is not None and src[0] is not SELF:
                stack.append(src[0])
    return varying, needed


def _rule(path: tuple, op: Container, model: Container) -> Any:
    namespace = _namespace(model, path)
    rule = rule_for(namespace, str(op.type))
    if rule is None:
        where = format_path(path)
        name = NamespaceName.parse(namespace)
        found = entry(name.family, str(op.type), domain=name.domain)
        why = f": {found.gradient_gap}" if found is not None and found.gradient_gap else ""
        raise SchemaError(
            f"no gradient rule for `{where}` ({op.type}, {namespace}){why}, which lies between wrt and the loss",
            path=where, expected=f"an op type with a rule in amanda.autodiff.RULES ({len(RULES)} rules)",
            found=f"{op.type} of {namespace}")
    return rule, namespace


def _namespace(model: Container, path: tuple) -> str:
    node, found = model, model.attrs.get("namespace")
    for name in path:
        node = node.child(name)
        found = node.attrs.get("namespace", found)
    return str(found or "amanda/onnx/17")


def _backward(p: _Pass, loss: Endpoint, wrt: list[tuple[str, Endpoint]]) -> None:
    order = p.flat.topological_order()
    varying, needed = _reachable(p, {e for _, e in wrt}, order, loss[0])
    seed = p.value(loss)
    one = ops.ConstantOfShape(ops.Shape(seed), value=const([1], seed))
    p._tag(one, "loss")
    p.contributions[loss] = [one]
    for path in reversed(order):
        if path not in needed or not any(Endpoint(path, o.name) in varying for o in p.flat.ops[path].outputs):
            continue
        op = p.flat.ops[path]
        grads = [p.total(Endpoint(path, o.name)) for o in op.outputs]
        if all(g is None for g in grads):
            continue
        sources = [p.source.get((path, port.name)) for port in op.inputs]
        needs = [s is not None and s in varying for s in sources]
        if not any(needs):
            continue
        rule, namespace = _rule(path, op, p.model)
        node = Node(path, op, [None if s is None else p.value(s) for s in sources],
                    [p.value(Endpoint(path, o.name)) for o in op.outputs], grads, needs, namespace)
        results = list(rule(node))
        where = format_path(path)
        for src, need, g in zip(sources, needs, results):
            if need and g is not None and src is not None:
                p._tag(g, where)
                p.contributions.setdefault(src, []).append(g)


def grad(model: Container, loss: str, wrt: Any, *, phase: Any = "auto", name: str | None = None) -> Container:
    """A container computing ``loss`` (an output name of ``model``) and its gradients with
    respect to ``wrt`` (weight paths, ``"op:port"`` endpoints, input names, or a Selection).

    ``phase``: the computation to differentiate (``"auto"``: ``"train"`` when the model has
    one). ``wrt`` entries that the loss does not depend on get zeros. A gradient whose name
    would be the loss's own (``grad(g, "grad/x", ["x"])`` of a gradient container ``g``) gets
    one more ``grad/`` (``grad/grad/x``), so gradients of gradients compose.
    """
    phase = checked_phase(model, loss, phase, name)
    targets = []
    for label, end in _wrt_endpoints(model, wrt):
        while label == loss:
            label = f"grad/{label}"
        targets.append((label, end))
    return differentiate(model, loss, targets, phase=phase, name=name)


def checked_phase(model: Container, loss: str, phase: Any, name: Any) -> Any:
    """The arguments of :func:`grad` checked: the phase to differentiate (``"auto"`` resolved)."""
    expect_container(model, "model")
    expect_str(loss, "loss", "the name of an output of the model")
    expect_str(phase, "phase", "'auto', a phase name", optional=True)
    expect_str(name, "name", "a name for the gradient container", optional=True)
    if loss not in model.output_names:
        raise PathError.at(f"{model.name}:{loss}", f"an output among {list(model.output_names)}", repr(loss))
    if phase == "auto":
        phase = "train" if "train" in computations(model) else None
    check_phase(model, phase, ArgumentError)
    return phase


def wrt_endpoints(model: Container, wrt: Any) -> list[tuple[str, Endpoint]]:
    """``(label, endpoint)`` per entry of ``wrt`` as :func:`grad` reads it, the label without
    its ``grad/`` (``"x"``, ``"fc/kernel"``, ``"fc/matmul.Y"``)."""
    expect_container(model, "model")
    return [(label.removeprefix("grad/"), end) for label, end in _wrt_endpoints(model, wrt)]


def differentiate(model: Container, loss: str, targets: list[tuple[str, Endpoint]], *, phase: Any,
                  name: str | None = None, keep: Sequence[str] | None = None, kind: str = "Gradients") -> Container:
    """:func:`grad` of checked arguments: ``targets`` are ``(output label, endpoint)`` pairs;
    ``keep`` the model outputs the answer passes through before the gradients (``[loss]``
    unless given); ``kind`` the answer's container type."""
    p = _Pass(model, phase, loss)
    targets = [(label, _leaf_endpoint(p.flat, model, end)) for label, end in targets]
    loss_end = p.flat.outputs[loss]
    if loss_end is None:
        raise PathError.at(f"{model.name}:{loss}", "an output with a producer", "none")
    _backward(p, loss_end, targets)
    outputs: list[tuple[str, Value]] = []
    for label, end in targets:
        g = p.total(end)
        if g is None:
            g = zeros_like(p.value(end))
            p._tag(g, "unused")
        outputs.append((label, g))
    return _assemble(p, [loss] if keep is None else list(keep), outputs, name, kind)


def _assemble(p: _Pass, keep: list[str], outputs: list[tuple[str, Value]], name: str | None, kind: str) -> Container:
    model = p.model
    labels = keep + [label for label, _ in outputs]
    if len(set(labels)) != len(labels):
        raise ArgumentError.at("wrt", "distinct entries", repr(labels))

    forward = p.forward
    children: list[Container] = [model]
    edges = [Edge(Endpoint(SELF, i.name), Endpoint((forward,), i.name)) for i in model.inputs]
    edges += [Edge(Endpoint((forward,), k), Endpoint(SELF, k)) for k in keep]
    ops_, inner = _backward_ops(p, outputs)
    children += ops_
    edges += [Edge(p.edges_of[e.src.port] if e.src.op is SELF else e.src, e.dst) for e in inner]
    kept = [next(o for o in model.outputs if o.name == k) for k in keep]
    out_ports = kept + [Port(label, attrs=to_attrs(v.type)) for label, v in outputs]
    return Container(kind, name or f"{model.name}_grad", inputs=model.inputs, outputs=out_ports, children=children,
                     edges=edges, attrs={"loss": p.loss})


def namespace_of(model: Container) -> str:
    """The namespace the backward ops are built in: the model's own ONNX namespace (its
    ``namespace`` attribute, else the one its ONNX ops share), else the builder's default."""
    own = model.attrs.get("namespace")
    if isinstance(own, str) and own and NamespaceName.parse(own).is_onnx:
        return own
    found = {str(node.attrs["namespace"]) for _, node, _ in walk(model)
             if node.is_op and node.attrs.get("namespace") and NamespaceName.parse(str(node.attrs["namespace"])).is_onnx}
    return found.pop() if len(found) == 1 else DEFAULT_NAMESPACE


def _backward_ops(p: _Pass, outputs: list[tuple[str, Value]]) -> tuple[list[Container], list[Edge]]:
    """The backward ops, each tagged ``grad_of`` and in the model's namespace, and the edges
    that wire them: from ``SELF`` placeholder ports (the forward values, named as in
    ``p.edges_of``) and to the answer's output ports.

    The rules build their ops in the builder's namespace (``amanda/onnx/17``); for a model of
    another opset the ops are moved there by the shipped opset tables (:func:`convert`), so the
    answer uses one opset and exports to ONNX."""
    target = namespace_of(p.model)
    calls = calls_in_order(outputs)
    placeholders: dict[str, None] = {}
    kids: list[Container] = []
    edges: list[Edge] = []

    def src_of(v: Value) -> Endpoint:
        if v.producer is None:
            placeholders[v.name] = None
            return Endpoint(SELF, v.name)
        return Endpoint((v.producer.op.name,), v.port)

    for call in calls:
        op = call.op
        attrs = {**op.attrs, "metadata": {"grad_of": p.grad_of.get(id(call), "?")}}
        kids.append(Container(op.type, op.name, inputs=op.inputs, outputs=op.outputs, attrs=attrs))
        edges += [Edge(src_of(v), Endpoint((op.name,), port)) for port, v in call.inputs]
    edges += [Edge(src_of(v), Endpoint(SELF, label)) for label, v in outputs]
    if target == DEFAULT_NAMESPACE:
        return kids, edges
    part = Container("Backward", "backward", inputs=list(placeholders), outputs=[label for label, _ in outputs],
                     children=kids, edges=edges, attrs={"namespace": DEFAULT_NAMESPACE})
    try:
        moved = convert(part, target)
    except AmandaError as exc:
        unmatched = getattr(exc, "ops", None)  # UnmatchedOpsError: (path, type, reasons) per op
        why = "; ".join(f"{t} ({', '.join(r)})" for _, t, r in unmatched) if unmatched else str(exc)
        raise SchemaError(f"the backward ops cannot be written at {target}, the namespace of `{p.model.name}`: {why}",
                          path=p.model.name, expected=f"backward ops expressible at {target}",
                          found=why) from None
    assert isinstance(moved, Container)
    kids = [c if c.attrs.get("namespace") == target else c.with_attrs(namespace=target) for c in moved.children]
    return kids, list(moved.edges)
