"""Write amanda's TensorFlow vocabularies from TensorFlow's own op definitions (OpDefs).

Two sources, both TensorFlow's:

- the op registry of the TensorFlow installed here (``op_def_registry``), for its version::

      pip install tensorflow-cpu          # in your own environment; not a dependency of amanda
      python tools/gen_tensorflow_vocabulary.py

- the OpDefs a released wheel carries without being installed: TensorFlow 1.x builds its
  ``gen_*_ops.py`` wrappers around a serialized ``OpList`` of the registry it was built with.
  The bytes are read with ``ast`` (the wheel's code is never run) and parsed with the installed
  TensorFlow's ``op_def_pb2``. This is how ``amanda/tensorflow/1.13.1`` (docs/format.md's example) is
  made, since TensorFlow 1.13 wheels exist only for Python <= 3.7::

      pip download tensorflow==1.13.1 --no-deps --only-binary=:all: \\
          --python-version 37 --platform manylinux1_x86_64 -d /tmp/tf113
      python tools/gen_tensorflow_vocabulary.py --wheel /tmp/tf113/tensorflow-1.13.1-*.whl

Each run writes ``amanda/namespaces/data/tensorflow-<version>.json.gz``: every op of the version's
registry (1908 for 2.21.0, 995 in 1.13.1's wheel), the common ones of ``OPS`` first, then the rest
by name, as gzip'ed JSON of the namespace-schema document (the YAML form would be over a megabyte;
amanda decompresses it on the first request of the namespace, never at import). A vocabulary
generated while an older one exists notes, per op, the attributes and ports added since the
oldest one (e.g. MatMul's ``grad_a``/``grad_b`` after 1.13.1).
``--check`` compares instead of writing.

Mapping from an OpDef: each ``input_arg``/``output_arg`` is a port named by the arg; a list arg
(``number_attr`` or ``type_list_attr``) is a variadic port whose values are named ``<arg>_0`` …
(amanda's schemas allow only a trailing variadic port, so a list arg that is not last, as in
ConcatV2, is moved last and the op's ``doc`` gives TensorFlow's order). ``type_attr`` becomes the
port's type constraint, a type attr's ``allowed_values`` its type list. Attribute types map
``type -> dtype``, ``shape -> shape``, ``list(T) -> Ts``; defaults are TensorFlow's (a shape of
unknown rank is "no default"). ``allowed_values`` of string attrs, minimums, ref ports and
statefulness are written in ``doc``. The few ops with several list args on one side (SparseConcat's
``indices``, ``values``, ``shapes``) have them as one trailing variadic port named by the first,
holding each list's values in TensorFlow's order; the ``doc`` names the args it holds.
"""

from __future__ import annotations

import argparse
import ast
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DATA = ROOT / "amanda" / "namespaces" / "data"
SCRIPT = "tools/gen_tensorflow_vocabulary.py"

#: The ops written: the format examples', the common layers', and the ops those graphs usually hold.
OPS = (
    # graph inputs, constants, state
    "Placeholder", "PlaceholderWithDefault", "Const", "VariableV2", "VarHandleOp",
    "ReadVariableOp", "AssignVariableOp", "Assign", "AssignAdd", "AssignSub",
    "Identity", "IdentityN", "NoOp", "StopGradient",
    # linear algebra and arithmetic
    "MatMul", "BatchMatMul", "BatchMatMulV2", "BiasAdd", "Add", "AddV2", "AddN", "Sub", "Mul",
    "RealDiv", "Div", "FloorDiv", "FloorMod", "Maximum", "Minimum", "Pow", "SquaredDifference",
    "Neg", "Abs", "Sqrt", "Rsqrt", "Square", "Exp", "Log", "Floor", "Ceil", "Round", "Sign",
    "Reciprocal", "Erf",
    # activations
    "Relu", "Relu6", "LeakyRelu", "Elu", "Selu", "Softplus", "Softsign", "Sigmoid", "Tanh",
    "Softmax", "LogSoftmax",
    # convolution, pooling, normalization
    "Conv2D", "DepthwiseConv2dNative", "Conv2DBackpropInput", "MaxPool", "AvgPool",
    "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", "LRN",
    # shapes and layout
    "Reshape", "Transpose", "ConcatV2", "Pack", "Unpack", "Split", "SplitV", "Slice",
    "StridedSlice", "Squeeze", "ExpandDims", "Tile", "Fill", "ZerosLike", "OnesLike", "GatherV2",
    "Range", "Shape", "Size", "Rank", "Cast", "Pad", "PadV2", "MirrorPad",
    # reductions and comparisons
    "Mean", "Sum", "Max", "Min", "Prod", "All", "Any", "ArgMax", "ArgMin", "Equal", "NotEqual",
    "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalNot",
    "Select", "SelectV2", "Where", "OneHot",
    # images, control flow, losses, training
    "ResizeBilinear", "ResizeNearestNeighbor", "Switch", "Merge", "Enter", "Exit",
    "NextIteration", "LoopCond", "SoftmaxCrossEntropyWithLogits",
    "SparseSoftmaxCrossEntropyWithLogits", "L2Loss", "ApplyGradientDescent",
    # what TF2/Keras 3 graphs and SavedModels hold (tests/fixtures/tensorflow): functional
    # control flow and calls, TensorLists of while loops, attention, checkpoints, initialisers
    "While", "StatelessWhile", "If", "StatelessIf", "PartitionedCall", "StatefulPartitionedCall",
    "TensorListFromTensor", "TensorListGetItem", "TensorListReserve", "TensorListSetItem",
    "TensorListStack", "TensorListLength", "TensorListElementShape", "Einsum", "SaveV2",
    "RestoreV2", "MergeV2Checkpoints", "ShardedFilename", "StringJoin", "StaticRegexFullMatch",
    "DisableCopyOnRead", "VarIsInitializedOp", "IsVariableInitialized", "RandomStandardNormal",
    "RandomUniform", "TruncatedNormal",
)

