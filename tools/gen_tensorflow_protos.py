"""Write the TensorFlow message definitions amanda decodes GraphDefs and SavedModels with.

Source: the serialized ``FileDescriptorProto`` of each ``.proto`` file that TensorFlow's installed
``*_pb2`` modules register (``tensorflow/core/framework/graph.proto``,
``tensorflow/core/protobuf/saved_model.proto``, ``tensorflow/core/protobuf/tensor_bundle.proto``,
``tensorflow/core/protobuf/trackable_object_graph.proto`` and every file they import:
NodeDef, AttrValue, TensorProto, TensorShapeProto, DataType, FunctionDefLibrary, VersionDef,
OpDef, MetaGraphDef, SignatureDef, SaverDef, BundleHeaderProto/BundleEntryProto ...), written
dependencies first as one ``FileDescriptorSet`` to ``amanda/io/tensorflow/descriptors.bin``.
At run time amanda builds message classes from it with the protobuf runtime alone
(``amanda/io/tensorflow/protos.py``); TensorFlow is needed only to run this script::

    pip install tensorflow-cpu            # 2.21.0 wrote the committed file
    python tools/gen_tensorflow_protos.py [--check]

``--check`` compares with the committed file instead of writing it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "amanda" / "io" / "tensorflow" / "descriptors.bin"


def descriptor_set() -> tuple[str, bytes]:
    """(TensorFlow version, the serialized FileDescriptorSet of the roots and their imports)."""
    import tensorflow as tf
    from google.protobuf import descriptor_pb2
    from tensorflow.core.framework import graph_pb2
    from tensorflow.core.protobuf import (
        saved_model_pb2,
        tensor_bundle_pb2,
        trackable_object_graph_pb2,
    )

    roots = [m.DESCRIPTOR for m in (graph_pb2, saved_model_pb2, tensor_bundle_pb2, trackable_object_graph_pb2)]
    ordered: list = []
    seen: set[str] = set()

    def visit(fd) -> None:  # dependencies first, each file once
        if fd.name in seen:
            return
        seen.add(fd.name)
        for dep in fd.dependencies:
            visit(dep)
        ordered.append(fd)

    for root in roots:
        visit(root)
    out = descriptor_pb2.FileDescriptorSet()
    for fd in ordered:
        proto = out.file.add()
        fd.CopyToProto(proto)
    return tf.__version__, out.SerializeToString(deterministic=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file")
    args = parser.parse_args(argv)
    version, data = descriptor_set()
    if args.check:
        same = OUT.exists() and OUT.read_bytes() == data
        print(f"{OUT.name}: {'up to date' if same else 'differs'} (tensorflow {version})")
        return 0 if same else 1
    OUT.write_bytes(data)
    print(f"wrote {OUT} ({len(data)} bytes, tensorflow {version})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
