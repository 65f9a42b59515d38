"""Errors cross process boundaries (Dask workers) whole: type, message and fields."""

from __future__ import annotations

import pickle

from amanda.errors import CycleError, ExecutionError, FormatError, InvariantError, Problem


def test_every_error_kind_survives_pickling() -> None:
    """Pickled and unpickled, an error keeps its class, message, path and subclass fields."""
    errors = [
        ExecutionError.at(("block", "conv"), "float32", "int64"),
        FormatError("bad", path="graph.ops[1]", line=3, column=4),
        InvariantError([Problem(("a",), "x", "y"), Problem(("b",), "x", "z")], "building G 'g'"),
        CycleError([("a",), ("b",)]),
    ]
    for error in errors:
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and str(again) == str(error)
        assert again.path == error.path and again.__dict__.keys() == error.__dict__.keys()
    assert pickle.loads(pickle.dumps(errors[2])).problems[1].path == ("b",)
    assert pickle.loads(pickle.dumps(errors[1])).line == 3
