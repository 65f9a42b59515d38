"""How a TensorFlow op's positional inputs and outputs map to amanda port names.

A ``NodeDef`` lists its data inputs in the order of its OpDef's ``input_arg``; a list arg
(``number_attr`` or ``type_list_attr``) takes as many of them as its length. amanda names the
ports as the TensorFlow vocabulary does (``tools/gen_tensorflow_vocabulary.py``): a single arg
is one port named by the arg (``a``, ``b``), a list arg's values are ``<arg>_0``, ``<arg>_1``
... The vocabulary moves a list arg that is not last to the end and says TensorFlow's order in
the schema's ``doc`` ("TensorFlow's input order is values, axis"); :func:`op_args` reads it back.
An op type the vocabulary does not have gets ``input_<i>`` / ``output_<i>`` (one list arg of
each side, named ``input`` and ``output``).

>>> from amanda.namespaces import namespace
>>> args = op_args(namespace("amanda/tensorflow/2.21.0"), "ConcatV2")
>>> args.inputs, args.outputs
((('values', True), ('axis', False)), (('output', False),))
>>> args.input_names(3)
['values_0', 'values_1', 'axis']
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["UNKNOWN", "OpArgs", "op_args", "split_port"]

Arg = tuple  # (name, is a list arg)


class OpArgs(NamedTuple):
    """The input and output args of one op type, in TensorFlow's order."""

    inputs: tuple[Arg, ...]
    outputs: tuple[Arg, ...]
    known: bool = True

    def input_names(self, count: int) -> list[str]:
        """Port names of ``count`` positional data inputs (a list arg takes what is left)."""
        return _names(self.inputs, count)

    def output_names(self, count: int) -> list[str]:
        """Port names of the first ``count`` flat outputs (a list arg takes what is left)."""
        return _names(self.outputs, count)

    def output_count(self, used: int) -> int:
        """How many output ports an op whose highest used flat output is ``used - 1`` gets:
        every single arg, and a list arg up to the highest one used."""
        fixed = sum(1 for _, listed in self.outputs if not listed)
        has_list = any(listed for _, listed in self.outputs)
        return max(used, fixed) if has_list else fixed


UNKNOWN = OpArgs((("input", True),), (("output", True),), known=False)


def _names(args: tuple[Arg, ...], count: int) -> list[str]:
    fixed = sum(1 for _, listed in args if not listed)
    spare = max(count - fixed, 0)
    names: list[str] = []
    for name, listed in args:
        if listed:
            names += [f"{name}_{i}" for i in range(spare)]
            spare = 0
        else:
            names.append(name)
    if len(names) < count:  # more values than the op's args take: numbered past the end
        names += [f"input_{i}" for i in range(len(names), count)]
    return names[:count]


def split_port(args: OpArgs, port: str, side: str = "output") -> tuple[str, int]:
    """(arg name, index in the arg) of a port name, as function bodies write outputs
    (``node:<arg>:<index>``).

    >>> from amanda.namespaces import namespace
    >>> split_port(op_args(namespace("amanda/tensorflow/2.21.0"), "Unpack"), "output_2")
    ('output', 2)
    """
    for name, listed in args.outputs if side == "output" else args.inputs:
        if not listed and port == name:
            return name, 0
        if listed and port.startswith(name + "_") and port[len(name) + 1:].isdigit():
            return name, int(port[len(name) + 1:])
    base, _, index = port.rpartition("_")
    return (base, int(index)) if base and index.isdigit() else (port, 0)


_CACHE: dict[tuple[str, str], OpArgs] = {}  # (namespace name, op type); namespaces never change


def _read(namespace: Any, op_type: str) -> OpArgs:
    if op_type not in namespace:
        return UNKNOWN
    schema = namespace.schema(op_type)
    sides = []
    for side, ports in (("input", schema.inputs), ("output", schema.outputs)):
        by_name = {p.name: p for p in ports}
        order = _tf_order(schema.doc, side) or [p.name for p in ports]
        sides.append(tuple((name, by_name[name].variadic) for name in order if name in by_name))
    return OpArgs(sides[0], sides[1])


def op_args(namespace: Any, op_type: str) -> OpArgs:
    """The args of ``op_type`` in ``namespace`` (a Namespace, or None: :data:`UNKNOWN`)."""
    if namespace is None:
        return UNKNOWN
    key = (namespace.name, op_type)
    found = _CACHE.get(key)
    if found is None:
        found = _CACHE[key] = _read(namespace, op_type)
    return found


def _tf_order(doc: str, side: str) -> list[str] | None:
    marker = f"TensorFlow's {side} order is "
    if marker not in doc:
        return None
    return doc.split(marker, 1)[1].split(" (", 1)[0].split(", ")
