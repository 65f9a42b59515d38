"""Checkpoints: weights, Adam's moments and step count, BatchNorm's statistics, the shuffle
generator and the position; stopping after 10 steps and resuming in a new process gives the
uninterrupted run's losses bit for bit; an edited model gets what still exists and a report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import amanda
from amanda.optim import Adam, Checkpoint, fit, load_checkpoint, restore, save_checkpoint, snapshot

NETWORK = '''
import numpy as np
import amanda
from amanda import Input, layers, model, ops

RNG = np.random.default_rng(0)
X = RNG.standard_normal((44, 4)).astype(np.float32)
Y = ((X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0)).astype(np.int64)


def network(edited=False):
    x, labels = Input("x", "float32", ("batch", 4)), Input("labels", "int64", ("batch",))
    h = layers.BatchNorm(8, name="bn")(layers.Dense(4, 8, activation="tanh", name="hidden")(x))
    if edited:  # `mid` replaced by a wider `mid2`, and a skip connection around it
        m = layers.Dense(16, 8, name="back")(layers.Dense(8, 16, activation="tanh", name="mid2")(h))
        m = ops.Add(m, h, name="skip")
    else:
        m = layers.Dense(8, 8, activation="tanh", name="mid")(h)
    logits = layers.Dense(8, 3, name="fc")(m)
    net = model([x, labels], {"loss": ops.SoftmaxCrossEntropyLoss(logits, labels)[0], "logits": logits}, name="net")
    return layers.seeded(net, seed=0)
'''

SCRIPT = NETWORK + '''
import json, sys
from amanda.optim import Adam, Checkpoint, LambdaCallback, fit

mode, path = sys.argv[1], sys.argv[2]
callbacks = []
if mode == "stop":
    def halt(loop, logs):
        loop.stop = loop.step == 10
    callbacks = [Checkpoint(path, every=10), LambdaCallback(on_batch_end=halt)]
h = fit(network(), X, Y, optimizer=Adam(lr=0.02), epochs=3, batch_size=8, seed=5, validation_split=0.2,
        metrics=["accuracy"], callbacks=callbacks, resume=path if mode == "resume" else None, verbose=False)
w = h.model().descendant(("hidden", "kernel")).attrs["value"]
print(json.dumps({"steps": [repr(s) for s in h.steps], "history": {k: [repr(v) for v in vs] for k, vs in
                  h.history.items()}, "weight": w.tobytes().hex()}))
'''

space: dict = {}
exec(NETWORK, space)  # the same network the subprocesses build
network, X, Y = space["network"], space["X"], space["Y"]


def run(tmp_path: Path, mode: str) -> dict:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    root = str(Path(amanda.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root, "AMANDA_PROGRESS": "0"}
    done = subprocess.run([sys.executable, str(script), mode, str(tmp_path / "ckpt.npz")], capture_output=True,
                          text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_resuming_in_a_new_process_is_bit_identical(tmp_path):
    whole = run(tmp_path, "full")
    stopped = run(tmp_path, "stop")
    resumed = run(tmp_path, "resume")
    assert len(whole["steps"]) == 15 and stopped["steps"] == whole["steps"][:10]
    assert resumed["steps"] == whole["steps"]
    assert resumed["history"] == whole["history"] and resumed["weight"] == whole["weight"]
    assert stopped["weight"] != whole["weight"]


def test_a_checkpoint_holds_weights_moments_step_statistics_and_position(tmp_path):
    path = tmp_path / "c.npz"
    history = fit(network(), X, Y, optimizer=Adam(lr=0.02), epochs=2, batch_size=8, seed=5,
                  callbacks=[Checkpoint(path)], verbose=False)
    entries, meta = load_checkpoint(path)
    by_path = {"/".join(p): e for e in entries for p in e.paths}
    names = {p.split("/")[-1] for p in by_path}
    assert {"variable", "m", "v", "step", "moving_mean", "moving_var"} <= {n.split("/")[-1] for n in names}
    step = next(e for p, e in by_path.items() if p.endswith("/step"))
    assert step.value == 12  # 2 epochs of 6 batches: Adam's step count
    state = history.state
    for entry in entries:  # every variable's value is the session's at the end
        np.testing.assert_array_equal(entry.value, state[entry.key])
    assert any(p.endswith("bn/moving_mean") for p in by_path)
    assert meta["epoch"] == 2 and meta["batch"] == 0 and meta["step"] == 12
    assert meta["rng"]["bit_generator"] == "PCG64"
    assert meta["history"] == {k: list(v) for k, v in history.history.items()}
    with np.load(path, allow_pickle=False) as archive:  # no pickled member anywhere
        assert all(archive[k].dtype != object for k in archive.files)


def test_resuming_into_an_edited_model_restores_what_exists_and_reports_the_rest(tmp_path):
    path = tmp_path / "c.npz"
    fit(network(), X, Y, optimizer=Adam(lr=0.02), epochs=1, batch_size=8, callbacks=[Checkpoint(path)],
        verbose=False)
    entries, _ = load_checkpoint(path)
    with pytest.warns(UserWarning, match="not in the model.*mid"):
        history = fit(network(edited=True), X, Y, optimizer=Adam(lr=0.02), epochs=1, batch_size=8,
                      resume=path, verbose=False)
    report = history.resumed
    assert any("mid/" in u for u in report.unmatched) and not any("mid2" in u for u in report.unmatched)
    assert any("mid2/" in m for m in report.missing) and any("back/" in m for m in report.missing)
    assert not any("hidden/" in m or "/fc/" in m for m in report.missing)
    saved = {e.paths[0][-3:]: e.value for e in entries}
    frozen = history.model()  # the checkpoint was written after the one epoch asked for: no step runs
    assert history.epoch == [0] and len(history.steps) == 6
    np.testing.assert_array_equal(frozen.descendant(("hidden", "kernel")).attrs["value"],
                                  saved[("hidden", "kernel", "variable")])
    np.testing.assert_array_equal(frozen.descendant(("bn", "moving_mean")).attrs["value"],
                                  next(e.value for e in entries if e.paths[0][-2:] == ("bn", "moving_mean")))
    with pytest.warns(UserWarning, match="not in the checkpoint.*mid2"):
        more = fit(network(edited=True), X, Y, optimizer=Adam(lr=0.02), epochs=2, batch_size=8, resume=path,
                   verbose=False)
    assert more.epoch == [0, 1] and len(more.steps) == 12 and np.isfinite(more.steps).all()


def test_restore_pairs_by_path_and_reports_mismatches():
    trainer = amanda.optim.minimize(network(), "loss", Adam())
    entries = snapshot(trainer)
    changed = [e._replace(key="elsewhere", value=np.ones_like(e.value)) if e.paths[0][-1].endswith("/m") else e
               for e in entries]
    got = restore(amanda.optim.minimize(network(), "loss", Adam()), changed)
    assert not got.unmatched and not got.missing and not got.mismatched
    moments = [node.attrs["value"] for path, node, _ in amanda.walk(got.container) if path and path[-1].endswith("/m")]
    assert moments and all((m == 1).all() for m in moments)
    wrong = [e._replace(value=np.zeros((2, 2), np.float64)) if e.paths[0][-1] == "step" else e for e in entries]
    assert any("step" in m for m in restore(trainer, wrong).mismatched)


def test_bad_checkpoints_are_format_errors(tmp_path):
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(amanda.FormatError, match="junk.npz"):
        load_checkpoint(junk)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, __amanda_checkpoint__=np.array([{"a": 1}], dtype=object))
    with pytest.raises(amanda.FormatError):
        load_checkpoint(pickled)
    with pytest.raises(amanda.FormatError):
        fit(network(), X, Y, optimizer=Adam(), resume=tmp_path / "absent.npz", verbose=False)
    with pytest.raises(amanda.ArgumentError, match="meta"):
        save_checkpoint(tmp_path / "x.npz", network(), meta={"bad": object()})


def test_wrong_types_name_the_argument(tmp_path):
    """Wrong-typed arguments are ArgumentErrors at their names: entries that are not a list of
    entries, a state that is an array, meta that is no mapping, a path that is no path."""
    trainer = amanda.optim.minimize(network(), "loss", Adam())
    entries = snapshot(trainer)
    cases = [(lambda: restore(trainer, "entries"), "entries"),
             (lambda: restore(trainer, [*entries, ("k", (), np.zeros(1))]), f"entries/{len(entries)}"),
             (lambda: restore("model", entries), "model"),
             (lambda: snapshot(trainer, np.zeros((2, 2))), "state"),
             (lambda: save_checkpoint(tmp_path / "c.npz", trainer, meta=[1]), "meta"),
             (lambda: load_checkpoint(3), "path"),
             (lambda: Checkpoint(3), "Checkpoint/path"),
             (lambda: Checkpoint(tmp_path / "c.npz", every=0), "Checkpoint/every")]
    for call, where in cases:
        with pytest.raises(amanda.ArgumentError) as info:
            call()
        assert amanda.errors.format_path(info.value.path) == where and info.value.found, where


def test_a_checkpoint_whose_meta_nests_too_deep_is_a_format_error(tmp_path):
    """The meta document is read by the one plain-data loader, under its depth guard: JSON
    nested 5,000 levels (json.loads raised RecursionError) is a FormatError naming the file."""
    deep = tmp_path / "deep.npz"
    np.savez(deep, __amanda_checkpoint__=np.array("[" * 5000 + "]" * 5000))
    with pytest.raises(amanda.FormatError, match="deep.npz"):
        load_checkpoint(deep)
