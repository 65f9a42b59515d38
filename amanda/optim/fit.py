"""``fit``, ``evaluate`` and ``predict``: the Keras-like loop over a training container
(docs/training.md).

Each epoch draws ``rng.permutation(rows)`` from ``numpy.random.default_rng(seed)`` (when
``shuffle``), cuts it into consecutive batches of ``batch_size`` rows (the last may be
shorter), and runs one ``session.run([loss, "train"], feeds, phase="train")`` per batch, so a
hand-written loop of the same calls gives the same losses bit for bit.

>>> import numpy as np, amanda
>>> from amanda import Input, layers, ops
>>> from amanda.optim import SGD
>>> x, y = Input("x", "float32", ("batch", 1)), Input("y", "float32", ("batch", 1))
>>> out = layers.Dense(1, 1, name="fc")(x)
>>> err = ops.Sub(out, y)
>>> net = layers.seeded(amanda.model([x, y], {"loss": ops.ReduceMean(ops.Mul(err, err), keepdims=0), "y_hat": out},
...                                  name="line"))
>>> data = np.linspace(-1, 1, 32, dtype=np.float32)[:, None]
>>> h = fit(net, data, 3 * data, optimizer=SGD(lr=0.3), epochs=30, batch_size=8, metrics=["mae"])
>>> h.history["loss"][-1] < 1e-3 < h.history["loss"][0]
True
>>> round(float(predict(h.model(), data[:1])[0, 0]), 2)
-3.0
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from amanda.containers import Container
from amanda.containers.arguments import expect_container, expect_flag, expect_int, expect_number, expect_str, expect_type, shown
from amanda.containers.phases import computations
from amanda.errors import ArgumentError, suggest
from amanda.exec import Session
from amanda.optim import callbacks as _callbacks
from amanda.optim import metrics as _metrics
from amanda.optim.checkpoint import load_checkpoint, restore, save_checkpoint, snapshot
from amanda.optim.clip import clip_gradients
from amanda.optim.data import batch_feeds, batches, feeds_of, rows, split
from amanda.optim.minimize import minimize
from amanda.optim.optimizers import Optimizer
from amanda.progress import progress

__all__ = ["evaluate", "fit", "predict"]

Metric = tuple[str, Callable[..., float]]

MAX_EPOCHS = 1_000_000  # epochs one fit may run: a larger count is a mistake, not a plan (it would never end)


def _checked(model: Any, session: Any, batch_size: Any, **names: Any) -> int:
    """Check the arguments ``fit``, ``evaluate`` and ``predict`` share: ``model`` a Container,
    ``session`` a Session or None, each of ``names`` (loss, output, target) a name or None;
    ``batch_size`` as an int."""
    expect_container(model, "model")
    if session is not None:
        expect_type(session, Session, "session", "a Session or None")
    for key, value in names.items():
        expect_str(value, key, "a port name", optional=True)
    return expect_int(batch_size, "batch_size", minimum=1)


def _output(model: Container, loss: str, output: str | None) -> str | None:
    names = model.output_names
    if output is not None:
        if output not in names:
            raise ArgumentError.at("output", f"an output of {model.name}: {list(names)}", repr(output),
                                   suggest(str(output), names))
        return output
    others = [n for n in names if n != loss]
    return others[0] if len(others) == 1 else None


def _phase(model: Container, wanted: str) -> str | None:
    return wanted if wanted in computations(model) else None


class _Stats:
    """Sums of batch values weighted by batch size: an epoch's (or an evaluation's) means."""

    def __init__(self, sums: Mapping[str, float] | None = None, count: int = 0) -> None:
        self.sums, self.count = dict(sums or {}), count

    def add(self, logs: Mapping[str, float], n: int) -> None:
        for key, value in logs.items():
            self.sums[key] = self.sums.get(key, 0.0) + value * n
        self.count += n

    def means(self, prefix: str = "") -> dict[str, float]:
        return {prefix + k: v / self.count for k, v in self.sums.items()}


class _Spec:
    """What one fit, evaluation or prediction fetches and how it scores a batch."""

    def __init__(self, model: Container, loss: str | None, output: str | None, target: str | None,
                 metrics: list[Metric]) -> None:
        self.model, self.loss, self.output, self.metrics = model, loss, output, metrics
        if loss is not None and loss not in model.output_names:
            raise ArgumentError.at("loss", f"an output of {model.name}: {list(model.output_names)}", repr(loss),
                                   suggest(str(loss), model.output_names))
        if target is None and len(model.input_names) > 1:
            target = model.input_names[1]
        self.target = target
        if metrics and (output is None or target is None):
            raise ArgumentError.at("metrics", "output= and target= (a model output and the labels' input) "
                                   "to compute metrics", f"output={output!r}, target={target!r}")

    def step(self, session: Session, feeds: Mapping[str, Any], phase: str | None, train: bool) -> dict[str, float]:
        """Run one batch; its loss (when the spec has one) and metrics."""
        fetches = ([self.loss] if self.loss else []) + (["train"] if train else [])
        if self.metrics:
            fetches.append(str(self.output))
        got = session.run(fetches, feeds, phase=phase)
        logs = {"loss": float(got[0])} if self.loss else {}
        for name, fn in self.metrics:
            logs[name] = float(fn(np.asarray(feeds[str(self.target)]), got[-1]))
        return logs


def _batch_list(spec: _Spec, data: Any, order: np.ndarray | None, size: int) -> Any:
    if isinstance(data, dict):
        return batches(data, order if order is not None else np.arange(rows(data)), size)
    return (batch_feeds(spec.model, item, "x") for item in data)


def _score(spec: _Spec, session: Session, data: Any, size: int, phase: str | None) -> dict[str, float]:
    stats = _Stats()
    for feeds in _batch_list(spec, data, None, size):
        stats.add(spec.step(session, feeds, phase, train=False), len(next(iter(feeds.values()))))
    if not stats.count:
        raise ArgumentError.at("x", "at least one batch to evaluate", "none")
    return stats.means()


class Loop:
    """The running fit, as callbacks see it: ``epoch``, ``batch`` (steps done in this epoch),
    ``step`` (steps done in all), ``stop``, ``lr``, ``history``, ``trainer``, ``session``."""

    def __init__(self, trainer: Container, rebuild: Callable[[float], Container] | None, lr: float | None,
                 seed: int) -> None:
        self.trainer, self.rebuild, self.lr = trainer, rebuild, lr
        self.session = Session(trainer)
        self.rng = np.random.default_rng(seed)
        self.epoch_rng: dict[str, Any] = dict(self.rng.bit_generator.state)
        self.epoch = self.batch = self.step = 0
        self.stop, self.epoch_done = False, False
        self.stats = _Stats()
        self.history = _callbacks.History()
        self.callbacks: list[_callbacks.Callback] = []  # whose states checkpoints keep
        self.saved_callbacks: dict[str, Any] | None = None  # a resumed checkpoint's, until restored

    def set_lr(self, lr: float) -> None:
        """Train with learning rate ``lr`` from the next step (rebuilds the training container,
        carrying its variables over)."""
        if lr == self.lr:
            return
        if self.rebuild is None:
            raise ArgumentError.at("callbacks", "fit(model, ..., optimizer=...) to change the learning rate",
                                   "a training container")
        entries = snapshot(self.trainer, self.session)
        self.session.close()
        self.trainer = restore(self.rebuild(lr), entries).container
        self.session, self.lr = Session(self.trainer), lr

    def position(self) -> dict[str, Any]:
        """Where the run is, as checkpoints record it (JSON)."""
        done = self.epoch_done
        h = self.history
        return {"epoch": self.epoch + 1 if done else self.epoch, "batch": 0 if done else self.batch,
                "step": self.step, "rng": self.rng.bit_generator.state if done else self.epoch_rng,
                "sums": {} if done else self.stats.sums, "count": 0 if done else self.stats.count, "lr": self.lr,
                "history": h.history, "epochs": h.epoch, "steps": h.steps,
                "callbacks": _callbacks.callback_states(self.callbacks)}

    def save(self, path: Any) -> list[str]:
        """Write a checkpoint of the variables and the position to ``path``."""
        return save_checkpoint(path, self.trainer, self.session, self.position())

    def resume(self, path: Any) -> None:
        """Restore the variables and position of the checkpoint at ``path``."""
        entries, meta = load_checkpoint(path)
        report = restore(self.trainer, entries)
        if report.summary():
            warnings.warn(f"checkpoint {path}: restored {len(report.restored)} variables; {report.summary()}",
                          stacklevel=3)
        self.session.close()
        self.trainer, self.history.resumed = report.container, report
        self.session = Session(self.trainer)
        self.rng.bit_generator.state = meta["rng"]
        self.epoch, self.batch, self.step = int(meta["epoch"]), int(meta["batch"]), int(meta["step"])
        self.stats = _Stats(meta["sums"], int(meta["count"]))
        h = self.history
        h.history, h.epoch, h.steps = meta["history"], meta["epochs"], meta["steps"]
        if meta.get("lr") is not None and self.lr is not None:
            self.set_lr(float(meta["lr"]))
        self.saved_callbacks = dict(meta.get("callbacks") or {})

    def resume_callbacks(self, path: Any) -> None:
        """Give the callbacks their states from the resumed checkpoint (after their
        ``on_train_begin``, which resets them); warn about states that did not pair up."""
        if self.saved_callbacks is None:
            return
        report = _callbacks.load_callback_states(self.callbacks, self.saved_callbacks)
        self.history.resumed_callbacks, self.saved_callbacks = report, None
        if report.unmatched or report.missing:
            warnings.warn(f"checkpoint {path}: callback states restored: {list(report.restored)}; saved for no "
                          f"callback now: {list(report.unmatched)}; not in the checkpoint: {list(report.missing)}",
                          stacklevel=4)


def _trainer(model: Container, optimizer: Any, loss: str, clip: tuple[Any, Any], weights: Any,
             ) -> tuple[Container, Any, Any]:
    """The training container, a function rebuilding it at another rate (or None), the rate."""
    if not isinstance(model, Container):
        raise ArgumentError.at("model", "a model (Container) or a training container", type(model).__name__)
    if model.type == "Training":
        if optimizer is not None:
            raise ArgumentError.at("optimizer", "None: the training container has its optimiser", shown(optimizer))
        return clip_gradients(model, *clip), None, None
    if not isinstance(optimizer, Optimizer):
        raise ArgumentError.at("optimizer", "an optimiser such as amanda.optim.Adam(lr=1e-3)", type(optimizer).__name__)

    def build(lr: float) -> Container:
        with_lr = getattr(optimizer, "with_lr", None)  # a Scheduled optimiser: its base rate
        rated = with_lr(lr) if with_lr else dataclasses.replace(optimizer, lr=lr)  # type: ignore[type-var]
        return clip_gradients(minimize(model, loss, rated, weights), *clip)

    lr = float(getattr(optimizer, "lr", 0.0))
    return build(lr), build, lr


def _epoch(loop: Loop, spec: _Spec, data: Any, size: int, shuffle: bool, hooks: list[Any], bar: Any) -> bool:
    """Train one epoch from ``loop.batch`` on; whether it ran to its end."""
    loop.epoch_rng = dict(loop.rng.bit_generator.state)
    order = None
    if isinstance(data, dict):
        order = loop.rng.permutation(rows(data)) if shuffle else np.arange(rows(data))
    skip, loop.batch = loop.batch, 0
    for feeds in _batch_list(spec, data, order, size):
        loop.batch += 1
        if loop.batch <= skip:
            continue
        logs = spec.step(loop.session, feeds, "train", train=True)
        loop.stats.add(logs, len(next(iter(feeds.values()))))
        loop.step += 1
        bar.update()
        bar.set_postfix_str(f"epoch {loop.epoch} " + " ".join(f"{k} {v:.4g}" for k, v in loop.stats.means().items()))
        for hook in hooks:
            hook.on_batch_end(loop, logs)
        if loop.stop:
            return False
    if not loop.stats.count:
        raise ArgumentError.at("x", "at least one batch each epoch (a list of batches, not a used-up generator)",
                               f"none in epoch {loop.epoch}")
    return True


def fit(model: Container, x: Any, y: Any = None, *, optimizer: Optimizer | None = None, loss: str = "loss",
        output: str | None = None, target: str | None = None, epochs: int = 1, batch_size: int = 32,
        shuffle: bool = True, seed: int = 0, validation_data: Any = None, validation_split: float = 0.0,
        metrics: Any = None, callbacks: Any = None, clip_value: float | None = None, clip_norm: float | None = None,
        weights: Any = None, resume: Any = None, verbose: bool = True) -> _callbacks.History:
    """Train ``model`` with ``optimizer`` (or a training container from
    :func:`~amanda.optim.minimize`) on ``x``/``y`` for ``epochs`` epochs; its History.

    ``validation_data`` (``(x, y)`` or feeds) or ``validation_split`` (the last fraction of
    the rows) are scored after each epoch in the ``inference`` phase; ``metrics`` compare the
    ``output`` (default: the only output besides ``loss``) with the ``target`` input (default:
    the second input); ``weights`` chooses what to train (as for ``minimize``); ``resume`` is a
    checkpoint to continue from (its variables, position and callbacks' states; ``Checkpoint``
    callbacks run after the others, so they save this epoch's states); ``verbose`` shows a progress bar (only on a terminal, see
    :mod:`amanda.progress`). ``epochs`` is at most :data:`MAX_EPOCHS`."""
    batch_size = _checked(model, None, batch_size, loss=loss, output=output, target=target)
    expect_str(loss, "loss", "a port name")
    epochs, seed = expect_int(epochs, "epochs", minimum=1), expect_int(seed, "seed")
    if epochs > MAX_EPOCHS:
        raise ArgumentError.at("epochs", f"an int in [1, {MAX_EPOCHS}]", shown(epochs))
    expect_flag(shuffle, "shuffle")
    expect_flag(verbose, "verbose")
    validation_split = expect_number(validation_split, "validation_split", 0.0, 1.0)
    trainer, rebuild, lr = _trainer(model, optimizer, loss, (clip_value, clip_norm), weights)
    spec = _Spec(trainer, loss, _output(trainer, loss, output), target, _metrics.resolve(metrics))
    data = feeds_of(trainer, x, y)
    held = None
    if validation_data is not None:
        pair = isinstance(validation_data, tuple) and len(validation_data) == 2
        vx, vy = validation_data if pair else (validation_data, None)
        held = feeds_of(trainer, vx, vy, where="validation_data")
    if validation_split:
        if held is not None or not isinstance(data, dict):
            raise ArgumentError.at("validation_split", "0 with validation_data or an iterable x", repr(validation_split))
        data, held = split(data, validation_split)
    hooks = _callbacks.resolve(callbacks)
    hooks.sort(key=lambda hook: isinstance(hook, _callbacks.Checkpoint))  # they save the others' epoch-end state
    loop = Loop(trainer, rebuild, lr, int(seed))
    hooks.insert(0, loop.history)
    loop.callbacks = hooks
    if resume is not None:
        loop.resume(resume)
    total = epochs * -(-rows(data) // batch_size) if isinstance(data, dict) else None
    try:
        with progress(total, "fit", quiet=not verbose, delay=0.0) as bar:
            bar.update(loop.step)
            _run(loop, spec, data, held, epochs, batch_size, shuffle, hooks, bar, resume)
    finally:
        loop.history.trainer, loop.history.state = loop.trainer, dict(loop.session.state)
        loop.session.close()
    return loop.history


def _run(loop: Loop, spec: _Spec, data: Any, held: Any, epochs: int, size: int, shuffle: bool,
         hooks: list[Any], bar: Any, resumed: Any) -> None:
    for hook in hooks:
        hook.on_train_begin(loop)
    loop.resume_callbacks(resumed)
    while loop.epoch < epochs and not loop.stop:
        loop.epoch_done = False
        for hook in hooks:
            hook.on_epoch_begin(loop)
        if not _epoch(loop, spec, data, size, shuffle, hooks, bar):
            break
        logs = loop.stats.means()
        if held is not None:
            logs.update({f"val_{k}": v for k, v in
                         _score(spec, loop.session, held, size, _phase(loop.trainer, "inference")).items()})
        if loop.lr is not None:
            logs["lr"] = loop.lr
        loop.epoch_done = True
        for hook in hooks:
            hook.on_epoch_end(loop, logs)
        loop.history.stopped_epoch = loop.epoch if loop.stop else None
        loop.epoch, loop.batch, loop.stats = loop.epoch + 1, 0, _Stats()
    for hook in hooks:
        hook.on_train_end(loop)


def evaluate(model: Container, x: Any, y: Any = None, *, loss: str | None = "loss", output: str | None = None,
             target: str | None = None, metrics: Any = None, batch_size: int = 32, session: Session | None = None,
             ) -> dict[str, float]:
    """The mean loss and ``metrics`` of ``model`` over ``x``/``y`` (batches weighted by size),
    in its ``inference`` phase when it has one; ``session`` (optional) holds its variables
    (a training container's), else a new session runs it."""
    batch_size = _checked(model, session, batch_size, loss=loss, output=output, target=target)
    spec = _Spec(model, loss if loss in model.output_names or loss != "loss" else None,
                 _output(model, loss or "", output), target, _metrics.resolve(metrics))
    data = feeds_of(model, x, y)
    if session is not None:
        return _score(spec, session, data, batch_size, _phase(model, "inference"))
    with Session(model) as own:
        return _score(spec, own, data, batch_size, _phase(model, "inference"))


def predict(model: Container, x: Any, *, output: str | None = None, batch_size: int = 32,
            session: Session | None = None, loss: str = "loss") -> np.ndarray:
    """``output`` (default: the only output besides ``loss``) of ``model`` for ``x`` (an array
    for the first input, or feeds), run in batches and joined along the first axis."""
    batch_size = _checked(model, session, batch_size, loss=loss, output=output)
    name = _output(model, loss, output)
    if name is None:
        raise ArgumentError.at("output", f"one of {list(model.output_names)}", "None")
    data = feeds_of(model, x)
    spec = _Spec(model, None, name, None, [])
    phase = _phase(model, "inference")
    own = session or Session(model)
    try:
        parts = [own.run([name], feeds, phase=phase)[0] for feeds in _batch_list(spec, data, None, batch_size)]
    finally:
        if session is None:
            own.close()
    return np.concatenate(parts, axis=0)
