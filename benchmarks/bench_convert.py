"""Namespace conversion time: the shipped mapping tables on the test fixtures.

TensorFlow frozen graphs (imported flat, and with their name scopes) converted to ONNX 17, and imported ONNX models converted
between opsets (down to 11, ops without an older form kept, and up to 24: every rule of the
opset tables tried on every op). The
models are loaded once; each conversion runs ``--repeat`` times after one warm-up and the median
is printed as JSON (milliseconds of CPU time), so two source trees can be compared in one run::

    for tree in /path/a /path/b /path/a /path/b; do PYTHONPATH=$tree python benchmarks/bench_convert.py; done
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
TENSORFLOW = ("mobilenet_v2", "resnet_small", "transformer_block")
ONNX = (("gpt2", "amanda/onnx/11"), ("gpt2", "amanda/onnx/24"), ("bert", "amanda/onnx/11"),
        ("mobilenet", "amanda/onnx/24"))


def cases() -> dict[str, Callable[[], Any]]:
    """Name -> a conversion to time (its model already loaded)."""
    import amanda
    from amanda.io.onnx import load_onnx
    from amanda.io.tensorflow.files import load_graphdef

    found: dict[str, Callable[[], Any]] = {}
    for name in TENSORFLOW:
        graph = load_graphdef(FIXTURES / "tensorflow" / f"{name}.pb", hierarchy=False)
        found[f"tensorflow {name} -> onnx/17"] = lambda g=graph: amanda.convert(g, "amanda/onnx/17")
        scoped = load_graphdef(FIXTURES / "tensorflow" / f"{name}.pb")
        found[f"tensorflow {name} (scoped) -> onnx/17"] = lambda g=scoped: amanda.convert(g, "amanda/onnx/17")
    for name, target in ONNX:
        model = load_onnx(str(FIXTURES / "onnx" / "hierarchy" / f"{name}.torchscript.onnx"))
        found[f"onnx {name} -> {target.rsplit('/', 1)[1]}"] = lambda m=model, t=target: amanda.convert(m, t, on_unmatched="pass")
    return found


def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    """Median CPU time of ``fn`` in milliseconds (this process; conversion runs in one thread,
    so other work on a shared machine counts less than in wall time), after one warm-up call."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return round(statistics.median(times) * 1000, 2)


def main(argv: list[str] | None = None) -> None:
    """Print the median time of each conversion as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    import amanda

    result = {name: median_ms(fn, args.repeat) for name, fn in cases().items()}
    print(json.dumps({"amanda": str(Path(amanda.__file__).parent.parent), **result}))


if __name__ == "__main__":
    sys.exit(main())
