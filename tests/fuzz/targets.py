"""Every fuzz target by name: documents, selectors and mapping tables (``targets_text``),
ONNX protos and bytes, Session feeds and fetches, and weight files (``targets_io``),
``amanda.grad``'s phase names (``targets_phase``), layer stacks and gradients at opsets
(``targets_layers``), random models run with and without optimisation (``targets_exec``),
models checked, ops built and layers chained against oracles (``targets_graphs``), and public
callables with wrong arguments, transforms of odd models and the command line (``targets_api``)."""

from __future__ import annotations

from tests.fuzz import targets_api, targets_exec, targets_graphs, targets_io, targets_layers, targets_phase, targets_text
from tests.fuzz.harness import Target

TARGETS: dict[str, Target] = {
    t.name: t
    for t in (*targets_text.TARGETS, *targets_io.TARGETS, *targets_phase.TARGETS, *targets_layers.TARGETS,
              *targets_exec.TARGETS, *targets_graphs.TARGETS, *targets_api.TARGETS)
}
