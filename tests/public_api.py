"""The public API as the argument tests and the fuzzer walk it: every callable that ``amanda``
or a subpackage lists in ``__all__``, a call of each that succeeds, and a way to run calls that
register namespaces or tables without leaving them registered."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import pkgutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

import amanda
from amanda import Input, layers, model, ops
from amanda.rewrite import Rule
from amanda.rewrite.pattern import Var

# results the library builds and hands out (records, views, rule contexts); users receive them
# and never construct them, so their constructors are not entry points
RECORDS = frozenset({
    "Call", "Change", "Diff", "Effect", "FlatGraph", "LoadedWeights", "Match", "NameMap", "Node", "OpBuilder",
    "OpDef", "OpDefinition",
    "OptimizeResult", "Optimizer", "PassReport", "PassResult", "Selection", "Slot", "Summary",
    "SummaryRow", "TypeMap", "Value",
})

#: callables that need an optional package, by name: the package and the extra that installs it.
#: Without the package their good call raises a FormatError naming the extra.
OPTIONAL = {"from_torch": ("torch", "amanda[torch]")}


def missing_extra(name: str) -> str | None:
    """The extra to install for ``name`` when its optional package is missing, else None."""
    package, extra = OPTIONAL.get(name, (None, None))
    return extra if package is not None and importlib.util.find_spec(package) is None else None


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


def _silu(op: Any, x: Any) -> Any:
    return op.Mul(x, op.Sigmoid(x))


def _swish(op: Any, x: Any) -> Any:
    return op.Swish(x)


def small_net() -> amanda.Container:
    """``loss = ReduceSum(Relu(x))`` over a float32[2, 3] input."""
    x = Input("x", "float32", [2, 3])
    return model([x], {"loss": ops.ReduceSum(ops.Relu(x), keepdims=0)}, name="net")


def good_calls(tmp: Path) -> dict[str, tuple[tuple, dict]]:
    """A call of each public callable that succeeds: positional and keyword arguments."""
    net = small_net()
    relu_name = net.children[0].name
    dense = layers.Dense(3, 2)
    saved = tmp / "net.yaml"
    amanda.dump(net, saved)
    weights = tmp / "w.npz"
    amanda.save_weights(dense, weights)
    ns = amanda.namespace("amanda/onnx/17")
    silu = Rule("silu", _silu, _swish)
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
        "grad": ((net, "loss", ["x"]), {"name": "g"}), "hvp": ((net, "loss", ["x"]), {"name": "h"}),
        "jvp": ((net, "loss", ["x"]), {"name": "j"}), "freeze": ((dense, None, "inference"), {}),
        "optimize": ((net, None, None, True), {}),
        "session_pipeline": ((net, {"x": ("float32", (2, 3))}), {}),
        "rewrite": ((net, [silu]), {}), "matches": ((net, silu), {}),
        "Rule": (("silu", _silu, _swish), {"guard": None, "namespace": "amanda/onnx/24", "commute": True,
                                                    "check": True}),
        "Optional": ((Var("b"),), {}),
        "family": (("amanda/onnx/17",), {}), "Ops": (("amanda/onnx/17",), {}),
        "define": (("ArgTestOp",), {"family": "amanda/argtest", "domain": "", "fresh": True}),
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
        "training_step": ((amanda.optim.minimize(dense_loss(), "loss", amanda.optim.SGD()), None), {"phase": "train"}),
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
    return {**c, **training_calls(tmp), **module_calls()}


def fit_net() -> amanda.Container:
    """A Dense layer with outputs ``y`` and ``loss = ReduceSum(y)``, for ``fit`` and ``predict``."""
    x = Input("x", "float32", ["batch", 3])
    y = layers.Dense(3, 2, seed=0)(x)
    return model([x], {"loss": ops.ReduceSum(y, keepdims=0), "y": y}, name="net")


def training_calls(tmp: Path) -> dict[str, tuple[tuple, dict]]:
    """Good calls of ``amanda.optim``'s training loop, callbacks, schedules and checkpoints."""
    optim = amanda.optim
    net, data = fit_net(), np.ones((4, 3), np.float32)
    trainer = optim.minimize(net, "loss", optim.SGD(0.1))
    checkpoint = tmp / "ck.npz"
    optim.save_checkpoint(checkpoint, trainer)
    fast = {"batch_size": 2, "verbose": False}
    return {
        "Callback": ((), {}), "History": ((), {}), "TerminateOnNaN": ((), {}), "Schedule": ((), {}),
        "Checkpoint": ((tmp / "ck-{epoch}.npz", 2), {}),
        "EarlyStopping": (("val_loss", 1, 0.0, "min"), {}),
        "LambdaCallback": ((), {"on_epoch_end": lambda loop, logs: None}),
        "LearningRateScheduler": ((lambda epoch, lr: lr,), {}),
        "StepDecay": ((2, 0.5), {}), "CosineDecay": ((10, 0.1), {}),
        "Warmup": ((2, optim.CosineDecay(10)), {}), "Scheduled": ((optim.SGD(0.1), optim.StepDecay(2)), {}),
        "TopKAccuracy": ((2,), {}), "clip_gradients": ((trainer, 1.0, 1.0), {}),
        "fit": ((net, data, None), {"optimizer": optim.SGD(0.1), "epochs": 1, **fast}),
        "evaluate": ((net, data, None), {"batch_size": 2}),
        "predict": ((net, data), {"output": "y", "batch_size": 2}),
        "save_checkpoint": ((tmp / "ck2.npz", trainer, None, {"epoch": 1}), {}),
        "load_checkpoint": ((checkpoint,), {}), "snapshot": ((trainer, None), {}),
        "restore": ((trainer, optim.snapshot(trainer)), {}),
    }


