"""``optimize``: the passes run in a pipeline, each reporting what it changed."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from amanda.containers import Container
from amanda.containers.arguments import expect_container, expect_flag, expect_list, expect_mapping, shown
from amanda.errors import ArgumentError
from amanda.exec.plan_cache import use_default_pipeline
from amanda.namespaces.schema import suggest
from amanda.passes.cleanup import eliminate_common_subexpressions, eliminate_dead_code, remove_identities
from amanda.passes.fold import fold_constants, specialize
from amanda.passes.fuse import (
    fuse_conv_batchnorm,
    fuse_gelu,
    fuse_gelu_internal,
    fuse_matmul_add,
    fuse_matmul_add_internal,
    fuse_swish_internal,
)
from amanda.passes.reorder import pool_before_relu
from amanda.passes.report import OptimizeResult, PassResult
from amanda.progress import progress

__all__ = ["DEFAULT_PASSES", "PASSES", "SESSION_PASSES", "optimize", "session_pipeline"]

PASSES: Mapping[str, Callable[[Container], PassResult]] = {
    "remove_identities": remove_identities,
    "fold_constants": fold_constants,
    "eliminate_common_subexpressions": eliminate_common_subexpressions,
    "eliminate_dead_code": eliminate_dead_code,
    "fuse_conv_batchnorm": fuse_conv_batchnorm,
    "fuse_matmul_add": fuse_matmul_add,
    "fuse_gelu": fuse_gelu,
    "pool_before_relu": pool_before_relu,
}
# identities first (they hide constants from folding); dead code last (folding leaves it).
# fuse_matmul_add is not a default: it infers types a second time to save one dispatch per layer
DEFAULT_PASSES: tuple[str, ...] = (
    "remove_identities", "fold_constants", "eliminate_common_subexpressions", "fuse_conv_batchnorm",
    "fuse_gelu", "eliminate_dead_code",
)
# a Session's plans: the defaults with GELU (below opset 20), SiLU (below 24) and Linear layers
# (MatMul+Add) fused into amanda's own ops (the plan runs them; nothing exports them), and max
# pools moved before the ReLUs that fed them
SESSION_PASSES: tuple[str | Callable[[Container], PassResult], ...] = (
    "remove_identities", "fold_constants", "eliminate_common_subexpressions", "fuse_conv_batchnorm",
    fuse_gelu_internal, fuse_swish_internal, "pool_before_relu", fuse_matmul_add_internal, "eliminate_dead_code",
)


def optimize(model: Container, passes: Sequence[str | Callable[[Container], PassResult]] | None = None,
             inputs: Mapping[str, Any] | None = None, quiet: bool | None = None) -> OptimizeResult:
    """``model`` through ``passes`` (names from :data:`PASSES` or functions; default
    :data:`DEFAULT_PASSES`), after :func:`specialize` to ``inputs`` when given. A progress bar
    shows on a terminal when the passes take over a second (``quiet=True`` turns it off).

    >>> import amanda
    >>> g = amanda.Container(None, "g", inputs=["x"], outputs=["y"], children=[amanda.op("Identity", "i", ["input"], ["output"]),
    ...     amanda.op("Relu", "r", ["X"], ["Y"])], edges=[("g:x", "i:input"), ("i:output", "r:X"), ("r:Y", "g:y")],
    ...     attrs={"namespace": "amanda/onnx/17"})
    >>> result = amanda.optimize(g)
    >>> [c.name for c in result.model.children], [str(r) for r in result.reports if r.changed]
    (['r'], ['remove_identities: 1 removed, 0 added, 0 replaced'])
    """
    expect_container(model, "model")
    expect_mapping(inputs, "inputs", "a mapping of input names to types", optional=True)
    expect_flag(quiet, "quiet", optional=True)
    chosen = DEFAULT_PASSES if passes is None else tuple(expect_list(passes, "passes", "a list of pass names or functions"))
    functions = []
    for item in chosen:
        if callable(item):
            functions.append(item)
        elif isinstance(item, str) and item in PASSES:
            functions.append(PASSES[item])
        else:
            raise ArgumentError.at("passes", f"pass names among {sorted(PASSES)} or functions", shown(item),
                                   suggest(item, PASSES) if isinstance(item, str) else "")
    reports = []
    if inputs:
        model, report = specialize(model, inputs)
        reports.append(report)
    with progress(len(functions), "optimize", quiet=quiet) as bar:
        for fn in functions:
            bar.set_postfix_str(getattr(fn, "__name__", "pass"))
            model, report = fn(model)
            reports.append(report)
            bar.update()
    return OptimizeResult(model, tuple(reports))


def session_pipeline(model: Container, inputs: Mapping[str, Any]) -> Container:
    """``model`` specialised to ``inputs`` (name -> (dtype, shape)) and run through
    :data:`SESSION_PASSES`: the pipeline ``Session(optimize=True)`` plans with.

    >>> import amanda, numpy as np
    >>> g = amanda.Container(None, "g", inputs=["x"], outputs=["y"], children=[amanda.op("Sigmoid", "s", ["X"], ["Y"]),
    ...     amanda.op("Mul", "m", ["A", "B"], ["C"])], edges=[("g:x", "s:X"), ("g:x", "m:A"), ("s:Y", "m:B"), ("m:C", "g:y")],
    ...     attrs={"namespace": "amanda/onnx/17"})
    >>> [c.type for c in session_pipeline(g, {"x": ("float32", (2,))}).children]
    ['Swish']
    """
    return optimize(model, SESSION_PASSES, inputs=inputs, quiet=True).model


use_default_pipeline(session_pipeline)
