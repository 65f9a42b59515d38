"""Every public entry point answers a wrong-typed argument with an AmandaError (ideally an
ArgumentError naming the parameter), never a bare AttributeError, TypeError or a dependency's
message.

The walk covers ``amanda.__all__`` and the ``__all__`` of every subpackage: each callable is
called once with good arguments (which must succeed), then with each positional and each
keyword parameter in turn replaced by each of a set of wrong values, and once with every
positional parameter wrong.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import amanda
from amanda import Input, layers, model, ops
from amanda.errors import AmandaError, ArgumentError

# results the library builds and hands out (records, views, rule contexts); users receive them
# and never construct them, so their constructors are not entry points
RECORDS = frozenset({
    "Call", "Change", "Diff", "FlatGraph", "LoadedWeights", "NameMap", "Node", "OpBuilder",
    "OptimizeResult", "Optimizer", "PassReport", "PassResult", "Selection", "Slot", "Summary",
    "SummaryRow", "TypeMap", "Value",
})

WRONG: tuple[Any, ...] = ("s", 3, -1, 2.5, True, None, object(), [object()], {"k": object()},
                          {3: 1}, b"x", np.zeros((2, 2)), [[1], [1, 2]])


def public_callables() -> dict[str, Callable[..., Any]]:
    """Every callable that ``amanda`` or one of its subpackages lists in ``__all__``, by name
    (the first module that lists it), errors excepted."""
    modules = [amanda] + [importlib.import_module(f"amanda.{m.name}")
                          for m in pkgutil.iter_modules(amanda.__path__) if m.ispkg]
    found: dict[str, Callable[..., Any]] = {}
    ids: set[int] = set()
    for module in modules:
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if not callable(obj) or (isinstance(obj, type) and issubclass(obj, BaseException)):
                continue
            if id(obj) not in ids and name not in RECORDS:
                ids.add(id(obj))
                found[name] = obj
    return found


def _net() -> amanda.Container:
    x = Input("x", "float32", [2, 3])
    return model([x], {"loss": ops.ReduceSum(ops.Relu(x), keepdims=0)}, name="net")


def good_calls(tmp: Path) -> dict[str, tuple[tuple, dict]]:
    """A call of each public callable that succeeds: positional and keyword arguments."""
    net = _net()
    relu_name = net.children[0].name
    dense = layers.Dense(3, 2)
    saved = tmp / "net.yaml"
    amanda.dump(net, saved)
    weights = tmp / "w.npz"
    amanda.save_weights(dense, weights)
    ns = amanda.namespace("amanda/onnx/17")
    relu = ns.schema("Relu")
    table = amanda.MappingTable("argtest/a", "argtest/b")
    t = amanda.TensorType("float32", [2, 3])
    mapping = "mapping:\n  source: argtest/c\n  target: argtest/d\n  rules: []\n"
    schema = amanda.namespaces.dump_namespace_schema(amanda.namespaces.Namespace("argtest/s"))
    c: dict[str, tuple[tuple, dict]] = {
        "Container": (("G", "g"), {}), "Edge": (("a:y", "b:x"), {}), "Endpoint": (("a", "x"), {}),
        "Port": (("x",), {}), "Edit": ((net,), {}), "Input": (("x", "float32", [2]), {}),
        "MappingTable": (("argtest/a", "argtest/b", ()), {"name": "t", "on_unmatched": "pass"}),
        "OptionalType": ((t,), {}), "SequenceType": ((t,), {}), "TensorType": (("float32", [2]), {}),
        "Session": ((net,), {"threads": 1}), "bind": ((dense, "inference"), {}),
        "chain": ((layers.relu(), layers.tanh()), {"name": "c"}), "compile_selector": (("$..*",), {}),
        "consolidate": ((net,), {}), "convert": ((net, "amanda/onnx/18"), {}), "diff": ((net, net), {}),
        "dump": ((net, tmp / "out.yaml", "yaml"), {}), "dumps": ((net, "json"), {}),
        "edit": ((net,), {}), "effective_attrs": ((net, ()), {}), "flatten": ((net,), {}),
        "fuse": ((net, [relu_name], "F", "f", {}), {}), "infer_types": ((net, {}), {}),
        "load": ((saved, "yaml"), {}), "load_mapping": ((mapping,), {}),
        "load_weights": ((dense, weights), {"by": "uid"}), "loads": ((saved.read_text(), "yaml"), {}),
        "model": (([Input("x", "float32", [2])], {}, "m"), {}),
        "named_merge": (([layers.relu(name="r")], [], "m"), {}), "namespace": (("amanda/onnx/17",), {}),
        "op": (("Relu", "r", ["X"], ["Y"], {}, None, ()), {}),
        "register_table": ((table,), {}), "render": ((net, tmp / "net.svg"), {}),
        "replace": ((net, relu_name, amanda.op("Tanh", "t", ["X"], ["Y"])), {}),
        "save_weights": ((dense, tmp / "w2.npz"), {}), "select": ((net, "$..*"), {}),
        "summary": ((net, 1, None), {}), "to_dot": ((net, 1, None, 300), {}),
        "unfuse": ((amanda.fuse(net, [relu_name], "F", "f"), "f"), {}),
        "validate": ((net,), {}), "walk": ((net,), {}), "with_attrs": ((net, relu_name), {"k": 1}),
        "grad": ((net, "loss", ["x"]), {"name": "g"}), "freeze": ((dense, None, "inference"), {}),
        "optimize": ((net, None, None, True), {}),
        "family": (("amanda/onnx/17",), {}), "Ops": (("amanda/onnx/17",), {}),
        "iter_ops": ((net,), {}), "new_uid": ((), {}), "phases": ((net,), {}),
        "sorted_ops": ((net, None), {}), "from_document": ((amanda.io.to_document(net),), {}),
        "to_document": ((net,), {}),
        "Activation": (("relu",), {"name": "a"}), "AvgPool": ((2, 2, "valid"), {"dims": 2}),
        "BatchNorm": ((3,), {"momentum": 0.9, "epsilon": 1e-5, "seed": 0}),
        "Conv": ((3, 4, 3), {"stride": 1, "groups": 1, "use_bias": True, "seed": 0}),
        "Conv1D": ((3, 4, 3), {}), "Conv2D": ((3, 4, 3), {}), "Conv3D": ((3, 4, 3), {}),
        "Dense": ((3, 2), {"activation": "relu", "use_bias": True, "seed": 0}),
        "Dropout": ((0.5,), {"name": "d"}), "Embedding": ((5, 2), {"seed": 0}),
        "Flatten": ((1,), {}), "GlobalAvgPool": ((), {"keepdims": False}),
        "LayerNorm": ((3,), {"epsilon": 1e-5}), "MaxPool": ((2, 2, "valid"), {}),
        "MultiHeadAttention": ((4, 2), {"seed": 0}), "Reshape": (([2, 3],), {}),
        "TransformerEncoder": ((4, 2, 8), {"seed": 0}),
        "seeded": ((dense, 1), {"prefix": ()}),
        "AttrSchema": (("a", "int", False, 1), {}), "Namespace": (("argtest/n",), {"parent": None}),
        "OpSchema": (("Neg",), {"since_version": 1}), "PortSchema": (("x",), {"optional": True}),
        "dump_namespace_schema": ((ns,), {}), "known_namespaces": ((), {}),
        "load_namespace_schema": ((schema,), {}),
        "register_namespace": ((amanda.namespaces.Namespace("argtest/r/1"),), {"replace": True}),
        "register_provider": (("argtest/p", lambda: ["argtest/p/1"], amanda.namespaces.Namespace), {}),
        "unregister_namespace": (("argtest/r/1",), {}),
        "validate_op": ((relu, ("g", "r"), "Relu", ["X"], ["Y"], {}), {}),
        "SGD": ((0.1, 0.0, False, 0.0), {}), "Adam": ((0.1, (0.9, 0.99), 1e-8, 0.0), {}),
        "AdamW": ((0.1, (0.9, 0.99), 1e-8, 0.0), {}), "default_weights": ((dense,), {}),
        "minimize": ((dense_loss(), "loss", amanda.optim.SGD()), {"name": "train"}),
        "trainable": ((dense, None), {}),
        "fold_constants": ((net, True), {}), "specialize": ((net, {"x": t}), {}),
        "Selector": (("$..*", False, "compiled"), {}),
        "broadcast_shapes": (([2, 1], [3]), {}), "check": ((net, None), {}),
        "fits": ((t, np.zeros((2, 3), np.float32), None), {}), "from_attrs": (({"dtype": "float32"},), {}),
        "merge": ((t, t), {}), "to_attrs": ((t,), {}), "unify_dims": ((2, 2), {}),
        "notebook_svg": ((net, None), {}), "to_svg": ((net,), {}), "tree_text": ((net, 60, 12), {}),
    }
    for name in ("eliminate_common_subexpressions", "eliminate_dead_code", "fuse_conv_batchnorm",
                 "fuse_gelu", "fuse_matmul_add", "pool_before_relu", "remove_identities"):
        c[name] = ((net,), {})
    for name in ("elu", "gelu", "leaky_relu", "log_softmax", "relu", "selu", "sigmoid", "silu",
                 "softmax", "softplus", "tanh"):
        c[name] = ((), {"name": "act"})
    return c


def dense_loss() -> amanda.Container:
    """A Dense layer under a scalar loss, ready for ``minimize``."""
    x = Input("x", "float32", [2, 3])
    y = layers.Dense(3, 2)(x)
    return model([x], {"loss": ops.ReduceSum(y, keepdims=0)}, name="net")


@pytest.fixture
def registries(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Run in ``tmp_path`` with the namespace and table registries restored afterwards."""
    registry = importlib.import_module("amanda.namespaces.namespace")
    tables = importlib.import_module("amanda.namespaces.mapping.convert")

    tables.registered_tables()
    monkeypatch.setattr(registry, "_registered", dict(registry._registered))
    monkeypatch.setattr(registry, "_providers", list(registry._providers))
    monkeypatch.setattr(tables, "_entries", list(tables._entries))
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def _wrong_calls(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Iterator[tuple[str, tuple, dict]]:
    """``(what, args, kwargs)`` for every single wrong argument, and all positional ones wrong."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except ValueError:  # pragma: no cover - every public callable has a signature
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keywords = [p for p in params if p.kind is p.KEYWORD_ONLY]
    for bad in WRONG:
        for i, p in enumerate(positional):
            filled = list(args) + [q.default for q in positional[len(args):i]]
            filled = filled[:i] + [bad] + filled[i + 1:]
            yield f"{p.name}={bad!r:.40}", tuple(filled), kwargs
        for p in keywords:
            yield f"{p.name}={bad!r:.40}", args, {**kwargs, p.name: bad}
        if positional:
            yield f"all positional={bad!r:.40}", (bad,) * len(positional), {}


def test_every_public_callable_has_a_good_call(registries: Path) -> None:
    """The walk knows a good call of every public callable, so a new one cannot slip past it."""
    missing = sorted(set(public_callables()) - set(good_calls(registries)))
    assert not missing, f"add a good call for {missing}"


@pytest.mark.parametrize("name", sorted(public_callables()))
def test_wrong_arguments_raise_amanda_errors(name: str, registries: Path) -> None:
    """The good call succeeds; every wrong-typed argument ends in an AmandaError or a result."""
    fn = public_callables()[name]
    args, kwargs = good_calls(registries)[name]
    _drain(fn(*args, **kwargs))
    raw = []
    for what, bad_args, bad_kwargs in _wrong_calls(fn, args, kwargs):
        try:
            _drain(fn(*bad_args, **bad_kwargs))
        except AmandaError:
            pass
        except Exception as exc:  # noqa: BLE001 - every other exception is the finding
            raw.append(f"{name}({what}): {type(exc).__name__}: {str(exc)[:100]}")
    assert not raw, "\n".join(raw)


def _drain(result: Any) -> None:
    """Exhaust a lazy result (a generator checks its arguments only when iterated)."""
    if inspect.isgenerator(result):
        for _ in result:
            pass


def test_infer_types_on_a_string_names_the_argument() -> None:
    """The case the issue reported: ``infer_types("model")`` is an ArgumentError naming
    ``model``, not an AttributeError."""
    with pytest.raises(ArgumentError, match="model") as info:
        amanda.infer_types("model")
    assert info.value.expected and "Container" in info.value.expected
