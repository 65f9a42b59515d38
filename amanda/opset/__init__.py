"""The shipped op families: one module per family of ONNX ops (:mod:`amanda.opset.onnx`) holding,
side by side, each op's kernel(s), type rule and vector-Jacobian rule (or the reason it has
none), registered in the op registry (:mod:`amanda.ops.registry`).

It sits above ``autodiff`` because a family module uses all three layers' helpers: kernels the
executor's (``exec.kernels.math_util``, ``blas``, ``scratch``), type rules the ``types`` ones,
gradients the builder. ``import amanda`` imports it, so every ``amanda`` module (the executor
too) finds the shipped ops registered.

>>> import amanda
>>> from amanda.ops.registry import entry
>>> entry("amanda/onnx", "Not").origins["kernels"]
('amanda.opset.onnx.logic',)
"""

from amanda.opset import onnx  # noqa: F401

__all__: list[str] = []
