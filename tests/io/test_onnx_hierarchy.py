"""Real models exported by torch (both exporters) import as their module tree: every module
that ran and produced a node has its container where torch's ``named_modules()`` puts it (with
its class for the torch.export-based exporter), every weight sits in its owner, the tree
computes torch's outputs, and every capability works on it."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import amanda  # noqa: E402
from amanda.containers.container import Container  # noqa: E402
from tests.fixtures.onnx import hierarchy_models as fx  # noqa: E402


def _containers(root: Container) -> dict[tuple, Container]:
    """Every module container (not a call of an ONNX function) by path."""
    found: dict[tuple, Container] = {}
    stack = [((), root)]
    while stack:
        path, node = stack.pop()
        for child in node.children:
            if child.children and "onnx_function" not in child.attrs:
                found[(*path, child.name)] = child
                stack.append(((*path, child.name), child))
    return found


def _load(model: str, kind: str, **options: object) -> Container:
    return amanda.load(fx.path(model, kind), **options)


@pytest.mark.parametrize(("model", "kind"), fx.CASES)
def test_each_module_that_ran_has_its_container(model: str, kind: str) -> None:
    """Every module that ran and produced a node has a container whose path is the module's
    qualified name split at its callers (``transformer/h.0/attn``), named by the exporter's
    name or, where amanda's naming rules forbid it, that name with ``_`` appended; the
    container's ``scope`` is the qualified name, and for the dynamo export its type is the
    class's short name and ``scope_class`` the full class path."""
    tree = _load(model, kind)
    containers = _containers(tree)
    by_scope = {c.attrs["scope"]: path for path, c in containers.items()}
    classes = fx.classes(model)
    owning = fx.modules_owning_ops(model, kind)
    assert owning, "the fixture has modules that produced nodes"
    for module in sorted(owning):
        found = by_scope.get(module)
        assert found is not None, f"{module} has no container"
        wanted = fx.relative_names(model, module)
        assert len(found) == len(wanted), (module, found)
        for name, exporter_name in zip(found, wanted):
            assert name == exporter_name or name.rstrip("_") == exporter_name, (module, found)
        container = containers[found]
        if kind == "dynamo":
            assert container.type == classes[module].rsplit(".", 1)[-1], module
            assert container.attrs["scope_class"] == classes[module], module
        else:
            assert container.type is None  # TorchScript records no classes


@pytest.mark.parametrize(("model", "kind"), fx.CASES)
def test_weights_sit_in_their_owner(model: str, kind: str) -> None:
    """A weight sits in the container of the module that owns it when every op reading it is
    inside that container; otherwise (tied, shared or folded) in the lowest container holding
    all its readers. Readers are found in the flat import, owners from torch's tensor names."""
    tree = _load(model, kind)
    flat = _load(model, kind, hierarchy=False)
    value_path = {}  # value name -> path of the op that produces it in the tree
    weight_path = {}
    for path, op in _leaves(tree):
        for port in op.outputs:
            value_path[port.attrs.get("onnx_name")] = path
        if op.attrs.get("initializer"):
            weight_path[op.outputs[0].attrs["onnx_name"]] = path
    readers: dict[str, list[tuple]] = {}
    for edge in amanda.flatten(flat).edges:
        src, dst = edge.src, edge.dst
        if src.op is not amanda.SELF and flat.child(src.op[0]).attrs.get("initializer"):
            name = flat.child(src.op[0]).outputs[0].attrs["onnx_name"]
            target = dst.op
            readers.setdefault(name, []).append(() if target is amanda.SELF else _op_path(flat, target, value_path))
    module_paths = {c.attrs["scope"]: p for p, c in _containers(tree).items()}
    assert weight_path
    for name, path in weight_path.items():
        homes = [r[:-1] for r in readers.get(name, [])]
        owner = module_paths.get(name.rsplit(".", 1)[0]) if "." in name else None
        if owner is not None and all(h[: len(owner)] == owner for h in homes):
            wanted = owner
        else:
            wanted = _common(homes) if homes else owner or ()
        assert path[:-1] == wanted, (name, path, wanted)


