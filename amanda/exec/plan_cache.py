"""Plans per input type signature: a Session optimises its model for the dtypes and shapes of
a run's feeds (with the pipeline it is given, by default the one ``amanda.passes`` sets), so
shape subgraphs are folded once, at plan time, and feeds of a new shape make a new plan.

A run is specialised only when every fetch names an output or a named control port (``train``)
of the model and every feed one of
its inputs, each value an array that fits its port's declared type; anything else (fetches of
inner ports, which optimisation could remove, or a feed the run will reject) takes the plain
plan, so names and error messages stay exactly as without optimisation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from amanda.containers import Container
from amanda.errors import ArgumentError

__all__ = ["Pipeline", "default_pipeline", "optimized_for", "signature", "use_default_pipeline"]

Signature = tuple[tuple[str, str, tuple[int, ...]], ...]
#: a Session's optimisation: ``pipeline(model, inputs) -> model``, inputs name -> (dtype, shape)
Pipeline = Callable[[Container, Mapping[str, tuple]], Container]
_DEFAULT: list[Pipeline] = []  # set by amanda.passes when it is imported


_NAMES: dict[np.dtype, str] = {}  # dtype -> name: ``dtype.name`` is a slow property, read every run


def _name(dtype: np.dtype) -> str:
    name = _NAMES[dtype] = dtype.name
    return name


def _declared(dtype: Any) -> np.dtype | None:
    try:
        return None if dtype is None else np.dtype(dtype)
    except TypeError:
        return None


def _ports(model: Container) -> tuple[frozenset, dict[str, tuple[Any, Any, bool]]]:
    """The model's output and control port names and each input's (declared dtype, shape, dtype readable),
    built once per model (runs call :func:`signature` every time)."""
    inputs = {}
    for port in model.inputs:
        dtype = port.attrs.get("dtype")
        inputs[port.name] = (_declared(dtype), port.attrs.get("shape"), dtype is None or _declared(dtype) is not None)
    return frozenset(model.output_names) | frozenset(model.control_names), inputs


def _fits(declared: tuple[Any, Any, bool], value: np.ndarray, symbols: dict[Any, int]) -> bool:
    """Whether ``value`` fits the declared dtype and shape, symbols binding one size per run."""
    dtype, shape, readable = declared
    if not readable or (dtype is not None and dtype != value.dtype):
        return False
    if shape is None:
        return True
    if len(shape) != value.ndim:
        return False
    for dim, size in zip(shape, value.shape):
        if isinstance(dim, int) and dim != size:
            return False
        if isinstance(dim, str) and symbols.setdefault(dim, size) != size:
            return False
    return True


def signature(model: Container, fetches: Sequence[Any], feeds: Any) -> Signature | None:
    """The type signature a run's plan is specialised to, or None for the plain plan.

    >>> import amanda
    >>> g = amanda.Container(None, "g", inputs=["x"], outputs=["y"], children=[amanda.op("Relu", "r", ["X"], ["Y"])],
    ...     edges=[("g:x", "r:X"), ("r:Y", "g:y")])
    >>> signature(g, ("y",), {"x": np.zeros((2, 3), np.float32)})
    (('x', 'float32', (2, 3)),)
    >>> signature(g, ("r:Y",), {"x": np.zeros(2, np.float32)}) is None
    True
    """
    if not isinstance(feeds, Mapping):
        return None
    outputs, ports = model._cached("exec.plan_cache.ports", _ports)
    if not all(isinstance(f, str) and f in outputs for f in fetches):
        return None
    symbols: dict[Any, int] = {}
    found = []
    for name, value in feeds.items():
        declared = ports.get(name) if isinstance(name, str) else None
        if declared is None or type(value) is not np.ndarray or not _fits(declared, value, symbols):
            return None
        dtype = value.dtype
        if dtype.kind not in "biufc":  # bfloat16, float8 ...: left to the plain plan
            return None
        found.append((name, _NAMES.get(dtype) or _name(dtype), value.shape))
    return tuple(sorted(found)) if len(found) > 1 else tuple(found)


def use_default_pipeline(pipeline: Pipeline) -> None:
    """Make ``pipeline(model, inputs) -> model`` the one ``Session(optimize=True)`` plans with.
    ``amanda.passes``, which sits above the executor, sets its own when it is imported (and
    ``import amanda`` imports it), so the executor never imports the passes.

    >>> before = default_pipeline()
    >>> use_default_pipeline(lambda model, inputs: model)
    >>> default_pipeline() is not before
    True
    >>> use_default_pipeline(before)
    """
    if not callable(pipeline):
        raise ArgumentError.at("pipeline", "a function (model, inputs) -> model", type(pipeline).__name__)
    _DEFAULT[:] = [pipeline]


def default_pipeline() -> Pipeline | None:
    """The pipeline ``Session(optimize=True)`` plans with (None before one is set)."""
    return _DEFAULT[0] if _DEFAULT else None


def optimized_for(model: Container, types: Signature, pipeline: Pipeline | None = None) -> Container:
    """``model`` specialised to ``types`` and optimised by ``pipeline`` (default: the one set
    with :func:`use_default_pipeline`; without one, ``model`` as it is).

    >>> import amanda
    >>> g = amanda.Container(None, "g", inputs=["x"], outputs=["y"], children=[amanda.op("Relu", "r", ["X"], ["Y"])],
    ...     edges=[("g:x", "r:X"), ("r:Y", "g:y")])
    >>> optimized_for(g, (("x", "float32", (2,)),), lambda model, inputs: inputs)
    {'x': ('float32', (2,))}
    """
    chosen = pipeline if pipeline is not None else default_pipeline()
    if chosen is None:
        return model
    return chosen(model, {name: (dtype, shape) for name, dtype, shape in types})
