"""bind: late choice between a container's computations (the BatchNorm challenge)."""

from hypothesis import given

import amanda
from amanda import Container, Edge, bind, flatten, op
from amanda.containers import phases
from tests.strategies import check_invariants, nested_containers, snapshot


def batchnorm() -> Container:
    """One container describing both computations of a batchnorm."""
    children = [
        op("ReduceMean", "batch_mean", ["x"], ["y"]),
        op("Normalize", "train_norm", ["x", "mean"], ["y"]),
        op("Read", "running_mean", [], ["y"]),
        op("Normalize", "infer_norm", ["x", "mean"], ["y"]),
        op("AssignMovingAverage", "update_mean", ["value"], []),
    ]
    edges = [
        ("bn:x", "batch_mean:x"), ("bn:x", "train_norm:x"), ("batch_mean:y", "train_norm:mean"),
        ("bn:x", "infer_norm:x"), ("running_mean:y", "infer_norm:mean"),
        Edge("train_norm:y", "bn:y", attrs={"phase": "train"}),
        Edge("infer_norm:y", "bn:y", attrs={"phase": "inference"}),
        ("batch_mean:y", "update_mean:value"),
        Edge("update_mean:-1", "bn:train", attrs={"phase": "train"}),
    ]
    return Container("BatchNorm", "bn", inputs=["x"], outputs=["y"], children=children, edges=edges, controls=["train", "inference"])


def producer_of_y(c):
    return [str(e.src) for e in flatten(c).producers(amanda.SELF, "y")]


def test_one_container_two_computations():
    """Unbound, both computations are described; bind picks one late."""
    bn = batchnorm()
    assert sorted(producer_of_y(bn)) == ["infer_norm:y", "train_norm:y"]
    assert producer_of_y(bind(bn, "train")) == ["train_norm:y"]
    assert producer_of_y(bind(bn, "inference")) == ["infer_norm:y"]
    assert not flatten(bind(bn, "inference")).producers(amanda.SELF, "train")
    assert phases(bn) == {"train", "inference"}


def test_bind_is_pure_and_shares_what_it_can():
    """bind leaves the model unchanged, returns it when nothing differs, and shares children."""
    bn = batchnorm()
    before = snapshot(bn)
    bound = bind(bn, "train")
    assert snapshot(bn) == before
    assert bound.child("batch_mean") is bn.child("batch_mean")
    plain = op("Relu", "r")
    assert bind(plain, "train") is plain
    wrapped = Container(children=[bn], edges=[])
    assert bind(wrapped, "inference").child("bn") == bind(bn, "inference")


@given(nested_containers())
def test_bind_never_modifies_and_keeps_invariants(pair):
    """bind on random models is pure and yields valid containers."""
    _, model = pair
    before = snapshot(model)
    for phase in ("train", "inference"):
        check_invariants(bind(model, phase))
    assert snapshot(model) == before
