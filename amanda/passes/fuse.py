"""Fusions the kernels exploit: Conv+BatchNormalization folded for inference, 2-D MatMul+Add
as one Gemm, and the erf form of GELU as one Gelu op (where the opset has it).

Each fusion is a named pattern function over one level: it receives an op and the level and
returns a match (the ops it replaces, the new ops, the rewiring) or None. The driver applies a
table of them once over the level, each op taking part in at most one match.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from amanda.containers import Container, Edge, Endpoint, Port, op
from amanda.containers.checks import expect_container
from amanda.exec.dispatch import parse_namespace
from amanda.exec.kernels.activations import FUSED
from amanda.passes.level import (
    Level,
    constant_value,
    level_namespaces,
    new_constant,
    on_levels,
    own_namespace,
    producer_name,
)
from amanda.passes.report import PassReport, PassResult
from amanda.types import TensorType, infer_types

__all__ = ["fuse_conv_batchnorm", "fuse_gelu", "fuse_gelu_internal", "fuse_matmul_add", "fuse_matmul_add_internal",
           "fuse_swish_internal"]


@dataclass
class Match:
    """A fusion found: ops to drop, ops to add, sources to rewire, edges to add."""

    drop: list[str]
    add: list[Container]
    rewire: dict[Endpoint, Endpoint] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)


Pattern = Callable[[str, Level, Any], "Match | None"]


def _const(level: Level, source: Endpoint | None) -> np.ndarray | None:
    name = producer_name(source)
    return None if name is None else constant_value(level.ops.get(name))


def _opset(namespace: str | None) -> int:
    try:
        family, domain, opset = parse_namespace(namespace or "")
    except Exception:  # noqa: BLE001 - unreadable namespaces are not fused
        return 0
    return opset or 0 if family == "amanda/onnx" and not domain else 0


def _free(level: Level, stem: str, taken: set[str]) -> str:
    name = stem
    while name in level.ops or name in taken:
        name += "_"
    taken.add(name)
    return name


def _real(value: Any) -> float | None:
    """``value`` as a float if it is a real number (a bool, int, float or numpy scalar), else None."""
    if isinstance(value, (bool, int, float, np.integer, np.floating)) or (
            isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biuf"):
        return float(value)
    return None


def _inference_epsilon(bn: Container) -> float | None:
    """The epsilon of a BatchNormalization in inference mode; None in training mode or for
    attributes no BatchNormalization can have (that op is left for the kernel to name)."""
    training, epsilon = _real(bn.attrs.get("training_mode", 0)), _real(bn.attrs.get("epsilon", 1e-5))
    return None if training is None or training else epsilon


def conv_batchnorm(name: str, level: Level, context: Any) -> Match | None:
    """Conv with constant weights read only by an inference BatchNormalization -> one Conv."""
    conv = level.ops[name]
    if conv.type != "Conv" or len(conv.outputs) != 1:
        return None
    bn_name = level.only_reader(level.output(name))
    bn = level.ops.get(bn_name) if bn_name else None
    if bn is None or bn.type != "BatchNormalization" or bn_name in level.pinned:
        return None
    if any(level.reads(level.output(bn_name, i)) for i in range(1, len(bn.outputs))):
        return None
    epsilon = _inference_epsilon(bn)
    if epsilon is None or len(bn.inputs) != 5 or not 2 <= len(conv.inputs) <= 3:
        return None
    params = [_const(level, s) for s in level.inputs(bn_name)[1:5]]
    sources = level.inputs(name, 3)
    w = _const(level, sources[1])
    b = _const(level, sources[2]) if sources[2] is not None else None
    if sources[0] is None or w is None or any(p is None for p in params) or (sources[2] is not None and b is None):
        return None
    scale, bias, mean, var = (np.asarray(p, np.float64) for p in params)  # type: ignore[arg-type]
    k = scale / np.sqrt(var + epsilon)
    w2 = (w * k.reshape(-1, *([1] * (w.ndim - 1)))).astype(w.dtype)
    b2 = ((0.0 if b is None else b) - mean) * k + bias
    taken: set[str] = context
    wn, bn2 = _free(level, f"{name}_W_bn", taken), _free(level, f"{name}_B_bn", taken)
    fused = conv if len(conv.inputs) > 2 else conv.evolve(inputs=conv.inputs + (Port("B"),))
    bias_port = fused.inputs[2].name
    edges = [Edge(Endpoint((wn,), "output"), Endpoint((name,), fused.inputs[1].name)),
             Edge(Endpoint((bn2,), "output"), Endpoint((name,), bias_port))]
    edges += [Edge(sources[0], Endpoint((name,), fused.inputs[0].name))] if sources[0] is not None else []
    return Match([str(bn_name), name], [fused, new_constant(wn, w2, conv, amanda_fused_into=name),
                                   new_constant(bn2, b2.astype(w.dtype), conv, amanda_fused_into=name)],
                 {level.output(bn_name): level.output(name)}, edges)


def matmul_add(name: str, level: Level, context: Any) -> Match | None:
    """A 2-D MatMul by a constant matrix read only by an Add of a constant row -> one Gemm;
    internally (no types: ``types`` None), a MatMul of any rank -> amanda's own MatMulAdd."""
    mm = level.ops[name]
    types, path, internal = context
    if mm.type != "MatMul" or (types is None and not internal) or len(mm.inputs) != 2 or len(mm.outputs) != 1:
        return None
    a, b_src = level.inputs(name)
    b = _const(level, b_src)
    add_name = level.only_reader(level.output(name))
    add = level.ops.get(add_name) if add_name else None
    if b is None or b.ndim != 2 or add is None or add.type != "Add" or add_name in level.pinned or len(add.outputs) != 1:
        return None
    others = [s for s in level.inputs(add_name) if s != level.output(name)]
    c = _const(level, others[0]) if len(others) == 1 else None
    if internal:
        return _linear(level, name, str(add_name), (a, b_src, others[0]), b, c)
    a_type = types.input(path + (name,), mm.inputs[0].name)
    if c is None or c.ndim > 1 or not isinstance(a_type, TensorType) or a_type.shape is None or len(a_type.shape) != 2:
        return None
    gemm = op("Gemm", add_name, ["A", "B", "C"], ["Y"], {**own_namespace(mm), "amanda_fused_from": (name, add_name)})
    edges = [Edge(s, Endpoint((add_name,), p)) for s, p in ((a, "A"), (b_src, "B"), (others[0], "C")) if s is not None]
    return Match([name, str(add_name)], [gemm], {level.output(add_name): Endpoint((add_name,), "Y")}, edges)