def _leaves(root: Container) -> list[tuple[tuple, Container]]:
    found = []
    stack = [((), root)]
    while stack:
        path, node = stack.pop()
        for child in node.children:
            if child.children and "onnx_function" not in child.attrs:
                stack.append(((*path, child.name), child))
            else:
                found.append(((*path, child.name), child))
    return found


def _op_path(flat: Container, op: tuple, value_path: dict) -> tuple:
    """The tree path of a flat op, found through the name of its first output value."""
    node = flat.child(op[0])
    return value_path[node.outputs[0].attrs.get("onnx_name")]


def _common(paths: list[tuple]) -> tuple:
    first = paths[0]
    size = 0
    while size < len(first) and all(len(p) > size and p[size] == first[size] for p in paths):
        size += 1
    return first[:size]


@pytest.mark.parametrize(("model", "kind"), fx.CASES)
def test_the_tree_computes_torchs_outputs(model: str, kind: str) -> None:
    """The Session's results on the tree equal torch's eager outputs."""
    tree = _load(model, kind)
    got = amanda.Session(tree).run(fx.info(model)["outputs"], fx.feeds(model))
    for ours, theirs in zip(got, fx.expected(model), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("model", "kind"), fx.CASES)
def test_load_dump_load_gives_the_same_tree(model: str, kind: str, tmp_path) -> None:
    """``load(dump(m)) == m`` (paths, types, attributes, ports, uids); onnxruntime runs the
    dumped file and agrees with torch; its nodes carry torch's scope metadata and
    TorchScript's scope-path names."""
    tree = _load(model, kind)
    target = tmp_path / "again.onnx"
    amanda.dump(tree, target)
    again = amanda.load(target)
    assert again == tree
    assert [c.uid for c in _containers(again).values()] == [c.uid for c in _containers(tree).values()]
    session = ort.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    for ours, theirs in zip(session.run(fx.info(model)["outputs"], fx.feeds(model)), fx.expected(model), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
    proto = onnx.load(target)
    scoped = [n for n in proto.graph.node if n.name.startswith("/")]
    assert scoped
    for node in scoped:
        keys = {p.key for p in node.metadata_props}
        assert {"pkg.torch.onnx.name_scopes", "pkg.torch.onnx.class_hierarchy"} <= keys


@pytest.mark.parametrize("kind", fx.KINDS)
def test_capabilities_work_on_the_tree(kind: str) -> None:
    """validate finds nothing, infer_types types every output as torch computed it, grad of
    the summed output by the input matches finite differences, and weights are reached by
    path and keep the values of the file's initializers."""
    tree = _load("nested", kind)
    assert amanda.validate(tree) == []
    types = amanda.infer_types(tree, {n: amanda.TensorType(a.dtype.name, a.shape) for n, a in fx.feeds("nested").items()})
    (y,) = fx.expected("nested")
    assert types.output((), "y") == amanda.TensorType("float32", y.shape)
    head = tree.child("head")  # a module's ports are typed too
    assert types.output(("head",), head.output_names[0]) == amanda.TensorType("float32", (2, 2))
    graded = amanda.grad(tree, "y", ["x"])
    feeds = fx.feeds("nested")
    _, dx = amanda.Session(graded).run(["y", "grad/x"], feeds)
    eps = 1e-3
    for index in [(0, 0), (1, 5)]:
        up, down = dict(feeds), dict(feeds)
        up["x"], down["x"] = feeds["x"].copy(), feeds["x"].copy()
        up["x"][index] += eps
        down["x"][index] -= eps
        plus = amanda.Session(tree).run(["y"], up)[0].sum()
        minus = amanda.Session(tree).run(["y"], down)[0].sum()
        assert dx[index] == pytest.approx((plus - minus) / (2 * eps), rel=1e-2, abs=1e-3)
    initializers = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(fx.path("nested", kind)).graph.initializer}
    weight = tree.descendant(("blocks.0", "lin", "weight"))
    assert np.array_equal(weight.attrs["value"], initializers["blocks.0.lin.weight"])
