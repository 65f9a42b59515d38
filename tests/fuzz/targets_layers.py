"""Fuzz targets over models built from code: random layer stacks trained, frozen and saved, and
gradients of random models at random ONNX opsets.

A case is a recipe (plain data, so it replays from its index); ``run`` builds the model and
raises ``InvalidResult`` where a property breaks:

- ``layer_stack``: every layer instance is one identity. The weights, the session variables
  after a train step and the arrays saved are one per weight of each layer instance (one
  object applied twice counts once); two weights that share a uid with other content (parts
  seeded apart) are refused, and only they; ``optim.freeze`` of a session that never ran the
  trainer and ``layers.freeze`` with a key no variable has are errors, not silent results.
- ``grad_opset``: the gradient container of a model of opset N uses opset N only, exports to
  ONNX whenever the model does, and onnxruntime computes what the session does.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np

import amanda
from amanda import Input, layers, ops
from tests.fuzz.harness import InvalidResult, Source, Target

# -- layer stacks ----------------------------------------------------------------------------

KINDS = ("dense", "dense", "batchnorm", "layernorm", "relu", "again", "seeded")
ACTIONS = ("train", "train", "freeze_fresh", "freeze_keys", "save")


def generate_layer_stack(src: Source) -> tuple[int, tuple, str, str]:
    """A first width, layer specs whose widths chain (``("again", i)`` applies spec i's object
    again; ``("seeded", units, seed)`` is a Dense keyed apart by ``layers.seeded``), an action
    and a state key for ``freeze_keys``."""
    width = current = src.integer(2, 5)
    specs: list[tuple] = []
    sizes: list[tuple[int, int]] = []
    for _ in range(src.integer(1, 6)):
        kind = src.choice(KINDS)
        square = [i for i, (a, b) in enumerate(sizes) if a == b == current and specs[i][0] != "again"]
        if kind == "again" and square:
            specs.append(("again", src.choice(square)))
            sizes.append((current, current))
            continue
        if kind in ("dense", "seeded", "again"):
            units = src.integer(2, 5)
            specs.append(("seeded", units, src.integer(0, 2)) if kind == "seeded" else ("dense", units))
            sizes.append((current, units))
            current = units
        else:
            specs.append((kind,))
            sizes.append((current, current))
    return width, tuple(specs), src.choice(ACTIONS), src.choice(["nobody", "0:dense/kernel", "moving_mean", ""])


def _build(width: int, specs: tuple) -> tuple[amanda.Container, list[amanda.Container], list[tuple]]:
    """The model, its layer objects in order, and each object's identity group (an
    amanda-independent account of which layers are one weight set)."""
    objects: list[amanda.Container] = []
    groups: list[tuple] = []
    current = width
    for i, spec in enumerate(specs):
        if spec[0] == "again":
            objects.append(objects[spec[1]])
            groups.append(groups[spec[1]])
            continue
        if spec[0] == "dense":
            objects.append(layers.Dense(current, spec[1]))
            groups.append(("own", i))
            current = spec[1]
        elif spec[0] == "seeded":  # equal seed, shape and path: equal content and uid, one weight
            objects.append(layers.seeded(layers.Dense(current, spec[1]), spec[2]))
            groups.append(("seeded", spec[2], current, spec[1]))
            current = spec[1]
        else:
            made = {"batchnorm": layers.BatchNorm, "layernorm": layers.LayerNorm}.get(spec[0])
            objects.append(made(current) if made else layers.relu())
            groups.append(("own", i))
    x = Input("x", "float32", ("batch", width))
    h = x
    for layer in objects:
        h = layer(h)
    net = amanda.model([x], {"loss": ops.ReduceMean(ops.Mul(h, h), keepdims=0)}, name="net")
    return net, objects, groups


def _clash(groups: list[tuple]) -> bool:
    """Whether two Dense parts were seeded apart with one seed and other shapes: one key, two weights."""
    shapes: dict[int, set[tuple[int, int]]] = {}
    for group in groups:
        if group[0] == "seeded":
            shapes.setdefault(group[1], set()).add(group[2:])
    return any(len(s) > 1 for s in shapes.values())


def run_layer_stack(case: tuple[int, tuple, str, str]) -> None:
    """Build, then train, freeze or save as the case says, checking one identity per instance."""
    width, specs, action, junk = case
    net, objects, groups = _build(width, specs)
    if _clash(groups):
        if not amanda.validate(net):
            raise InvalidResult("two weights of one uid and other content were not reported by validate")
        amanda.Session(net)  # must raise: an InvariantError naming both paths
        raise InvalidResult("a Session accepted two weights of one uid and other content")
    firsts = {g: o for g, o in zip(groups, objects)}
    expected = sum(len(o.attrs.get("weights") or {}) for o in firsts.values())
    listed = {node.child(name).uid for _, node, _ in amanda.walk(net) if not node.is_op
              for name in (node.attrs.get("weights") or {})}
    try:
        problems = amanda.validate(net)
    except amanda.AmandaError as exc:
        raise InvalidResult(f"validate raised on a valid stack: {exc}") from None
    if problems or len(listed) != expected:
        raise InvalidResult(f"{len(listed)} weight uids for {expected} weights of instances; {problems[:1]}")
    if action == "freeze_keys":
        layers.freeze(net, {junk or "x": np.zeros(1, np.float32)})  # must raise: no variable has that key
        raise InvalidResult(f"layers.freeze accepted the state key {junk!r}, which no variable has")
    if action == "save":
        _save_and_load(net, listed)
        return
    if not amanda.optim.default_weights(net):
        return
    step = amanda.optim.minimize(net, "loss", amanda.optim.SGD(lr=0.01))
    with amanda.Session(step, threads=1) as session:
        if action == "freeze_fresh":
            amanda.optim.freeze(step, session)  # must raise: the session never ran the trainer
            raise InvalidResult("optim.freeze returned the weights of a session that never ran the trainer")
        session.run(["loss", "train"], {"x": np.ones((3, width), np.float32)}, phase="train")
        if set(session.state) != listed:
            raise InvalidResult(f"{len(session.state)} session variables for {expected} weights of instances")
        frozen = amanda.optim.freeze(step, session)
    _save_and_load(frozen, listed)


def _save_and_load(model: amanda.Container, listed: set[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        file = os.path.join(folder, "w.npz")
        keys = amanda.save_weights(model, file)
        saved = [k for k in keys if k.partition("::")[0] in listed]
        if len(saved) != len(listed):
            raise InvalidResult(f"{len(saved)} arrays saved for {len(listed)} weights of instances")
        loaded = amanda.load_weights(model, file)
    if loaded.unmatched or loaded.missing or loaded.mismatched:
        raise InvalidResult(f"saved weights did not load back: {loaded[1:]}")


# -- gradients at opsets -----------------------------------------------------------------------

UNARY = ("Relu", "Tanh", "Sigmoid", "Softmax", "Exp", "Neg", "Transpose", "MatMul", "Add", "Mul", "ReduceMean",
         "ReduceSum", "Concat", "Slice", "Relu", "Tanh", "Mish",  # Mish: an op from opset 18 on
         "Hardmax")  # Hardmax has no gradient rule: an error


def generate_grad_opset(src: Source) -> tuple[int, tuple[str, ...], int]:
    """An opset (13 up to the newest ONNX defines), a chain of ops on a ``[2, 3]`` input, and a seed."""
    import onnx

    opset = src.integer(13, onnx.defs.onnx_opset_version())
    return opset, tuple(src.choice(UNARY) for _ in range(src.integer(1, 5))), src.integer(0, 99)


def _chain(o: Any, opset: int, names: tuple[str, ...], seed: int) -> amanda.Container:
    rng = np.random.default_rng(seed)
    x = Input("x", "float32", (2, 3))
    h = x
    for i, name in enumerate(names):
        shape = h.type.shape
        if name == "MatMul":
            h = o.MatMul(h, o.Constant(value=rng.standard_normal((shape[-1], 3)).astype(np.float32), name=f"w{i}"))
        elif name in ("Add", "Mul"):
            h = getattr(o, name)(h, o.Constant(value=rng.standard_normal(shape[-1:]).astype(np.float32), name=f"w{i}"))
        elif name == "Softmax":
            h = o.Softmax(h, axis=int(rng.integers(0, 2)))
        elif name == "Transpose":
            h = o.Transpose(h, perm=[1, 0])
        elif name in ("ReduceMean", "ReduceSum"):
            axes = [int(rng.integers(0, 2))]
            h = getattr(o, name)(h, np.array(axes, np.int64), keepdims=1) if opset >= 18 or name == "ReduceSum" \
                else getattr(o, name)(h, axes=axes, keepdims=1)
        elif name == "Concat":
            h = o.Concat(h, h, axis=int(rng.integers(0, 2)))
        elif name == "Slice":
            h = o.Slice(h, np.array([0], np.int64), np.array([1], np.int64), np.array([1], np.int64))
        else:
            h = getattr(o, name)(h)
    return amanda.model([x], {"loss": o.ReduceSum(o.Mul(h, h), keepdims=0)}, name="net")


def run_grad_opset(case: tuple[int, tuple[str, ...], int]) -> None:
    """grad of the model: one opset, exports where the model does, onnxruntime agrees."""
    from amanda.build import Ops
    from amanda.io.onnx import to_onnx

    opset, names, seed = case
    net = _chain(Ops(f"amanda/onnx/{opset}"), opset, names, seed)
    weights = [c.name for c in net.children if c.type == "Constant" and c.name.startswith("w")]
    g = amanda.grad(net, "loss", ["x", *weights])
    spaces = {node.attrs.get("namespace") for _, node, _ in amanda.walk(g) if node.is_op}
    if spaces != {f"amanda/onnx/{opset}"}:
        raise InvalidResult(f"the gradient container of an opset-{opset} model uses {sorted(map(str, spaces))}")
    to_onnx(net)  # a model that does not export is the exporter's business, not this target's
    try:
        proto = to_onnx(g)
    except amanda.AmandaError as exc:
        raise InvalidResult(f"the model exports at opset {opset} but its gradients do not: {exc}") from None
    feeds = {"x": np.random.default_rng(seed).standard_normal((2, 3)).astype(np.float32)}
    names_out = list(g.output_names)
    with amanda.Session(g, threads=1) as session:
        ours = session.run(names_out, feeds)
    import onnxruntime as ort

    try:
        runtime = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - an opset this onnxruntime does not run
        return
    for name, a, b in zip(names_out, ours, runtime.run(names_out, feeds)):
        if not np.allclose(a, b, rtol=1e-3, atol=1e-4):
            raise InvalidResult(f"{name}: the session and onnxruntime disagree by {np.abs(a - b).max()}")


TARGETS = (
    Target("layer_stack", generate_layer_stack, run_layer_stack),
    Target("grad_opset", generate_grad_opset, run_grad_opset),
)
