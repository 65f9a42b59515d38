"""Weights are drawn from a seeded Generator and keyed by (seed, path): the same code builds the
same weights and uids in a new process, so saved weights pair back by uid, or by path."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import amanda
from amanda import layers

ROOT = Path(__file__).resolve().parents[2]
BUILD = textwrap.dedent("""
    import amanda
    from amanda import layers
    def build(seed):
        body = amanda.chain(layers.Conv(3, 4, 3, name="conv"), layers.BatchNorm(4, name="bn"), layers.relu(),
                            layers.GlobalAvgPool(), layers.Dense(4, 4, name="fc"), layers.Dense(4, 2), name="net")
        return layers.seeded(body, seed)
""")


def build(seed: int) -> amanda.Container:
    namespace: dict = {}
    exec(compile(BUILD, "build", "exec"), namespace)  # noqa: S102 - our own test source
    return namespace["build"](seed)


def weights(model: amanda.Container) -> dict[tuple, tuple[str, np.ndarray]]:
    return {path: (node.uid, np.asarray(node.attrs["value"])) for path, node, _ in amanda.walk(model)
            if node.is_op and isinstance(node.attrs.get("value"), np.ndarray) and node.type != "Constant"
            or node.is_op and path[-1] in ("kernel", "bias", "scale", "moving_mean", "moving_var")}


def test_the_same_code_and_seed_build_the_same_weights_and_uids() -> None:
    """Two builds with one seed agree on every weight and uid; another seed draws other weights."""
    a, b, c = build(5), build(5), build(6)
    wa, wb, wc = weights(a), weights(b), weights(c)
    assert wa.keys() == wb.keys() and len(wa) == 10
    for path, (uid, value) in wa.items():
        assert uid == f"5:{'/'.join(path)}" and wb[path][0] == uid
        np.testing.assert_array_equal(value, wb[path][1])
    assert not np.array_equal(wa[("fc", "kernel")][1], wc[("fc", "kernel")][1])


def test_two_layers_of_one_default_name_get_their_own_weights_once_seeded() -> None:
    """Chained layers renamed dense, dense_1 get different uids and draws from seeded."""
    net = layers.seeded(layers.Dense(4, 4) >> layers.Dense(4, 4), 0)
    first, second = (c.child("kernel") for c in net.children)
    assert first.uid != second.uid and not np.array_equal(first.attrs["value"], second.attrs["value"])


def test_seeded_keeps_weights_already_keyed_and_shared_ones_shared() -> None:
    """seeded returns the model itself when every weight already has its key, and a layer used
    twice keeps one uid for its weights."""
    net = build(1)
    assert layers.seeded(net, 1) is net
    dense = layers.Dense(3, 3)
    x = amanda.Input("x", "float32", (1, 3))
    twice = layers.seeded(amanda.model([x], {"y": dense(dense(x))}, name="twice"), 0)
    uids = {c.child("kernel").uid for c in twice.children}
    assert len(uids) == 1


def test_seeded_rejects_a_bad_seed() -> None:
    """A negative or non-int seed raises ArgumentError."""
    with pytest.raises(amanda.ArgumentError, match="seed"):
        layers.seeded(layers.Dense(2, 2), -1)
    with pytest.raises(amanda.ArgumentError, match="seed"):
        layers.seeded(layers.Dense(2, 2), 1.5)  # type: ignore[arg-type]


def test_weights_saved_here_pair_by_uid_in_a_new_process(tmp_path: Path) -> None:
    """A model built again from the same code in another process loads saved weights by uid
    (and by path), with nothing unmatched or missing, and computes what the trained one did."""
    trained = amanda.replace(build(3), [("fc", "kernel")], lambda op: op.with_attrs(value=np.full((4, 4), 0.5, np.float32)))
    file = tmp_path / "w.npz"
    amanda.save_weights(trained, file)
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    with amanda.Session(trained) as session:
        want = session.run(["y"], {"x": x}, phase="inference")[0]
    np.save(tmp_path / "want.npy", want)
    script = BUILD + textwrap.dedent(f"""
        import numpy as np
        for by in ("uid", "path"):
            loaded = amanda.load_weights(build(3), {str(file)!r}, by=by)
            assert loaded.unmatched == () and loaded.missing == () and loaded.mismatched == (), loaded
            with amanda.Session(loaded.container) as session:
                got = session.run(["y"], {{"x": np.load({str(tmp_path / "x.npy")!r})}}, phase="inference")[0]
            np.testing.assert_allclose(got, np.load({str(tmp_path / "want.npy")!r}), rtol=1e-6)
        print("paired")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "paired"


def test_seeded_keeps_a_tie_and_a_layer_rejects_a_bad_seed() -> None:
    """A tie made by layers.tie stays one weight (one uid, one value) through seeded; a layer's
    own seed must be None or a non-negative int; layers built apart draw apart, one seed draws alike."""
    tied = layers.seeded(layers.tie(layers.Dense(3, 3) >> layers.Dense(3, 3), "dense/kernel", "dense_1/kernel"), 4)
    a, b = (tied.child(n).child("kernel") for n in ("dense", "dense_1"))
    assert a.uid == b.uid == "4:dense/kernel" and np.array_equal(a.attrs["value"], b.attrs["value"])
    with pytest.raises(amanda.ArgumentError, match="Dense/seed"):
        layers.Dense(2, 2, seed=-1)
    with pytest.raises(amanda.ArgumentError, match="BatchNorm/seed"):
        layers.BatchNorm(2, seed="0")  # type: ignore[arg-type]
    apart = [layers.Dense(3, 3).child("kernel") for _ in range(2)]
    assert apart[0].uid != apart[1].uid and not np.array_equal(apart[0].attrs["value"], apart[1].attrs["value"])
    alike = [layers.Dense(3, 3, seed=5).child("kernel") for _ in range(2)]
    assert alike[0].uid != alike[1].uid and np.array_equal(alike[0].attrs["value"], alike[1].attrs["value"])
