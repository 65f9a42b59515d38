"""Run the ONNX backend node test cases through ``amanda.Session`` and print a table per op type.

The cases come from the installed onnx package itself
(``onnx.backend.test.case.node.collect_testcases``, via ``onnx_cases.all_cases``): each
case's model is imported with ``from_onnx``, run by a :class:`~amanda.exec.Session` (the
whole path a user takes: import, plan, dispatch, run) and compared with the expected
outputs as the onnx backend runner compares them.

An op type is *claimed* when amanda has a kernel for it (a registry kernel or a session
kernel such as If/Loop/Scan); every claimed op type must pass at least 95% of its cases.

Usage::

    python tests/conformance/run_onnx_node_tests.py               # the table
    python tests/conformance/run_onnx_node_tests.py -v Add Conv   # with failure reasons
    python tests/conformance/run_onnx_node_tests.py --markdown docs/ops.md
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import onnx_cases  # noqa: E402

MIN_PASS_RATE = 0.95
THREADS = 1  # the sequential interpreter; tests/exec checks the threaded one agrees with it


def _from_onnx() -> Any:
    try:
        from amanda.io.onnx.importer import from_onnx
    except ImportError:  # the planned public home
        from amanda.io.onnx import from_onnx  # type: ignore[no-redef]
    return from_onnx


def claimed_op_types(domain: str = "") -> list[str]:
    """Op types of an ONNX domain that amanda has a kernel for."""
    from amanda.exec.dispatch import ONNX, session_op_types
    from amanda.exec.kernels import registry

    return sorted(set(registry.supported_op_types(ONNX, domain)) | set(session_op_types(ONNX, domain)))


def onnx_op_types(domain: str = "") -> list[str]:
    """Every op type the installed onnx defines in ``domain`` (deprecated ones included)."""
    import onnx.defs

    return sorted({s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain == domain})


# ONNX defines these ops' values as random: its own cases say an implementation "may not
# produce the same values ... even if a seed is specified". They are compared by dtype,
# shape and the set of values an output may take; tests/exec checks their distributions.
RANDOM_OP_TYPES = frozenset({"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike",
                             "RandomUniform", "RandomUniformLike"})


def _random_mismatch(expected: Any, got: Any) -> str | None:
    if not isinstance(got, np.ndarray) or got.dtype != expected.dtype or got.shape != expected.shape:
        return f"{getattr(got, 'dtype', type(got))}{getattr(got, 'shape', '')} != {expected.dtype}{expected.shape}"
    allowed = set(np.unique(expected).tolist())
    if allowed <= {0, 1} and not set(np.unique(got).tolist()) <= {0, 1}:
        return "values outside {0, 1}"
    return None


def run_case(case: onnx_cases.Case) -> str | None:
    """None if ``case`` passes through a Session, otherwise a one-line reason."""
    from amanda.exec import Session

    try:
        container = _from_onnx()(case.model)
        graph = case.model.graph
        initialized = {t.name for t in graph.initializer}
        names = [i.name for i in graph.input if i.name not in initialized]
        feeds = dict(zip(names, case.inputs))
        with np.errstate(all="ignore"), Session(container, threads=THREADS) as session:
            actual = session.run([o.name for o in graph.output], feeds)
    except Exception as err:  # noqa: BLE001 - report it, do not abort the op type
        where = traceback.extract_tb(err.__traceback__)[-1]
        text = str(err).splitlines()[0] if str(err) else ""
        return f"{type(err).__name__}: {text[:300]} ({where.filename.split('/')[-1]}:{where.lineno})"
    if len(actual) != len(case.outputs):
        return f"{len(actual)} outputs, expected {len(case.outputs)}"
    for i, (expected, got) in enumerate(zip(case.outputs, actual)):
        if case.op_type in RANDOM_OP_TYPES:
            why = _random_mismatch(expected, got)
        else:
            why = onnx_cases.mismatch(expected, got, case.rtol, case.atol)
        if why:
            return f"output {i}: {why}"
    return None


@dataclass
class OpResult:
    """One op type's outcome."""

    op_type: str
    claimed: bool
    passed: int = 0
    total: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 1.0

    @property
    def ok(self) -> bool:
        return not self.claimed or self.rate >= MIN_PASS_RATE


