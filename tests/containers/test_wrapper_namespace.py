"""Wrappers (edit, chain, named_merge) declare the namespace of what they wrap when it is unambiguous."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from amanda import Session, chain, edit, effective_attrs, named_merge, op, walk

onnx = pytest.importorskip("onnx")
from onnx import numpy_helper  # noqa: E402

from amanda.io.onnx import from_onnx  # noqa: E402
from tests.fixtures.onnx.onnx_models import feeds, mlp  # noqa: E402
from tests.strategies import chains, check_invariants, snapshot  # noqa: E402

ONNX17 = "amanda/onnx/17"


def _relu(x):
    return np.maximum(x, 0)


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_a_skip_connection_around_an_imported_onnx_model_runs():
    """An Add added by edit() around an imported ONNX model runs in the model's namespace,
    and the Session's result equals plain numpy with the skip."""
    proto = mlp()
    model = from_onnx(proto)
    assert model.attrs["namespace"] == ONNX17
    skip = (
        edit(model)
        .remove_edge("mlp/dense1:Y", "mlp/relu1:X")
        .add(op("Add", "skip", ["A", "B"], ["C"]))
        .connect("mlp/relu0:Y", "skip:A")
        .connect("mlp/dense1:Y", "skip:B")
        .connect("skip:C", "mlp/relu1:X")
        .build(name="resnet")
    )
    assert skip.attrs["namespace"] == ONNX17 and "namespace" not in skip.child("skip").attrs
    assert effective_attrs(skip, "skip")["namespace"] == ONNX17
    w = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    x = feeds("mlp")["x"]
    a0 = _relu(x @ w["W0"] + w["b0"])
    h1 = a0 @ w["W1"] + w["b1"]
    a1 = _relu(a0 + h1)
    expected = _softmax(a1 @ w["W2"] + w["b2"])
    with Session(skip, threads=1) as session:
        (probs,) = session.run(["probs"], {"x": x})
    np.testing.assert_allclose(probs, expected, rtol=1e-5, atol=1e-6)


def test_explicit_wrapper_namespace_wins():
    """A namespace given to build() overrides the model's; a model without one adds none."""
    model = op("Relu", "r", ["X"], ["Y"], attrs={"namespace": ONNX17})
    assert edit(model).build(attrs={"namespace": "amanda/onnx/13"}).attrs["namespace"] == "amanda/onnx/13"
    assert "namespace" not in edit(op("Relu", "r", ["X"], ["Y"])).build().attrs


@pytest.mark.parametrize("namespaces, expected", [
    ((ONNX17, ONNX17), ONNX17),
    ((ONNX17, None), ONNX17),
    ((None, None), None),
    ((ONNX17, "amanda/onnx/13"), None),
])
def test_chain_and_merge_declare_a_shared_namespace_only(namespaces, expected):
    """chain and named_merge declare a namespace exactly when the children that declare one agree."""
    kids = [op("Relu", f"r{i}", ["X"], ["Y"], attrs={"namespace": ns} if ns else None)
            for i, ns in enumerate(namespaces)]
    for wrapper in (chain(*kids), named_merge(kids, patches=[("r0:Y", "r1:X")])):
        assert wrapper.attrs.get("namespace") == expected
        # each child's effective namespace is what it was on its own, or the shared one
        for path, _node, attrs in walk(wrapper):
            if path:
                own = namespaces[int(path[0][1:])]
                assert attrs.get("namespace") == (own or expected)


@given(chains(min_layers=2, max_layers=4), st.data())
def test_wrappers_keep_every_declared_namespace(layers, data):
    """For random layers with random namespaces, chain and named_merge leave inputs unchanged,
    satisfy the invariants, declare a namespace exactly when the declared ones agree, and every
    leaf that had an effective namespace on its own keeps it."""
    names = [data.draw(st.sampled_from([None, ONNX17, "amanda/onnx/13"])) for _ in layers]
    layers = [layer.with_attrs(namespace=ns) if ns else layer for layer, ns in zip(layers, names)]
    before = [snapshot(layer) for layer in layers]
    declared = {ns for ns in names if ns}
    own = {n.uid: a.get("namespace") for layer in layers for _, n, a in walk(layer) if n.is_op}
    for wrapper in (chain(*layers), named_merge(layers, patches=[]), edit(layers[0]).build()):
        check_invariants(wrapper)
        assert [snapshot(layer) for layer in layers] == before
        if wrapper.type == "Edit":
            assert wrapper.attrs.get("namespace") == names[0]
            continue
        assert wrapper.attrs.get("namespace") == (next(iter(declared)) if len(declared) == 1 else None)
        for _, node, attrs in walk(wrapper):
            if node.is_op and own[node.uid] is not None:
                assert attrs.get("namespace") == own[node.uid]
