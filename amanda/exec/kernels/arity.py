"""Kernels whose work depends on how many outputs the node declares.

ONNX defines some results by the node's output count rather than by an
attribute: Split before opset 18 splits into as many equal parts as the node has
outputs, and MaxPool's Indices output is optional (and costly). A kernel marked
with :func:`wants_output_count` asks the runner to pass that count as
``attrs["num_outputs"]`` when the node does not carry the attribute itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from amanda.exec.kernels.registry import Kernel

OUTPUT_COUNT = "num_outputs"


def wants_output_count(fn: Kernel) -> Kernel:
    """Mark ``fn`` as reading the node's output count from ``attrs["num_outputs"]``."""
    fn.wants_output_count = True  # type: ignore[attr-defined]
    return fn


def needs_output_count(fn: Kernel) -> bool:
    """Whether a runner should pass the node's output count to ``fn``."""
    return bool(getattr(fn, "wants_output_count", False))


def output_count(attrs: Mapping[str, Any], default: int | None = None) -> int | None:
    """The node's output count as the runner passed it, else ``default``.

    >>> output_count({"num_outputs": 3}), output_count({}, 2)
    (3, 2)"""
    value = attrs.get(OUTPUT_COUNT)
    return default if value is None else int(value)
