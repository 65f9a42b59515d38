"""The kernels' numerics and helpers (BLAS, scratch buffers, windows, the conv layouts, the
recurrent driver); the ops themselves are registered by the families of :mod:`amanda.opset.onnx`."""
