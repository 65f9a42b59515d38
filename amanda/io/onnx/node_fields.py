"""Each ``NodeProto``'s fields read once, as plain values.

Reading a field of a parsed protobuf message from Python makes a new object each time (a
string decoded from UTF-8, a wrapper of a repeated field), and the reader used to read some of
a node's fields several times (its outputs in both passes, its metadata once to check its text
and once to read it). :func:`read_node` reads every field the reader needs once, checks in one
go that the text fields are text (a name that is not UTF-8 comes back as ``bytes``), and gives
them as one tuple; the reader never goes back to the message but for the attributes.

>>> from onnx import helper
>>> node = helper.make_node("Add", ["a", "b", ""], ["y"], name="add")
>>> _ = node.metadata_props.add(key="k", value="v")
>>> read_node(node)[:8]
('Add', '', 'add', '', '', ('y',), ('a', 'b'), [('k', 'v')])
"""

from __future__ import annotations

from itertools import chain
from operator import attrgetter
from typing import Any

__all__ = ["NodeFields", "read_node"]

_join = "".join
_key_value = attrgetter("key", "value")

#: (op_type, domain, name, overload, doc_string, outputs, inputs without the omitted trailing
#: optional ones, metadata_props as (key, value) pairs, the attribute field): see read_node
NodeFields = tuple


def read_node(node: Any) -> NodeFields | None:
    """The fields of ``node`` (see :data:`NodeFields`), or None where a text field among them is
    not text (the caller then names it by the full walk of ``amanda.io.onnx.text``)."""
    op_type, domain, name, overload, doc = node.op_type, node.domain, node.name, node.overload, node.doc_string
    # a slice of a repeated field is made in C: about twice as fast as iterating it
    outs, ins, props = tuple(node.output[:]), tuple(node.input[:]), node.metadata_props
    pairs = list(map(_key_value, props[:])) if props else ()
    try:  # joining refuses anything but str (bytes: not UTF-8), in C
        _join((op_type, domain, name, overload, doc, *outs, *ins))
        if pairs:
            _join(chain.from_iterable(pairs))
    except TypeError:
        return None
    if ins and not ins[-1]:
        end = len(ins)
        while end and not ins[end - 1]:
            end -= 1  # omitted trailing optional inputs are not declared
        ins = ins[:end]
    return op_type, domain, name, overload, doc, outs, ins, pairs, node.attribute
