"""Constant folding in levels that read a sibling's inner values by path (a gradient container
reading its forward model), and in levels that an outer edge names by path."""

from __future__ import annotations

import numpy as np

import amanda
from amanda import Container, op
from amanda.passes import fold_constants, specialize
from amanda.passes.level import reached_paths

NS = {"namespace": "amanda/onnx/17"}


def reading_inside() -> Container:
    """``outer``: y = reshape(inner's relu value, shape(that value) with its last two dims
    merged) read by path ``inner/r:Y``; ``top`` reads ``outer/cat:concat_result`` by path too."""
    inner = Container(None, "inner", inputs=["x"], outputs=["y"], children=[op("Relu", "r", ["X"], ["Y"])],
                      edges=[("inner:x", "r:X"), ("r:Y", "inner:y")])
    merge = op("Constant", "merge", [], ["output"], {"value": np.array([-1], np.int64)})
    outer = Container(None, "outer", inputs=["x"], outputs=["y"], children=[
        inner, op("Shape", "s", ["data"], ["shape"], {"end": 1}), merge,
        op("Concat", "cat", ["a", "b"], ["concat_result"], {"axis": 0}),
        op("Reshape", "rs", ["data", "shape"], ["reshaped"]),
    ], edges=[("outer:x", "inner:x"), ("inner/r:Y", "s:data"), ("s:shape", "cat:a"), ("merge:output", "cat:b"),
              ("inner/r:Y", "rs:data"), ("cat:concat_result", "rs:shape"), ("rs:reshaped", "outer:y")])
    return Container(None, "top", inputs=["x"], outputs=["y", "n"], children=[outer], attrs=NS,
                     edges=[("top:x", "outer:x"), ("outer:y", "top:y"), ("outer/cat:concat_result", "top:n")])


def test_reached_paths_names_every_op_an_edge_reaches_by_path() -> None:
    """Both the sibling's Relu and the Concat that the top level reads by path are listed."""
    assert reached_paths(reading_inside()) == {("outer", "inner", "r"), ("outer", "cat")}


def test_a_level_reading_a_sibling_by_path_folds_and_keeps_what_is_named_from_above() -> None:
    """Specialised to (2, 3, 4): the Shape folds to [2] although it reads inside ``inner``; the
    Concat, named by the top level's edge, stays; results match numpy."""
    model, _ = specialize(reading_inside(), {"x": ("float32", (2, 3, 4))})
    out = fold_constants(model).model
    outer = out.child("outer")
    assert outer.child("s").type == "Constant" and outer.child("s").attrs["value"].tolist() == [2]
    assert outer.child("cat").type == "Concat" and outer.child("rs").type == "Reshape"
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    with amanda.Session(out, optimize=False) as session:
        y, n = session.run(["y", "n"], {"x": x})
    np.testing.assert_array_equal(y, np.maximum(x, 0).reshape(2, -1))
    np.testing.assert_array_equal(n, [2, -1])
