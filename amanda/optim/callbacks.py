"""Callbacks of :func:`amanda.optim.fit` and the :class:`History` it returns.

A callback's hooks get the running loop (``loop``: its ``epoch``, ``batch``, ``history``,
``session``, ``trainer``, ``lr``; ``loop.stop = True`` ends training after the current batch;
``loop.save(path)`` writes a checkpoint) and the logs (``{"loss": ..., "<metric>": ...,
"val_loss": ...}``). Names usable in place of a callback: ``"early_stopping"``,
``"terminate_on_nan"``. A callback that counts across epochs (``EarlyStopping``) gives its
``checkpoint_state()`` to checkpoints and takes it back with ``load_checkpoint_state`` when a
run resumes.

>>> EarlyStopping(monitor="val_loss", patience=2)
EarlyStopping(monitor='val_loss', patience=2, min_delta=0.0, mode='min')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from amanda.containers.arguments import expect_file, expect_int, expect_number, expect_str, shown
from amanda.errors import ArgumentError, suggest

__all__ = ["CALLBACKS", "Callback", "CallbackStates", "Checkpoint", "EarlyStopping", "History", "LambdaCallback",
           "LearningRateScheduler", "TerminateOnNaN", "callback_states", "load_callback_states", "resolve"]


class Callback:
    """Hooks called by ``fit``; each does nothing unless overridden."""

    def on_train_begin(self, loop: Any) -> None:
        """Before the first epoch (after a checkpoint was resumed)."""

    def on_epoch_begin(self, loop: Any) -> None:
        """Before an epoch's first batch (``loop.epoch`` is its index)."""

    def on_batch_end(self, loop: Any, logs: Mapping[str, float]) -> None:
        """After each training step (``logs``: that batch's loss and metrics)."""

    def on_epoch_end(self, loop: Any, logs: Mapping[str, float]) -> None:
        """After an epoch and its validation (``logs``: the epoch's means)."""

    def on_train_end(self, loop: Any) -> None:
        """After the last epoch, or after a callback stopped training."""

    def checkpoint_state(self) -> dict[str, Any] | None:
        """What a checkpoint keeps of this callback (JSON values), None for nothing: a callback
        that counts or remembers across epochs returns it, so a resumed run goes on counting."""
        return None

    def load_checkpoint_state(self, state: Mapping[str, Any]) -> None:
        """Take back what :meth:`checkpoint_state` gave (``fit(..., resume=)`` calls it after
        ``on_train_begin``)."""


def callback_states(callbacks: Sequence[Callback]) -> dict[str, dict[str, Any]]:
    """The state of each callback that has one, keyed ``<class name>`` (``<class name>#<n>``
    for the n-th further callback of one class), as checkpoints record it.

    >>> early = EarlyStopping("loss")
    >>> early.best, early.wait = 0.5, 1
    >>> callback_states([early, TerminateOnNaN()])
    {'EarlyStopping': {'best': 0.5, 'wait': 1, 'stopped_epoch': None}}
    """
    found = {}
    for key, callback in zip(_keys(callbacks), callbacks):
        state = callback.checkpoint_state()
        if state is not None:
            found[key] = dict(state)
    return found


def _keys(callbacks: Sequence[Callback]) -> list[str]:
    """``<class name>``, then ``<class name>#1``, ``#2`` ... for more of one class."""
    keys, seen = [], {}  # type: ignore[var-annotated]
    for callback in callbacks:
        kind = type(callback).__name__
        count = seen[kind] = seen.get(kind, -1) + 1
        keys.append(kind if not count else f"{kind}#{count}")
    return keys


class CallbackStates(NamedTuple):
    """What resuming did with the checkpoint's callback states (keys as
    :func:`callback_states` makes them): ``restored``; ``unmatched``, saved with no such callback
    now; ``missing``, callbacks with state the checkpoint has nothing for."""

    restored: tuple[str, ...]
    unmatched: tuple[str, ...]
    missing: tuple[str, ...]


def load_callback_states(callbacks: Sequence[Callback], saved: Mapping[str, Any]) -> CallbackStates:
    """Give each callback its state from ``saved`` (a checkpoint's ``callbacks``); the report.

    >>> early = EarlyStopping("loss")
    >>> load_callback_states([early], {"EarlyStopping": {"best": 0.5, "wait": 1, "stopped_epoch": None},
    ...                                "Mine": {}})
    CallbackStates(restored=('EarlyStopping',), unmatched=('Mine',), missing=())
    >>> early.best, early.wait
    (0.5, 1)
    """
    restored, missing = [], []
    for key, callback in zip(_keys(callbacks), callbacks):
        if key in saved:
            callback.load_checkpoint_state(saved[key])
            restored.append(key)
        elif callback.checkpoint_state() is not None:
            missing.append(key)
    unmatched = sorted(k for k in saved if k not in restored)
    return CallbackStates(tuple(restored), tuple(unmatched), tuple(missing))


