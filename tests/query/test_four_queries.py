"""The four example queries of docs/query.md, each one selector."""

import pytest

from amanda.query import select
from tests.query.models import four_queries_model

RNN_CELLS = "$..[?own_attrs.rnn_cell == `true`]"
OPS_IN_RNN_CELLS = "$..[?is_op && attrs.rnn_cell == `true`]"
DOT_OPS = "$..[?is_op && type == 'Dot']"
DEBUG_IN_INFERENCE = "$..[?is_op && attrs.debug && in_computation('inference')]"
TOP_LEVEL_NOT_INITIALIZERS = "$[?is_op && !(attrs.initializer)]"


@pytest.fixture(scope="module")
def model():
    return four_queries_model()


def test_containers_marked_rnn_cell(model):
    """The containers marked `rnn_cell: true` are the two cells themselves."""
    found = select(model, RNN_CELLS)
    assert found.paths == (("rnn1",), ("rnn2",))
    assert [c.type for c in found.containers] == ["LSTMCell", "LSTMCell"]


def test_ops_inside_rnn_cells_through_inheritance(model):
    """Every op inside a cell inherits `rnn_cell` and is selected; no op outside is."""
    found = select(model, OPS_IN_RNN_CELLS).paths
    inside = [(cell, op) for cell in ("rnn1", "rnn2") for op in ("x_proj", "h_proj", "add", "act", "probe")]
    assert found == tuple(inside)


def test_all_dot_ops(model):
    """All Dot ops, at any depth."""
    found = select(model, DOT_OPS).paths
    assert found == (("rnn1", "x_proj"), ("rnn1", "h_proj"), ("rnn2", "x_proj"), ("rnn2", "h_proj"), ("dense/MatMul",))


def test_debug_ops_in_the_inference_computation(model):
    """Debug ops that run when inference is fetched: the one wired to the model's inference
    port and the probe wired to its cell's; not the train-only check nor the dangling probe."""
    found = select(model, DEBUG_IN_INFERENCE).paths
    assert found == (("rnn2", "probe"), ("print_logits",))


def test_top_level_ops_that_are_not_initializers(model):
    """Direct children that are ops and not marked `initializer`."""
    found = select(model, TOP_LEVEL_NOT_INITIALIZERS).paths
    assert found == (("embed",), ("dense/MatMul",), ("softmax",), ("print_logits",), ("grad_check",), ("update",))
