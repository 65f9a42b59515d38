"""The ONNX op families; importing this package registers each family's ops (kernel, type rule
and gradient of each op, side by side in its family's module)."""

from amanda.opset.onnx import (  # noqa: F401
    activations,
    attention,
    cast,
    construct,
    conv,
    deform,
    detection,
    elementwise,
    identity,
    indexing,
    layout,
    linalg,
    logic,
    losses,
    normalization,
    norms,
    pool,
    quantize,
    random,
    recurrent,
    reduce,
    resize,
    sampling,
    sequence_state,
    sequences,
    shape,
    signal,
    slicing,
    softmax,
    sorting,
    strings,
    text_features,
)

__all__: list[str] = []
