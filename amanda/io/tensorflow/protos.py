"""TensorFlow's protobuf messages, built at run time from the definitions amanda carries.

``descriptors.bin`` is one serialized ``FileDescriptorSet`` written by
``tools/gen_tensorflow_protos.py`` from TensorFlow 2.21's own ``.proto`` definitions (GraphDef,
NodeDef, AttrValue, TensorProto, FunctionDefLibrary, SavedModel, MetaGraphDef, SignatureDef,
SaverDef, TrackableObjectGraph, BundleHeaderProto/BundleEntryProto and what they import). The
files are added to a descriptor pool of amanda's own (so a TensorFlow installed beside amanda,
with the same file names in the default pool, never clashes) and the message classes are made
with the protobuf runtime, once. Only ``protobuf`` is needed (the ``tensorflow`` extra).

>>> graph = message("tensorflow.GraphDef")()
>>> node = graph.node.add(name="dense/MatMul", op="MatMul", input=["x", "dense/kernel"])
>>> back = message("tensorflow.GraphDef").FromString(graph.SerializeToString())
>>> back.node[0].name, list(back.node[0].input)
('dense/MatMul', ['x', 'dense/kernel'])
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from amanda.errors import ArgumentError

__all__ = ["DESCRIPTORS", "data_types", "message", "parse", "require_protobuf"]

DESCRIPTORS = Path(__file__).with_name("descriptors.bin")


def require_protobuf() -> Any:
    """The ``google.protobuf`` package, or an ArgumentError telling how to install it."""
    try:
        import google.protobuf  # noqa: F401
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError:
        raise ArgumentError(
            "reading or writing TensorFlow files needs the protobuf package: "
            "pip install 'amanda[tensorflow]'", expected="the protobuf package", found="not installed",
        ) from None
    return descriptor_pb2, descriptor_pool, message_factory


@functools.cache
def _pool() -> Any:
    descriptor_pb2, descriptor_pool, _ = require_protobuf()
    files = descriptor_pb2.FileDescriptorSet.FromString(DESCRIPTORS.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for proto in files.file:
        pool.Add(proto)
    return pool


@functools.cache
def message(full_name: str) -> Any:
    """The message class of ``full_name`` (``tensorflow.GraphDef``, ``tensorflow.SavedModel`` ...)."""
    _, _, message_factory = require_protobuf()
    try:
        descriptor = _pool().FindMessageTypeByName(full_name)
    except KeyError:
        raise ArgumentError.at("full_name", "a TensorFlow message amanda carries", repr(full_name)) from None
    return message_factory.GetMessageClass(descriptor)


@functools.cache
def data_types() -> dict[int, str]:
    """TensorFlow's ``DataType`` enum: number -> name (``1 -> 'DT_FLOAT'``).

    >>> data_types()[1], data_types()[20]
    ('DT_FLOAT', 'DT_RESOURCE')
    """
    enum = _pool().FindEnumTypeByName("tensorflow.DataType")
    return {value.number: value.name for value in enum.values}


def parse(full_name: str, data: bytes, source: str) -> Any:
    """``data`` decoded as a ``full_name`` message, or a FormatError naming ``source``: a
    truncated or corrupt file never surfaces as protobuf's own exception."""
    from amanda.errors import FormatError

    cls = message(full_name)
    try:
        return cls.FromString(data)
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise FormatError(
            f"{source}: not a readable {full_name.split('.')[-1]} (corrupt or truncated file): {exc}",
            path=source, expected=f"a serialized {full_name}", found=type(exc).__name__,
        ) from None
