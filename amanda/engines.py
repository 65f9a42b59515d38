"""Engines: what a lower layer calls in a higher one, installed by the higher one when imported.

The packages sit in a layer order (docs/design.md, "Layers"): the data model knows nothing of
queries, the op builder, drawing, types or files. A few conveniences of a lower layer still
reach upward (``model.select(...)``, a layer applied to builder values, notebook display,
chain's type check, the executor's parts sent as JSON text or run by onnxruntime). Each calls
an engine by name here, and the package that provides it installs it in its ``__init__``
(``amanda.query`` installs ``select``), so no module imports a layer above its own. Importing
``amanda`` imports every package, so every engine is installed before any is used.

>>> import amanda
>>> from amanda.engines import engine
>>> engine("select") is amanda.select
True
>>> engine("selct")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
amanda.errors.ArgumentError: at engine: expected one of apply, ... found 'selct' (did you mean 'select'?)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amanda.errors import ArgumentError, suggest

__all__ = ["ENGINES", "engine", "install"]

#: engine name -> (the package that installs it, what it does)
ENGINES = {
    "select": ("amanda.query", "select(container, selector) -> Selection"),
    "apply": ("amanda.build", "apply(layer, *values) -> values: a container called on builder values"),
    "op_builders": ("amanda.build", "op_builders() -> the builder of the default namespace"),
    "tree_text": ("amanda.viz", "tree_text(container) -> the folded text tree"),
    "notebook_svg": ("amanda.viz", "notebook_svg(container, highlight=None) -> SVG text or None"),
    "chain_problem": ("amanda.types", "chain_problem(kids, pairs) -> (position, problem) or None"),
    "type_check": ("amanda.types", "check(model, ...) -> the type problems validate reports"),
    "dumps": ("amanda.io", "dumps(container, format) -> document text"),
    "loads": ("amanda.io", "loads(text, format) -> container"),
    "to_onnx": ("amanda.io", "to_onnx(container) -> an onnx ModelProto of the ops, none as a function call"),
    "onnx_domain": ("amanda.io", "onnx_domain(namespace) -> (ONNX domain, opset) or None"),
}

_INSTALLED: dict[str, Callable[..., Any]] = {}


def _known(name: object) -> str:
    if not isinstance(name, str) or name not in ENGINES:
        raise ArgumentError.at("engine", f"one of {', '.join(sorted(ENGINES))}", repr(name),
                               suggest(name, ENGINES) if isinstance(name, str) else "")
    return name


def install(name: str, function: Callable[..., Any]) -> None:
    """Make ``function`` the engine ``name`` (one of :data:`ENGINES`); the package named there
    calls this when it is imported.

    >>> from amanda.engines import engine, install
    >>> before = engine("tree_text")
    >>> install("tree_text", lambda container: "a tree")
    >>> engine("tree_text")(None)
    'a tree'
    >>> install("tree_text", before)
    """
    name = _known(name)
    if not callable(function):
        raise ArgumentError.at(f"engine {name!r}", f"a function: {ENGINES[name][1]}", type(function).__name__)
    _INSTALLED[name] = function


def engine(name: str) -> Callable[..., Any]:
    """The function installed as engine ``name``; an ArgumentError naming the package to
    import when none is (only while ``amanda`` itself is still being imported)."""
    name = _known(name)
    found = _INSTALLED.get(name)
    if found is None:
        package, what = ENGINES[name]
        raise ArgumentError.at(f"engine {name!r}", f"{what}, installed when {package} is imported",
                               "nothing installed", f"import {package} first")
    return found
