"""Kernel registry: (namespace family, op type) -> versions chosen by since-version and dtypes.

A kernel is a plain function ``kernel(attrs, *inputs) -> tuple[ndarray | None, ...]``:

- ``attrs`` is a read-only mapping of the op's own attributes (ONNX defaults are
  applied by the kernel itself, with ``attrs.get(name, default)``);
- ``inputs`` are numpy arrays, or ``None`` for an omitted optional input;
- the result is a tuple with one entry per output port (``None`` for an optional
  output the kernel does not produce).

Versions: ``@kernel("ReduceSum", since=13)`` registers the kernel used for opsets
13 and later; a lookup for opset ``v`` takes the newest registration with
``since <= v`` whose dtype predicate accepts the input dtypes (an op
has one version per type, chosen from its inputs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from amanda.errors import ExecutionError

Kernel = Callable[..., tuple]
DtypePredicate = Callable[[Sequence[np.dtype]], bool]

ONNX = "amanda/onnx"


@dataclass(frozen=True)
class KernelVersion:
    """One registered implementation of an op type."""

    op_type: str
    since: int
    fn: Kernel
    accepts: DtypePredicate | None = None
    domain: str = ""


_REGISTRY: dict[tuple[str, str, str], list[KernelVersion]] = {}


def kernel(
    op_type: str,
    since: int = 1,
    *,
    family: str = ONNX,
    domain: str = "",
    dtypes: Iterable[Any] | None = None,
    accepts: DtypePredicate | None = None,
) -> Callable[[Kernel], Kernel]:
    """Register ``fn`` as the kernel of ``op_type`` from opset ``since`` on.

    ``dtypes`` restricts the version to inputs whose first dtype is one of them;
    ``accepts`` is a general predicate over all input dtypes.
    """
    if dtypes is not None:
        allowed = frozenset(np.dtype(d) for d in dtypes)

        def by_first(ds: Sequence[np.dtype]) -> bool:
            return bool(ds) and ds[0] in allowed

        accepts = by_first

    def register(fn: Kernel) -> Kernel:
        versions = _REGISTRY.setdefault((family, domain, op_type), [])
        versions.append(KernelVersion(op_type, since, fn, accepts, domain))
        # newest first; among equal since, dtype-specific before generic
        versions.sort(key=lambda v: (-v.since, v.accepts is None))
        return fn

    return register


def lookup(
    op_type: str,
    opset: int | None = None,
    dtypes: Sequence[np.dtype] = (),
    *,
    family: str = ONNX,
    domain: str = "",
) -> KernelVersion | None:
    """The kernel version for ``op_type`` at ``opset`` and these input dtypes, or None."""
    versions = _REGISTRY.get((family, domain, op_type))
    if not versions:
        return None
    newest = opset if opset is not None else 1 << 30
    for version in versions:
        if version.since <= newest and (version.accepts is None or version.accepts(dtypes)):
            return version
    return None


def supported_op_types(family: str = ONNX, domain: str = "") -> list[str]:
    """Sorted op types that have at least one kernel."""
    return sorted(t for (f, d, t) in _REGISTRY if f == family and d == domain)


def run_kernel(version: KernelVersion, attrs: Mapping[str, Any], inputs: Sequence[Any]) -> tuple:
    """Call a kernel and check it returned a tuple."""
    result = version.fn(attrs, *inputs)
    if not isinstance(result, tuple):
        raise ExecutionError(
            f"kernel for {version.op_type} returned {type(result).__name__}, expected a tuple"
        )
    return result
