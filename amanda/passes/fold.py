"""Constant folding and shape specialisation.

``fold_constants`` evaluates, once, every deterministic ONNX op whose inputs are all constants
and replaces its used outputs by ``Constant`` ops; with inferred types it first turns ``Shape``
and ``Size`` of statically shaped values into constants, so that a torch export's
``Shape -> Gather -> Unsqueeze -> Concat -> Reshape`` chains fold to one constant shape.
``specialize`` fixes the model's input types (dtype and shape), which is what makes those
shapes static.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

import amanda.exec.kernels  # noqa: F401  # registers the kernels
from amanda.containers import SELF, Container, Endpoint, Port
from amanda.containers.arguments import expect_container, expect_flag, expect_mapping
from amanda.errors import ArgumentError
from amanda.exec.dispatch import output_positions, resolve_kernel
from amanda.exec.plan_fold import MAX_FOLDED_BYTES
from amanda.namespaces.name import NamespaceName
from amanda.ops.registry import entry
from amanda.passes.cleanup import effectful
from amanda.passes.level import Level, constant_value, level_namespaces, new_constant, on_levels, reached_paths
from amanda.passes.report import PassReport, PassResult
from amanda.types import TensorType, infer_types

__all__ = ["fold_constants", "specialize"]



def _onnx_family(namespace: str | None) -> bool:
    return bool(namespace) and NamespaceName.parse(str(namespace)).is_onnx


def _constant_source(node: Container, namespace: str | None) -> bool:
    """Whether ``node`` is a constant source (its registry entry says ``constant``): already folded."""
    name = NamespaceName.parse(str(namespace)) if namespace else None
    found = entry(name.family if name else "amanda/onnx", str(node.type), domain=name.domain if name else "")
    return found is not None and found.constant


def _static_shape(types: Any, path: tuple, source: Endpoint | None) -> tuple[int, ...] | None:
    if types is None or source is None:
        return None
    where = path if source.op is SELF else path + tuple(source.op)
    found = types.input(where, source.port) if source.op is SELF else types.output(where, source.port)
    if not isinstance(found, TensorType) or found.shape is None:
        return None
    shape = tuple(found.shape)
    return shape if all(isinstance(d, (int, np.integer)) for d in shape) else None


def _shape_value(node: Container, shape: tuple[int, ...]) -> np.ndarray:
    if node.type == "Size":
        return np.array(int(np.prod(shape)), np.int64)
    rank = len(shape)
    start, end = int(node.attrs.get("start", 0)), node.attrs.get("end")
    start = max(0, min(rank, start + rank if start < 0 else start))
    stop = rank if end is None else int(end)
    stop = max(0, min(rank, stop + rank if stop < 0 else stop))
    return np.array(shape[start:stop], np.int64)


class _Folder:
    """The state of folding one level: known constant values by source endpoint."""

    def __init__(self, level: Level, path: tuple, namespace: str | None, types: Any) -> None:
        self.level, self.path, self.namespace, self.types = level, path, namespace, types
        self.values: dict[Endpoint, np.ndarray] = {}
        self.folded: list[str] = []

    def foldable(self, name: str) -> bool:
        node = self.level.ops[name]
        ns = node.attrs.get("namespace", self.namespace)
        if (not node.is_op or effectful(node, ns) or _constant_source(node, ns) or name in self.level.pinned
                or not _onnx_family(ns)):
            return False
        sources = self.level.inputs(name)
        return any(s is not None for s in sources) and all(s is None or s in self.values for s in sources)

    def shape_of(self, name: str) -> np.ndarray | None:
        node = self.level.ops[name]
        if (node.type not in ("Shape", "Size") or not node.is_op or name in self.level.pinned
                or not _onnx_family(node.attrs.get("namespace", self.namespace))):
            return None
        shape = _static_shape(self.types, self.path, self.level.inputs(name)[0] if node.inputs else None)
        return None if shape is None else _shape_value(node, shape)

    def evaluate(self, name: str) -> list[np.ndarray] | None:
        """The outputs of op ``name`` run on its constant inputs (None when it cannot run now)."""
        node = self.level.ops[name]
        ns = node.attrs.get("namespace", self.namespace)
        args = [None if s is None else self.values[s] for s in self.level.inputs(name)]
        try:
            resolved = resolve_kernel(node, "/".join(self.path + (name,)), ns)
            if resolved.session:
                return None
            with np.errstate(all="ignore"):
                results = resolved.fn(resolved.attrs, *args)
            found = [np.asarray(v) if isinstance(v, np.generic) else v for v in
                     (results[k] for k in output_positions(node, ns))]
        except Exception:  # noqa: BLE001 - an op that cannot run now is left to run (and fail) at run time
            return None
        if not all(isinstance(v, np.ndarray) and v.nbytes <= MAX_FOLDED_BYTES for v in found):
            return None
        return found

    def run(self) -> tuple[Container, dict]:
        level = self.level
        for name in level.order():
            value = constant_value(level.ops[name])
            if value is not None and name not in level.pinned:
                self.values[level.output(name)] = value
                continue
            shape = self.shape_of(name)
            found = [shape] if shape is not None else (self.evaluate(name) if self.foldable(name) else None)
            if found is None:
                continue
            self.values.update({level.output(name, i): v for i, v in enumerate(found)})
            self.folded.append(name)
        return self.rebuild()

    def rebuild(self) -> tuple[Container, dict]:
        level = self.level
        if not self.folded:
            return level.model, {}
        taken = set(level.ops) - set(self.folded)
        added, rewire = [], {}
        for name in self.folded:
            node = level.ops[name]
            for i, port in enumerate(node.outputs):
                readers = level.reads(level.output(name, i))
                if not readers:
                    continue
                new = name if len(node.outputs) == 1 else f"{name}_{port.name}"
                while new in taken:
                    new += "_"
                taken.add(new)
                added.append(new_constant(new, self.values[level.output(name, i)], node, amanda_folded_from=name))
                rewire[level.output(name, i)] = Endpoint((new,), "output")
        model = level.rebuild(drop=self.folded, add=added, rewire=rewire)
        return model, {"replaced": list(self.folded), "added": [c.name for c in added]}


def _fold_level(model: Container, path: tuple, context: Any) -> tuple[Container, dict]:
    level = Level.of(model, deep_sources=True)
    if level is None:
        return model, {}
    namespaces, types, reached = context
    level.pinned.update(name for name in level.ops if path + (name,) in reached)  # named from above
    return _Folder(level, path, namespaces.get(path), types).run()


def fold_constants(model: Container, use_types: bool = True) -> PassResult:
    """Evaluate once every deterministic ONNX op whose inputs are all constant (and, with
    ``use_types``, ``Shape``/``Size`` of values whose inferred shape is static).

    A folded op is replaced by a ``Constant`` of the same name (``name_port`` for each used
    output of a multi-output op), marked ``amanda_folded_from``; the ops that fed only it are
    left for :func:`eliminate_dead_code`.

    >>> import amanda, numpy as np
    >>> two = amanda.op("Constant", "two", [], ["output"], {"value": np.float32(2)})
    >>> g = amanda.Container(None, "g", inputs=["x"], outputs=["y"], children=[two, amanda.op("Mul", "sq", ["A", "B"], ["C"]),
    ...     amanda.op("Add", "add", ["A", "B"], ["C"])],
    ...     edges=[("two:output", "sq:A"), ("two:output", "sq:B"), ("g:x", "add:A"), ("sq:C", "add:B"), ("add:C", "g:y")],
    ...     attrs={"namespace": "amanda/onnx/17"})
    >>> out, report = fold_constants(g)
    >>> report.replaced, float(out.child("sq").attrs["value"])
    (('sq',), 4.0)
    """
    expect_container(model, "model")
    types = None
    if expect_flag(use_types, "use_types"):
        try:
            types = infer_types(model)
        except Exception:  # noqa: BLE001 - a model inference cannot read folds without shapes
            types = None
    out, changes = on_levels(model, _fold_level, (level_namespaces(model), types, reached_paths(model)),
                             enter_reached=True)
    return PassResult(out, PassReport.of("fold_constants", changes))


def _typed_port(port: Port, given: Any) -> Port:
    if isinstance(given, np.ndarray):
        dtype, shape = given.dtype, given.shape
    elif isinstance(given, TensorType):
        dtype, shape = given.dtype, given.shape
    else:
        try:
            dtype, shape = given
        except (TypeError, ValueError):
            raise ArgumentError.at(f"inputs.{port.name}", "an array, a TensorType or a (dtype, shape) pair",
                                   repr(given)[:80]) from None
    try:
        name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise ArgumentError.at(f"inputs.{port.name}", "a dtype and a shape of integers", repr(given)[:80]) from None
    return port.with_attrs(dtype=name, shape=dims)


def specialize(model: Container, inputs: Mapping[str, Any]) -> PassResult:
    """``model`` with the given input ports typed: ``{name: array | TensorType | (dtype, shape)}``.

    The result only accepts values of those types; :func:`fold_constants` then folds the
    shape computations that depend on them.

    >>> import amanda, numpy as np
    >>> g = amanda.Container(None, "g", inputs=["x"], outputs=["y"], children=[amanda.op("Relu", "r", ["X"], ["Y"])],
    ...     edges=[("g:x", "r:X"), ("r:Y", "g:y")])
    >>> out, report = specialize(g, {"x": ("float32", (2, 3))})
    >>> out.inputs[0].attrs["dtype"], out.inputs[0].attrs["shape"], report.replaced
    ('float32', (2, 3), ('x',))
    """
    expect_container(model, "model")
    expect_mapping(inputs, "inputs", "a mapping of input names to types")
    unknown = set(inputs) - set(model.input_names)
    if unknown:
        raise ArgumentError.at("inputs", f"input names among {list(model.input_names)}", str(sorted(unknown)))
    ports = tuple(_typed_port(p, inputs[p.name]) if p.name in inputs else p for p in model.inputs)
    changed = [p.name for p, q in zip(model.inputs, ports) if p != q]
    if not changed:
        return PassResult(model, PassReport("specialize"))
    return PassResult(model.evolve(inputs=ports), PassReport("specialize", replaced=tuple(changed)))
