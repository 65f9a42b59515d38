"""The per-run and per-iteration shortcuts of small models (issue 31 point 5): each against
onnxruntime or numpy, and the aliasing each must not cause."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import amanda
from amanda.errors import ExecutionError

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from amanda.io.onnx.importer import from_onnx  # noqa: E402
from tests.exec.onnx_oracle import both, one_node  # noqa: E402

RNG = np.random.default_rng(11)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_of_index_arrays_matches_onnxruntime(dtype: Any, axis: int) -> None:
    """Gather of a 2-D index array (an embedding lookup), negative indices included, takes
    numpy's own bounds check: onnxruntime's values, shape and dtype."""
    x = RNG.standard_normal((5, 6)).astype(np.float32)
    i = np.array([[0, -1, 4], [-5, 2, 3]], dtype)
    theirs, ours = both(helper.make_node("Gather", ["x", "i"], ["y"], axis=axis), {"x": x, "i": i}, 13)
    assert ours[0].shape == theirs[0].shape and ours[0].dtype == theirs[0].dtype
    np.testing.assert_array_equal(ours[0], theirs[0])


@pytest.mark.parametrize("bad", [5, -6])
def test_gather_out_of_range_names_the_indices(bad: int) -> None:
    """An index past either end still raises an ExecutionError naming the indices' range."""
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=0)
    feeds = {"x": np.zeros((5, 2), np.float32), "i": np.array([[0, bad]], np.int64)}
    with amanda.Session(from_onnx(one_node(node, feeds, 13)), threads=1) as session:
        with pytest.raises(ExecutionError, match=r"indices in \[-5, 5\)"):
            session.run(["y"], feeds)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_sum_of_everything_matches_onnxruntime(dtype: Any, keepdims: int) -> None:
    """ReduceSum with no axes (a loop body's row sum) sums every axis in one reduce: onnxruntime's
    value, dtype and shape (0-d without keepdims), float16 accumulating wider as before."""
    x = RNG.integers(-20, 20, (3, 4)).astype(dtype)
    theirs, ours = both(helper.make_node("ReduceSum", ["x"], ["y"], keepdims=keepdims), {"x": x}, 13)
    assert type(ours[0]) is np.ndarray
    assert ours[0].shape == theirs[0].shape and ours[0].dtype == theirs[0].dtype
    np.testing.assert_array_equal(ours[0], theirs[0])


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_cast_to_the_same_type_returns_equal_values(dtype: Any) -> None:
    """A Cast to the input's own type: onnxruntime's values and dtype."""
    x = (RNG.standard_normal((2, 3)) > 0).astype(dtype) if dtype is np.bool_ else \
        RNG.integers(-9, 9, (2, 3)).astype(dtype)
    to = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    theirs, ours = both(helper.make_node("Cast", ["x"], ["y"], to=to), {"x": x}, 13)
    assert ours[0].dtype == theirs[0].dtype
    np.testing.assert_array_equal(ours[0], theirs[0])


def test_cast_to_the_same_type_is_not_written_in_place() -> None:
    """A same-type Cast passes its input on without a copy, so no later op may write into its
    output: Relu and Add after it, on arrays large enough to be given a dead input, leave the
    fed array as it was."""
    x = RNG.standard_normal((64, 128)).astype(np.float32)
    kept = x.copy()
    nodes = [helper.make_node("Cast", ["x"], ["c"], to=TensorProto.FLOAT),
             helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Add", ["r", "r"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with amanda.Session(from_onnx(model), threads=1) as session:
        y, = session.run(["y"], {"x": x})
    np.testing.assert_array_equal(x, kept)
    np.testing.assert_array_equal(y, 2 * np.maximum(kept, 0))


def _two_input_session(**options: Any) -> amanda.Session:
    """y = a - b, z = a * b over [n, 3] float32 inputs of a symbolic first axis."""
    nodes = [helper.make_node("Sub", ["a", "b"], ["y"]), helper.make_node("Mul", ["a", "b"], ["z"])]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["n", 3]) for n in ("a", "b")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["n", 3]) for n in ("y", "z")]
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 13)])
    return amanda.Session(from_onnx(model), threads=1, **options)


@pytest.mark.parametrize("optimize", [True, False])
def test_repeated_runs_follow_each_runs_feeds_and_fetches(optimize: bool) -> None:
    """Runs that repeat a key (fetches, phase, feed names, dtypes and shapes) take the prepared
    plan; each still reads its own values, in its own feed order, and a new shape, fetch order
    or feed order makes a run of its own: every result numpy's."""
    with _two_input_session(optimize=optimize) as session:
        for n in (2, 5, 2):
            for _ in range(3):
                a, b = RNG.standard_normal((2, n, 3)).astype(np.float32)
                y, z = session.run(["y", "z"], {"a": a, "b": b})
                np.testing.assert_array_equal(y, a - b)
                np.testing.assert_array_equal(z, a * b)
                z, y = session.run(("z", "y"), {"b": b, "a": a})
                np.testing.assert_array_equal(y, a - b)
                np.testing.assert_array_equal(z, a * b)


