"""The ``amanda/core`` vocabulary: amanda's own resource-style variable ops, which the
Session runs (see :mod:`amanda.exec.state`), so that ``validate`` can check them.

>>> from amanda.namespaces import namespace
>>> namespace("amanda/core").schema("AssignAdd").input_names
('ref', 'delta')
"""

from __future__ import annotations

from amanda.namespaces.namespace import Namespace, register_provider
from amanda.namespaces.schema import AttrSchema, OpSchema

__all__ = ["CORE", "core_namespace"]

CORE = "amanda/core"


def core_namespace(name: str = CORE) -> Namespace:
    """The schemas of ``Variable``, ``Read``, ``Assign`` and ``AssignAdd``."""
    variable_attrs = [
        AttrSchema("value", "any"), AttrSchema("shape", "ints"), AttrSchema("dtype", "dtype"),
        AttrSchema("shared_name", "string"),
    ]
    return Namespace(name, [
        OpSchema("Variable", outputs=["ref"], attrs=variable_attrs,
                 doc="A reference to a variable initialised from `value`, or zeros of `shape`/`dtype`."),
        OpSchema("Read", inputs=["ref"], outputs=["value"], doc="The variable's current value."),
        OpSchema("Assign", inputs=["ref", "value"], outputs=["value"],
                 doc="Replace the variable's value; output the new value."),
        OpSchema("AssignAdd", inputs=["ref", "delta"], outputs=["value"],
                 doc="Add `delta` to the variable; output the new value."),
    ], source="amanda.exec.state")


register_provider(CORE, lambda: (CORE,), core_namespace)
