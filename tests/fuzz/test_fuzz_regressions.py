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
]


@pytest.mark.parametrize("target, seed, index", FOUND, ids=[f"{t}-{s}-{i}" for t, s, i in FOUND])
def test_found_case_meets_the_contract(target: str, seed: int, index: int) -> None:
    """The case ends well or in an AmandaError, in time, with its input unchanged."""
    chosen = TARGETS[target]
    outcome = classify(chosen, case_of(chosen, seed, index), limit=20.0)
    assert outcome.kind == "ok" or outcome.kind.startswith("amanda_error"), outcome
