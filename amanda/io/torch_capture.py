"""Capturing a torch module directly: ``amanda.from_torch(module, example_args)`` exports it
through torch's own ONNX exporter in memory and imports the result with its module tree
(``docs/onnx.md``, "Capture from torch"). Needs the ``torch`` extra; nothing else in amanda
imports torch.
"""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from amanda.containers.arguments import expect_flag, expect_int, expect_list, expect_mapping, expect_str
from amanda.containers.container import Container
from amanda.errors import ArgumentError, FormatError

__all__ = ["from_torch", "require_torch"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # torch colours its messages


def require_torch() -> Any:
    """The ``torch`` module, or a FormatError saying which extra to install."""
    try:
        import torch
    except ImportError:
        raise FormatError(
            "capturing a torch module needs torch (and onnxscript for its exporter): "
            "pip install 'amanda[torch]'",
            expected="the torch package",
            found="not installed",
        ) from None
    return torch


def _export(torch: Any, module: Any, args: tuple, kwargs: Mapping[str, Any] | None, dynamo: bool,
            options: dict[str, Any]) -> Any:
    """The ``onnx.ModelProto`` torch's exporter makes of ``module`` (quietly: torch prints its
    progress and warns about things amanda reads correctly)."""
    import onnx

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        if dynamo:
            program = torch.onnx.export(module, args, kwargs=dict(kwargs or {}), dynamo=True,
                                        verbose=False, **options)
            return program.model_proto
        buffer = io.BytesIO()
        options.setdefault("opset_version", 17)
        torch.onnx.export(module, args, buffer, kwargs=dict(kwargs or {}), dynamo=False, **options)
        return onnx.load_from_string(buffer.getvalue())


def _check_options(example_kwargs: Any, input_names: Any, output_names: Any, opset: Any, dynamo: Any,
                   hierarchy: Any) -> None:
    """ArgumentError for a :func:`from_torch` option of the wrong type, before torch sees it."""
    from amanda.io.onnx.hierarchy import check_hierarchy

    expect_mapping(example_kwargs, "example_kwargs", "a mapping of keyword names to example inputs", optional=True)
    for key, names in (("input_names", input_names), ("output_names", output_names)):
        if names is not None:
            for i, name in enumerate(expect_list(names, key, "a list of port names or None")):
                expect_str(name, (key, i), "a port name")
    if opset is not None:
        expect_int(opset, "opset", minimum=1)
    expect_flag(dynamo, "dynamo")
    check_hierarchy(hierarchy)


def from_torch(
    module: Any,
    example_args: Any,
    *,
    example_kwargs: Mapping[str, Any] | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    dynamic_shapes: Any = None,
    opset: int | None = None,
    dynamo: bool = True,
    hierarchy: Any = "auto",
) -> Container:
    """The container for a torch ``module``, with its module tree: exported in memory by
    ``torch.onnx.export`` (the torch.export-based exporter, or TorchScript's for
    ``dynamo=False``) with ``example_args`` (a tensor or a tuple of them) and
    ``example_kwargs``, then imported by :func:`amanda.io.onnx.importer.from_onnx`.

    Every module that ran has its container at its ``named_modules()`` path, and the
    container computes the module's outputs. The module is exported in the mode it is in (call
    ``module.eval()`` first for inference). ``input_names``/``output_names`` name the ports;
    ``dynamic_shapes`` and ``opset`` go to torch's exporter as ``dynamic_shapes`` and
    ``opset_version``. Raises ``FormatError`` when torch is missing (naming the extra to
    install) or cannot export the module, ``ArgumentError`` for an argument that is not a module.

    >>> import torch, amanda  # doctest: +SKIP
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()).eval()  # doctest: +SKIP
    >>> model = amanda.from_torch(net, (torch.randn(2, 4),), input_names=["x"])  # doctest: +SKIP
    >>> [c.type for c in model.children if c.children]  # doctest: +SKIP
    ['Linear', 'ReLU']
    """
    _check_options(example_kwargs, input_names, output_names, opset, dynamo, hierarchy)
    torch = require_torch()
    if not isinstance(module, torch.nn.Module):
        raise ArgumentError.at("module", "a torch.nn.Module", type(module).__name__)
    args = example_args if isinstance(example_args, tuple) else (example_args,)
    options: dict[str, Any] = {}
    if input_names is not None:
        options["input_names"] = list(input_names)
    if output_names is not None:
        options["output_names"] = list(output_names)
    if opset is not None:
        options["opset_version"] = int(opset)
    if dynamic_shapes is not None:
        options["dynamic_shapes" if dynamo else "dynamic_axes"] = dynamic_shapes
    name = type(module).__name__
    try:
        proto = _export(torch, module, args, example_kwargs, dynamo, options)
    except Exception as exc:  # noqa: BLE001 - torch's exporters raise many kinds
        message = " ".join(_ANSI.sub("", str(exc)).split())[:400]
        raise FormatError(
            f"torch could not export {name} to ONNX ({'dynamo' if dynamo else 'TorchScript'} "
            f"exporter): {message}",
            path=name,
            expected="a module torch.onnx.export accepts with these example inputs",
            found=type(exc).__name__,
        ) from None
    from amanda.io.onnx.importer import from_onnx

    return from_onnx(proto, source=f"torch {name}", hierarchy=hierarchy)
