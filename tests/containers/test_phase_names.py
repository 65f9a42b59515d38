"""Phases are checked by name: Session.run, Session.plan, grad and in_computation refuse a name
the model does not have, listing its phases and computations with a did-you-mean."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda import SELF, Container, Input, layers, op, ops
from amanda.containers.phases import check_phase, computations
from amanda.errors import ArgumentError, ExecutionError, QueryError
from amanda.query import compile_selector, select

X = np.linspace(-1.0, 1.0, 8, dtype=np.float32).reshape(2, 4)


def batchnorm_net() -> Container:
    """Dense(BatchNorm(x)) with a summed loss: phases train and inference, a `train` port."""
    x = Input("x", "float32", ("batch", 4))
    y = layers.Dense(4, 3)(layers.BatchNorm(4)(x))
    return layers.seeded(amanda.model([x], {"y": y, "loss": ops.ReduceSum(y, keepdims=0)}, name="net"), 0)


def plain_net() -> Container:
    """A model with no phase anywhere."""
    x = Input("x", "float32", ("batch", 4))
    return amanda.model([x], {"y": ops.Relu(x)}, name="plain")


def test_computations_are_tagged_phases_and_linked_control_ports() -> None:
    """A phase on an edge and a control port some op is linked to (directly or through an inner
    port) are names; a control port nothing is linked to is not."""
    inner = Container("Inner", "inner", controls=["update"], children=[op("Assign", "a")],
                      edges=[("a:-1", (SELF, "update"))])
    top = Container("G", "g", controls=["train", "spare"], children=[inner, op("Noop", "n")],
                    edges=[("inner:update", (SELF, "train"))])
    assert computations(top) == {"train", "update"}
    assert computations(batchnorm_net()) == {"train", "inference"}
    assert computations(plain_net()) == frozenset()
    assert computations(layers.freeze(batchnorm_net())) == {"inference"}


def test_a_misspelt_phase_is_refused_by_run_and_plan_with_the_names_and_a_suggestion() -> None:
    """run(phase="trian") and plan(phase="trian") raise an ExecutionError listing the model's
    phases with a did-you-mean; the right name runs."""
    net = batchnorm_net()
    with amanda.Session(net) as session:
        for call in (lambda: session.run(["y"], {"x": X}, phase="trian"),
                     lambda: session.plan(["y"], ["x"], phase="trian")):
            with pytest.raises(ExecutionError, match=r"'inference', 'train'.*did you mean 'train'\?") as info:
                call()
            assert info.value.found == "'trian'"
        assert session.run(["y"], {"x": X}, phase="inference")[0].shape == (2, 3)


def test_a_frozen_model_says_it_has_no_train_phase() -> None:
    """A model frozen by layers.freeze run with phase="train" (and its gradient container, and
    grad asked for the train phase) says it has no train phase; inference still runs."""
    frozen = layers.freeze(batchnorm_net())
    with amanda.Session(frozen) as session:
        with pytest.raises(ExecutionError, match="`net` has no train phase"):
            session.run(["y"], {"x": X}, phase="train")
        expected = session.run(["y"], {"x": X}, phase="inference")[0]
        np.testing.assert_array_equal(session.run(["y"], {"x": X})[0], expected)
    with pytest.raises(ArgumentError, match="has no train phase"):
        amanda.grad(frozen, "loss", ["x"], phase="train")
    g = amanda.grad(frozen, "loss", ["x"])  # "auto": no train phase, so none is bound
    with amanda.Session(g) as session:
        with pytest.raises(ExecutionError, match="has no train phase"):
            session.run(["grad/x"], {"x": X}, phase="train")
        assert session.run(["grad/x"], {"x": X})[0].shape == (2, 4)


def test_a_model_without_phases_says_to_leave_phase_out() -> None:
    """Any phase given to a model that has none is refused with the advice to leave it out."""
    with amanda.Session(plain_net()) as session:
        with pytest.raises(ExecutionError, match=r"has no phases or computations.*leave phase out"):
            session.run(["y"], {"x": X}, phase="inference")
        np.testing.assert_array_equal(session.run(["y"], {"x": X})[0], np.maximum(X, 0))


def test_grad_checks_its_phase_by_name() -> None:
    """grad(..., phase="trian") is an ArgumentError with a did-you-mean; phase="train" works."""
    net = batchnorm_net()
    with pytest.raises(ArgumentError, match=r"did you mean 'train'\?"):
        amanda.grad(net, "loss", ["x"], phase="trian")
    assert amanda.grad(net, "loss", ["x"], phase="train").output_names == ("loss", "grad/x")


def test_in_computation_checks_its_name_with_a_caret() -> None:
    """in_computation('inferense') is a QueryError with a did-you-mean and a caret under the call,
    on either engine; a computed name the model lacks is refused too."""
    net = batchnorm_net()
    text = "$..[?is_op && in_computation('inferense')]"
    for engine in ("compiled", "jmespath"):
        with pytest.raises(QueryError, match=r"did you mean 'inference'\?") as info:
            compile_selector(text, engine=engine).select(net)
        assert info.value.position == text.index("in_computation")  # type: ignore[attr-defined]
    with pytest.raises(QueryError, match="'inference', 'train'"):
        select(net, "$..[?is_op && in_computation(join('', ['tr', 'ian']))]")
    assert select(net, "$..[?is_op && in_computation('inference')]").paths


def test_check_phase_accepts_none_and_known_names_only() -> None:
    """None and a known name pass; a non-string is refused with the names it could be."""
    net = batchnorm_net()
    check_phase(net, None)
    check_phase(net, "train")
    with pytest.raises(ArgumentError, match="'inference', 'train'"):
        check_phase(net, 3)
