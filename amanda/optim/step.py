"""A training container as a pure function, so that one training step exports to ONNX.

A training container keeps its weights and the optimiser's state (moments, step counters,
BatchNorm's running statistics) in session variables that ``Assign`` ops update in place; an
ONNX graph has no such state. :func:`training_step` rewrites the container's computation (its
``train`` phase, flattened to its leaf ops) as a function from (its inputs, every variable's
value) to (its outputs, every updated variable's new value):

- each variable (one per state key) becomes an input ``state/<path>`` and its reads read it;
- each ``Assign`` becomes an ``Identity`` and each ``AssignAdd`` an ``Add``, whose results are
  the outputs ``new_state/<path>``;
- each fused ``AdamStep`` becomes a container of ONNX elementwise ops (type ``AdamStep``) that
  follows the kernel's arithmetic step by step (its scalar factors in float64, as the kernel
  computes them), so onnxruntime reproduces amanda's steps.

Everything else is kept as it is, so the answer exports when the model's own ops do. Feeding
each ``new_state/<path>`` back as ``state/<path>`` runs the next step.

>>> import numpy as np, amanda
>>> from amanda import Input, ops
>>> from amanda.optim import SGD, minimize
>>> x = Input("x", "float32", (2, 1))
>>> w = ops.Constant(value=np.zeros((1, 1), np.float32), name="w")
>>> net = amanda.model([x], {"loss": ops.ReduceSum(ops.MatMul(x, w), keepdims=0)}, name="net")
>>> step = training_step(minimize(net, "loss", SGD(lr=0.5), weights=["w"]))
>>> step.container.input_names, step.container.output_names
(('x', 'state/net_grad/net/w/variable'), ('loss', 'new_state/net_grad/net/w/variable'))
>>> with amanda.Session(step.container) as s:
...     s.run(["new_state/net_grad/net/w/variable"], {"x": np.ones((2, 1), np.float32), **step.state})[0].tolist()
[[-1.0]]
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from amanda.autodiff.transform import namespace_of
from amanda.build import Input, Ops
from amanda.build.model import model as build_model
from amanda.containers import CONTROL, SELF, Container, Edge, Endpoint, Port, bind, effective_attrs, flatten
from amanda.containers.arguments import expect_container, expect_str
from amanda.containers.phases import computations
from amanda.errors import FormatError, format_path
from amanda.exec.state import state_key
from amanda.optim.checkpoint import snapshot
from amanda.types import TensorType, to_attrs

__all__ = ["TrainingStep", "training_step"]

CORE, TRAIN = "amanda/core", "amanda/train"
_DOUBLE = 11  # ONNX TensorProto.DOUBLE


class TrainingStep(NamedTuple):
    """What :func:`training_step` returns: the pure ``container``; ``state``, the value of each
    ``state/<path>`` input (the session's, else the variables' initial values); ``updates``,
    each ``new_state/<path>`` output's ``state/<path>`` input."""

    container: Container
    state: dict[str, np.ndarray]
    updates: dict[str, str]


def _adam(op: Container, path: tuple, types: dict[str, TensorType], ops: Any) -> Container:
    """``AdamStep`` as ONNX ops in the kernel's order (``amanda.exec.kernels.grad_kernels``)."""
    dtype = np.dtype(types["weight"].dtype or "float32")
    d, f64 = dtype.type, np.float64
    attrs = op.attrs
    b1, b2 = float(attrs.get("beta1", 0.9)), float(attrs.get("beta2", 0.999))
    eps, decay = float(attrs.get("eps", 1e-8)), float(attrs.get("weight_decay", 0.0))
    ins = {n: Input(n, str(t.dtype), t.shape) for n, t in types.items()}
    w, g, m, v = ins["weight"], ins["grad"], ins["m"], ins["v"]
    t = ops.Cast(ins["step"], to=_DOUBLE)
    lr = ops.Cast(ins["lr"], to=_DOUBLE) if "lr" in ins else f64(attrs.get("lr", 1e-3))
    to = int(_onnx_dtype(dtype, path))
    if decay and int(attrs.get("decoupled", 0)):
        w = ops.Mul(w, ops.Cast(ops.Sub(f64(1), ops.Mul(lr, f64(decay))), to=to))
    elif decay:
        g = ops.Add(g, ops.Mul(w, d(decay)))
    m_new = ops.Add(ops.Mul(m, d(b1)), ops.Mul(g, d(1 - b1)))
    v_new = ops.Add(ops.Mul(v, d(b2)), ops.Mul(ops.Mul(g, g), d(1 - b2)))
    c2 = ops.Cast(ops.Sqrt(ops.Sub(f64(1), ops.Pow(f64(b2), t))), to=to)
    c1 = ops.Cast(ops.Div(lr, ops.Sub(f64(1), ops.Pow(f64(b1), t))), to=to)
    ratio = ops.Div(m_new, ops.Add(ops.Div(ops.Sqrt(v_new), c2), d(eps)))
    w_new = ops.Sub(w, ops.Mul(ratio, c1))
    return build_model(list(ins.values()), {"weight": w_new, "m": m_new, "v": v_new}, name=op.name, type="AdamStep",
                       attrs={k: attrs[k] for k in ("lr", "beta1", "beta2", "eps", "weight_decay") if k in attrs})


