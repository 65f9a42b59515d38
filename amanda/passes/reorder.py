"""Reorderings that keep every op and its result: ``MaxPool(Relu(x))`` as ``Relu(MaxPool(x))``.

Relu is monotone, so it commutes with a max over any window that holds at least one real
(unpadded) value; run after the pool it touches a quarter of the values of a 2x2 pool's input
(the CNN's two ReLUs: 0.53 -> 0.14 ms at batch 64). Both ops are the same objects afterwards;
only the edges between them and around them change.
"""

from __future__ import annotations

from typing import Any

from amanda.containers import Container, Edge, Endpoint
from amanda.containers.checks import expect_container
from amanda.passes.level import Level, on_levels
from amanda.passes.report import PassReport, PassResult

__all__ = ["pool_before_relu"]


def _ints(value: Any, default: int, n: int) -> list[int]:
    return [int(v) for v in value] if value is not None else [default] * n


def _windows_hold_values(pool: Container) -> bool:
    """Whether every window of this MaxPool covers a real value (pads smaller than the window);
    False for attributes no MaxPool can have (a float or scalar ``kernel_shape``): such an op is
    left in place, for validate and the kernel to name."""
    try:
        return _covered(pool)
    except (TypeError, ValueError, OverflowError):
        return False


def _covered(pool: Container) -> bool:
    attrs = pool.attrs
    kernel = attrs.get("kernel_shape")
    if kernel is None or int(attrs.get("ceil_mode", 0)) or attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return False
    n = len(kernel)
    dilations = _ints(attrs.get("dilations"), 1, n)
    pads = _ints(attrs.get("pads"), 0, 2 * n)
    extents = [(int(k) - 1) * d + 1 for k, d in zip(kernel, dilations)]
    return all(0 <= pads[i] < extents[i] and 0 <= pads[n + i] < extents[i] for i in range(n))


def _pairs(level: Level) -> list[tuple[str, str]]:
    """(relu, pool) pairs: a Relu read only by a MaxPool whose Indices nobody reads."""
    found = []
    for name, node in level.ops.items():
        if not node.is_op or node.type != "Relu" or name in level.pinned or len(node.inputs) != 1:
            continue
        pool_name = level.only_reader(level.output(name))
        pool = level.ops.get(pool_name) if pool_name else None
        if pool is None or pool.type != "MaxPool" or pool_name in level.pinned or len(pool.inputs) != 1:
            continue
        if any(level.reads(level.output(pool_name, i)) for i in range(1, len(pool.outputs))):
            continue
        if level.inputs(name)[0] is not None and _windows_hold_values(pool):
            found.append((name, str(pool_name)))
    return found


def _swap(level: Level, pairs: list[tuple[str, str]]) -> Container:
    feeds: dict[Endpoint, Endpoint] = {}  # x -> relu:X  becomes  x -> pool:X
    swaps: dict[tuple, tuple] = {}  # relu:Y -> pool:X  becomes  pool:Y -> relu:X
    outs: dict[Endpoint, Endpoint] = {}  # pool:Y -> reader  becomes  relu:Y -> reader
    for relu, pool in pairs:
        relu_in = Endpoint((relu,), level.ops[relu].inputs[0].name)
        pool_in = Endpoint((pool,), level.ops[pool].inputs[0].name)
        feeds[relu_in] = pool_in
        swaps[(level.output(relu), pool_in)] = (level.output(pool), relu_in)
        outs[level.output(pool)] = level.output(relu)
    edges = []
    for edge in level.model.edges:
        src, dst = swaps.get((edge.src, edge.dst), (outs.get(edge.src, edge.src), feeds.get(edge.dst, edge.dst)))
        edges.append(edge if (src, dst) == (edge.src, edge.dst) else Edge(src, dst, attrs=edge.attrs or None))
    return level.model.evolve(edges=tuple(edges))


def pool_before_relu(model: Container) -> PassResult:
    """Run each MaxPool before the Relu that fed it (same ops, same results, fewer values
    through the Relu); the report lists the Relus moved as replaced.

    >>> import amanda, numpy as np
    >>> g = amanda.Container(None, "g", inputs=["x"], outputs=["y"], attrs={"namespace": "amanda/onnx/17"},
    ...     children=[amanda.op("Relu", "r", ["X"], ["Y"]),
    ...               amanda.op("MaxPool", "p", ["X"], ["Y"], {"kernel_shape": [2], "strides": [2]})],
    ...     edges=[("g:x", "r:X"), ("r:Y", "p:X"), ("p:Y", "g:y")])
    >>> out, report = pool_before_relu(g)
    >>> report.replaced, sorted((str(e.src), str(e.dst)) for e in out.edges)
    (('r',), [('SELF:x', 'p:X'), ('p:Y', 'r:X'), ('r:Y', 'SELF:y')])
    >>> amanda.Session(out).run(["y"], {"x": np.float32([[[-1, -2, 3, -4]]])})[0].tolist()
    [[[0.0, 3.0]]]
    """
    expect_container(model, "model")
    def level_fn(m: Container, path: tuple, _: Any) -> tuple[Container, dict]:
        level = Level.of(m)
        pairs = _pairs(level) if level is not None else []
        if level is None or not pairs:
            return m, {}
        return _swap(level, pairs), {"replaced": [relu for relu, _ in pairs]}

    out, changes = on_levels(model, level_fn)
    return PassResult(out, PassReport.of("pool_before_relu", changes))
