"""Constructor parameters after the name are keyword-only; positional calls still work, warned."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from amanda import Container, Edge, Port, op
from amanda.errors import AmandaError, ArgumentError
from amanda.exec import Session
from amanda.namespaces import Namespace, OpSchema, PortSchema


def relu_graph(**extra: object) -> Container:
    return Container("G", "g", inputs=["x"], outputs=["y"], children=[op("Relu", "r", ["x"], ["y"])],
                     edges=[("g:x", "r:x"), ("r:y", "g:y")], attrs={"namespace": "amanda/onnx/17"}, **extra)


def test_keyword_calls_do_not_warn() -> None:
    """Building every public record with keywords emits no DeprecationWarning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        g = relu_graph(uid="u1")
        Port("x", attrs={"dtype": "float32"})
        Edge("a:y", "b:x", attrs={"phase": "train"})
        Session(g, threads=1).run(["y"], {"x": np.ones(2)})
        Namespace("demo/1", schemas=[OpSchema("Add", domain="", inputs=["A", "B"], outputs=["C"])])
        PortSchema("x", optional=True)


@pytest.mark.parametrize("build, expected", [
    (lambda: Container("G", "g", ["x"], ["y"], [op("Relu", "r", ["x"], ["y"])],
                       [("g:x", "r:x"), ("r:y", "g:y")], (), {"namespace": "amanda/onnx/17"}, "u1"),
     relu_graph(uid="u1")),
    (lambda: Port("x", {"dtype": "float32"}), Port("x", attrs={"dtype": "float32"})),
    (lambda: Edge("a:y", "b:x", {"phase": "train"}), Edge("a:y", "b:x", attrs={"phase": "train"})),
    (lambda: Namespace("demo/1", [OpSchema("Id")]), Namespace("demo/1", schemas=[OpSchema("Id")])),
    (lambda: OpSchema("Add", "", 7, ["A", "B"]), OpSchema("Add", since_version=7, inputs=["A", "B"])),
    (lambda: PortSchema("x", True), PortSchema("x", optional=True)),
])
def test_positional_calls_warn_and_build_the_same(build, expected) -> None:
    """A positional call warns, naming the parameters to pass as keywords, and builds what the
    keyword call builds."""
    with pytest.warns(DeprecationWarning, match=r"pass .* as (a keyword|keywords)") as caught:
        built = build()
    assert built == expected
    assert caught[0].filename == __file__  # the warning points at the caller


def test_positional_session_threads_warns() -> None:
    """Session(model, threads) warns and runs with that thread count."""
    with pytest.warns(DeprecationWarning, match="threads"):
        session = Session(relu_graph(), 1)
    assert session.run(["y"], {"x": np.array([-1.0, 2.0])})[0].tolist() == [0.0, 2.0]


@pytest.mark.parametrize("build", [
    lambda: Port("x", {"a": 1}, attrs={"b": 2}),
    lambda: Edge("a:y", "b:x", {"a": 1}, attrs={"b": 2}),
    lambda: Container("G", "g", ["x"], inputs=["y"]),
    lambda: Port("x", {}, {}),
    lambda: Container("G", "g", (), (), (), (), (), None, None, (), "extra"),
    lambda: Namespace("demo/1", [], schemas=[]),
    lambda: PortSchema("x", True, False, None, (), True, 1, "extra"),
])
def test_a_value_given_twice_or_too_many_is_refused(build) -> None:
    """A parameter given by position and by keyword, or too many positional arguments, raise an
    ArgumentError (an AmandaError) instead of silently picking one."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(ArgumentError) as info:
            build()
    assert isinstance(info.value, AmandaError)
