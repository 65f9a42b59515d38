"""Time amanda's Conv kernel against onnxruntime on the same single-node model.

Run from the repository root: ``PYTHONPATH=. python benchmarks/conv_vs_onnxruntime.py``.
onnxruntime gets ``intra_op_num_threads=2``; times are medians in milliseconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

from amanda.exec.kernels.conv import conv

CASES = [((64, 1, 28, 28), (32, 1, 3, 3)), ((64, 32, 14, 14), (64, 32, 3, 3))]


def median_ms(fn: Callable[[], object], repeat: int = 30) -> float:
    """Median wall time of ``fn`` after one warm-up call."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e3)


def ort_session(x_shape: tuple, w_shape: tuple) -> ort.InferenceSession:
    """A one-node Conv model (pads 1) in onnxruntime with two intra-op threads."""
    node = helper.make_node("Conv", ["X", "W"], ["Y"], pads=[1, 1, 1, 1])
    graph = helper.make_graph(
        [node],
        "conv",
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape),
            helper.make_tensor_value_info("W", TensorProto.FLOAT, w_shape),
        ],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def main() -> None:
    rng = np.random.default_rng(0)
    for x_shape, w_shape in CASES:
        x = rng.standard_normal(x_shape, dtype=np.float32)
        w = rng.standard_normal(w_shape, dtype=np.float32)
        # amanda first: onnxruntime's idle threads spin for a while after each run
        t_ours = median_ms(lambda x=x, w=w: conv({"pads": [1, 1, 1, 1]}, x, w))
        ours = conv({"pads": [1, 1, 1, 1]}, x, w)[0]
        session = ort_session(x_shape, w_shape)
        t_ort = median_ms(lambda x=x, w=w, s=session: s.run(None, {"X": x, "W": w}))
        theirs = session.run(None, {"X": x, "W": w})[0]
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-3)
        print(
            f"Conv x{list(x_shape)} w{list(w_shape)}: amanda {t_ours:.2f} ms, "
            f"onnxruntime {t_ort:.2f} ms, ratio {t_ours / t_ort:.2f}"
        )


if __name__ == "__main__":
    main()