def _linear(level: Level, name: str, add_name: str, sources: tuple, b: np.ndarray, c: np.ndarray | None) -> Match | None:
    """MatMul ``name`` and the Add reading it -> amanda's own MatMulAdd, when ``c`` is a bias row."""
    if c is None or c.ndim > 1 or c.size not in (1, b.shape[1]) or sources[0] is None:
        return None
    fused = op("MatMulAdd", add_name, ["A", "B", "C"], ["Y"], {"namespace": FUSED, "amanda_fused_from": (name, add_name)})
    edges = [Edge(s, Endpoint((add_name,), p)) for s, p in zip(sources, ("A", "B", "C"))]
    return Match([name, add_name], [fused], {level.output(add_name): Endpoint((add_name,), "Y")}, edges)


def _scalar(level: Level, source: Endpoint | None, value: float) -> bool:
    found = _const(level, source)
    if found is None or found.size != 1:
        return False
    # within rounding of the constant's own dtype (float16's sqrt 2 is 1.4141)
    eps = float(np.finfo(found.dtype).eps) if found.dtype.kind == "f" else 0.0
    return abs(float(found.reshape(-1)[0]) - value) < max(1e-4, 2 * eps * abs(value))


def _reader_of(level: Level, name: str, op_type: str) -> str | None:
    reader = level.only_reader(level.output(name))
    node = level.ops.get(reader) if reader else None
    if node is None or node.type != op_type or reader in level.pinned or len(node.inputs) != 2 or len(node.outputs) != 1:
        return None
    return reader


def gelu(name: str, level: Level, context: Any) -> Match | None:
    """``Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)`` (as torch exports it) -> one Gelu:
    ONNX's where the level's opset has it, else amanda's own when the context asks for it."""
    namespace, internal = context
    erf = level.ops[name]
    if erf.type != "Erf" or len(erf.outputs) != 1:
        return None
    own = own_namespace(erf)  # an op may set its own namespace: the fused op takes it
    attrs: dict[str, Any] | None = (own if _opset(own.get("namespace", namespace)) >= 20
                                    else {"namespace": FUSED} if internal else None)
    if attrs is None:
        return None
    div = producer_name(level.inputs(name, 1)[0])
    if div is None or level.ops[div].type != "Div" or level.only_reader(level.output(div)) != name:
        return None
    x, root = level.inputs(div, 2)[:2]
    add = _reader_of(level, name, "Add")
    mul = _reader_of(level, add, "Mul") if add else None
    half = _reader_of(level, mul, "Mul") if mul else None
    if not (x is not None and _scalar(level, root, 2 ** 0.5) and add and mul and half):
        return None
    one = [s for s in level.inputs(add) if s != level.output(name)]
    mul_in = set(level.inputs(mul))
    half_in = [s for s in level.inputs(half) if s != level.output(mul)]
    if len(one) != 1 or not _scalar(level, one[0], 1.0) or mul_in != {x, level.output(add)}:
        return None
    if len(half_in) != 1 or not _scalar(level, half_in[0], 0.5):
        return None
    fused = op("Gelu", half, ["X"], ["Y"], {**attrs, "amanda_fused_from": (div, name, add, mul, half)})
    return Match([div, name, add, mul, half], [fused], {level.output(half): Endpoint((half,), "Y")},
                 [Edge(x, Endpoint((half,), "X"))])


