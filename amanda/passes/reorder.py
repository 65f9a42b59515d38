"""Reorderings that keep every op and its result: ``MaxPool(Relu(x))`` as ``Relu(MaxPool(x))``.

Relu is monotone, so it commutes with a max over any window that holds at least one real
(unpadded) value; run after the pool it touches a quarter of the values of a 2x2 pool's input
(the CNN's two ReLUs: 0.53 -> 0.14 ms at batch 64). The move is one rewrite rule whose
replacement keeps both ops (``_like``): they are the same objects afterwards, at the same
places; only the edges between them and around them change.
"""

from __future__ import annotations

from typing import Any

from amanda.containers import Container
from amanda.containers.arguments import expect_container
from amanda.passes.report import PassResult
from amanda.passes.rules import apply_rules
from amanda.rewrite import Rule

__all__ = ["POOL_BEFORE_RELU", "pool_before_relu"]


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


def _swapped(op: Any, x: Any, relu: Container, pool: Container) -> Any:
    return op.Relu(op.MaxPool(x, _like=pool), _like=relu)


# a Relu read only by a MaxPool whose windows all hold a value (and whose Indices nobody reads)
POOL_BEFORE_RELU = Rule("pool_before_relu", lambda op, x: op.MaxPool(op.Relu(x, _as="relu"), _as="pool"), _swapped,
                        guard=lambda m: _windows_hold_values(m.op("pool")), check=False)


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
    return apply_rules("pool_before_relu", model, [POOL_BEFORE_RELU], changes=lambda m: [m.op("relu").name])
