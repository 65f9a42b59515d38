"""Every fuzz target by name: documents, selectors and mapping tables (``targets_text``),
ONNX protos and bytes, Session feeds and fetches, and weight files (``targets_io``), public
callables with wrong arguments, transforms of odd models and the command line (``targets_api``)."""

from __future__ import annotations

from tests.fuzz import targets_api, targets_io, targets_text
from tests.fuzz.harness import Target

TARGETS: dict[str, Target] = {t.name: t for t in (*targets_text.TARGETS, *targets_io.TARGETS, *targets_api.TARGETS)}
