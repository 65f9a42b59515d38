"""ONNX backend node test cases, run one node at a time through amanda's kernel registry.

The onnx wheel ships the case generators, not the data files, so cases are
collected with ``onnx.backend.test.case.node.collect_testcases`` (a few seconds,
cached per process).

Grouping: every non-expanded node test has exactly one node, and the case is
counted under that node's ``(domain, op_type)``. ``*_expanded*`` tests (the
op's function body spelled out with other ops) are skipped: they test the
other ops, which are counted on their own, and would make one op's pass rate
depend on a different module's kernels.

The evaluator here is test-only: a plain loop over ``graph.node`` with the
kernel picked by ``registry.lookup(op_type, opset, dtypes)``.
"""

from __future__ import annotations

import functools
import traceback
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

import amanda.exec.kernels  # noqa: F401  (registers every kernel module)
from amanda.exec.kernels import registry
from amanda.exec.kernels.arity import OUTPUT_COUNT, needs_output_count

DEFAULT_RTOL = 1e-3
DEFAULT_ATOL = 1e-7


@dataclass(frozen=True)
class Case:
    """One backend node test: a one-node model, its inputs and expected outputs."""

    name: str
    op_type: str
    domain: str
    model: onnx.ModelProto
    inputs: tuple
    outputs: tuple
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL


def _value(v: Any) -> Any:
    """A data-set entry as the kernels see it: TensorProtos become ndarrays."""
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, (list, tuple)):
        return [_value(x) for x in v]
    return v


def _opsets(model: onnx.ModelProto) -> dict[str, int]:
    return {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}


@functools.lru_cache(maxsize=1)
def all_cases() -> tuple[Case, ...]:
    """Every non-expanded node test case of the installed onnx, one entry per data set."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators overflow on purpose
        raw = collect_testcases(None)
    cases = []
    for tc in raw:
        if tc.model is None or "_expanded" in tc.name or len(tc.model.graph.node) != 1:
            continue
        node = tc.model.graph.node[0]
        data_sets = tc.data_sets or []
        for i, (inputs, outputs) in enumerate(data_sets):
            name = tc.name if len(data_sets) == 1 else f"{tc.name}[{i}]"
            cases.append(
                Case(
                    name,
                    node.op_type,
                    "" if node.domain == "ai.onnx" else node.domain,
                    tc.model,
                    tuple(_value(x) for x in inputs),
                    tuple(_value(x) for x in outputs),
                    tc.rtol if tc.rtol is not None else DEFAULT_RTOL,
                    tc.atol if tc.atol is not None else DEFAULT_ATOL,
                )
            )
    return tuple(cases)


def cases_by_op(domain: str = "") -> dict[str, list[Case]]:
    """Cases of one domain grouped by op type."""
    groups: dict[str, list[Case]] = defaultdict(list)
    for case in all_cases():
        if case.domain == domain:
            groups[case.op_type].append(case)
    return dict(groups)


def attribute_value(attr: onnx.AttributeProto) -> Any:
    """An onnx attribute as a plain python value (str for strings, ndarray for tensors)."""
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8") for v in value]
    if isinstance(value, list) and value and isinstance(value[0], onnx.TensorProto):
        return [numpy_helper.to_array(v) for v in value]
    return value


def run_model(model: onnx.ModelProto, inputs: Sequence[Any]) -> list[Any]:
    """Evaluate ``model``'s graph node by node; return its outputs in graph order."""
    graph = model.graph
    opsets = _opsets(model)
    env: dict[str, Any] = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    feeds = [i.name for i in graph.input if i.name not in env]
    env.update(zip(feeds, inputs))
    for node in graph.node:
        domain = "" if node.domain == "ai.onnx" else node.domain
        args = [env[name] if name else None for name in node.input]
        # a device array (CuPy's) is not an ndarray but has a numpy dtype to dispatch on
        dtypes = tuple(a.dtype if isinstance(getattr(a, "dtype", None), np.dtype) and not isinstance(a, np.generic)
                       else None for a in args)
        version = registry.lookup(
            node.op_type, opsets.get(domain), dtypes, domain=domain  # type: ignore[arg-type]
        )
        if version is None:
            raise NotImplementedError(f"no kernel for {domain or 'ai.onnx'}::{node.op_type}")
        attrs = {a.name: attribute_value(a) for a in node.attribute}
        if needs_output_count(version.fn):
            # ops defined by their output count (Split < 18, MaxPool's optional Indices)
            attrs.setdefault(OUTPUT_COUNT, len(node.output))
        results = registry.run_kernel(version, attrs, args)
        for name, value in zip(node.output, results):
            if name:
                env[name] = value
    return [env[o.name] for o in graph.output]


def mismatch(expected: Any, actual: Any, rtol: float, atol: float) -> str | None:
    """Why ``actual`` differs from ``expected`` as the onnx backend runner judges, or None."""
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            return f"expected a sequence of {len(expected)}, got {type(actual).__name__}"
        for e, a in zip(expected, actual):
            why = mismatch(e, a, rtol, atol)
            if why:
                return why
        return None
    if not isinstance(actual, np.ndarray):
        return f"expected an ndarray, got {type(actual).__name__}"
    if actual.shape != expected.shape:
        return f"shape {actual.shape} != expected {expected.shape}"
    if expected.dtype == object:
        return None if np.array_equal(actual, expected) else "string values differ"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype} != expected {expected.dtype}"
    if expected.dtype.kind not in "biufc":
        # ml_dtypes types (bfloat16, float8, int4 ...) do not promote with python floats
        if expected.dtype.name == "bfloat16":
            rtol = max(rtol, 2**-6)
        expected = expected.astype(np.float32)
        actual = actual.astype(np.float32)
    try:
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)
    except AssertionError as err:
        return str(err).strip().splitlines()[-1] if str(err).strip() else "values differ"
    return None


def run_case(case: Case) -> str | None:
    """None if ``case`` passes, otherwise a one-line reason."""
    try:
        with np.errstate(all="ignore"):
            actual = run_model(case.model, case.inputs)
    except Exception as err:  # noqa: BLE001 - report, do not abort the whole op type
        where = traceback.extract_tb(err.__traceback__)[-1]
        return f"{type(err).__name__}: {err} ({where.filename.split('/')[-1]}:{where.lineno})"
    if len(actual) != len(case.outputs):
        return f"{len(actual)} outputs, expected {len(case.outputs)}"
    for i, (e, a) in enumerate(zip(case.outputs, actual)):
        why = mismatch(e, a, case.rtol, case.atol)
        if why:
            return f"output {i}: {why}"
    return None


def pass_counts(op_types: Sequence[str], domain: str = "") -> dict[str, tuple[int, int, list[str]]]:
    """``{op_type: (passed, total, failure lines)}`` for the given op types."""
    groups = cases_by_op(domain)
    report = {}
    for op in op_types:
        cases = groups.get(op, [])
        failures = [f"{c.name}: {why}" for c in cases if (why := run_case(c))]
        report[op] = (len(cases) - len(failures), len(cases), failures)
    return report
