"""Engines other than the numpy executor that a placement can hand parts of a model to
(``onnxruntime:cpu``, ``onnxruntime:cuda``; ``cupy:<n>``, the numpy executor's kernels on CuPy
arrays), and the runner that joins them with numpy parts."""

from amanda.exec.backends.onnxruntime import ORT_PREFIX, check_device, is_ort_device, supported_op
from amanda.exec.backends.placed import PlacedRunner, assign_devices, uses_backend

__all__ = ["ORT_PREFIX", "PlacedRunner", "assign_devices", "check_device", "is_ort_device", "supported_op",
           "uses_backend"]
