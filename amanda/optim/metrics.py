"""Metrics for :func:`amanda.optim.fit` and :func:`amanda.optim.evaluate`: functions
``metric(y_true, y_pred) -> float`` of one batch, named or given as callables. An epoch's value
is the mean of its batches' values weighted by their sizes, which for these metrics equals the
metric of the whole epoch's predictions.

>>> import numpy as np
>>> [(name, float(fn(np.array([1, 0]), np.array([[0.2, 0.8], [0.3, 0.7]])))) for name, fn in resolve(["accuracy"])]
[('accuracy', 0.5)]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from amanda.containers.arguments import expect_int
from amanda.errors import ArgumentError, suggest

__all__ = ["METRICS", "TopKAccuracy", "accuracy", "mean_absolute_error", "mean_squared_error", "resolve"]


def accuracy(y_true: Any, y_pred: Any) -> float:
    """The fraction of rows whose highest score is at the label (scores one axis more than the
    labels), or whose thresholded prediction (``> 0.5``) equals the label (same shape)."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    guess = y_pred.argmax(axis=-1) if y_pred.ndim == y_true.ndim + 1 else (y_pred > 0.5)
    return float(np.mean(guess == y_true))


class TopKAccuracy:
    """The fraction of rows whose label is among the ``k`` highest scores (ties broken by
    position, as ``np.argsort`` does)."""

    def __init__(self, k: int = 5) -> None:
        self.k = expect_int(k, ("TopKAccuracy", "k"), minimum=1)
        self.__name__ = f"top_{self.k}_accuracy"

    def __call__(self, y_true: Any, y_pred: Any) -> float:
        y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
        top = np.argsort(-y_pred, axis=-1, kind="stable")[..., : self.k]
        return float(np.mean((top == y_true[..., None]).any(axis=-1)))

    def __repr__(self) -> str:
        return f"TopKAccuracy(k={self.k})"


def mean_squared_error(y_true: Any, y_pred: Any) -> float:
    """The mean of the squared differences."""
    diff = np.asarray(y_pred, np.float64) - np.asarray(y_true, np.float64)
    return float(np.mean(diff * diff))


def mean_absolute_error(y_true: Any, y_pred: Any) -> float:
    """The mean of the absolute differences."""
    return float(np.mean(np.abs(np.asarray(y_pred, np.float64) - np.asarray(y_true, np.float64))))


METRICS: dict[str, Callable[..., float]] = {
    "accuracy": accuracy, "top_k_accuracy": TopKAccuracy(5), "mean_squared_error": mean_squared_error,
    "mse": mean_squared_error, "mean_absolute_error": mean_absolute_error, "mae": mean_absolute_error,
}


def resolve(metrics: Any) -> list[tuple[str, Callable[..., float]]]:
    """``(name, function)`` for each metric: a name of :data:`METRICS` or a callable
    ``(y_true, y_pred) -> float`` (named by its ``__name__``)."""
    if metrics is None:
        return []
    if isinstance(metrics, str) or callable(metrics) or not isinstance(metrics, Sequence):
        metrics = [metrics]
    out: list[tuple[str, Callable[..., float]]] = []
    for i, metric in enumerate(metrics):
        if isinstance(metric, str):
            if metric not in METRICS:
                raise ArgumentError.at(("metrics", i), f"one of {sorted(METRICS)} or a callable", repr(metric),
                                       suggest(metric, METRICS))
            out.append((metric, METRICS[metric]))
        elif callable(metric):
            out.append((str(getattr(metric, "__name__", type(metric).__name__)), metric))
        else:
            raise ArgumentError.at(("metrics", i), "a metric name or a callable (y_true, y_pred) -> float",
                                   type(metric).__name__)
    names = [name for name, _ in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ArgumentError.at("metrics", "metrics of distinct names", f"{twice} more than once")
    return out
