"""Every public entry point answers a wrong-typed argument with an AmandaError (ideally an
ArgumentError naming the parameter), never a bare AttributeError, TypeError or a dependency's
message.

The walk covers ``amanda.__all__`` and the ``__all__`` of every subpackage: each callable is
called once with good arguments (which must succeed), then with each positional and each
keyword parameter in turn replaced by each of a set of wrong values, and once with every
positional parameter wrong.
"""

from __future__ import annotations

import inspect
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import amanda
from amanda.errors import AmandaError, ArgumentError, FormatError, RenderError
from tests.public_api import drain, good_calls, missing_extra, public_callables, restored_registries

WRONG: tuple[Any, ...] = ("s", 3, -1, 2.5, True, None, object(), [object()], {"k": object()},
                          {3: 1}, b"x", np.zeros((2, 2)), [[1], [1, 2]])


@pytest.fixture
def registries(tmp_path: Path) -> Iterator[Path]:
    """Run in ``tmp_path`` with the namespace and table registries restored afterwards."""
    with restored_registries(tmp_path):
        yield tmp_path


def _wrong_calls(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Iterator[tuple[str, tuple, dict]]:
    """``(what, args, kwargs)`` for every single wrong argument, and all positional ones wrong."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except ValueError:  # pragma: no cover - every public callable has a signature
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keywords = [p for p in params if p.kind is p.KEYWORD_ONLY]
    for bad in WRONG:
        for i, p in enumerate(positional):
            filled = list(args) + [q.default for q in positional[len(args):i]]
            filled = filled[:i] + [bad] + filled[i + 1:]
            yield f"{p.name}={bad!r:.40}", tuple(filled), kwargs
        for p in keywords:
            yield f"{p.name}={bad!r:.40}", args, {**kwargs, p.name: bad}
        if positional:
            yield f"all positional={bad!r:.40}", (bad,) * len(positional), {}


def test_every_public_callable_has_a_good_call(registries: Path) -> None:
    """The walk knows a good call of every public callable, so a new one cannot slip past it."""
    missing = sorted(set(public_callables()) - set(good_calls(registries)))
    assert not missing, f"add a good call for {missing}"


@pytest.mark.parametrize("name", sorted(public_callables()))
def test_wrong_arguments_raise_amanda_errors(name: str, registries: Path) -> None:
    """The good call succeeds; every wrong-typed argument ends in an AmandaError or a result."""
    fn = public_callables()[name]
    args, kwargs = good_calls(registries)[name]
    try:
        drain(fn(*args, **kwargs))
    except RenderError:  # rendering needs Graphviz's `dot`: without it the good call cannot draw
        if shutil.which("dot") is not None:
            raise
    except FormatError as exc:  # an optional package is missing: the error names its extra
        extra = missing_extra(name)
        if extra is None or extra not in str(exc):
            raise
    raw = []
    for what, bad_args, bad_kwargs in _wrong_calls(fn, args, kwargs):
        try:
            drain(fn(*bad_args, **bad_kwargs))
        except AmandaError:
            pass
        except Exception as exc:  # noqa: BLE001 - every other exception is the finding
            raw.append(f"{name}({what}): {type(exc).__name__}: {str(exc)[:100]}")
    assert not raw, "\n".join(raw)


def test_infer_types_on_a_string_names_the_argument() -> None:
    """The case the issue reported: ``infer_types("model")`` is an ArgumentError naming
    ``model``, not an AttributeError."""
    with pytest.raises(ArgumentError, match="model") as info:
        amanda.infer_types("model")
    assert info.value.expected and "Container" in info.value.expected
