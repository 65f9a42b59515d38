"""The executor's way into the op registry (:mod:`amanda.ops.registry`): ``@kernel``,
``@session_kernel``, ``declare`` and the lookups, under the names kernel modules import.

>>> from amanda.ops import registry as ops_registry
>>> lookup is ops_registry.lookup
True
"""

from amanda.ops.registry import (
    ONNX,
    DtypePredicate,
    InPlace,
    Kernel,
    KernelVersion,
    OpDef,
    OpEntry,
    OpKey,
    declare,
    entries,
    entry,
    fact,
    kernel,
    lookup,
    register_fact,
    run_kernel,
    session_kernel,
    session_op_types,
    supported_op_types,
    version_of,
)

__all__ = [
    "ONNX", "DtypePredicate", "InPlace", "Kernel", "KernelVersion", "OpDef", "OpEntry", "OpKey",
    "declare", "entries", "entry", "fact", "kernel", "lookup", "register_fact", "run_kernel",
    "session_kernel", "session_op_types", "supported_op_types", "version_of",
]
