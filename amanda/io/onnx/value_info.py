"""A graph's ``value_info`` read fast: each entry's fields once, each distinct type once.

An exported transformer declares a type for most of its values (626 entries in a 529-node
GPT-2), and those entries share few types (28 there): reading the type's fields from Python
(its kind, element type, each dimension's kind and value) costs far more than serializing the
small ``TypeProto`` back to bytes in C. :func:`read_value_types` reads each distinct type once,
keyed by those bytes (equal bytes parse to equal types, so the text checks made on the first
hold for all), and checks the rest of each entry (name, doc string, metadata pairs) field by
field. Whatever it does not expect (another kind of type, a denotation, text that is not UTF-8)
it leaves to the caller's general path.

>>> from onnx import helper
>>> entries = [helper.make_tensor_value_info(n, 1, ["n", 3]) for n in ("a", "b")]
>>> read_value_types(entries, print)["b"]
{'dtype': 'float32', 'shape': ('n', 3)}
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from typing import Any

from amanda.io.onnx.values import DTYPE_NAMES

__all__ = ["read_value_types"]

_INFERRED = "amanda_inferred"  # amanda.types.onnx_info's mark of a type its export inferred

_join = "".join
_UNREAD: Any = object()  # a type not read yet


def read_value_types(entries: Any, general: Callable[[Any], dict[str, Any] | None]) -> dict[str, dict[str, Any]]:
    """The port attributes (as ``type_to_attrs`` gives them) of the value each ``ValueInfoProto``
    of ``entries`` names, but those amanda's export inferred (not declared types); an entry
    this does not expect (see the module docstring) is read by ``general`` in its turn (None:
    not a declared type)."""
    types: dict[str, dict[str, Any]] = {}
    by_bytes: dict[bytes, dict[str, Any] | None] = {}
    for vi in entries:
        name, doc, props = vi.name, vi.doc_string, vi.metadata_props
        found: Any = None
        if type(name) is str and type(doc) is str and vi.HasField("type") and _plain_props(props):
            if props and any(p.key == _INFERRED for p in props):
                continue
            kind = vi.type
            key = kind.SerializeToString()
            found = by_bytes.get(key, _UNREAD)
            if found is _UNREAD:
                found = by_bytes[key] = _tensor_attrs(kind)
        if found is None:
            found = general(vi)
            if found is None:
                continue
        elif doc:
            found = {**found, "doc_string": doc}
        types[name] = found
    return types


def _plain_props(props: Any) -> bool:
    """Whether every key and value of the metadata entries ``props`` is text."""
    if not props:
        return True
    try:  # joining refuses anything but str (bytes: not UTF-8), in C
        _join(chain.from_iterable((p.key, p.value) for p in props))
    except TypeError:
        return False
    return True


def _tensor_attrs(kind: Any) -> dict[str, Any] | None:
    """``dtype`` and ``shape`` of a tensor's ``TypeProto``, its text checked; None for another
    kind, a denotation or text that is not UTF-8."""
    if kind.WhichOneof("value") != "tensor_type" or kind.denotation:
        return None
    tensor = kind.tensor_type
    out: dict[str, Any] = {}
    if tensor.elem_type:
        out["dtype"] = DTYPE_NAMES.get(tensor.elem_type, str(tensor.elem_type))
    if tensor.HasField("shape"):
        dims = []
        for dim in tensor.shape.dim:
            which = dim.WhichOneof("value")
            found = dim.dim_value if which == "dim_value" else dim.dim_param if which == "dim_param" else None
            if type(dim.denotation) is not str or (which == "dim_param" and type(found) is not str):
                return None
            dims.append(found)
        out["shape"] = tuple(dims)
    return out