def test_a_repeated_run_still_checks_what_its_key_does_not_hold() -> None:
    """After runs that were kept, a feed of another dtype, a missing feed, an unknown fetch or a
    mismatched symbolic size still raise the ExecutionError naming it."""
    with _two_input_session(optimize=False) as session:
        a = np.ones((2, 3), np.float32)
        for _ in range(2):
            session.run(["y"], {"a": a, "b": a})
        with pytest.raises(ExecutionError, match="`b`"):
            session.run(["y"], {"a": a, "b": a.astype(np.float64)})
        with pytest.raises(ExecutionError, match="missing feed"):
            session.run(["y"], {"a": a})
        with pytest.raises(ExecutionError, match="'yy'"):
            session.run(["yy"], {"a": a, "b": a})
        with pytest.raises(ExecutionError, match="`n`"):
            session.run(["y"], {"a": a, "b": np.ones((3, 3), np.float32)})
        np.testing.assert_array_equal(session.run(["y"], {"a": a, "b": a})[0], np.zeros((2, 3), np.float32))


@pytest.mark.parametrize("value", [(2, 0, 1), [2, 0, 1], np.array([2, 0, 1], np.int64), np.array([[2], [0], [1]], np.int32),
                                   np.array([2.0, 0.0, 1.0]), (np.int64(2), 0, 1)])
def test_int_list_gives_python_ints_of_every_spelling(value: Any) -> None:
    """An attribute tuple or list, an integer axes input of any shape or a float array: the same
    list of Python ints (the quick paths for ints included)."""
    from amanda.exec.kernels.math_util import int_list

    found = int_list(value)
    assert found == [2, 0, 1] and all(type(v) is int for v in found)


@pytest.mark.parametrize("value", [np.float32(1.5), np.bool_(True), np.array([1, 0]), 3])
@pytest.mark.parametrize("dtype", [None, np.bool_, np.float64])
def test_as_array_gives_numpy_arrays_of_the_dtype_asked(value: Any, dtype: Any) -> None:
    """Numpy scalars, arrays and Python numbers become arrays (of ``dtype`` where given), as
    ``np.asarray`` makes them; an array already of that dtype is returned as it is."""
    from amanda.exec.kernels.math_util import as_array

    found = as_array(value, dtype=dtype)
    expected = np.asarray(value, dtype=dtype)
    assert type(found) is np.ndarray and found.dtype == expected.dtype
    np.testing.assert_array_equal(found, expected)
    if isinstance(value, np.ndarray) and (dtype is None or value.dtype == dtype):
        assert found is value


def _tuner_state(tuner: Any) -> tuple:
    return (tuner.choice, tuner.runs, tuner.retry_at, tuner.wait, tuner.probing, tuner.warmed, tuner.stalls,
            tuner.budget_runs, list(tuner.samples), {k: list(v) for k, v in tuner.recent.items()})


def test_a_settled_one_thread_run_counts_as_next_and_record_count_it() -> None:
    """The runner's shortcut for settled one-thread runs (``quick`` then ``note``) leaves a BLAS
    tuner exactly as ``next`` then ``record`` leave it, through crowded spells, retries of the
    budget that win and lose, and load samples; and it is taken on most of those runs."""
    from amanda.exec.blas import BlasTuner

    loads = [2] * 300 + [1] * 300 + [2] * 200  # crowded, then a core free, then crowded again
    rng = np.random.default_rng(3)
    plain = BlasTuner(2, load=lambda: loads[min(plain.runs, len(loads) - 1)], cores=2)
    quick = BlasTuner(2, load=lambda: loads[min(quick.runs, len(loads) - 1)], cores=2)
    plain.skip()
    quick.skip()
    taken = 0
    for run in range(len(loads)):
        seconds = float(rng.uniform(1.0, 1.2)) * (0.5 if 300 <= run < 420 else 1.5)  # the budget's speed
        count = plain.next()
        plain.record(count, seconds if count == 2 else 1.0)
        if quick.quick():
            taken += 1
            quick.note(1.0)
        else:
            mine = quick.next()
            assert mine == count
            quick.record(mine, seconds if mine == 2 else 1.0)
        assert _tuner_state(quick) == _tuner_state(plain)
    assert taken > len(loads) // 2 and plain.budget_runs > 10  # the budget was tried, and kept a while


