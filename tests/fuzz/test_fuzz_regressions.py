"""Cases the long fuzz campaigns found, kept as regressions: each now ends in a valid result or
an AmandaError (they raised bare exceptions, or broke a property of their target)."""

from __future__ import annotations

import pytest

from tests.fuzz.harness import case_of, classify
from tests.fuzz.targets import TARGETS

FOUND = [
    ("yaml_document", 1, 3038),  # `!!int` with empty text: IndexError
    ("mapping", 1, 615),  # a replacement whose ports are an int: TypeError
    ("mapping", 1, 6530),  # ... a bool
    ("mapping", 1, 1244),  # ... None among the ports
    ("weights", 1, 581),  # a zip member in a compression zipfile lacks: NotImplementedError
    ("weights", 0, 6),  # a 119 KB file cost 122 MB of memory though no key paired
    ("layer_stack", 0, 0),  # two Dense layers built apart held one uid: 6 weight uids for 14
    ("grad_opset", 0, 0),  # an opset-20 model's backward ops were built at opset 17
    # wrong-typed arguments at public entry points (issue 26): bare errors before
    ("api", 0, 85),  # gelu(name=<array>): ValueError (an array's truth value)
    ("api", 0, 157),  # infer_types(model, 3): TypeError
    ("api", 0, 341),  # MultiHeadAttention(2**63): ValueError from numpy, a weight beyond memory
    ("api", 0, 415),  # TensorType(shape=2**63): TypeError
    ("api", 0, 1788),  # op(..., attrs=<array>): ValueError, an array as a container field
    ("api", 0, 3157),  # Container(tombstones=<array>): ValueError, the same
    ("api", 0, 3071),  # ops.Reshape(x, [[1], [1, 2]]): ValueError, a ragged list
    ("api", 0, 3620),  # ops.Relu(x, name=<a list 3000 deep>): RecursionError in the message
    # odd models through transforms
    ("transform", 0, 73),  # a BatchNorm epsilon [1.0] crashed the Session's optimiser: TypeError
    ("transform", 0, 434),  # a declared dim 10**20 exported: protobuf's ValueError
    ("transform", 0, 1163),  # a MaxPool kernel_shape 10**20 in pool_before_relu: TypeError
    ("transform", 0, 2436),  # ... kernel_shape 'ab': ValueError
    ("transform", 0, 1624),  # fuse of an If's bodies (selected by `$.if.*`): ValueError
    ("cli", 0, 3),  # `amanda run --repeat 0` ran once (invalid result)
    ("yaml_document", 0, 24),  # a rejected document composed twice to locate its error (invalid result)
]


@pytest.mark.parametrize("target, seed, index", FOUND, ids=[f"{t}-{s}-{i}" for t, s, i in FOUND])
def test_found_case_meets_the_contract(target: str, seed: int, index: int) -> None:
    """The case ends well or in an AmandaError, in time, with its input unchanged."""
    chosen = TARGETS[target]
    outcome = classify(chosen, case_of(chosen, seed, index), limit=20.0)
    assert outcome.kind == "ok" or outcome.kind.startswith("amanda_error"), outcome