def module_calls() -> dict[str, tuple[tuple, dict]]:
    """Good calls of the functions over a model's module tree: weight sharing, extraction, and
    capture from torch (an optional dependency: see :data:`OPTIONAL`)."""
    dense = layers.Dense(3, 3, name="d")
    x = Input("x", "float32", [1, 3])
    twice = model([x], {"y": dense(dense(x))}, name="twice")
    torch = importlib.import_module("torch") if importlib.util.find_spec("torch") else None
    torch_call = ((torch.nn.Linear(3, 2).eval(), (torch.ones(1, 3),)), {"input_names": ["x"]}) if torch \
        else ((object(), ()), {})
    return {
        "shared": ((twice,), {}), "tie": ((twice, "d/kernel", "d_1/kernel"), {}),
        "extract": ((dense_loss(), "dense"), {}), "from_torch": torch_call,
    }


def dense_loss() -> amanda.Container:
    """A Dense layer under a scalar loss, ready for ``minimize``."""
    x = Input("x", "float32", [2, 3])
    y = layers.Dense(3, 2)(x)
    return model([x], {"loss": ops.ReduceSum(y, keepdims=0)}, name="net")


def builder_calls() -> dict[str, tuple[Callable[..., Any], tuple, dict]]:
    """A few op builders of ``amanda.ops`` (entry points too, not in ``__all__`` by name) with a
    call of each that succeeds: the function, positional and keyword arguments."""
    x, image = Input("x", "float32", [2, 4]), Input("image", "float32", [1, 1, 4, 4])
    return {
        "ops.Add": (ops.Add, (x, x), {}),
        "ops.Relu": (ops.Relu, (x,), {"name": "r"}),
        "ops.Reshape": (ops.Reshape, (x, np.array([4, 2], np.int64)), {}),
        "ops.MaxPool": (ops.MaxPool, (image,), {"kernel_shape": [2, 2]}),
        "ops.Gemm": (ops.Gemm, (x, np.ones((4, 3), np.float32)), {"transB": 0}),
    }


@contextlib.contextmanager
def restored_registries(directory: Path) -> Iterator[None]:
    """Run in ``directory`` with the namespace and table registries as they were afterwards."""
    registry = importlib.import_module("amanda.namespaces.namespace")
    tables = importlib.import_module("amanda.rewrite.mapping.convert")
    tables.registered_tables()
    saved = dict(registry._registered), list(registry._providers), list(tables._entries)
    cwd = os.getcwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(cwd)
        registry._registered.clear()
        registry._registered.update(saved[0])
        registry._providers[:] = saved[1]
        tables._entries[:] = saved[2]


def drain(result: Any) -> None:
    """Exhaust a lazy result (a generator checks its arguments only when iterated)."""
    if inspect.isgenerator(result):
        for _ in result:
            pass