_ATTR_TYPES = {"type": "dtype", "shape": "shape", "tensor": "tensor", "func": "func",
               "int": "int", "float": "float", "bool": "bool", "string": "string"}


# --- reading OpDefs ------------------------------------------------------------------------------

def opdefs_from_registry() -> tuple[str, dict[str, Any]]:
    """(TensorFlow version, OpDef by name) of the installed TensorFlow's op registry."""
    import tensorflow as tf
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session
    from tensorflow.python.framework import op_def_registry

    ops = op_def_pb2.OpList()
    ops.ParseFromString(bytes(pywrap_tf_session.TF_GetBuffer(pywrap_tf_session.TF_GetAllOpList())))
    found = {opdef.name: opdef for opdef in ops.op}
    for name in OPS:  # the registry the Python side sees: each common op must be there
        if name not in found and op_def_registry.get(name) is not None:
            found[name] = op_def_registry.get(name)
    return tf.__version__, found


def opdefs_from_wheel(path: Path) -> tuple[str, dict[str, Any]]:
    """(version, OpDef by name) from the serialized OpLists in a TensorFlow 1.x wheel's
    ``gen_*_ops.py`` files; the files are parsed, never run."""
    from tensorflow.core.framework import op_def_pb2

    found: dict[str, Any] = {}
    version = None
    with zipfile.ZipFile(path) as wheel:
        for member in sorted(wheel.namelist()):
            if version is None and ".dist-info/" in member:
                version = member.split(".dist-info/")[0].rsplit("-", 1)[-1]
            if not (member.rsplit("/", 1)[-1].startswith("gen_") and member.endswith(".py")):
                continue
            if "/contrib/" in member:
                continue  # contrib ops are not TensorFlow's core registry
            tree = ast.parse(wheel.read(member))
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "_InitOpDefLibrary"
                        and node.args and isinstance(node.args[0], ast.Constant)
                        and isinstance(node.args[0].value, bytes)):
                    ops = op_def_pb2.OpList()
                    ops.ParseFromString(node.args[0].value)
                    for opdef in ops.op:
                        found[opdef.name] = opdef
    if version is None:
        raise SystemExit(f"{path}: no .dist-info in the wheel, cannot tell its version")
    return version, found


# --- OpDef -> schema data -----------------------------------------------------------------------

def dtype_name(enum: int) -> str:
    """TensorFlow DataType enum -> its dtype name (``DT_FLOAT`` -> ``float32``)."""
    from tensorflow.python.framework import dtypes

    return dtypes.as_dtype(enum).name


def _float(value: float) -> float:
    import numpy as np

    return float(str(np.float32(value)))  # OpDefs hold float32: 0.0001, not 9.99999974e-05


def attr_value(value: Any, kind: str) -> Any:
    """An ``AttrValue`` default as plain data (None for a shape of unknown rank)."""
    from tensorflow.python.framework import tensor_util

    field = value.WhichOneof("value")
    if field == "list":
        items = value.list
        element = kind[5:-1]
        if element == "int":
            return list(items.i)
        if element == "float":
            return [_float(f) for f in items.f]
        if element == "bool":
            return list(items.b)
        if element == "string":
            return [s.decode("utf-8") for s in items.s]
        if element == "type":
            return [dtype_name(t) for t in items.type]
        if element == "shape":
            return [_shape(s) for s in items.shape]
        return []
    if field == "i":
        return value.i
    if field == "f":
        return _float(value.f)
    if field == "b":
        return value.b
    if field == "s":
        return value.s.decode("utf-8")
    if field == "type":
        return dtype_name(value.type)
    if field == "shape":
        return _shape(value.shape)
    if field == "tensor":
        return tensor_util.MakeNdarray(value.tensor).tolist()
    return None


