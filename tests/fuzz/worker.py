"""A fuzz worker process: reads one JSON request per line on stdin, answers one JSON line.

``{"op": "case", "target", "seed", "index", "limit"}`` runs the long runner's case ``index``;
``{"op": "hypothesis", "target", "examples", "limit", "shrink"}`` runs a derandomized
hypothesis test of ``examples`` cases and reports the first (shrunk) bad one. The worker
crashing or hanging is the pool's business (``tests.fuzz.pool``).
"""

from __future__ import annotations

import collections
import faulthandler
import json
import resource
import sys
import time
from typing import Any

MEMORY_LIMIT = 4 * 2**30  # a case that wants more gets a MemoryError, not the machine's memory


def run_case(request: dict[str, Any]) -> dict[str, Any]:
    """One case of the long runner."""
    from tests.fuzz.harness import case_of, classify
    from tests.fuzz.targets import TARGETS

    target = TARGETS[request["target"]]
    try:
        case = case_of(target, request["seed"], request["index"])
    except Exception as exc:  # noqa: BLE001 - a bug of the fuzzer itself, reported as such
        return {"kind": f"generator_error:{type(exc).__name__}", "detail": str(exc)[:300], "seconds": 0.0}
    outcome = classify(target, case, request["limit"])
    return {"kind": outcome.kind, "detail": outcome.detail, "seconds": outcome.seconds}


def run_hypothesis(request: dict[str, Any]) -> dict[str, Any]:
    """A derandomized hypothesis test of one target; counts of outcomes and the first bad one."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from tests.fuzz.harness import HypothesisSource, classify
    from tests.fuzz.targets import TARGETS

    target = TARGETS[request["target"]]
    counts: collections.Counter[str] = collections.Counter()
    phases = [Phase.generate, Phase.shrink] if request.get("shrink") else [Phase.generate]

    @settings(max_examples=request["examples"], derandomize=True, database=None, deadline=None,
              phases=phases, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def contract(data: Any) -> None:
        case = target.generate(HypothesisSource(data))
        outcome = classify(target, case, request["limit"])
        counts[outcome.kind] += 1
        if outcome.bad:
            raise AssertionError(outcome.kind, outcome.detail, target.describe(case)[:400].decode("latin-1"))

    bad = None
    try:
        contract()
    except Exception as exc:  # noqa: BLE001 - an AssertionError, or a group of them
        first = exc.exceptions[0] if hasattr(exc, "exceptions") else exc  # an ExceptionGroup
        bad = [str(a) for a in first.args] if isinstance(first, AssertionError) else [
            f"raw_exception:{type(first).__name__}", str(first), "while generating"]
    return {"counts": dict(counts), "bad": bad}


def main() -> None:
    """Serve requests until stdin closes."""
    faulthandler.enable()
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    from tests.fuzz import seeds

    seeds.warm()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "selftest":  # lets the pool's tests make a worker crash or stick
            if request["do"] == "crash":
                faulthandler._sigsegv()
            time.sleep(request["seconds"])
            answer = {"slept": request["seconds"]}
        elif request["op"] == "hypothesis":
            answer = run_hypothesis(request)
        else:
            answer = run_case(request)
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