def _onnx_dtype(dtype: np.dtype, path: tuple) -> int:
    codes = {"float16": 10, "float32": 1, "float64": 11}
    if dtype.name not in codes:
        raise FormatError.at(format_path(path), "an AdamStep of float16, float32 or float64 weights", dtype.name)
    return codes[dtype.name]


class _Rewrite:
    """The state of one rewrite: the flat graph, the state inputs, the new children."""

    def __init__(self, trainer: Container, phase: str | None) -> None:
        self.bound = bind(trainer, phase) if phase else trainer
        self.flat = flatten(self.bound)
        self.namespace = namespace_of(trainer)
        self.ops = Ops(self.namespace)
        self.source = {(e.dst[0], e.dst[1]): e.src for e in self.flat.edges if e.dst[0] is not SELF}
        self.input_of: dict[str, str] = {}  # state key -> its input's name
        self.types: dict[str, TensorType] = {}

    def variable(self, path: tuple, port: str = "ref") -> str:
        """The state input read through input ``port`` of the op at ``path``."""
        src = self.source.get((path, port))
        op = self.flat.ops.get(src[0]) if src is not None and src[0] is not SELF else None
        if op is None or op.type != "Variable":
            raise FormatError.at(format_path(path), "a reference from a Variable op", repr(src))
        return self.input_of[state_key(op)]

    def adam_types(self, path: tuple, op: Container) -> dict[str, TensorType]:
        """The types of an ``AdamStep``'s inputs: the weight, its gradient and moments are typed
        as its moment ``m`` (a state input), the step count and rate are float32 scalars."""
        like = self.types[self.read(self.source[(path, "m")])]
        scalar = TensorType("float32", ())
        return {p.name: like if p.name in ("weight", "grad", "m", "v") else scalar for p in op.inputs
                if (path, p.name) in self.source}

    def read(self, end: Endpoint) -> str:
        """The state input a ``Read`` op's output stands for."""
        op = self.flat.ops.get(end[0]) if end[0] is not SELF else None
        if op is None or op.type != "Read":
            raise FormatError.at(format_path(end[0]), "a Read of an optimiser's moment", repr(end))
        return self.variable(end[0])


def training_step(trainer: Container, state: Any = None, *, phase: str = "train", name: str | None = None) -> TrainingStep:
    """``trainer`` (a training container, or any container with session variables) as a pure
    function of its inputs and its variables' values, computing one step of ``phase`` (the
    module doc says how). ``state``: a Session, its state or None (the initial values) for the
    answer's ``state`` feeds. Ops of ``amanda/core`` other than variables, reads and assigns
    are a ``FormatError`` naming them."""
    expect_container(trainer, "trainer")
    expect_str(phase, "phase", "a phase name such as 'train'")
    expect_str(name, "name", "a name for the step container", optional=True)
    r = _Rewrite(trainer, phase if phase in computations(trainer) else None)
    entries = snapshot(r.bound, state)
    feeds: dict[str, np.ndarray] = {}
    for entry in entries:
        label = f"state/{'/'.join(entry.paths[0])}"
        r.input_of[entry.key] = label
        r.types[label] = TensorType(str(entry.value.dtype), tuple(entry.value.shape))
        feeds[label] = entry.value
    children, replaced, updates = _children(r)
    edges = _edges(r, replaced)
    outputs = list(r.flat.output_ports)
    for out_name, (label, end) in updates.items():
        edges.append(Edge(end, Endpoint(SELF, out_name)))
        outputs.append(Port(out_name, attrs=to_attrs(r.types[label])))
    inputs = list(r.flat.input_ports) + [Port(label, attrs=to_attrs(r.types[label])) for label in feeds]
    container = Container("TrainingStep", name or f"{trainer.name}_step", inputs=inputs, outputs=outputs,
                          children=children, edges=edges, attrs={"namespace": r.namespace})
    return TrainingStep(container, feeds, {out: label for out, (label, _) in updates.items()})