def _shape(shape: Any) -> list[int | None] | None:
    if shape.unknown_rank:
        return None
    return [None if d.size < 0 else d.size for d in shape.dim]


def _port(arg: Any, minimums: Mapping[str, int]) -> dict[str, Any]:
    data: dict[str, Any] = {"name": arg.name}
    listed = arg.number_attr or arg.type_list_attr
    if listed:
        data["variadic"] = True
        data["min_arity"] = minimums.get(listed, 0)
        if arg.type_list_attr:
            data["homogeneous"] = False
    if arg.type_attr or arg.type_list_attr:
        data["type_attr"] = arg.type_attr or arg.type_list_attr
    elif arg.type:
        data["allowed_types"] = [dtype_name(arg.type)]
    return data


def schema_data(opdef: Any, baseline: Mapping[str, Any] | None = None,
                baseline_version: str = "") -> dict[str, Any]:
    """The amanda op-schema data (one entry of ``op_schemas``) of a TensorFlow OpDef."""
    attrs: dict[str, Any] = {}
    constraints: dict[str, list[str]] = {}
    minimums: dict[str, int] = {}
    notes: list[str] = []
    for attr in opdef.attr:
        kind = attr.type
        amanda_type = (_ATTR_TYPES[kind[5:-1]] + "s") if kind.startswith("list(") else _ATTR_TYPES[kind]
        spec: dict[str, Any] = {"type": amanda_type}
        if attr.HasField("default_value"):
            default = attr_value(attr.default_value, kind)
            if default is None:
                spec["required"] = False  # e.g. Placeholder's shape: unknown rank by default
            else:
                spec["default"] = default
        attrs[attr.name] = spec
        allowed = attr.allowed_values.list
        if kind in ("type", "list(type)") and allowed.type:
            constraints[attr.name] = [dtype_name(t) for t in allowed.type]
        elif allowed.s:
            notes.append(f"{attr.name} is one of {', '.join(s.decode() for s in allowed.s)}")
        if attr.has_minimum:
            minimums[attr.name] = attr.minimum
            if kind in ("int", "list(int)", "list(type)", "list(float)", "list(shape)",
                        "list(string)", "list(tensor)", "list(bool)", "list(func)"):
                what = "length " if kind.startswith("list(") else ""
                notes.append(f"{attr.name} has {what}>= {attr.minimum}")
    inputs = [_port(a, minimums) for a in opdef.input_arg]
    outputs = [_port(a, minimums) for a in opdef.output_arg]
    for side, ports, args in (("input", inputs, opdef.input_arg), ("output", outputs, opdef.output_arg)):
        listed = [p for p in ports if p.get("variadic")]
        if len(listed) > 1:
            listed = [_merged(ports, listed, notes, side)]
        if listed and ports[-1] is not listed[0]:
            ports.remove(listed[0])
            ports.append(listed[0])
            notes.append(f"TensorFlow's {side} order is {', '.join(a.name for a in args)} "
                         f"(the list arg {listed[0]['name']} is last here)")
        refs = [a.name for a in args if a.is_ref]
        if refs:
            notes.append(f"ref {side}s: {', '.join(refs)}")
    if opdef.is_stateful:
        notes.append("stateful")
    if baseline is not None:
        notes += _since(opdef, baseline.get(opdef.name), baseline_version)
    data: dict[str, Any] = {"type": opdef.name, "attrs": attrs, "input_ports": inputs,
                            "output_ports": outputs}
    if constraints:
        data["type_constraints"] = constraints
    if notes:
        data["doc"] = "; ".join(notes) + "."
    return data


def _merged(ports: list[dict[str, Any]], listed: list[dict[str, Any]], notes: list[str],
            side: str) -> dict[str, Any]:
    """One variadic port for several list args (amanda's schemas allow one, and last)."""
    merged = {"name": listed[0]["name"], "variadic": True, "homogeneous": False,
              "min_arity": sum(p.get("min_arity", 0) for p in listed)}
    for port in listed:
        ports.remove(port)
    ports.append(merged)
    notes.append(f"the {side} list args {', '.join(p['name'] for p in listed)} are one variadic port "
                 f"{merged['name']} here, their values in that order")
    return merged


