"""Types and shapes: tensor types with symbolic dims, inference over every port, checking.

>>> import amanda
>>> from amanda.types import TensorType, infer_types
>>> mm = amanda.op("MatMul", "mm", inputs=["A", "B"], outputs=["Y"])
>>> g = amanda.Container(None, "g", inputs=[amanda.Port("a", attrs={"dtype": "float32", "shape": ["batch", 3]}),
...     amanda.Port("b", attrs={"dtype": "float32", "shape": [3, 5]})], outputs=["y"], children=[mm],
...     edges=[("g:a", "mm:A"), ("g:b", "mm:B"), ("mm:Y", "g:y")], attrs={"namespace": "amanda/onnx/17"})
>>> infer_types(g)[(), "y"]
float32[batch,5]
"""

from amanda.engines import install
from amanda.types.consistency import check
from amanda.types.links import chain_problem
from amanda.types.tensor_type import (
    Dim,
    OptionalType,
    SequenceType,
    TensorType,
    Type,
    TypeMismatch,
    broadcast_shapes,
    fits,
    from_attrs,
    merge,
    to_attrs,
    unify_dims,
)
from amanda.types.typemap import TypeMap, infer_types

__all__ = [
    "Dim",
    "OptionalType",
    "SequenceType",
    "TensorType",
    "Type",
    "TypeMap",
    "TypeMismatch",
    "broadcast_shapes",
    "check",
    "fits",
    "from_attrs",
    "infer_types",
    "merge",
    "to_attrs",
    "unify_dims",
]

install("chain_problem", chain_problem)  # chain refuses types that never fit
install("type_check", check)  # validate adds the type checks
