"""The ``amanda/core`` vocabulary: amanda's own resource-style variable ops, which the
Session runs (see :mod:`amanda.exec.state`), so that ``validate`` can check them.

>>> from amanda.namespaces import namespace
>>> namespace("amanda/core").schema("AssignAdd").input_names
('ref', 'delta')
"""

from __future__ import annotations

from amanda.namespaces.namespace import Namespace, register_provider
from amanda.namespaces.schema import AttrSchema, OpSchema, PortSchema

__all__ = ["CORE", "core_namespace"]

CORE = "amanda/core"


def _ports(*names: str) -> tuple[PortSchema, ...]:
    return tuple(PortSchema(name) for name in names)


def core_namespace(name: str = CORE) -> Namespace:
    """The schemas of ``Variable``, ``Read``, ``Assign`` and ``AssignAdd``."""
    variable_attrs = [
        AttrSchema("value", "any"), AttrSchema("shape", "ints"), AttrSchema("dtype", "dtype"),
        AttrSchema("shared_name", "string"),
    ]
    schemas = [
        OpSchema("Variable", outputs=_ports("ref"), attrs={a.name: a for a in variable_attrs},
                 doc="A reference to a variable initialised from `value`, or zeros of `shape`/`dtype`."),
        OpSchema("Read", inputs=_ports("ref"), outputs=_ports("value"), doc="The variable's current value."),
        OpSchema("Assign", inputs=_ports("ref", "value"), outputs=_ports("value"),
                 doc="Replace the variable's value; output the new value."),
        OpSchema("AssignAdd", inputs=_ports("ref", "delta"), outputs=_ports("value"),
                 doc="Add `delta` to the variable; output the new value."),
    ]
    return Namespace(name, schemas={s.type: s for s in schemas}, source="amanda.exec.state")


register_provider(CORE, lambda: (CORE,), core_namespace)