def _since(opdef: Any, old: Any, version: str) -> list[str]:
    """What this OpDef has that the baseline version's OpDef of the same op lacks."""
    if old is None:
        return [f"not in TensorFlow {version}"]
    notes = []
    added = [a.name for a in opdef.attr if a.name not in {b.name for b in old.attr}]
    if added:
        notes.append(f"attrs added after TensorFlow {version}: {', '.join(added)}")
    for side in ("input_arg", "output_arg"):
        new_args = [a.name for a in getattr(opdef, side)]
        old_args = [a.name for a in getattr(old, side)]
        if new_args != old_args:
            notes.append(f"{side.replace('_arg', 's')} in TensorFlow {version}: {', '.join(old_args)}")
    return notes


# --- writing -------------------------------------------------------------------------------------

def order(opdefs: Mapping[str, Any]) -> list[str]:
    """The op types written: the common ones of ``OPS`` first, then every other one by name."""
    common = [name for name in OPS if name in opdefs]
    return common + sorted(set(opdefs) - set(common))


def document(version: str, opdefs: Mapping[str, Any], origin: str,
             baseline: tuple[str, Mapping[str, Any]] | None = None) -> bytes:
    """The gzip'ed JSON of ``amanda/tensorflow/<version>``, checked by loading it back."""
    from amanda.namespaces.schema_io import namespace_from_data, namespace_to_data
    from amanda.namespaces.tensorflow_vocab import vocabulary_bytes, vocabulary_data

    base_version, base_defs = baseline if baseline else ("", None)
    missing = [name for name in OPS if name not in opdefs]
    source = f"generated from {origin} by {SCRIPT}"
    if missing:
        source += f"; not in this version: {', '.join(missing)}"
    body = {
        "namespace": f"amanda/tensorflow/{version}",
        "source": source,
        "op_schemas": [schema_data(opdefs[name], base_defs, base_version) for name in order(opdefs)],
    }
    namespace = namespace_from_data({"namespace_schema": body})
    data = vocabulary_bytes(namespace_to_data(namespace, attr_style="mapping"))
    if namespace_from_data(vocabulary_data(data, version)) != namespace:
        raise SystemExit("the vocabulary does not survive its own JSON round trip")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, help="read the OpDefs embedded in this TF 1.x wheel")
    parser.add_argument("--output-dir", type=Path, default=DATA)
    parser.add_argument("--check", action="store_true", help="exit 1 if the file differs")
    args = parser.parse_args(argv)
    if args.wheel is not None:
        version, opdefs = opdefs_from_wheel(args.wheel)
        origin = f"the OpDefs serialized in the gen_*_ops.py wrappers of {args.wheel.name}"
    else:
        version, opdefs = opdefs_from_registry()
        origin = f"tensorflow-cpu {version}'s op registry"
    baseline = _baseline(args.output_dir, version)
    data = document(version, opdefs, origin, baseline)
    target = args.output_dir / f"tensorflow-{version}.json.gz"
    if args.check:
        if not target.exists() or target.read_bytes() != data:
            print(f"{target} is out of date; run python {SCRIPT}", file=sys.stderr)
            return 1
        print(f"{target} is up to date")
        return 0
    target.write_bytes(data)
    print(f"wrote {target}: {len(opdefs)} op schemas, {len(data)} bytes")
    return 0


def _baseline(directory: Path, version: str) -> tuple[str, dict[str, Any]] | None:
    """The oldest vocabulary already written (as OpDef-like views), to note what is newer."""
    from amanda.namespaces.namespace import version_key
    from amanda.namespaces.tensorflow_vocab import tensorflow_files, tensorflow_namespace

    files = tensorflow_files(directory)
    if not files:
        return None
    oldest = next(iter(files)).rsplit("/", 1)[1]
    if (version_key(oldest) or ()) >= (version_key(version) or ()):
        return None
    ns = tensorflow_namespace(next(iter(files)), directory)
    return oldest, {t: _OpDefView(s) for t, s in ns.schemas.items()}


class _OpDefView:
    """Enough of an OpDef, rebuilt from an amanda schema, for :func:`_since`."""

    def __init__(self, schema: Any) -> None:
        self.attr = [_Named(a) for a in schema.attrs]
        order = _tf_order(schema.doc)
        self.input_arg = [_Named(p) for p in order.get("input", schema.input_names)]
        self.output_arg = [_Named(p) for p in order.get("output", schema.output_names)]


class _Named:
    def __init__(self, name: str) -> None:
        self.name = name


def _tf_order(doc: str) -> dict[str, list[str]]:
    found = {}
    for side in ("input", "output"):
        marker = f"TensorFlow's {side} order is "
        if marker in doc:
            found[side] = doc.split(marker, 1)[1].split(" (", 1)[0].split(", ")
    return found


if __name__ == "__main__":
    sys.exit(main())