def swish(name: str, level: Level, context: Any) -> Match | None:
    """``Mul(x, Sigmoid(x))`` (SiLU, as torch exports it) -> one Swish: ONNX's where the
    level's opset has it (24), else amanda's own when the context asks for it."""
    namespace, internal = context
    sig = level.ops[name]
    if sig.type != "Sigmoid" or len(sig.inputs) != 1 or len(sig.outputs) != 1:
        return None
    own = own_namespace(sig)
    attrs: dict[str, Any] | None = (own if _opset(own.get("namespace", namespace)) >= 24
                                    else {"namespace": FUSED} if internal else None)
    mul = _reader_of(level, name, "Mul")
    x = level.inputs(name, 1)[0]
    if attrs is None or mul is None or x is None or set(level.inputs(mul)) != {x, level.output(name)}:
        return None
    fused = op("Swish", mul, ["X"], ["Y"], {**attrs, "amanda_fused_from": (name, mul)})
    return Match([name, mul], [fused], {level.output(mul): Endpoint((mul,), "Y")}, [Edge(x, Endpoint((mul,), "X"))])


def _apply(level: Level, pattern: Pattern, context: Any) -> tuple[Container, dict]:
    used: set[str] = set()
    drop, add, rewire, edges, replaced = [], [], {}, [], []
    for name in level.order():
        if name in used or name in level.pinned or not level.ops[name].is_op:
            continue
        match = pattern(name, level, context)
        if match is None or used & set(match.drop):
            continue
        used.update(match.drop)
        drop += match.drop
        add += match.add
        rewire.update(match.rewire)
        edges += match.edges
        replaced += match.drop
    if not drop:
        return level.model, {}
    out = level.rebuild(drop=drop, add=add, rewire=rewire, extra=edges)
    return out, {"replaced": replaced, "added": [c.name for c in add]}


def _run(name: str, model: Container, pattern: Pattern, context: Callable[[Container, tuple], Any]) -> PassResult:
    def level_fn(m: Container, path: tuple, _: Any) -> tuple[Container, dict]:
        level = Level.of(m)
        return (m, {}) if level is None else _apply(level, pattern, context(m, path))

    out, changes = on_levels(model, level_fn)
    return PassResult(out, PassReport.of(name, changes))


def fuse_conv_batchnorm(model: Container) -> PassResult:
    """Fold inference BatchNormalization into the Conv before it (constant weights only).

    >>> import amanda, numpy as np
    >>> c = lambda n, v: amanda.op("Constant", n, [], ["output"], {"value": np.asarray(v, np.float32)})
    >>> g = amanda.Container(None, "g", inputs=["x"], outputs=["y"],
    ...     children=[c("w", np.ones((1, 1, 1, 1))), c("s", [2]), c("b", [1]), c("m", [0]), c("v", [1]),
    ...     amanda.op("Conv", "conv", ["X", "W"], ["Y"]),
    ...     amanda.op("BatchNormalization", "bn", ["X", "scale", "B", "input_mean", "input_var"], ["Y"], {"epsilon": 0.0})],
    ...     edges=[("g:x", "conv:X"), ("w:output", "conv:W"), ("conv:Y", "bn:X"), ("s:output", "bn:scale"),
    ...      ("b:output", "bn:B"), ("m:output", "bn:input_mean"), ("v:output", "bn:input_var"), ("bn:Y", "g:y")])
    >>> out, report = fuse_conv_batchnorm(g)
    >>> report.replaced, out.child("conv_W_bn").attrs["value"].ravel().tolist()
    (('bn', 'conv'), [2.0])
    """
    expect_container(model, "model")
    return _run("fuse_conv_batchnorm", model, conv_batchnorm, lambda m, p: set())


def fuse_matmul_add(model: Container) -> PassResult:
    """Turn a 2-D MatMul by a constant matrix plus a constant bias row into one Gemm
    (named after the Add, whose readers it feeds); needs the inferred rank of the left operand."""
    expect_container(model, "model")
    try:
        types = infer_types(model)
    except Exception:  # noqa: BLE001 - without types no MatMul is known to be 2-D
        types = None
    return _run("fuse_matmul_add", model, matmul_add, lambda m, p: (types, p, False))


