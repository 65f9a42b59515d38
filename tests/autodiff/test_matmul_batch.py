"""MatMul's weight gradient over a batch: one Gemm of the flattened rows (not a product per
batch entry and a ReduceSum), checked against central differences."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda import Input, model, ops
from tests.autodiff.fd import check


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 1, 3, 4)])
def test_a_weight_matrix_on_a_batch_gets_one_gemm_of_the_flattened_rows(shape: tuple) -> None:
    a, w = Input("a", "float64", shape), Input("w", "float64", (4, 5))
    net = model([a, w], {"loss": ops.ReduceSum(ops.Tanh(ops.MatMul(a, w)), keepdims=0)}, name="net")
    kinds = [c.type for c in amanda.grad(net, "loss", ["w"]).children if c.name != "net"]
    assert "Gemm" in kinds and "ReduceSum" not in kinds and "MatMul" not in kinds
    rng = np.random.default_rng(0)
    check(lambda a, w: ops.Tanh(ops.MatMul(a, w)), {"a": rng.standard_normal(shape), "w": rng.standard_normal((4, 5))})
