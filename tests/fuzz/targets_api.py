"""Fuzz targets over the public API: wrong-typed arguments to every public callable, fixture
models with odd attributes or port shapes put through the transforms, and the command line
with odd counts.

- ``api``: a callable of ``tests/public_api.py`` (every name of ``amanda.__all__`` and of its
  subpackages' ``__all__``, and a few op builders of ``amanda.ops``) called with its good arguments, one to three of them (positional or
  keyword) replaced by a wrong value: a string, a number beyond any size, NaN, a ragged or deep
  list, a numpy array, an object, a function, a Container where none belongs (a Session made
  is run once, where its settings take effect). Registries of
  namespaces and tables are restored after each case, and list, mapping and array arguments
  must be unchanged.
- ``transform``: a fixture model with one attribute of every op that has it set to an odd
  value (a float ``kernel_shape``, a string, a huge or negative number ...) or one input's
  declared shape made odd (a dimension beyond int64, negative, a float), then one of optimize,
  each pass, a Session run (whose plans are optimised), ONNX export, fuse of what a selector
  picks (If and Loop bodies included), type inference, validate, summary, to_dot; the model
  must be unchanged.
- ``cli``: ``amanda info | summary | render | run`` on a saved model with ``--top``,
  ``--depth`` and ``--repeat`` from a small range and a few non-numbers; the exit status is 0,
  1 or 2, and a count below its minimum (``--repeat 0``, ``--top -5``) must be refused (2).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

import amanda
from amanda import Container
from amanda.errors import AmandaError
from tests.fuzz import seeds
from tests.fuzz.harness import InvalidResult, ModifiedInput, Source, Target, check_unchanged, snapshot
from tests.fuzz.targets_io import ODD_ATTRS, _scratch
from tests.public_api import builder_calls, drain, good_calls, public_callables, restored_registries

# -- wrong values ---------------------------------------------------------------------------

# each a plain, printable description (a case must print the same every time it is made);
# ``wrong_value`` makes the value. Sizes are small or beyond any machine (10**20): a size in
# between (10**5 channels) is valid and would have a case allocate gigabytes.
SPECS: tuple[tuple, ...] = (
    ("v", "s"), ("v", ""), ("v", "relu"), ("v", "x:y"), ("v", "$..*"), ("v", "a/b"), ("v", "float"),
    ("v", 0), ("v", 1), ("v", -1), ("v", 3), ("v", 100), ("v", 2**63), ("v", 10**20), ("v", -(10**20)),
    ("v", 1.5), ("v", float("nan")), ("v", float("inf")), ("v", True), ("v", False), ("v", None),
    ("v", b"x"), ("v", 1j), ("v", []), ("v", [1, 2]), ("v", ["a"]), ("v", [[1], [1, 2]]), ("v", [None]),
    ("v", [2.0, 2.0]), ("v", ()), ("v", {}), ("v", {3: 1}), ("v", {"x": [[1], [1, 2]]}), ("v", {"k": None}),
    ("v", {"": 1}), ("array", "float64", (2, 2)), ("array", "float32", (0,)), ("array", "bool", (3,)),
    ("array", "<U1", ()), ("array", "int64", (2,)), ("array", "float32", (1,)), ("object",), ("set",),
    ("function",), ("container",), ("tensor_type",), ("deep", 3000), ("bytearray",),
)


def wrong_value(spec: tuple) -> Any:
    """The value a spec of :data:`SPECS` describes (a fresh one each time)."""
    kind = spec[0]
    if kind == "v":
        value = spec[1]
        return list(value) if isinstance(value, list) else dict(value) if isinstance(value, dict) else value
    if kind == "array":
        return np.zeros(spec[2], spec[1])
    if kind == "deep":
        deep: list = []
        for _ in range(spec[1]):
            deep = [deep]
        return deep
    makers = {"object": object, "set": lambda: {1, 2}, "function": lambda: (lambda *a, **k: None),
              "container": lambda: amanda.op("Relu", "odd", ["X"], ["Y"]),
              "tensor_type": lambda: amanda.TensorType("float32", [2]), "bytearray": lambda: bytearray(b"x")}
    return makers[kind]()


# -- api ------------------------------------------------------------------------------------


@functools.cache
def _calls() -> dict[str, tuple[Any, tuple, dict]]:
    """Every public callable and a few op builders, each with a good call."""
    good = good_calls(Path(_scratch()))
    calls = {name: (fn, *good[name]) for name, fn in public_callables().items()}
    return {**calls, **builder_calls()}


def _slots(fn: Any, args: tuple, kwargs: dict) -> list[Any]:
    """Argument slots of ``fn``: positional indexes, keyword-only names and the keywords its
    good call passes (an op builder's attributes)."""
    params = inspect.signature(fn).parameters.values()
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keywords = [p.name for p in params if p.kind is p.KEYWORD_ONLY]
    return [*range(max(len(positional), len(args))), *keywords, *(k for k in kwargs if k not in keywords)]


def generate_api(src: Source) -> tuple[str, tuple[tuple[Any, tuple], ...]]:
    """A public callable's name and ``(slot, spec)`` replacements of its good arguments."""
    name = src.choice(sorted(_calls()))
    fn, args, kwargs = _calls()[name]
    slots = _slots(fn, args, kwargs)
    changes = []
    if slots and not src.boolean(0.1):  # sometimes the good call itself
        for _ in range(src.choice([1, 1, 1, 2, 3])):
            changes.append((src.choice(slots), src.choice(SPECS)))
    return name, tuple(changes)


def _fingerprint(value: Any) -> Any:
    if isinstance(value, Container):
        return snapshot(value)
    if isinstance(value, np.ndarray):
        return value.dtype, value.shape, value.tobytes()
    if isinstance(value, (list, dict, tuple)):
        try:
            return repr(value)
        except RecursionError:  # the deep list: its identity and length stand for it
            return id(value), len(value)
    return None


def run_api(case: tuple[str, tuple[tuple[Any, tuple], ...]]) -> None:
    """The call ends in a result or an AmandaError; its arguments are unchanged."""
    name, changes = case
    fn, good, kwargs = _calls()[name]
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    args, kwargs = list(good), dict(kwargs)
    for slot, spec in changes:
        if isinstance(slot, int):
            while len(args) <= slot:  # the defaults of the parameters before the slot
                i = len(args)
                args.append(params[i].default if i < len(params) and params[i].default is not params[i].empty
                            else None)
            args[slot] = wrong_value(spec)
        else:
            kwargs[slot] = wrong_value(spec)
    given = [*args, *kwargs.values()]
    before = [_fingerprint(v) for v in given]
    with restored_registries(Path(_scratch())), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = fn(*args, **kwargs)
        drain(result)
        if isinstance(result, amanda.Session):  # its settings (threads ...) take effect in a run
            with result:
                result.run(["loss"], {"x": np.ones((2, 3), np.float32)})
    for value, old in zip(given, before):
        if isinstance(value, Container):
            check_unchanged(value, old, f"a Container given to {name}")
        elif old is not None and _fingerprint(value) != old:
            raise ModifiedInput(f"{name} changed the {type(value).__name__} it was given")


# -- transform ------------------------------------------------------------------------------

TRANSFORM_MODELS = ("mlp", "cnn", "attention", "control_flow")
ODD_VALUES = (*ODD_ATTRS, 2.0, [2.0, 2.0], [2.5, 2], "ab", [10**20], 10**20, -(10**20), [-3, -3],
              [float("nan"), 2], [[1], [1, 2]], None, True)
ODD_DIMS = ([10**20, 3], [2**63], [-1, 3], [2.5], "n", [[1]], [0], [None, None], [2**62, 2**62])
SELECTORS = ("$..*", "$..[?is_op]", "$.*", "$[0]", "$.if.*", "$.if.then_branch.*", "$.loop.body.*",
             "$..[?type=='Relu']", "$..[?depth > `1`]", "$..[?type=='MaxPool' || type=='Relu']")
TRANSFORMS = ("optimize", "to_onnx", "fuse", "infer_types", "validate", "summary", "to_dot", "consolidate",
              "check", "flatten", "session", "session", *sorted(amanda.passes.PASSES))


def _leaves(model: Container) -> list[tuple[str, ...]]:
    return [path for path, node, _ in amanda.walk(model) if path and node.is_op]


def generate_transform(src: Source) -> tuple[str, str, Any, Any, str, str]:
    """A fixture model, what to make odd (``attr``: one attribute of every op that has it, or
    ``shape``: a declared input shape), where, to what, the transform and a selector."""
    transform = src.choice(TRANSFORMS)
    name = "control_flow" if transform == "fuse" and src.boolean(0.5) else src.choice(TRANSFORM_MODELS)
    model = seeds.onnx_containers()[name]
    kind = src.choice(["attr", "attr", "shape", "none"])
    where: Any = None
    value: Any = None
    if kind == "attr":
        keys = sorted({k for path in _leaves(model) for k in model.descendant(path).attrs} - {"namespace", "value"})
        where, value = src.choice(keys or ["axis"]), src.choice(ODD_VALUES)
    elif kind == "shape":
        where, value = src.choice(model.input_names), src.choice(ODD_DIMS)
    return name, kind, where, value, transform, src.choice(SELECTORS)


def _odd_model(name: str, kind: str, where: Any, value: Any) -> Container:
    model = seeds.onnx_containers()[name]
    if kind == "attr":
        paths = [p for p in _leaves(model) if where in model.descendant(p).attrs]
        return amanda.replace(model, paths, lambda node: node.with_attrs(**{where: value})) if paths else model
    if kind == "shape":
        ports = [p if p.name != where else amanda.Port(p.name, attrs={**p.attrs, "shape": value})
                 for p in model.inputs]
        return model.evolve(inputs=ports)
    return model


def run_transform(case: tuple[str, str, Any, Any, str, str]) -> None:
    """The transform ends in a result or an AmandaError and leaves the model unchanged."""
    name, kind, where, value, transform, selector = case
    model = _odd_model(name, kind, where, value)
    before = snapshot(model)
    if transform == "to_onnx":
        from amanda.io.onnx import to_onnx

        to_onnx(model)
    elif transform == "fuse":
        amanda.fuse(model, amanda.select(model, selector), "Fused")
    elif transform == "session":  # plans are specialised and optimised (every pass but fuse_gelu's export form)
        from tests.fixtures.onnx.onnx_models import feeds

        with amanda.Session(model, threads=1) as session:
            session.run(list(model.output_names), feeds(name))
    elif transform in amanda.passes.PASSES:
        amanda.passes.PASSES[transform](model)
    elif transform == "check":
        amanda.types.check(model)
    else:
        getattr(amanda, transform)(model)
    check_unchanged(model, before, f"the model given to {transform}")


# -- cli ------------------------------------------------------------------------------------

_MINIMUM = {"--top": 0, "--depth": 0, "--repeat": 1}
_COMMANDS = {"info": ("--top",), "summary": ("--depth",), "render": ("--depth",), "run": ("--repeat",)}
COUNTS = ("-5", "-1", "0", "1", "2", "x", "1.5", "", "+1", " 2")


@functools.cache
def _cli_files() -> tuple[str, str]:
    """The mlp fixture saved as YAML, and its input as ``.npy``."""
    from tests.fixtures.onnx.onnx_models import feeds

    path = os.path.join(_scratch(), "cli_model.yaml")
    amanda.dump(seeds.onnx_containers()["mlp"], path)
    array = os.path.join(_scratch(), "cli_x.npy")
    np.save(array, feeds("mlp")["x"])
    return path, array


def generate_cli(src: Source) -> tuple[str, ...]:
    """Command-line arguments after ``amanda``."""
    command = src.choice(sorted(_COMMANDS))
    argv = [command, "MODEL"]
    if command == "render":
        argv.append("OUT.svg")
    if command == "run":
        argv += ["--input", "x=INPUT"]
    for option in _COMMANDS[command]:
        if src.boolean(0.8):
            argv += [option, src.choice(COUNTS)]
    return tuple(argv)


def _below_minimum(argv: tuple[str, ...]) -> str | None:
    for option, text in zip(argv, argv[1:]):
        if option in _MINIMUM:
            try:
                number = int(text)
            except ValueError:
                return f"{option} {text!r}"
            if number < _MINIMUM[option]:
                return f"{option} {text}"
    return None


class Refused(AmandaError):
    """The command line refused its arguments or input (exit status 2): its way of raising an
    AmandaError, so the fuzzer counts it as bad input rejected."""


def run_cli(case: tuple[str, ...]) -> None:
    """Exit status 0, 1 or 2, and 2 for a count below its minimum or not a whole number."""
    from amanda.cli import main

    model, array = _cli_files()
    out = os.path.join(_scratch(), "cli_out.svg")
    argv = [model if a == "MODEL" else out if a == "OUT.svg" else f"x={array}" if a == "x=INPUT" else a for a in case]
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        try:
            status = main(argv)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 2
    if status not in (0, 1, 2):
        raise InvalidResult(f"exit status {status}")
    bad = _below_minimum(case)
    if bad is not None and status != 2:
        raise InvalidResult(f"accepted {bad} (exit status {status})")
    if status == 2:
        raise Refused(sink.getvalue().strip().splitlines()[-1] if sink.getvalue().strip() else "exit status 2")


TARGETS = (
    Target("api", generate_api, run_api),
    Target("transform", generate_transform, run_transform),
    Target("cli", generate_cli, run_cli),
)
