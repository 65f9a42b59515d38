"""At a fixed thread setting a session gives the same bits run after run, the first run included."""

from __future__ import annotations

import os

import numpy as np
import pytest

import amanda
from amanda import Input, model, ops
from amanda.exec import blas

SHAPES = 200


def products(seed: int) -> tuple[amanda.Container, dict, dict]:
    """One model of SHAPES independent products by constant weights (MatMul of rank 2 and 3, MatMul
    plus a bias row as a Linear layer, Gemm with and without transB, alpha and a bias), its feeds,
    and numpy's result for each output."""
    rng = np.random.default_rng(seed)
    inputs, outputs, feeds, expected = [], {}, {}, {}
    for i in range(SHAPES):
        m, k, n = (int(v) for v in rng.integers(1, 257, 3))
        kind = ["matmul", "batched", "linear", "gemm", "gemm_t"][i % 5]
        shape = (int(rng.integers(2, 4)), m, k) if kind == "batched" else (m, k)
        x = Input(f"x{i}", "float32", shape)
        a = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal((k, n)).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32)
        if kind in ("matmul", "batched"):
            y, want = ops.MatMul(x, ops.Constant(value=w)), a @ w
        elif kind == "linear":
            y, want = ops.Add(ops.MatMul(x, ops.Constant(value=w)), ops.Constant(value=bias)), a @ w + bias
        elif kind == "gemm":
            y, want = ops.Gemm(x, ops.Constant(value=w), ops.Constant(value=bias)), a @ w + bias
        else:
            y = ops.Gemm(x, ops.Constant(value=np.ascontiguousarray(w.T)), ops.Constant(value=bias), transB=1,
                         alpha=0.5)
            want = 0.5 * (a @ w) + bias
        inputs.append(x)
        outputs[f"y{i}"] = y
        feeds[f"x{i}"] = a
        expected[f"y{i}"] = want
    return model(inputs, outputs, name="products"), feeds, expected


@pytest.mark.parametrize(("threads", "optimize"), [(1, False), (1, True), (2, True)])
def test_two_hundred_products_give_the_same_bits_run_after_run(threads, optimize):
    """200 random MatMul/Gemm shapes by constant weights, run three times in one session: every run,
    the first included, gives bit-identical results, which agree with numpy (float64 oracle)."""
    g, feeds, expected = products(threads + 10 * optimize)
    names = list(g.output_names)
    with amanda.Session(g, threads=threads, optimize=optimize) as session:
        runs = [session.run(names, feeds) for _ in range(3)]
    for name, first, second, third in zip(names, *runs):
        np.testing.assert_array_equal(second, first, err_msg=name)
        np.testing.assert_array_equal(third, first, err_msg=name)
        np.testing.assert_allclose(first, expected[name], rtol=1e-3, atol=1e-3, err_msg=name)


def test_threads_none_is_reproducible_while_its_blas_count_holds(monkeypatch):
    """With the default setting on a machine with no spare core the tuner keeps one BLAS thread, and the
    results are then bit-identical run after run, and equal to threads=1's."""
    monkeypatch.setattr(blas, "runnable_tasks", lambda: 1 + (os.cpu_count() or 1))
    g, feeds, _ = products(7)
    names = list(g.output_names)
    with amanda.Session(g) as auto, amanda.Session(g, threads=1) as one:
        runs = [auto.run(names, feeds) for _ in range(5)]
        reference = one.run(names, feeds)
    for name, first, *later in zip(names, reference, *runs):
        for value in later:
            np.testing.assert_array_equal(value, first, err_msg=name)
