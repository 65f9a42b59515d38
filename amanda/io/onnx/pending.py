"""Ops of a nested import whose containers are built when their level is opened.

When the ONNX reader reads the main graph of a model whose module tree will be rebuilt
(``amanda.io.onnx.hierarchy``), an op that lands inside a module container is seen by no one
until that container's level is opened (``amanda.containers.deferred``). The reader checks
everything about such a node at import (its text, its values, its attribute set, which it
converts or finds converted, its names and uid) and keeps what the op is made of as plain
values (:class:`PendingOp`: no reference to the parsed message, which is freed after the
import); :meth:`PendingOp.build` makes the op under its name in the tree, exactly the
container the reader would have built (nothing left to fail). Ops of the root level, and ops
of a graph that turns out flat, are built at the end of the import.

>>> op = PendingOp("Relu", "/a/Relu", (Port("X"),), ("Y",), ("y",), (None,), {}, None)
>>> op.value_of("Y"), op.build("Relu").output_names, op.build("Relu").outputs[0].attrs["onnx_name"]
('y', ('Y',), 'y')
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from pyrsistent import PMap, pvector

from amanda.containers.arguments import INTERPRETED_ATTRS, check_names
from amanda.containers.container import Container, new_uid
from amanda.containers.edge import Port
from amanda.containers.values import ScalarMap, freeze_attrs
from amanda.errors import InvariantError
from amanda.io.onnx.values import typed_port

__all__ = ["PendingOp", "can_wait", "make_pending", "pending_op"]

_INTERPRETED = frozenset(INTERPRETED_ATTRS)
_INITIALIZER = {"initializer"}
_NO_EDGES: Any = pvector()
_NO_CHILDREN: dict[str, int] = {}
_new = tuple.__new__


class PendingOp(tuple):
    """What one leaf op is made of: type, the reader's name, input ports, output port names
    and the values they carry (``""``: not produced), those values' types (port attributes
    from the graph's value_info, or None), attributes (a dict, or a map freeze_attrs made) and
    uid (None: a fresh one when built). ``type``, ``name`` and ``_attrs`` read as a built op's
    do, for the nesting that places it. A tuple of these fields (the reader makes one per op:
    :func:`make_pending` assembles it in C), read by name."""

    __slots__ = ()

    def __new__(cls, type: str, name: str, inputs: tuple[Port, ...], out_names: tuple[str, ...],
                values: tuple[str, ...], typed: tuple[dict | None, ...], attrs: Any, uid: str | None) -> PendingOp:
        return tuple.__new__(cls, (type, name, inputs, out_names, values, typed, attrs, uid))

    type = property(itemgetter(0), doc="The op's type.")
    name = property(itemgetter(1), doc="The reader's name of the op.")
    inputs = property(itemgetter(2), doc="The input ports.")
    out_names = property(itemgetter(3), doc="The output port names.")
    values = property(itemgetter(4), doc="The values the output ports carry.")
    typed = property(itemgetter(5), doc="Their port attributes from value_info (or None).")
    _attrs = property(itemgetter(6), doc="The attributes.")
    uid = property(itemgetter(7), doc="The uid (None: a fresh one when built).")

    def value_of(self, port: str) -> str | None:
        """The name of the value output port ``port`` carries (None: no such port)."""
        for name, value in zip(self.out_names, self.values):
            if name == port:
                return value or None
        return None

    def build(self, name: str) -> Container:
        """The op, named ``name`` (checked already), as the reader builds it."""
        outputs = tuple(typed_port(port, value, typed)
                        for port, value, typed in zip(self.out_names, self.values, self.typed) if value)
        attrs = self._attrs
        frozen = attrs if attrs.__class__ is ScalarMap or attrs.__class__ is PMap else freeze_attrs(attrs)
        return Container._trusted(self.type, name, self.inputs, outputs, (), _NO_EDGES, _NO_EDGES, _NO_EDGES,
                                  frozen, self.uid or new_uid(), _NO_CHILDREN)


def can_wait(attrs: Any, inputs: Any, out_names: tuple[str, ...]) -> bool:
    """Whether an op of these attributes and ports may be built later with nothing checked
    then: no attribute amanda interprets but ``initializer: true`` (checked when built) and no
    port name twice."""
    if not _INTERPRETED.isdisjoint(attrs):
        interpreted = _INTERPRETED.intersection(attrs)
        if interpreted != _INITIALIZER or attrs["initializer"] is not True:
            return False
    return ((len(inputs) < 2 or len({p[0] for p in inputs}) == len(inputs))
            and (len(out_names) < 2 or len(set(out_names)) == len(out_names)))


def pending_op(type: str, name: str, inputs: Any, out_names: tuple[str, ...], outputs: Any, types: dict,
               attrs: Any, uid: str | None, *, checked: bool = False, plain: bool = False) -> PendingOp | None:
    """The :class:`PendingOp` of a node or initializer, or None where it is to be built now
    (:func:`can_wait` refuses it, or its type, name or uid is not valid: building it says why).
    ``outputs`` are its output value names, ``types`` the port attributes the graph's
    value_info gives by value name (read already: the op keeps no message). ``checked``: the port names are unique by
    construction (a schema's), so only the attributes are looked at; ``plain``: the caller
    knows they hold no attribute amanda interprets (a shared set's map, whose keys are read in
    Python)."""
    if not (checked and (plain or _INTERPRETED.isdisjoint(attrs))) and not can_wait(attrs, inputs, out_names):
        return None
    try:
        check_names(type, name, uid)
    except InvariantError:
        return None
    values = tuple(outputs)
    if not types:  # no value_info in the graph (TorchScript's exports, most files)
        return make_pending((type, name, tuple(inputs), out_names, values, (None,) * len(values), attrs, uid))
    typed = tuple(types.get(v) if v else None for v in values)
    return make_pending((type, name, tuple(inputs), out_names, values, typed, attrs, uid))


def make_pending(fields: tuple) -> PendingOp:
    """The :class:`PendingOp` of ``fields`` (in its order), made without a Python-level call.

    >>> make_pending(("Relu", "r", (), ("Y",), ("y",), (None,), {}, None)).name
    'r'
    """
    return _new(PendingOp, fields)