def _children(r: _Rewrite) -> tuple[list[Container], dict[tuple, tuple[str, dict[str, str]]], dict]:
    """The new children; per rewritten op its new name and port renaming; the state updates."""
    children: list[Container] = []
    replaced: dict[tuple, tuple[str, dict[str, str]]] = {}
    updates: dict[str, tuple[str, Endpoint]] = {}
    taken: set[str] = set()
    for path, op in r.flat.ops.items():
        namespace = str(effective_attrs(r.bound, path).get("namespace") or r.namespace)
        new = "/".join(path)
        while new in taken:
            new = f"{new}_"
        taken.add(new)
        if namespace == CORE and op.type in ("Variable", "Read"):
            continue
        if namespace == CORE and op.type in ("Assign", "AssignAdd"):
            label = r.variable(path)
            out = "new_state/" + label.removeprefix("state/")
            if out in updates:
                raise FormatError.at(format_path(path), "one update per variable in a step", f"two of {label}")
            kind, ports = ("Identity", {"value": "input"}) if op.type == "Assign" else ("Add", {"delta": "B"})
            made = Container(kind, new, inputs=["A", "B"] if kind == "Add" else ["input"],
                             outputs=["C"] if kind == "Add" else ["output"], attrs={"namespace": r.namespace})
            replaced[path] = (new, {**ports, "value_out": made.outputs[0].name})
            updates[out] = (label, Endpoint((new,), made.outputs[0].name))
            children.append(made)
        elif namespace == TRAIN and op.type == "AdamStep":
            children.append(_adam(op.with_name(new), path, r.adam_types(path, op), r.ops))
            replaced[path] = (new, {})
        elif namespace in (CORE, TRAIN):
            raise FormatError.at(format_path(path), "variables, reads, assigns and AdamStep among amanda's own ops",
                                 f"{op.type} of {namespace}")
        else:
            children.append(op.with_name(new) if op.attrs.get("namespace") else
                            op.evolve(name=new).with_attrs(namespace=namespace))
            replaced[path] = (new, {})
    return children, replaced, updates


def _edges(r: _Rewrite, replaced: dict[tuple, tuple[str, dict[str, str]]]) -> list[Edge]:
    """The flat graph's data edges, rewired: reads to their state inputs, assigns to their
    replacements (an ``AssignAdd``'s ``A`` from the state it adds to)."""
    edges: list[Edge] = []
    for edge in r.flat.edges:
        (src_op, src_port), (dst_op, dst_port) = edge.src, edge.dst
        if src_port == CONTROL or dst_port == CONTROL:
            continue
        if dst_op is not SELF and dst_op not in replaced:
            continue  # into a variable or a read
        if dst_port == "ref" and dst_op is not SELF:  # an assign's variable
            if r.flat.ops[dst_op].type == "AssignAdd":
                edges.append(Edge(Endpoint(SELF, r.variable(dst_op)), Endpoint((replaced[dst_op][0],), "A")))
            continue
        if src_op is SELF:
            src = Endpoint(SELF, src_port)
        elif src_op in replaced:
            new, ports = replaced[src_op]
            src = Endpoint((new,), ports.get("value_out", src_port) if src_port == "value" else src_port)
        elif r.flat.ops[src_op].type == "Read":
            src = Endpoint(SELF, r.variable(src_op))
        else:
            continue  # a variable's reference
        if dst_op is SELF:
            edges.append(Edge(src, Endpoint(SELF, dst_port)))
            continue
        new, ports = replaced[dst_op]
        edges.append(Edge(src, Endpoint((new,), ports.get(dst_port, dst_port))))
    return edges
