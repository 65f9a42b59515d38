"""Importing real models as their module tree: ``amanda.load(path)`` (hierarchical) against
``amanda.load(path, hierarchy=False)`` (flat) and ``onnx_ir.load(path)`` on the same files, and
the coverage of the tree on the fixture corpus.

Models, exported from torch with random weights by both torch exporters (``dynamo=True`` and
``dynamo=False``) and cached outside the repository (``--cache``; needs torch, transformers,
timm and onnxscript, otherwise only the fixtures and the encoder are measured):

- ``gpt2``: GPT-2 small (transformers' default config, 124M parameters);
- ``vit``: timm's ``vit_base_patch16_224`` (86M);
- ``efficientnet``: timm's ``efficientnet_b0`` (5.3M);
- ``gpt2-narrow``: GPT-2's 12 blocks at width 64 (the structure without the weights);
- ``encoder``: bench_onnx.py's 7,400-node transformer encoder, whose node names carry no scopes
  (so "auto" finds none and imports flat: the cost of looking).

Figures are medians of alternating runs in one process per file (each loader once per round);
ratios are taken within the run. ``--coverage`` adds, for
each fixture export, the share of the modules that ran and produced a node whose container is at
the right path (and class, for dynamo exports), the share of weights in their owner, and whether
``load(dump(m)) == m`` (also with ``functions="modules"``); the checks are
tests/fixtures/onnx/hierarchy_models.py's.

    python benchmarks/bench_hierarchy.py [--repeat 5] [--only gpt2,vit] [--cache DIR] [--coverage]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from common import fmt_time  # noqa: E402

import amanda  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "onnx" / "hierarchy"


def _torch_models() -> dict[str, Callable[[], tuple[Any, tuple, list[str]]]]:
    import torch

    def gpt2(width: int | None = None) -> tuple[Any, tuple, list[str]]:
        import transformers

        class GPT2(transformers.GPT2LMHeadModel):
            def forward(self, input_ids, attention_mask):  # type: ignore[no-untyped-def,override]
                return super().forward(input_ids=input_ids, attention_mask=attention_mask).logits

        config = transformers.GPT2Config(use_cache=False)
        if width:
            config = transformers.GPT2Config(n_embd=width, n_head=4, vocab_size=1000, use_cache=False)
        args = (torch.randint(0, 1000, (1, 16)), torch.ones(1, 16, dtype=torch.int64))
        return GPT2(config).eval(), args, ["input_ids", "attention_mask"]

    def timm_model(name: str) -> Callable[[], tuple[Any, tuple, list[str]]]:
        def make() -> tuple[Any, tuple, list[str]]:
            import timm

            return timm.create_model(name, pretrained=False).eval(), (torch.randn(1, 3, 224, 224),), ["pixels"]
        return make

    return {"gpt2": gpt2, "vit": timm_model("vit_base_patch16_224"),
            "efficientnet": timm_model("efficientnet_b0"), "gpt2-narrow": lambda: gpt2(64)}


def export(name: str, cache: Path) -> list[Path]:
    """The model's two exports, made once into ``cache``."""
    import torch

    files = [cache / f"{name}.dynamo.onnx", cache / f"{name}.torchscript.onnx"]
    if all(f.exists() for f in files):
        return files
    torch.manual_seed(0)
    model, args, names = _torch_models()[name]()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, dynamo=True, input_names=names, verbose=False).save(str(files[0]))
        torch.onnx.export(model, args, str(files[1]), dynamo=False, opset_version=17, input_names=names)
    return files


def _encoder(cache: Path) -> Path:
    import onnx
    from bench_onnx import transformer_encoder

    target = cache / "encoder.onnx"
    if not target.exists():
        onnx.save(transformer_encoder(48, 32), target)
    return target


def measure(path: Path, repeat: int) -> dict[str, float]:
    """Median seconds of each loader on one file, in alternating rounds: CPU time of this
    process (``name``) and wall time (``name wall``)."""
    from amanda.containers.traverse import walk

    loaders: dict[str, Callable[[], Any]] = {
        "tree": lambda: amanda.load(path),
        "flat": lambda: amanda.load(path, hierarchy=False),
        # the tree with every level opened (a nested import makes each module's level when
        # first read: amanda.containers.deferred), as a full walk, a Session or == opens it
        "tree opened": lambda: [node for _, node, _ in walk(amanda.load(path))],
    }
    try:
        import onnx_ir

        loaders["onnx-ir"] = lambda: onnx_ir.load(str(path))
    except ImportError:
        pass
    times: dict[str, list[float]] = {k: [] for name in loaders for k in (name, f"{name} wall")}
    for _ in range(repeat + 1):  # the first round warms caches and is dropped
        for name, load in loaders.items():
            gc.collect()
            start, cpu = time.perf_counter(), time.process_time()
            kept = load()
            times[name].append(time.process_time() - cpu)
            times[f"{name} wall"].append(time.perf_counter() - start)
            del kept
    return {k: statistics.median(v[1:]) for k, v in times.items()}


