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


def _load(model: str, kind: str, **options: object) -> Container:
    return amanda.load(fx.path(model, kind), **options)


@pytest.mark.parametrize(("model", "kind"), fx.CASES)
def test_each_module_that_ran_has_its_container(model: str, kind: str) -> None:
    """Every module that ran and produced a node has a container whose path is the module's
    qualified name split at its callers (``transformer/h.0/attn``), named by the exporter's
    name or, where amanda's naming rules forbid it, that name with ``_`` appended; the
    container's ``scope`` is the qualified name, and for the dynamo export its type is the
    class's short name and ``scope_class`` the full class path."""
    checked, problems = fx.module_problems(model, kind, _load(model, kind))
    assert checked > 0 and problems == []


@pytest.mark.parametrize(("model", "kind"), fx.CASES)
def test_weights_sit_in_their_owner(model: str, kind: str) -> None:
    """A weight sits in the container of the module that owns it when every op reading it is
    inside that container; otherwise (tied, shared or folded) in the lowest container holding
    all its readers. Readers are found in the flat import, owners from torch's tensor names."""
    checked, problems = fx.weight_problems(_load(model, kind), _load(model, kind, hierarchy=False))
    assert checked > 0 and problems == []


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
    assert [c.uid for c in fx.containers(again).values()] == [c.uid for c in fx.containers(tree).values()]
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
