"""The checks of a Session's and a run's arguments: each bad one an ExecutionError that names it.

>>> _fetch_list("y")
('y',)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.containers import Endpoint
from amanda.containers.arguments import brief
from amanda.errors import ExecutionError
from amanda.exec.resolve import normalize

__all__: list[str] = []


def _as_value(value: Any) -> Any:
    """A fed value as kernels expect it: arrays stay (an array device's too: a type with
    ``__array_function__``), scalars become 0-d arrays, sequences stay."""
    if type(value) is np.ndarray or isinstance(value, (list, tuple, np.ndarray)) or value is None \
            or hasattr(type(value), "__array_function__"):
        return value
    return np.asarray(value)


def _bad(argument: str, expected: str, found: Any) -> ExecutionError:
    """The error for a bad argument of Session or Session.run."""
    shown = f"{type(found).__name__} {brief(found)}"
    return ExecutionError(f"{argument}: expected {expected}, found {shown}", path=argument, expected=expected,
                          found=shown)


def _names(items: Any, role: str) -> tuple:
    """Fetch or feed names as hashable keys; an ExecutionError saying what a name is otherwise."""
    out = []
    for item in items:
        name = normalize(item)
        if not isinstance(name, (str, Endpoint)) and not (isinstance(name, tuple) and len(name) == 2):
            raise _bad(role, "a name 'y', an endpoint 'op:port' or a (path, port) pair", item)
        try:
            hash(name)
        except TypeError:
            raise _bad(role, "a hashable name or (path, port) pair", item) from None
        out.append(name)
    return tuple(out)


def _fetch_list(fetches: Any) -> tuple:
    if isinstance(fetches, (str, Endpoint)):
        return (fetches,)
    if not isinstance(fetches, (list, tuple)):
        raise _bad("fetches", "a list or tuple of names, or one name as a string", fetches)
    return _names(fetches, "fetch")


def _feed_map(feeds: Any) -> Mapping[Any, Any]:
    if feeds is None:
        return {}
    if not isinstance(feeds, Mapping):
        raise _bad("feeds", "a mapping {name: value} or None", feeds)
    return feeds


def _check_phase(phase: Any) -> None:
    try:
        hash(phase)
    except TypeError:
        raise _bad("phase", "None or a hashable value such as 'train'", phase) from None


def _seconds(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not value > 0 or math.isnan(value):
        raise _bad(what, "None or a positive number of seconds", value)
    return float(value)


def _check_flags(max_loop_iterations: Any, optimize: Any, profile: Any, client: Any, cache: Any) -> None:
    """Refuse a Session's settings of the wrong kind, each by its keyword."""
    if max_loop_iterations is not None and (
            isinstance(max_loop_iterations, bool) or not isinstance(max_loop_iterations, (int, np.integer))
            or max_loop_iterations < 0):
        raise _bad("max_loop_iterations", "None or a non-negative int", max_loop_iterations)
    if optimize is not True and optimize is not False and not callable(optimize):
        raise _bad("optimize", "True or False (or a pipeline function)", optimize)
    if profile is not True and profile is not False:
        raise _bad("profile", "True or False", profile)
    if profile and client is not None:
        raise _bad("profile", "False with client= (a run on Dask workers is not profiled)", profile)
    if not isinstance(cache, (bool, int, np.integer)) or cache < 0:
        raise _bad("cache", "True, False or a budget in bytes (a non-negative int)", cache)
