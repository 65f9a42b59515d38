"""ONNX backend node tests for the tensor, shape, indexing, conv, pool and resize kernels."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_cases import pass_counts

# Every op type these kernel modules register (conv, pool, shape, slicing,
# indexing, construct, sorting, resize). GlobalLpPool has no backend case; it is
# covered by tests/exec/test_kernels_tensor.py.
OP_TYPES = [
    "Conv",
    "ConvTranspose",
    "Col2Im",
    "MaxPool",
    "AveragePool",
    "LpPool",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "MaxUnpool",
    "Reshape",
    "Transpose",
    "Concat",
    "Split",
    "Squeeze",
    "Unsqueeze",
    "Expand",
    "Tile",
    "Flatten",
    "Shape",
    "Size",
    "DepthToSpace",
    "SpaceToDepth",
    "Slice",
    "Pad",
    "CenterCropPad",
    "Compress",
    "ReverseSequence",
    "Trilu",
    "Gather",
    "GatherElements",
    "GatherND",
    "Scatter",
    "ScatterElements",
    "ScatterND",
    "OneHot",
    "NonZero",
    "Constant",
    "ConstantOfShape",
    "Range",
    "EyeLike",
    "TopK",
    "Unique",
    "Det",
    "Resize",
    "Upsample",
]

REQUIRED_PASS_RATE = 0.95


@pytest.fixture(scope="module")
def report() -> dict[str, tuple[int, int, list[str]]]:
    return pass_counts(OP_TYPES)


@pytest.mark.parametrize("op_type", OP_TYPES)
def test_backend_cases_pass(report: dict, op_type: str) -> None:
    """At least 95% of the ONNX backend cases of each registered op type pass."""
    passed, total, failures = report[op_type]
    for line in failures:
        print("FAIL", line)
    assert total > 0, f"no backend cases for {op_type}"
    assert passed >= REQUIRED_PASS_RATE * total, f"{op_type}: {passed}/{total} passed"


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


def test_kernels_leave_inputs_unchanged() -> None:
    """Running any backend case of these op types never modifies the fed arrays."""
    from onnx_cases import cases_by_op, run_model

    groups = cases_by_op()
    changed = []
    for op_type in OP_TYPES:
        for case in groups.get(op_type, []):
            inputs = [
                np.array(x, copy=True) if isinstance(x, np.ndarray) else x for x in case.inputs
            ]
            try:
                with np.errstate(all="ignore"):
                    run_model(case.model, inputs)
            except Exception:  # noqa: BLE001, S112 - reported by test_backend_cases_pass
                continue
            for before, after in zip(case.inputs, inputs):
                if isinstance(before, np.ndarray) and not _same(before, after):
                    changed.append(case.name)
    assert not changed, changed