def run(op_types: Sequence[str] | None = None, domain: str = "") -> dict[str, OpResult]:
    """Results per op type: the given ones, else every op type with cases or a kernel."""
    groups = onnx_cases.cases_by_op(domain)
    claimed = set(claimed_op_types(domain))
    wanted = sorted(op_types) if op_types else sorted(set(groups) | claimed)
    results = {}
    for op_type in wanted:
        result = OpResult(op_type, op_type in claimed)
        for case in groups.get(op_type, []):
            result.total += 1
            why = run_case(case)
            if why is None:
                result.passed += 1
            else:
                result.failures.append(f"{case.name}: {why}")
        results[op_type] = result
    return results


def table(results: dict[str, OpResult], verbose: bool = False) -> str:
    """A plain-text table: op type, claimed, passed/total, rate, status."""
    lines = [f"{'op type':<28} {'claimed':<8} {'passed':>9} {'rate':>7}  status"]
    for r in results.values():
        status = "ok" if r.ok and r.claimed else ("FAIL" if not r.ok else "no kernel")
        lines.append(f"{r.op_type:<28} {'yes' if r.claimed else 'no':<8} {r.passed:>4}/{r.total:<4} "
                     f"{r.rate:>6.0%}  {status}")
        if verbose:
            lines.extend(f"    {f}" for f in r.failures)
    claimed = [r for r in results.values() if r.claimed]
    cases = sum(r.total for r in claimed)
    passed = sum(r.passed for r in claimed)
    failing = [r.op_type for r in claimed if not r.ok]
    lines.append(f"claimed op types: {len(claimed)}, their cases passed: {passed}/{cases}; "
                 f"below {MIN_PASS_RATE:.0%}: {', '.join(failing) or 'none'}")
    return "\n".join(lines)


UNCLAIMED_REASONS = {
    "ImageDecoder": "decoding JPEG, PNG, WebP, TIFF and JPEG 2000 needs an image codec library; "
                    "amanda takes on no such dependency for one op",
}


def markdown(results: dict[str, OpResult]) -> str:
    """``docs/ops.md``: claimed op types with pass counts, then the ONNX op types without a kernel."""
    import onnx

    claimed = [r for r in results.values() if r.claimed]
    unclaimed = sorted(set(onnx_op_types()) - {r.op_type for r in claimed})
    passed = sum(r.passed for r in claimed)
    total = sum(r.total for r in results.values())
    with_cases = {r.op_type: r for r in results.values()}
    out = [
        "# Operators",
        "",
        "Generated by `python tests/conformance/run_onnx_node_tests.py --markdown docs/ops.md`",
        f"against the ONNX backend node test cases of onnx {onnx.__version__} (non-expanded cases,",
        "one row per data set), each run through `amanda.Session` after `from_onnx`. A claimed op",
        f"type (one amanda has a kernel for) must pass at least {MIN_PASS_RATE:.0%} of its cases;",
        "`tests/conformance/test_onnx_node_conformance.py` checks that in CI.",
        "",
        f"Overall: {passed} of the {total} cases pass ({passed / max(total, 1):.1%}).",
        "",
        f"## Claimed ({len(claimed)} op types of the default domain)",
        "",
        "| op type | passed | cases |",
        "|---|---|---|",
    ]
    for r in claimed:
        out.append(f"| {r.op_type} | {r.passed} | {r.total} |")
    out += [
        "",
        f"## Not claimed ({len(unclaimed)} op types of the default domain without a kernel)",
        "",
        "Running one raises `ExecutionError: no kernel for op type ...`. The number of backend",
        "cases each has is given where there are any.",
        "",
    ]
    items = []
    for name in unclaimed:
        r = with_cases.get(name)
        label = f"{name} ({r.total})" if r is not None and r.total else name
        items.append(f"- {label}: {UNCLAIMED_REASONS[name]}" if name in UNCLAIMED_REASONS else f"- {label}")
    out += items
    out.append("")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table; exit 1 if a claimed op type is below the pass rate."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("op_types", nargs="*", help="only these op types")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each failure")
    parser.add_argument("--markdown", metavar="PATH", help="also write the ops list (docs/ops.md)")
    args = parser.parse_args(argv)
    results = run(args.op_types or None)
    print(table(results, args.verbose))
    if args.markdown:
        Path(args.markdown).write_text(markdown(results))
    return 0 if all(r.ok for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
