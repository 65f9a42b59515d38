"""Namespaces: versioned vocabularies of op schemas, their registry, file format and checks.

>>> from amanda.namespaces import namespace
>>> "axes" in namespace("amanda/onnx/11").schema("ReduceSum").attrs
True
"""

from amanda.namespaces import core_vocab as core_vocab  # registers amanda/core
from amanda.namespaces import onnx_vocab as onnx_vocab  # registers the ONNX vocabularies
from amanda.namespaces import tensorflow_vocab as tensorflow_vocab  # and TensorFlow's
from amanda.namespaces.namespace import (
    Namespace,
    known_namespaces,
    namespace,
    register_namespace,
    register_provider,
    unregister_namespace,
)
from amanda.namespaces.op_fit import validate_op
from amanda.namespaces.schema import AttrSchema, OpSchema, PortSchema
from amanda.namespaces.schema_io import dump_namespace_schema, load_namespace_schema

__all__ = [
    "AttrSchema",
    "Namespace",
    "OpSchema",
    "PortSchema",
    "dump_namespace_schema",
    "known_namespaces",
    "load_namespace_schema",
    "namespace",
    "onnx_vocab",
    "register_namespace",
    "register_provider",
    "unregister_namespace",
    "validate_op",
]