class History(Callback):
    """What ``fit`` returns: ``history`` (each log name -> one value per epoch), ``epoch`` (the
    epochs' indices), ``steps`` (the loss of every training step), ``stopped_epoch``,
    ``trainer`` and ``state`` (its session variables at the end), ``resumed`` (the
    :class:`~amanda.optim.checkpoint.Restored` report of a resumed checkpoint, else None),
    ``resumed_callbacks`` (the :class:`CallbackStates` report of its callbacks' states, else
    None), and :meth:`model`: the trained model for inference."""

    def __init__(self) -> None:
        self.history: dict[str, list[float]] = {}
        self.epoch: list[int] = []
        self.steps: list[float] = []
        self.stopped_epoch: int | None = None
        self.trainer: Any = None
        self.state: dict[str, Any] = {}
        self.resumed: Any = None
        self.resumed_callbacks: CallbackStates | None = None
        self.steps_run = 0  # steps this fit call ran (steps may hold a resumed run's earlier ones)

    def on_batch_end(self, loop: Any, logs: Mapping[str, float]) -> None:
        self.steps.append(float(logs["loss"]))
        self.steps_run += 1

    def on_epoch_end(self, loop: Any, logs: Mapping[str, float]) -> None:
        self.epoch.append(loop.epoch)
        for key, value in logs.items():
            self.history.setdefault(key, []).append(float(value))

    def model(self, phase: str = "inference") -> Any:
        """The trained model: :func:`amanda.optim.freeze` of the trainer with the final state
        (with no step run, as when resuming a finished run, the trainer's own initial values,
        which a resume set to the checkpoint's)."""
        from amanda.optim.variables import freeze

        return freeze(self.trainer, self.state if self.steps_run else None, phase)

    def __repr__(self) -> str:
        return f"History(epochs={len(self.epoch)}, {sorted(self.history)})"


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved by more than ``min_delta`` for ``patience``
    epochs in a row (Keras's rule): after epoch ``e`` with no improvement since epoch
    ``b``, training stops when ``e - b >= patience``. ``mode``: "min", "max" or "auto" (max for
    names holding "acc", else min)."""

    def __init__(self, monitor: str = "val_loss", patience: int = 0, min_delta: float = 0.0, mode: str = "auto") -> None:
        expect_str(monitor, ("EarlyStopping", "monitor"), "a log name such as 'val_loss'")
        patience = expect_int(patience, ("EarlyStopping", "patience"))
        min_delta = abs(expect_number(min_delta, ("EarlyStopping", "min_delta"), -math.inf))
        if type(mode) is not str or mode not in ("auto", "min", "max"):
            raise ArgumentError.at(("EarlyStopping", "mode"), "'auto', 'min' or 'max'", shown(mode),
                                   suggest(mode, ["auto", "min", "max"]) if type(mode) is str else "")
        self.monitor, self.patience, self.min_delta = monitor, patience, min_delta
        self.mode = mode if mode != "auto" else ("max" if "acc" in monitor else "min")
        self.best: float | None = None
        self.wait = 0
        self.stopped_epoch: int | None = None

    def on_train_begin(self, loop: Any) -> None:
        self.best, self.wait, self.stopped_epoch = None, 0, None

    def checkpoint_state(self) -> dict[str, Any]:
        """The best value so far, the epochs waited since, the epoch it stopped at."""
        return {"best": self.best, "wait": self.wait, "stopped_epoch": self.stopped_epoch}

    def load_checkpoint_state(self, state: Mapping[str, Any]) -> None:
        best, wait, stopped = state.get("best"), state.get("wait", 0), state.get("stopped_epoch")
        if (best is not None and not isinstance(best, (int, float))) or not isinstance(wait, int) or (
                stopped is not None and not isinstance(stopped, int)):
            raise ArgumentError.at(("EarlyStopping", "state"), "best (a number or None), wait and stopped_epoch (ints)",
                                   shown(dict(state)))
        self.best, self.wait, self.stopped_epoch = None if best is None else float(best), wait, stopped

    def on_epoch_end(self, loop: Any, logs: Mapping[str, float]) -> None:
        if self.monitor not in logs:
            raise ArgumentError.at(("EarlyStopping", "monitor"), f"one of the logs {sorted(logs)}", repr(self.monitor),
                                   suggest(self.monitor, logs))
        value = float(logs[self.monitor])
        sign = 1.0 if self.mode == "min" else -1.0
        if self.best is None or sign * (self.best - value) > self.min_delta:
            self.best, self.wait = value, 0
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_epoch = loop.epoch
            loop.stop = True

    def __repr__(self) -> str:
        return (f"EarlyStopping(monitor={self.monitor!r}, patience={self.patience}, min_delta={self.min_delta}, "
                f"mode={self.mode!r})")


class TerminateOnNaN(Callback):
    """Stop as soon as a batch's loss is NaN or infinite."""

    def on_batch_end(self, loop: Any, logs: Mapping[str, float]) -> None:
        if not math.isfinite(float(logs["loss"])):
            loop.stop = True


class Checkpoint(Callback):
    """Write a checkpoint (:func:`amanda.optim.save_checkpoint`, with the loop's position) to
    ``path`` after every epoch, and also every ``every`` training steps when given; ``path``
    may hold ``{epoch}`` and ``{step}``. ``fit(..., resume=path)`` continues from it."""

    def __init__(self, path: Any, every: int | None = None) -> None:
        expect_file(path, ("Checkpoint", "path"))
        if every is not None:
            every = expect_int(every, ("Checkpoint", "every"), minimum=1)
        self.path, self.every = path, every
        self.written: list[str] = []

    def _write(self, loop: Any) -> None:
        target = str(self.path).format(epoch=loop.epoch, step=loop.step)
        loop.save(target)
        self.written.append(target)

    def on_batch_end(self, loop: Any, logs: Mapping[str, float]) -> None:
        if self.every and loop.step % self.every == 0:
            self._write(loop)

    def on_epoch_end(self, loop: Any, logs: Mapping[str, float]) -> None:
        self._write(loop)


class LearningRateScheduler(Callback):
    """Set the learning rate to ``schedule(epoch, lr)`` before each epoch. The rate is an
    attribute of the optimiser's ops, so a new rate rebuilds the training container (the
    model and its optimiser given to ``fit``) and carries every variable over by key and path;
    the new rate is in ``loop.lr`` and the logs' ``lr``."""

    def __init__(self, schedule: Callable[[int, float], float]) -> None:
        if not callable(schedule):
            raise ArgumentError.at(("LearningRateScheduler", "schedule"), "a function (epoch, lr) -> lr",
                                   type(schedule).__name__)
        self.schedule = schedule

    def on_epoch_begin(self, loop: Any) -> None:
        lr = self.schedule(loop.epoch, loop.lr)
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr >= 0:
            raise ArgumentError.at(("LearningRateScheduler", "schedule"), "a non-negative number", shown(lr))
        loop.set_lr(float(lr))


class LambdaCallback(Callback):
    """A callback of plain functions: ``on_epoch_end(loop, logs)``, ``on_batch_end(loop,
    logs)``, ``on_epoch_begin(loop)``, ``on_train_begin(loop)``, ``on_train_end(loop)``."""

    _HOOKS = ("on_train_begin", "on_epoch_begin", "on_batch_end", "on_epoch_end", "on_train_end")

    def __init__(self, **hooks: Callable[..., Any]) -> None:
        for name, fn in hooks.items():
            if name not in self._HOOKS:
                raise ArgumentError.at(("LambdaCallback", name), f"one of {list(self._HOOKS)}", repr(name),
                                       suggest(name, self._HOOKS))
            if not callable(fn):
                raise ArgumentError.at(("LambdaCallback", name), "a function", type(fn).__name__)
            setattr(self, name, fn)


CALLBACKS: dict[str, Callable[[], Callback]] = {"early_stopping": EarlyStopping, "terminate_on_nan": TerminateOnNaN}


def resolve(callbacks: Any) -> list[Callback]:
    """Each callback: a :class:`Callback` or a name of :data:`CALLBACKS`."""
    if callbacks is None:
        return []
    if isinstance(callbacks, (str, Callback)) or not isinstance(callbacks, Sequence):
        callbacks = [callbacks]
    out = []
    for i, item in enumerate(callbacks):
        if isinstance(item, str):
            if item not in CALLBACKS:
                raise ArgumentError.at(("callbacks", i), f"a Callback or one of {sorted(CALLBACKS)}", repr(item),
                                       suggest(item, CALLBACKS))
            out.append(CALLBACKS[item]())
        elif isinstance(item, Callback):
            out.append(item)
        else:
            raise ArgumentError.at(("callbacks", i), "a Callback (amanda.optim.callbacks)", type(item).__name__)
    return out
