"""Fusions whose matches chain: the second fused op reads the output of the first."""

import numpy as np

import amanda
from amanda.passes.fuse import fuse_swish_internal


def test_two_silus_in_a_row_fuse_and_compute_silu_twice():
    """Mul(x, Sigmoid(x)) twice in a row becomes two Swish ops, the second reading the first's
    output; the result equals SiLU applied twice in numpy."""
    ops = [amanda.op("Sigmoid", "s1", ["X"], ["Y"]), amanda.op("Mul", "m1", ["A", "B"], ["C"]),
           amanda.op("Sigmoid", "s2", ["X"], ["Y"]), amanda.op("Mul", "m2", ["A", "B"], ["C"])]
    g = amanda.Container(None, "g", inputs=["x"], outputs=["y"], children=ops, attrs={"namespace": "amanda/onnx/17"},
                         edges=[("g:x", "s1:X"), ("g:x", "m1:A"), ("s1:Y", "m1:B"), ("m1:C", "s2:X"), ("m1:C", "m2:A"),
                                ("s2:Y", "m2:B"), ("m2:C", "g:y")])
    out, report = fuse_swish_internal(g)
    assert sorted(c.type for c in out.children) == ["Swish", "Swish"] and len(report.replaced) == 4
    x = np.linspace(-4, 4, 9, dtype=np.float32)
    silu = lambda v: v / (1 + np.exp(-v))  # noqa: E731
    (y,) = amanda.Session(out).run(["y"], {"x": x})
    np.testing.assert_allclose(y, silu(silu(x)), rtol=1e-5, atol=1e-6)
