"""Chaining layers whose widths can never fit is refused when they are composed, naming the
user's layers (not an internal fused op); chains that fit, or might, compose and run."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import amanda
from amanda import layers
from amanda.containers.compose import CompositionError


def test_dense_widths_that_differ_are_refused_naming_both_layers():
    """``Dense(4, 8) >> Dense(4, 3)`` raises a CompositionError naming 'dense' and 'dense_1' and
    the width 8 the second cannot take; nothing says MatMulAdd or amanda/fused."""
    for compose in (lambda a, b: a >> b, lambda a, b: amanda.chain(a, b), lambda a, b: b(a)):
        with pytest.raises(CompositionError) as info:
            compose(layers.Dense(4, 8), layers.Dense(4, 3))
        message = str(info.value)
        assert "'dense' (Dense)" in message and "'dense_1' (Dense)" in message and "[?,8]" in message
        assert "MatMulAdd" not in message and "fused" not in message


def test_the_layer_inside_a_longer_chain_is_named():
    """In ``Dense >> relu >> Dense`` the error names the chain's layers and the last Dense."""
    with pytest.raises(CompositionError) as info:
        layers.Dense(4, 8, name="hidden") >> layers.relu() >> layers.Dense(6, 3, name="out")
    message = str(info.value)
    assert "hidden" in message and "(Dense)" in message and "'out' (Dense)" in message and "out/matmul" in message


def test_conv_channels_that_differ_are_refused():
    """A Conv of 8 output channels into a Conv expecting 4 is refused."""
    with pytest.raises(CompositionError, match="conv_1"):
        layers.Conv(3, 8, 3) >> layers.Conv(4, 8, 3)


@pytest.mark.parametrize("build", [
    lambda: layers.Dense(4, 8) >> layers.Dense(8, 3),
    lambda: layers.Conv(3, 8, 3) >> layers.BatchNorm(8) >> layers.relu() >> layers.Conv(8, 4, 3),
    lambda: layers.Dense(4, 4) >> layers.Conv(4, 8, 3),  # Dense over the last axis of an image: may fit
    lambda: layers.Conv(3, 8, 3) >> layers.Flatten() >> layers.Dense(99, 3),  # the flat width is unknown
    lambda: amanda.chain(amanda.op("Dense", "a", ["x"], ["y"]), amanda.op("Dense", "b", ["x"], ["y"])),  # untyped
])
def test_chains_that_fit_or_might_are_composed(build):
    """What can fit at some input rank, or whose types are unknown, composes as before."""
    assert isinstance(build(), amanda.Container)


def test_long_chains_of_unnamed_layers_compose():
    """``a >> b >> c >> d`` nests unnamed chains without a child named like its parent, and runs."""
    net = layers.Dense(4, 4) >> layers.Dense(4, 4) >> layers.Dense(4, 4) >> layers.Dense(4, 2)
    with amanda.Session(net) as session:
        assert session.run(["y"], {"x": np.ones((3, 4), np.float32)})[0].shape == (3, 2)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=2, max_size=4))
def test_a_dense_stack_is_refused_exactly_when_two_widths_differ(widths):
    """Random Dense stacks: refused iff some layer's input width differs from the previous
    layer's units (checked here by comparing the numbers); accepted stacks run to the last width."""
    stack = [layers.Dense(i, o, name=f"d{k}") for k, (i, o) in enumerate(widths)]
    mismatch = any(widths[k][1] != widths[k + 1][0] for k in range(len(widths) - 1))
    try:
        net = amanda.chain(*stack)
    except CompositionError as error:
        assert mismatch
        first = next(k for k in range(len(widths) - 1) if widths[k][1] != widths[k + 1][0])
        assert f"'d{first}' (Dense)" in str(error) and f"'d{first + 1}' (Dense)" in str(error)
        return
    assert not mismatch
    with amanda.Session(net) as session:
        out = session.run(["y"], {"x": np.ones((2, widths[0][0]), np.float32)})[0]
    assert out.shape == (2, widths[-1][1])
