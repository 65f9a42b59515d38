"""The ONNX op families; importing this package registers each family's ops (kernel, type rule
and gradient of each op, side by side in its family's module)."""

from amanda.opset.onnx import (  # noqa: F401
    activations,
    attention,
    cast,
    construct,
    deform,
    detection,
    elementwise,
    indexing,
    layout,
    logic,
    losses,
    normalization,
    norms,
    quantize,
    reduce,
    resize,
    sampling,
    shape,
    signal,
    slicing,
    softmax,
    sorting,
)

__all__: list[str] = []