def _measured_apart(path: Path, repeat: int) -> dict[str, float]:
    """:func:`measure` of one file in a process of its own: a file of hundreds of megabytes
    leaves the heap in a state that slowed the next file's first loader of each round by up to
    20% (GPT-2 TorchScript's tree import after GPT-2 dynamo's: 1.19x-1.24x the flat import,
    1.00x in a process of its own)."""
    import subprocess

    done = subprocess.run([sys.executable, __file__, "--measure", str(path), "--repeat", str(repeat)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def coverage() -> list[str]:
    """The coverage table of the fixture corpus."""
    from tests.fixtures.onnx import hierarchy_models as fx

    rows = ["| export | modules at their path (and class) | weights in their owner | load(dump(m)) == m | "
            "with functions='modules' |", "|---|---|---|---|---|"]
    totals = [0, 0, 0, 0, 0, 0]
    with tempfile.TemporaryDirectory() as tmp:
        for model, kind in fx.CASES:
            tree = amanda.load(fx.path(model, kind))
            modules, bad_modules = fx.module_problems(model, kind, tree)
            weights, bad_weights = fx.weight_problems(tree, amanda.load(fx.path(model, kind), hierarchy=False))
            amanda.dump(tree, Path(tmp) / "again.onnx")
            same = amanda.load(Path(tmp) / "again.onnx") == tree
            amanda.dump(tree, Path(tmp) / "folded.onnx", functions="modules")
            folded = amanda.load(Path(tmp) / "folded.onnx") == tree
            totals = [totals[0] + modules - len(bad_modules), totals[1] + modules,
                      totals[2] + weights - len(bad_weights), totals[3] + weights, totals[4] + same,
                      totals[5] + folded]
            rows.append(f"| {model}.{kind} | {modules - len(bad_modules)}/{modules} | "
                        f"{weights - len(bad_weights)}/{weights} | {'yes' if same else 'NO'} | "
                        f"{'yes' if folded else 'NO'} |")
    rows.append(f"| all {len(fx.CASES)} | {totals[0]}/{totals[1]} ({100 * totals[0] / totals[1]:.1f}%) | "
                f"{totals[2]}/{totals[3]} ({100 * totals[2] / totals[3]:.1f}%) | {totals[4]}/{len(fx.CASES)} | "
                f"{totals[5]}/{len(fx.CASES)} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", default="")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "amanda-bench-hierarchy")
    parser.add_argument("--coverage", action="store_true")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # one file, in this process (JSON out)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.repeat)))
        return 0
    args.cache.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    try:
        wanted = [n for n in _torch_models() if not args.only or n in args.only.split(",")]
        for name in wanted:
            files += export(name, args.cache)
    except ImportError as exc:
        print(f"torch models skipped ({exc})")
    if not args.only or "encoder" in args.only.split(","):
        files.append(_encoder(args.cache))
    if not args.only or "fixtures" in args.only.split(","):
        files += [FIXTURES / "gpt2.dynamo.onnx", FIXTURES / "mobilenet.torchscript.onnx"]
    print("CPU time of the process (wall time ratios in brackets), medians of", args.repeat, "rounds")
    print("| file | nodes | size | tree | flat | onnx-ir | tree / flat (<= 1.2x) | tree / onnx-ir (<= 1x) "
          "| tree, every level opened |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in files:
        import onnx

        nodes = len(onnx.load(str(path), load_external_data=False).graph.node)
        found = _measured_apart(path, args.repeat)
        ir = found.get("onnx-ir")
        flat = f"{found['tree'] / found['flat']:.2f}x ({found['tree wall'] / found['flat wall']:.2f}x)"
        versus = f"{fmt_time(ir)} | {flat} | {found['tree'] / ir:.2f}x ({found['tree wall'] / found['onnx-ir wall']:.2f}x)" \
            if ir else f"- | {flat} | -"
        print(f"| {path.name} | {nodes} | {path.stat().st_size / 1e6:.1f} MB | {fmt_time(found['tree'])} | "
              f"{fmt_time(found['flat'])} | {versus} | {fmt_time(found['tree opened'])} |", flush=True)
    if args.coverage:
        print()
        print("\n".join(coverage()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
