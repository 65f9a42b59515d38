"""Callbacks' state in checkpoints: an EarlyStopping resumed mid-run goes on counting and stops
where the uninterrupted run stopped; states saved for callbacks no longer given, and callbacks
the checkpoint has no state for, are reported."""

from __future__ import annotations

import pytest

from amanda.errors import ArgumentError
from amanda.optim import Adam, Checkpoint, EarlyStopping, fit, load_checkpoint
from amanda.optim.callbacks import TerminateOnNaN, callback_states, load_callback_states
from tests.optim.test_checkpoint import X, Y, network


def train(epochs: int, callbacks: list, resume=None):
    return fit(network(), X, Y, optimizer=Adam(lr=0.02), epochs=epochs, batch_size=8, callbacks=callbacks,
               resume=resume, verbose=False)


def stopper() -> EarlyStopping:
    """Never improves after the first epoch (the loss must fall by 10): stops after epoch 2."""
    return EarlyStopping("loss", patience=2, min_delta=10.0)


def test_early_stopping_resumes_its_count(tmp_path) -> None:
    """Stopped after epoch 1 and resumed for 10 epochs, the run stops after epoch 2 as the
    uninterrupted one does (a fresh count would run to epoch 4); the checkpoint, written by a
    Checkpoint given before the EarlyStopping, holds the state after epoch 1's count."""
    whole = train(10, [stopper()])
    assert whole.epoch == [0, 1, 2] and whole.stopped_epoch == 2
    path = tmp_path / "c.npz"
    train(2, [Checkpoint(path), stopper()])
    _, meta = load_checkpoint(path)
    state = meta["callbacks"]["EarlyStopping"]
    assert state["wait"] == 1 and state["best"] == pytest.approx(whole.history["loss"][0])
    early = stopper()
    resumed = train(10, [early, Checkpoint(tmp_path / "d.npz")], resume=path)
    assert resumed.epoch == [0, 1, 2] and resumed.stopped_epoch == 2 and early.stopped_epoch == 2
    assert resumed.steps == whole.steps
    assert resumed.resumed_callbacks.restored == ("EarlyStopping",)


def test_unpaired_callback_states_are_reported(tmp_path) -> None:
    """A checkpoint with an EarlyStopping's state, resumed without one (and with two of them):
    a warning and ``history.resumed_callbacks`` name what did not pair up."""
    path = tmp_path / "c.npz"
    train(1, [stopper(), Checkpoint(path)])
    with pytest.warns(UserWarning, match="EarlyStopping"):
        plain = train(2, [], resume=path)
    assert plain.resumed_callbacks.unmatched == ("EarlyStopping",) and not plain.resumed_callbacks.restored
    with pytest.warns(UserWarning, match="EarlyStopping#1"):
        two = train(2, [stopper(), EarlyStopping("loss")], resume=path)
    assert two.resumed_callbacks.restored == ("EarlyStopping",)
    assert two.resumed_callbacks.missing == ("EarlyStopping#1",)


def test_callback_states_are_keyed_by_class_and_checked_when_loaded() -> None:
    a, b = EarlyStopping("loss"), EarlyStopping("val_loss")
    a.best, b.wait = 1.5, 3
    states = callback_states([a, TerminateOnNaN(), b])
    assert states == {"EarlyStopping": {"best": 1.5, "wait": 0, "stopped_epoch": None},
                      "EarlyStopping#1": {"best": None, "wait": 3, "stopped_epoch": None}}
    c, d = EarlyStopping("loss"), EarlyStopping("val_loss")
    report = load_callback_states([c, d], states)
    assert (c.best, c.wait, d.best, d.wait) == (1.5, 0, None, 3) and not report.unmatched
    with pytest.raises(ArgumentError) as info:
        EarlyStopping("loss").load_checkpoint_state({"best": "low", "wait": 0})
    assert info.value.path == ("EarlyStopping", "state")