def fuse_matmul_add_internal(model: Container) -> PassResult:
    """A MatMul of any rank by a constant matrix, read only by an Add of a constant row (a
    dense or Linear layer) -> amanda's own MatMulAdd (namespace ``amanda/fused``, run only by
    amanda), which writes the bias first and lets BLAS add the product to it: no types needed,
    so it costs a Session's plan nothing like :func:`fuse_matmul_add`'s second inference.

    >>> import amanda, numpy as np
    >>> c = lambda n, v: amanda.op("Constant", n, [], ["output"], {"value": np.asarray(v, np.float32)})
    >>> g = amanda.Container(None, "g", inputs=["x"], outputs=["y"], children=[c("w", [[1, 2], [3, 4]]),
    ...     c("b", [10, 20]), amanda.op("MatMul", "m", ["A", "B"], ["Y"]), amanda.op("Add", "a", ["A", "B"], ["C"])],
    ...     edges=[("g:x", "m:A"), ("w:output", "m:B"), ("m:Y", "a:A"), ("b:output", "a:B"), ("a:C", "g:y")],
    ...     attrs={"namespace": "amanda/onnx/17"})
    >>> out, report = fuse_matmul_add_internal(g)
    >>> out.child("a").type, report.replaced
    ('MatMulAdd', ('m', 'a'))
    >>> amanda.Session(out).run(["y"], {"x": np.ones((1, 1, 2), np.float32)})[0].tolist()
    [[[14.0, 26.0]]]
    """
    return _run("fuse_matmul_add_internal", model, matmul_add, lambda m, p: (None, p, True))


def fuse_gelu(model: Container) -> PassResult:
    """Replace the erf form of GELU (``x * 0.5 * (1 + erf(x / sqrt 2))``, as exported by torch)
    with one Gelu op, in levels whose ONNX opset has Gelu (20 and later)."""
    expect_container(model, "model")
    namespaces = level_namespaces(model)
    return _run("fuse_gelu", model, gelu, lambda m, p: (namespaces.get(p), False))


def fuse_gelu_internal(model: Container) -> PassResult:
    """:func:`fuse_gelu`, and below opset 20 into amanda's own ``Gelu`` (namespace
    ``amanda/fused``), which only amanda runs: a Session uses it in its plans, where one
    float32 pass replaces five ops; a model meant for export should use :func:`fuse_gelu`.

    >>> import amanda, numpy as np
    >>> c = lambda n, v: amanda.op("Constant", n, [], ["output"], {"value": np.float32(v)})
    >>> g = amanda.Container(None, "g", inputs=["x"], outputs=["y"], children=[c("r2", 2 ** 0.5), c("one", 1),
    ...     c("half", 0.5), amanda.op("Div", "d", ["A", "B"], ["C"]), amanda.op("Erf", "e", ["input"], ["output"]),
    ...     amanda.op("Add", "a", ["A", "B"], ["C"]), amanda.op("Mul", "m", ["A", "B"], ["C"]),
    ...     amanda.op("Mul", "h", ["A", "B"], ["C"])],
    ...     edges=[("g:x", "d:A"), ("r2:output", "d:B"), ("d:C", "e:input"), ("e:output", "a:A"), ("one:output", "a:B"),
    ...      ("g:x", "m:A"), ("a:C", "m:B"), ("m:C", "h:A"), ("half:output", "h:B"), ("h:C", "g:y")],
    ...     attrs={"namespace": "amanda/onnx/17"})
    >>> out, report = fuse_gelu_internal(g)
    >>> out.child("h").type, out.child("h").attrs["namespace"], report.replaced
    ('Gelu', 'amanda/fused', ('d', 'e', 'a', 'm', 'h'))
    >>> [round(float(v), 4) for v in amanda.Session(out).run(["y"], {"x": np.float32([-1, 0, 2])})[0]]
    [-0.1587, 0.0, 1.9545]
    """
    namespaces = level_namespaces(model)
    return _run("fuse_gelu_internal", model, gelu, lambda m, p: (namespaces.get(p), True))


def fuse_swish_internal(model: Container) -> PassResult:
    """``Mul(x, Sigmoid(x))`` as one Swish: ONNX's from opset 24, amanda's own (namespace
    ``amanda/fused``, run only by amanda) below; a Session uses it in its plans."""
    namespaces = level_namespaces(model)
    return _run("fuse_swish_internal", model, swish, lambda m, p: (namespaces.get(p), True))
