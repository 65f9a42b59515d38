"""Every layer instance has an identity of its own: two layers built apart (without
``layers.seeded``) train, keep statistics and save as two, checked against numpy; a weight is
shared only on purpose (one layer object applied twice, ``layers.tie``), and a model in which
two different weights hold one uid is reported by ``validate`` and refused by ``Session``,
``save_weights`` and ``minimize`` with both paths named."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import amanda
from amanda import Input, layers, ops
from amanda.optim import SGD, freeze, minimize

RNG = np.random.default_rng(0)
LR = 0.1


def regression(net: amanda.Container, width: int, out: int) -> amanda.Container:
    """``net`` applied to ``x`` with the loss ``mean((net(x) - t)^2)``."""
    x, t = Input("x", "float32", ("batch", width)), Input("t", "float32", ("batch", out))
    err = ops.Sub(net(x), t)
    return amanda.model([x, t], {"loss": ops.ReduceMean(ops.Mul(err, err), keepdims=0)}, name="fit")


def numpy_sgd(w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray, x: np.ndarray, t: np.ndarray,
              steps: int) -> list[np.ndarray]:
    """Plain SGD on ``mean((x w1 + b1) w2 + b2 - t)^2`` in float64."""
    w1, b1, w2, b2 = (np.asarray(a, np.float64) for a in (w1, b1, w2, b2))
    for _ in range(steps):
        h = x @ w1 + b1
        dy = 2 * (h @ w2 + b2 - t) / t.size
        dh = dy @ w2.T
        w1, b1, w2, b2 = w1 - LR * x.T @ dh, b1 - LR * dh.sum(0), w2 - LR * h.T @ dy, b2 - LR * dy.sum(0)
    return [w1, b1, w2, b2]


def arrays(net: amanda.Container, names: tuple[str, ...]) -> list[np.ndarray]:
    return [np.asarray(net.child(n).child(w).attrs["value"]) for n in names for w in ("kernel", "bias")]


@pytest.mark.parametrize("width, hidden, out", [(4, 4, 4), (4, 4, 3), (4, 8, 3)])
def test_two_dense_layers_built_apart_train_and_save_as_two(width: int, hidden: int, out: int, tmp_path: Path) -> None:
    """``Dense(width, hidden) >> Dense(hidden, out)`` built without seeded: minimize trains four
    weights (one session variable each) to what numpy's SGD gives, and save_weights keeps both
    trained kernels, which load back by uid."""
    net = amanda.chain(layers.Dense(width, hidden), layers.Dense(hidden, out), name="net")  # what >> builds, named
    first, second = (c.child("kernel") for c in net.children)
    assert first.uid != second.uid and amanda.validate(net) == []
    fit = regression(net, width, out)
    step = minimize(fit, "loss", SGD(lr=LR))
    x, t = RNG.standard_normal((6, width)).astype(np.float32), RNG.standard_normal((6, out)).astype(np.float32)
    with amanda.Session(step, threads=1) as session:
        for _ in range(3):
            session.run(["loss", "train"], {"x": x, "t": t}, phase="train")
        assert len(session.state) == 4
        trained = freeze(step, session)
    body = trained.child(net.name)
    want = numpy_sgd(*arrays(net, ("dense", "dense_1")), x.astype(np.float64), t.astype(np.float64), 3)
    got = arrays(body, ("dense", "dense_1"))
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)
    with amanda.Session(trained) as session:
        assert session.run(["loss"], {"x": x, "t": t})[0].shape == ()  # the right widths: it runs
    file = tmp_path / "w.npz"
    keys = amanda.save_weights(trained, file)
    assert sum(k.endswith("::value") for k in keys if k.split("::")[0] in {n.uid for n in
               (body.child(d).child(w) for d in ("dense", "dense_1") for w in ("kernel", "bias"))}) == 4
    loaded = amanda.load_weights(fit, file)
    assert loaded.mismatched == ()
    for w, g in zip(want, arrays(loaded.container.child(net.name), ("dense", "dense_1"))):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)


def test_two_batchnorms_built_apart_keep_their_own_statistics() -> None:
    """Two BatchNorm layers built apart have running statistics of their own: after one train
    step the first holds 0.1 x the batch mean of its input, the second that of its own input."""
    net = layers.BatchNorm(3) >> layers.BatchNorm(3)
    x = (RNG.standard_normal((8, 3)) * 2 + 5).astype(np.float32)
    with amanda.Session(net, threads=1) as session:
        session.run(["train"], {"x": x}, phase="train")
        means = [session.state[bn.child("moving_mean").uid] for bn in net.children]
    assert len({bn.child("moving_mean").uid for bn in net.children}) == 2
    np.testing.assert_allclose(means[0], 0.1 * x.mean(0), rtol=1e-5)
    normalised = (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5)
    np.testing.assert_allclose(means[1], 0.1 * normalised.mean(0), atol=1e-6)


def test_a_layer_applied_twice_or_tied_is_one_weight() -> None:
    """One Dense object applied twice is one weight (shared lists its two places, minimize makes
    one variable per weight, training keeps both places equal, as numpy's SGD with the tied
    gradient says); tie makes the same of two layers built apart."""
    dense = layers.Dense(3, 3, name="d")
    x, t = Input("x", "float32", ("batch", 3)), Input("t", "float32", ("batch", 3))
    err = ops.Sub(dense(dense(x)), t)
    fit = amanda.model([x, t], {"loss": ops.ReduceMean(ops.Mul(err, err), keepdims=0)}, name="fit")
    assert sorted(len(p) for p in layers.shared(fit).values()) == [2, 2] and amanda.validate(fit) == []
    xs, ts = RNG.standard_normal((5, 3)).astype(np.float32), RNG.standard_normal((5, 3)).astype(np.float32)
    step = minimize(fit, "loss", SGD(lr=LR))
    with amanda.Session(step, threads=1) as session:
        session.run(["loss", "train"], {"x": xs, "t": ts}, phase="train")
        assert len(session.state) == 2
        trained = freeze(step, session)
    w, b = (np.asarray(dense.child(n).attrs["value"], np.float64) for n in ("kernel", "bias"))
    h = xs @ w + b
    dy = 2 * (h @ w + b - ts) / ts.size
    dh = dy @ w.T
    want_w, want_b = w - LR * (xs.T @ dh + h.T @ dy), b - LR * (dh.sum(0) + dy.sum(0))
    for name in ("d", "d_1"):
        np.testing.assert_allclose(trained.child(name).child("kernel").attrs["value"], want_w, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(trained.child(name).child("bias").attrs["value"], want_b, rtol=1e-4, atol=1e-6)
    tied = layers.tie(layers.Dense(3, 3) >> layers.Dense(3, 3), "dense/kernel", "dense_1/kernel")
    assert [len(p) for p in layers.shared(tied).values()] == [2] and amanda.validate(tied) == []


def test_tie_refuses_what_is_not_a_weight_like_the_source() -> None:
    """tie names the target whose shape differs and a path that is not a weight."""
    net = layers.Dense(3, 4) >> layers.Dense(4, 3)
    with pytest.raises(amanda.ArgumentError, match="dense_1/kernel.*float32\\[4, 3\\]"):
        layers.tie(net, "dense/kernel", "dense_1/kernel")
    with pytest.raises(amanda.ArgumentError, match="dense_1/matmul"):
        layers.tie(net, "dense/kernel", "dense_1/matmul")
    with pytest.raises(amanda.PathError):
        layers.tie(net, "dense/kernle", "dense_1/kernel")


def clashing() -> amanda.Container:
    """Two Dense layers keyed apart by one seed at equal paths: one uid, two kernels."""
    return layers.seeded(layers.Dense(4, 8), 0) >> layers.seeded(layers.Dense(8, 3), 0)


def test_a_uid_clash_is_reported_and_refused_with_both_paths(tmp_path: Path) -> None:
    """validate reports two weights of one uid and other content, and Session, save_weights and
    minimize refuse the model, each naming both paths; seeding the whole model resolves it."""
    net = clashing()
    problems = [p for p in amanda.validate(net) if "uid" in p.expected]
    assert [p.path for p in problems] == [("dense_1", "kernel"), ("dense_1", "bias")]
    assert "`dense/kernel`" in problems[0].found and "`dense_1/kernel`" in problems[0].found
    assert "(8, 3)" in problems[0].found
    fit = regression(net, 4, 3)
    for action in (lambda: amanda.Session(net), lambda: amanda.save_weights(net, tmp_path / "w.npz"),
                   lambda: minimize(fit, "loss", SGD(lr=LR))):
        with pytest.raises(amanda.InvariantError, match=r"dense/kernel.*dense_1/kernel"):
            action()
    assert not (tmp_path / "w.npz").exists()
    fixed = layers.seeded(net, 0)
    assert amanda.validate(fixed) == []
    assert fixed.child("dense_1").child("kernel").uid == "0:dense_1/kernel"


def test_one_place_of_a_shared_weight_changed_alone_is_a_clash() -> None:
    """Loading other values into one place of a layer applied twice breaks the tie: reported."""
    dense = layers.Dense(2, 2, name="d")
    x = Input("x", "float32", ("batch", 2))
    net = amanda.model([x], {"y": dense(dense(x))}, name="twice")
    changed = amanda.replace(net, [("d_1", "kernel")], lambda w: w.with_attrs(value=np.ones((2, 2), np.float32)))
    problems = amanda.validate(changed)
    assert len(problems) == 1 and problems[0].path == ("d_1", "kernel") and "values" in problems[0].found


# -- random stacks ---------------------------------------------------------------------------


@st.composite
def stacks(draw: st.DrawFn) -> tuple[int, list[amanda.Container]]:
    """A first width and a list of layers (some objects used twice) whose widths chain."""
    width = first = draw(st.integers(2, 5))
    built: list[amanda.Container] = []
    for _ in range(draw(st.integers(1, 6))):
        reusable = [layer for layer in built if layer.attrs.get("units", width) == width
                    and layer.attrs.get("in_features", layer.attrs.get("channels", layer.attrs.get("features", width))) == width]
        kind = draw(st.sampled_from(["dense", "dense", "batchnorm", "layernorm", "relu", "again"]))
        if kind == "again" and reusable:
            built.append(draw(st.sampled_from(reusable)))
            continue
        if kind == "dense" or kind == "again":
            units = draw(st.integers(2, 5))
            built.append(layers.Dense(width, units))
            width = units
        elif kind == "batchnorm":
            built.append(layers.BatchNorm(width))
        elif kind == "layernorm":
            built.append(layers.LayerNorm(width))
        else:
            built.append(layers.relu())
    return first, built


@settings(max_examples=12, deadline=None, derandomize=True)
@given(stacks())
def test_random_stacks_hold_one_variable_state_and_array_per_layer_instance(case: tuple) -> None:
    """For a random stack of layers built without seeded (some applied twice), the weights,
    the session variables after a train step and the saved arrays are one per weight of each
    layer instance: a reused object counts once, two objects built apart twice."""
    width, stack = case
    instances = {id(layer): layer for layer in stack}
    expected = sum(len(layer.attrs.get("weights") or {}) for layer in instances.values())
    x = Input("x", "float32", ("batch", width))
    h = x
    for layer in stack:
        h = layer(h)
    net = amanda.model([x], {"loss": ops.ReduceMean(ops.Mul(h, h), keepdims=0)}, name="net")
    listed = {node.child(name).uid for _, node, _ in amanda.walk(net) if not node.is_op
              for name in (node.attrs.get("weights") or {})}
    assert len(listed) == expected
    assert amanda.validate(net) == []
    if not amanda.optim.default_weights(net):
        return
    step = minimize(net, "loss", SGD(lr=0.01))
    feeds = {"x": np.random.default_rng(1).standard_normal((4, width)).astype(np.float32)}
    with amanda.Session(step, threads=1) as session:
        session.run(["loss", "train"], feeds, phase="train")
        assert set(session.state) == listed
        frozen = freeze(step, session)
    with tempfile.TemporaryDirectory() as folder:
        keys = amanda.save_weights(frozen, Path(folder) / "w.npz")
    saved = {k.split("::")[0] for k in keys}
    assert listed <= saved
    assert len([k for k in keys if k.split("::")[0] in listed]) == expected
