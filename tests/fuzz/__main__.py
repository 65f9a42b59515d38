"""The long fuzz campaign: ``python -m tests.fuzz --cases 100000``.

Runs cases of every target (or ``--target``) on worker processes and prints, per target, the
cases run, the valid results, the AmandaErrors by class, and every outcome that breaks the
contract with one example each. ``--replay N`` runs case N of one target in this process
and shows its traceback; ``--hypothesis N`` runs N hypothesis-generated cases per target
instead (``--shrink`` to shrink a failure). The exit status is 1 when any case broke the
contract.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback

from tests.fuzz import pool


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=1000, help="cases per target")
    parser.add_argument("--target", action="append", help="a target (repeatable); default: all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="first case index")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=float, default=5.0, help="seconds per case")
    parser.add_argument("--replay", type=int, help="run this case in-process, with its traceback")
    parser.add_argument("--hypothesis", type=int, help="hypothesis examples per target instead")
    parser.add_argument("--shrink", action="store_true", help="shrink hypothesis failures")
    return parser.parse_args(argv)


def _errors(counts: dict[str, int], prefix: str) -> str:
    found = {k.split(":", 1)[1]: v for k, v in counts.items() if k.startswith(prefix)}
    return ", ".join(f"{k} {v}" for k, v in sorted(found.items(), key=lambda kv: -kv[1])) or "-"


def table(reports: dict[str, pool.Report]) -> str:
    """The campaign's table (markdown) and one example of every contract-breaking outcome."""
    head = ("| target | cases | ok | AmandaError by class | raw exceptions | modified input / "
            "invalid result | hangs | crashes | ms/case |")
    lines = [head, "|---|---:|---:|---|---|---|---:|---:|---:|"]
    details = []
    for name, r in reports.items():
        c = r.counts
        raw = sum(v for k, v in c.items() if k.startswith("raw_exception"))
        broken = c["modified_input"] + c["invalid_result"]
        lines.append(f"| {name} | {r.cases} | {c['ok']} | {_errors(c, 'amanda_error:')} | {raw} | "
                     f"{broken} | {c['hang']} | {c['crash']} | {1000 * r.seconds / max(r.cases, 1):.0f} |")
        for kind, (index, detail) in sorted(r.bad().items()):
            details.append(f"- `{name}` {kind} ×{c[kind]}, e.g. case {index}: {detail}")
    return "\n".join(lines + [""] + (details or ["No case broke the contract."]))


def replay(target: str, seed: int, index: int) -> int:
    """Run one case in-process and show how it ends."""
    from tests.fuzz.harness import case_of
    from tests.fuzz.targets import TARGETS

    chosen = TARGETS[target]
    case = case_of(chosen, seed, index)
    print(f"input ({target}, seed {seed}, case {index}):\n{chosen.describe(case)[:2000]!r}\n")
    try:
        chosen.run(case)
    except Exception:  # noqa: BLE001 - shown, whatever it is
        traceback.print_exc()
        return 1
    print("ok")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the campaign the arguments describe; 1 if any case broke the contract."""
    args = _parse(argv)
    from tests.fuzz.targets import TARGETS

    targets = args.target or list(TARGETS)
    unknown = sorted(set(targets) - set(TARGETS))
    if unknown:
        print(f"unknown targets {unknown}; targets are {sorted(TARGETS)}", file=sys.stderr)
        return 2
    if args.replay is not None:
        return replay(targets[0], args.seed, args.replay)
    start = time.time()
    if args.hypothesis:
        results = pool.run_hypothesis(targets, args.hypothesis, args.limit, args.shrink, args.workers)
        for name, result in results.items():
            print(f"{name}: {result['counts']}\n  first bad case: {result['bad']}")
        return int(any(r["bad"] for r in results.values()))
    done = [0]
    total = args.cases * len(targets)

    def progress() -> None:
        done[0] += 1
        if done[0] % max(1, total // 20) == 0:
            print(f"  {done[0]}/{total} cases, {time.time() - start:.0f} s", file=sys.stderr)

    reports = pool.run_cases(targets, args.cases, args.seed, args.workers, args.limit, args.start, progress)
    print(f"seed {args.seed}, cases {args.start}..{args.start + args.cases - 1} per target, "
          f"limit {args.limit} s, {args.workers} workers, {time.time() - start:.0f} s\n")
    print(table(reports))
    return int(any(r.bad() for r in reports.values()))


if __name__ == "__main__":
    sys.exit(main())
