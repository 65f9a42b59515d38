"""Constructor parameters after the name are keyword-only: values given by position are refused."""

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


@pytest.mark.parametrize("build, keyword", [
    (lambda: Container("G", "g", ["x"], ["y"], [op("Relu", "r", ["x"], ["y"])]), "inputs"),
    (lambda: Container("G", "g", ["x"], inputs=["y"]), "inputs"),
    (lambda: Port("x", {"dtype": "float32"}), "attrs"),
    (lambda: Port("x", {"a": 1}, attrs={"b": 2}), "attrs"),
    (lambda: Edge("a:y", "b:x", {"phase": "train"}), "attrs"),
    (lambda: Session(relu_graph(), 1), "threads"),
    (lambda: Namespace("demo/1", [OpSchema("Id")]), "schemas"),
    (lambda: OpSchema("Add", "", 7, ["A", "B"]), "domain"),
    (lambda: PortSchema("x", True), "optional"),
])
def test_positional_values_for_keywords_are_refused(build, keyword) -> None:
    """A value given by position for a keyword-only parameter (the removed positional forms)
    is an ArgumentError that names the keyword to write, never a silent pick or a bare TypeError."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ArgumentError) as info:
            build()
    assert isinstance(info.value, AmandaError)
    assert f"{keyword}=..." in info.value.expected
