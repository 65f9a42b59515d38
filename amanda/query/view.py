"""What a filter sees: each node as a JSON-like view, with values in JMESPath's types.

A view is a dict with the keys in :data:`VIEW_KEYS`. Attribute values are converted
by :func:`to_jmes` so that JMESPath compares and type-checks them as JSON: tuples
become lists, maps become dicts, arrays become (nested) lists or scalars, dtypes
become strings and graph-valued attributes become ``{"type", "name"}`` summaries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["VIEW_KEYS", "to_jmes"]

VIEW_KEYS = (
    "name",  # the node's name
    "type",  # the node's type
    "path",  # list of path segments from the root
    "depth",  # len(path)
    "attrs",  # effective attributes: the ancestors' overlaid by the node's own
    "own_attrs",  # the node's own attributes
    "inputs",  # input port names
    "outputs",  # output port names
    "controls",  # named control port names
    "is_op",  # whether the node has no children
    "namespace",  # the effective `namespace` attribute
    "uid",  # the node's stable identifier
)

_PLAIN = frozenset({str, int, float, bool, type(None)})


def to_jmes(value: Any) -> Any:
    """An attribute value as JMESPath sees it.

    >>> import numpy as np
    >>> to_jmes((1, (2, 3))), to_jmes(np.array(2.5)), to_jmes(np.array([[1, 2]], dtype="int8"))
    ([1, [2, 3]], 2.5, [[1, 2]])
    """
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is tuple or kind is list:
        return [to_jmes(v) for v in value]
    if isinstance(value, Mapping):
        return {k: to_jmes(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return value.item() if value.ndim == 0 else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.dtype):
        return str(value)
    if getattr(value, "_amanda_frozen", False):
        # a graph-valued attribute (an ONNX body); `..` walks into the graph itself
        return {"type": value.type, "name": value.name}
    # subclasses of the JSON scalars (IntEnum, str subclasses) compare as their base
    for base in (bool, int, float, str):
        if isinstance(value, base):
            return base(value)
    return value
