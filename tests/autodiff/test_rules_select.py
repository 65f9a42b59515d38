"""Rules of ops that copy, mask or accumulate elements (GatherElements, GatherND, Compress,
Tile, DepthToSpace, SpaceToDepth, ReverseSequence, Pad in every mode, TopK, Trilu, CumSum,
CastLike), of Mod, of GlobalMaxPool and of the norm-like reductions agree with central finite
differences in float64 over several attribute settings."""

from __future__ import annotations

import numpy as np
import pytest

from amanda import ops
from amanda.build import Ops
from tests.autodiff.fd import check

I64 = np.int64


def arr(seed: int, shape: tuple) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


COPIES = {
    "GatherElements": lambda x: ops.GatherElements(x, np.array([[0, 2, 2], [1, 0, 0]], I64), axis=1),
    "GatherND": lambda x: ops.GatherND(x, np.array([[0, 1], [1, 2], [0, 1]], I64)),
    "GatherND-batch": lambda x: ops.GatherND(x, np.array([[2], [0]], I64), batch_dims=1),
    # Compress's output size is known only at run time: a Reshape gives the check its shape
    "Compress": lambda x: ops.Reshape(ops.Compress(x, np.array([True, False, True]), axis=1), np.array([3, 2], I64)),
    "Compress-flat": lambda x: ops.Reshape(ops.Compress(x, np.array([False, True, True, False, True])),
                                           np.array([3], I64)),
    "Tile": lambda x: ops.Tile(x, np.array([2, 3], I64)),
    "Pad-constant": lambda x: ops.Pad(x, np.array([1, 0, 2, 1], I64), np.array(0.5)),
    "Pad-crop": lambda x: ops.Pad(x, np.array([-1, 1, 0, -1], I64)),
    "Pad-edge": lambda x: ops.Pad(x, np.array([1, 2, 2, 0], I64), mode="edge"),
    "Pad-reflect": lambda x: ops.Pad(x, np.array([1, 2, 1, 1], I64), mode="reflect"),
    "Pad-axes": lambda x: Ops("amanda/onnx/18").Pad(x, np.array([2, 1], I64), None, np.array([1], I64)),
    "Pad-wrap": lambda x: Ops("amanda/onnx/19").Pad(x, np.array([1, 2, 1, 2], I64), mode="wrap"),
    "TopK": lambda x: ops.TopK(x, np.array([2], I64), axis=1)[0],
    "TopK-smallest": lambda x: ops.TopK(x, np.array([1], I64), axis=0, largest=0)[0],
    "Trilu": lambda x: ops.Trilu(x),
    "Trilu-lower": lambda x: ops.Trilu(x, np.array(1, I64), upper=0),
    "CumSum": lambda x: ops.CumSum(x, np.array(1, I64)),
    "CumSum-reverse-exclusive": lambda x: ops.CumSum(x, np.array(0, I64), exclusive=1, reverse=1),
    "CastLike": lambda x: ops.CastLike(x, np.zeros((), np.float64)),
    "ReverseSequence": lambda x: ops.ReverseSequence(x, np.array([2, 1, 3], I64), batch_axis=1, time_axis=0),
}


@pytest.mark.parametrize("case", sorted(COPIES))
def test_element_copying_ops(case: str) -> None:
    """Each op that copies or masks elements sends the gradient back where they came from
    (repeated picks add up); the pad value gets the gradient of what it filled."""
    shape = {"GatherND-batch": (2, 3), "Compress-flat": (5,), "ReverseSequence": (4, 3)}.get(case, (3, 4))
    feeds = {"x": arr(0, shape)}
    check(COPIES[case], feeds)


def test_pad_value_gradient() -> None:
    """A Pad's constant value gets the gradient summed over the positions it filled."""
    check(lambda x, v: ops.Pad(x, np.array([1, 0, 0, 2], I64), v), {"x": arr(0, (2, 3)), "v": np.array(0.3)})


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_and_back(mode: str) -> None:
    """DepthToSpace (both modes) and SpaceToDepth are permutations: their gradients too."""
    check(lambda x: ops.DepthToSpace(x, blocksize=2, mode=mode), {"x": arr(0, (1, 8, 2, 3))})
    check(lambda x: ops.SpaceToDepth(x, blocksize=2), {"x": arr(1, (1, 2, 4, 6))})


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod(fmod: int) -> None:
    """Mod of floats (fmod=1, and numpy's sign rule) in both operands, broadcast."""
    a = arr(0, (3, 4)) * 3
    b = np.abs(arr(1, (4,))) + 0.7
    b = b * np.array([1, -1, 1, -1]) if fmod else b
    check(lambda a, b: ops.Mod(a, b, fmod=fmod), {"a": a, "b": b})


def test_global_max_pool() -> None:
    """GlobalMaxPool sends each channel's gradient to its maximum."""
    check(lambda x: ops.GlobalMaxPool(x), {"x": arr(0, (2, 3, 4, 5))})


@pytest.mark.parametrize("kind", ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"])
@pytest.mark.parametrize(("axes", "keepdims"), [([1], 1), ([0, 2], 0), (None, 0), ([], 1)])
def test_norm_reductions(kind: str, axes: list | None, keepdims: int) -> None:
    """ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum (of a positive input) and
    ReduceLogSumExp over some axes, all, or none (noop_with_empty_axes)."""
    x = arr(0, (2, 3, 4))
    x = np.abs(x) + 0.3 if kind == "ReduceLogSum" else np.where(np.abs(x) < 0.05, 0.3, x)
    extra = {"noop_with_empty_axes": 1} if axes == [] else {}
    axes_in = None if axes is None else np.array(axes, I64)
    o = Ops("amanda/onnx/18")
    check(lambda x: getattr(o, kind)(x, axes_in, keepdims=keepdims, **extra), {"x": x})


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_scatter_elements_and_nd(reduction: str) -> None:
    """ScatterElements and ScatterND (reduction none, distinct positions; and add, repeated
    ones): data and updates gradients."""
    index = np.array([[1, 0, 2], [0, 2, 1]], I64) if reduction == "none" else np.array([[1, 1, 2], [0, 0, 1]], I64)
    check(lambda d, u: ops.ScatterElements(d, index, u, axis=1, reduction=reduction),
          {"d": arr(0, (2, 4)), "u": arr(1, (2, 3))})
    rows = np.array([[2], [0]], I64) if reduction == "none" else np.array([[2], [2]], I64)
    check(lambda d, u: ops.ScatterND(d, rows, u, reduction=reduction), {"d": arr(2, (3, 4)), "u": arr(3, (2, 4))})


def test_scatter_with_a_multiplying_reduction_is_named() -> None:
    """ScatterElements with reduction mul is a SchemaError naming the op and the reduction."""
    import amanda
    from amanda import Input, model

    d = Input("d", "float64", (2, 3))
    y = ops.ScatterElements(d, np.array([[0], [1]], I64), np.ones((2, 1)), axis=1, reduction="mul", name="sc")
    net = model([d], {"loss": ops.ReduceSum(y, keepdims=0)}, name="net")
    with pytest.raises(amanda.SchemaError, match=r"`sc` \(ScatterElements\).*'mul'"):
        amanda.grad(net, "loss", ["d"])