@pytest.mark.parametrize("straight", [True, False])
def test_a_run_ignores_floating_point_errors_and_restores_the_users_setting(
        straight: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside a run numpy's floating-point errors are off (inf and nan are values), whether the
    runner sets numpy's error state straight or through np.errstate (numpy 1); after the run,
    and after a failing one, the caller's setting holds again."""
    from amanda.exec import runner

    if not straight:
        monkeypatch.setattr(runner, "_ERRORS", None)
    node = helper.make_node("Div", ["a", "b"], ["y"])
    feeds = {"a": np.array([1.0, -1.0, 0.0], np.float32), "b": np.zeros(3, np.float32)}
    with amanda.Session(from_onnx(one_node(node, feeds, 13)), threads=1) as session, np.errstate(all="raise"):
        y, = session.run(["y"], feeds)
        assert np.geterr()["divide"] == "raise"
    gather = helper.make_node("Gather", ["x", "i"], ["y"])
    bad = {"x": np.zeros(2, np.float32), "i": np.array([7], np.int64)}
    with amanda.Session(from_onnx(one_node(gather, bad, 13)), threads=1) as session, np.errstate(all="raise"):
        with pytest.raises(ExecutionError):  # fails inside the run
            session.run(["y"], bad)
        assert np.geterr() == {"divide": "raise", "over": "raise", "under": "raise", "invalid": "raise"}
    np.testing.assert_array_equal(y, [np.inf, -np.inf, np.nan])


@pytest.mark.parametrize("name", ["lstm_tagger", "bigru", "torch_if", "scripted_loop"])
@pytest.mark.parametrize("threads", [None, 1, 2])
def test_repeated_runs_of_the_torch_fixtures_match_onnxruntime(name: str, threads: int | None) -> None:
    """The recurrent and control-flow fixtures, run again and again on new inputs by one session
    (prepared runs, If and Loop bodies from their prepared runners, on the interpreter and on
    the threaded scheduler), give onnxruntime's outputs every time."""
    import onnxruntime as ort

    from tests.io.test_torch_fixtures import FIXTURES, feeds

    proto = onnx.load(FIXTURES / f"{name}.onnx")
    reference = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    outputs = [o.name for o in proto.graph.output]
    with amanda.Session(from_onnx(proto), threads=threads) as session:
        for seed in range(12):
            inputs = feeds(name, seed)
            for got, expected in zip(session.run(outputs, inputs), reference.run(None, inputs)):
                np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_a_recurrent_layers_attributes_are_read_again_from_a_mapping_that_may_change() -> None:
    """The LSTM kernel keeps what it read from a plan's read-only attribute mapping, but a plain
    dict changed between calls (forward, then reverse) is read again: onnxruntime's outputs for
    each direction; a mapping whose direction does not fit W still raises."""
    from types import MappingProxyType

    from amanda.opset.onnx.recurrent import lstm_kernel

    x = RNG.standard_normal((5, 2, 3)).astype(np.float32)
    w = RNG.standard_normal((1, 16, 3)).astype(np.float32)
    r = RNG.standard_normal((1, 16, 4)).astype(np.float32)
    attrs: dict = {"hidden_size": 4, "direction": "forward"}
    for direction in ("forward", "reverse", "forward"):
        attrs["direction"] = direction
        node = helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=4, direction=direction)
        theirs, _ = both(node, {"x": x, "w": w, "r": r}, 14)
        for mapping in (attrs, MappingProxyType(dict(attrs))):
            np.testing.assert_allclose(lstm_kernel(mapping, x, w, r)[0], theirs[0], rtol=1e-5, atol=1e-6)
    fixed = MappingProxyType({"hidden_size": 4, "direction": "bidirectional"})
    for _ in range(2):
        with pytest.raises(ExecutionError, match="direction"):
            lstm_kernel(fixed, x, w, r)


def test_set_limit_and_restore_limit_set_blas_and_set_it_back() -> None:
    """set_limit(1) puts every BLAS library numpy uses (those amanda found, as threadpoolctl
    reads their limits) at one thread and restore_limit sets the user's limit back; a limit
    already in place changes nothing, and a session's runs leave the user's limit as it was."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from amanda.exec.blas import _blas_libraries, restore_limit, set_limit

    def limits() -> list[int]:
        return [lib.get_num_threads() for lib in _blas_libraries()]

    if not limits():
        pytest.skip("no BLAS library visible to threadpoolctl")
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        users = limits()
        changed = set_limit(1)
        assert limits() == [1] * len(users)
        assert set_limit(1) is None  # already one thread: nothing to set or set back
        restore_limit(changed)
        assert limits() == users
        feeds = {"a": np.ones((2, 3), np.float32), "b": np.ones((3, 2), np.float32)}
        model = from_onnx(one_node(helper.make_node("MatMul", ["a", "b"], ["y"]), feeds, 13))
        for threads in (1, None):
            with amanda.Session(model, threads=threads) as session:
                for _ in range(12):
                    np.testing.assert_array_equal(session.run(["y"], feeds)[0], np.full((2, 2), 3, np.float32))
                    assert limits() == users
        assert limits() == users


def test_onnx_dtype_numbers_map_as_onnx_maps_them_every_time() -> None:
    """Each numpy-typed ONNX data type number gives onnx's own numpy dtype, on the first ask and
    the next (kept); an unknown number still raises."""
    from amanda.exec.kernels.onnx_dtypes import NUMPY_TYPES, onnx_dtype

    for code in sorted(NUMPY_TYPES):
        if code == TensorProto.STRING:
            continue
        for _ in range(2):
            assert onnx_dtype(code) == helper.tensor_dtype_to_np_dtype(code)
    with pytest.raises(ValueError):
        onnx_dtype(999)
