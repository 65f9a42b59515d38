"""The shipped mapping tables, registered with ``convert`` on first use and built lazily.

- ``tensorflow_onnx``: ``amanda/tensorflow`` (any version) -> ``amanda/onnx/17``.
- ``onnx_opsets``: ``amanda/onnx/N`` <-> ``amanda/onnx/N+1`` for every N from 1 to the newest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["register_shipped"]


def register_shipped(register: Callable[..., Any]) -> None:
    """Register every shipped table with ``register`` (``convert.register_table``)."""
    from amanda.rewrite.mapping.tables import onnx_opsets, tensorflow_onnx, tensorflow_onnx_scopes

    register(factory=tensorflow_onnx_scopes.shipped_table, source=tensorflow_onnx.SOURCE,
             target=tensorflow_onnx.TARGET, name="tensorflow_to_onnx")
    for low, high in onnx_opsets.opset_pairs():
        register(factory=lambda a=low, b=high: onnx_opsets.adapter(a, b),
                 source=onnx_opsets.name(low), target=onnx_opsets.name(high), name=f"onnx {low} -> {high}")
        register(factory=lambda a=high, b=low: onnx_opsets.adapter(a, b),
                 source=onnx_opsets.name(high), target=onnx_opsets.name(low), name=f"onnx {high} -> {low}")
