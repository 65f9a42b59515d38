"""Kernels whose work depends on how many outputs the node declares.

ONNX defines some results by the node's output count rather than by an
attribute: Split before opset 18 splits into as many equal parts as the node has
outputs, and MaxPool's Indices output is optional (and costly). A kernel registered
with ``@kernel(..., output_count=True)`` asks the runner to pass that count as
``attrs["num_outputs"]`` when the node does not carry the attribute itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from amanda.exec.kernels.registry import Kernel, KernelVersion, version_of

OUTPUT_COUNT = "num_outputs"


def needs_output_count(kernel: Kernel | KernelVersion) -> bool:
    """Whether a runner should pass the node's output count to a kernel version (or the
    registered version of a kernel function).

    >>> from amanda.exec.kernels.registry import lookup
    >>> needs_output_count(lookup("Split", 13)), needs_output_count(lookup("Relu", 14).fn)
    (True, False)
    """
    version = kernel if isinstance(kernel, KernelVersion) else version_of(kernel)
    return version is not None and version.output_count


def output_count(attrs: Mapping[str, Any], default: int | None = None) -> int | None:
    """The node's output count as the runner passed it, else ``default``.

    >>> output_count({"num_outputs": 3}), output_count({}, 2)
    (3, 2)"""
    value = attrs.get(OUTPUT_COUNT)
    return default if value is None else int(value)
