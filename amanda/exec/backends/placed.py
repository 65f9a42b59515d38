"""Running a model whose ops are placed on backends: the placement's partitioning
(:func:`~amanda.exec.dist.partition.partition`) run in this process, numpy parts by a
Session over the part (sharing the session's variables), onnxruntime parts by
:class:`~amanda.exec.backends.onnxruntime.OrtPart`, array-device parts (``cupy:0``) by a
Session over the part whose values live on the device (:mod:`amanda.exec.backends.arrays`).

An op placed on an onnxruntime device that onnxruntime cannot run (another namespace than
ONNX's, or a type its provider has no kernel for), or on an array device that its kernel
does not run on, is moved to numpy before partitioning
(:func:`assign_devices`), so variables, amanda's own namespaces and control into stateful
ops always stay on numpy.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.containers import Container, flatten, walk, with_attrs
from amanda.containers.uids import uid_clashes
from amanda.errors import ArgumentError, suggest
from amanda.exec.backends import arrays
from amanda.exec.backends.arrays import check_array_device, device_index, is_array_device, runs_on_arrays
from amanda.exec.backends.onnxruntime import ORT_PREFIX, PROVIDERS, OrtPart, check_device, is_ort_device, provider_of
from amanda.exec.backends.onnxruntime import supported_op as _supported
from amanda.exec.dist.partition import DIST, DONE, Part, Partitioning, partition
from amanda.exec.dist.placement import DEFAULT_DEVICE, devices_of
from amanda.exec.profile import Event, Profile, common_prefix
from amanda.exec.runner import timed_out

__all__ = ["BACKENDS", "PlacedRunner", "assign_devices", "place_by", "uses_backend"]

BACKENDS = ("numpy", *(ORT_PREFIX.rstrip(":") + suffix for suffix in ("", *(":" + k for k in PROVIDERS))),
            "cupy", "cupy:0")


def backend_device(backend: Any) -> str | None:
    """The default device a ``Session(backend=...)`` gives every op (None for numpy)."""
    if backend is None or isinstance(backend, str) and backend == "numpy":
        return None
    if not isinstance(backend, str) or backend not in BACKENDS:
        hint = suggest(backend, BACKENDS) if isinstance(backend, str) else ""
        raise ArgumentError.at("backend", f"None or one of {', '.join(map(repr, BACKENDS))}", repr(backend), hint)
    if backend == "cupy":
        return "cupy:0"
    return backend if ":" in backend else ORT_PREFIX + "cpu"


def place_by(model: Container, placement: Mapping[str, str]) -> Container:
    """``model`` with a ``device`` attribute on every node each selector of ``placement``
    matches (``{"$..[?type=='GPT2Block']": "onnxruntime:cpu"}``; later rules win where two match)."""
    if not isinstance(placement, Mapping):
        raise ArgumentError.at("placement", "a mapping {selector: device}", type(placement).__name__)
    for selector, device in placement.items():
        if not isinstance(device, str) or not device:
            raise ArgumentError.at(f"placement[{selector!r}]", "a device name", repr(device))
        if is_ort_device(device):
            provider_of(device)
        elif is_array_device(device):
            device_index(device)
        selection = model.select(selector)
        if not selection.paths:
            raise ArgumentError.at(f"placement[{selector!r}]", "a selector that matches nodes", "no match")
        model = with_attrs(model, selection, device=device)
    return model


def uses_backend(model: Container) -> bool:
    """Whether any node of ``model`` names an onnxruntime or array device in its own attributes."""
    stack = [model]
    while stack:
        node = stack.pop()
        if _is_backend(node.attrs.get("device")):
            return True
        stack.extend(node.children)
    return False


def _is_backend(device: Any) -> bool:
    return is_ort_device(device) or is_array_device(device)


def _runs_on(op: Container, namespace: Any, device: str) -> bool:
    """Whether ``op`` can run on the backend ``device``."""
    if is_array_device(device):
        return runs_on_arrays(op, namespace)
    return _supported(op, namespace, provider_of(device))


def assign_devices(model: Container, default: str = DEFAULT_DEVICE) -> Container:
    """``model`` with every op placed on an onnxruntime or array device that it cannot run
    there moved to numpy (``cpu:0``) by its own ``device`` attribute."""
    devices = devices_of(model, default)
    wanted = {p for p, d in devices.items() if _is_backend(d)}
    for d in {devices[p] for p in wanted}:
        if is_array_device(d):
            check_array_device(d)
        else:
            check_device(d)
    if not wanted:
        return model
    ops = flatten(model).ops
    moved = [p for p, _, attrs in walk(model)
             if p in wanted and not _runs_on(ops[p], attrs.get("namespace"), devices[p])]
    if not moved:
        return model
    if moved == [()]:
        return model.with_attrs(device=DEFAULT_DEVICE)
    return with_attrs(model, moved, device=DEFAULT_DEVICE)


class _NumpyPart:
    """A numpy part: a Session over the part's container, sharing the session's variables."""

    def __init__(self, part: Part, owner: Any) -> None:
        from amanda.exec.session import Session

        self.part = part
        container = part.container
        if uid_clashes(container):  # copies of one shared Constant with their scopes' attributes
            container = container.evolve(children=[c.evolve(uid=None) if c.type == "Constant" else c
                                                   for c in container.children])
        self.session = Session(container, threads=owner.threads, optimize=False, backend="numpy",
                               profile=owner._profile)
        self.session._state = owner._state  # variables live on numpy, in the user's session

    def run(self, values: Mapping[str, Any]) -> dict[str, Any]:
        outputs = list(self.part.container.output_names)
        results = self.session.run([*outputs, DONE], values)
        return dict(zip(outputs, results))


class _DevicePart(_NumpyPart):
    """An array-device part: a Session over the part whose inputs arrive on the device (the
    runner moves them) and whose plan's constants are copied there once."""

    def __init__(self, part: Part, owner: Any) -> None:
        super().__init__(part, owner)
        self.library = arrays.library_of(part.device)
        self.index = device_index(part.device)
        self._placed: set[int] = set()  # ids of the plans whose constants are on the device

    def run(self, values: Mapping[str, Any]) -> dict[str, Any]:
        outputs = list(self.part.container.output_names)
        plan = self.session.plan([*outputs, DONE], list(values))
        if id(plan) not in self._placed:
            arrays.on_device(plan.template, self.library, self.index)
            self._placed.add(id(plan))
        return super().run(values)


def _fallback(part: Part, owner: Any) -> Any:
    """Runs ``part`` on numpy, its Session made on first use (only where onnxruntime refuses)."""
    made: list[_NumpyPart] = []

    def run(values: Mapping[str, Any]) -> dict[str, Any]:
        if not made:
            made.append(_NumpyPart(part, owner))
        return made[0].run(values)

    return run


def _events(part: Part, runner: Any, start: float, seconds: float, moved: int, origin: float) -> list[Event]:
    """A part's events in model paths: a numpy part's ops (its Recv ops carry the bytes moved),
    an onnxruntime part as one event on the innermost container of its ops."""
    ops = [tuple(c.name.split("/")) for c in part.container.children if c.attrs.get("namespace") != DIST]
    session = getattr(runner, "session", None)
    profile = session.profile if session is not None else None
    if profile is None:  # onnxruntime ran it, or numpy where onnxruntime refused it
        kind = "numpy fallback" if getattr(runner, "fell_back", False) else "onnxruntime"
        return [Event(common_prefix(ops), kind, part.device, start - origin, seconds, moved)]
    shift = start - origin
    out = []
    first = _first_recv(part)
    for k, e in enumerate(profile.events):
        name = e.path[0] if len(e.path) == 1 else "/".join(e.path)
        # feeds copied to an array device arrive with no Recv: the part's first op takes them
        bytes_in = moved if (name == first if first is not None else k == 0) else 0
        out.append(Event(tuple(name.split("/")), e.op_type, part.device, e.start + shift, e.seconds, bytes_in))
    return out


def _first_recv(part: Part) -> str | None:
    """The Recv op a part's bytes received are charged to (the first one)."""
    return next((c.name for c in part.container.children if c.type == "Recv"), None)


def _inputs(parts: tuple, part: Part, runner: Any, values: Mapping[Any, Any], produced: list[dict],
            fed: dict) -> tuple[dict, int]:
    """A part's input values, moved to its device (a feed once per run), and the bytes it
    receives from other devices (feeds copied to an array device included)."""
    device = isinstance(runner, _DevicePart)
    inputs, moved = {}, 0
    for port, name in part.feeds.items():
        value = values[name]
        if device and arrays.movable(value):
            key = (name, part.device)
            if key not in fed:
                fed[key] = runner.library.to_device(value, runner.index)
                moved += value.nbytes
            value = fed[key]
        inputs[port] = value
    for port, (i, out) in part.receives.items():
        value = produced[i][out]
        if device and arrays.movable(value):
            value = runner.library.to_device(value, runner.index)
        elif not device and type(value) is not np.ndarray:
            value = arrays.to_host(value)
        if parts[i].device != part.device:
            moved += arrays.nbytes(value)
        inputs[port] = value
    return inputs, moved


class PlacedRunner:
    """Runs a Session's model by its placement (a run's timeout is checked before each part
    starts; a part already running is not stopped); ``records`` holds, after each run, one
    ``(part name, device, start, seconds, bytes received from other devices)`` per part."""

    def __init__(self, session: Any, backend: Any = None) -> None:
        self.session = session
        self.default = backend_device(backend) or DEFAULT_DEVICE
        if is_ort_device(self.default):
            check_device(self.default)
        elif is_array_device(self.default):
            check_array_device(self.default)
        self._runs: dict[tuple, tuple[Partitioning, list]] = {}
        self.records: list[tuple[str, str, float, float, int]] = []
        self._events: list[Event] = []

    def _prepared(self, model: Container, items: tuple, names: frozenset, phase: Any) -> tuple[Partitioning, list]:
        key = (items, names, phase)
        found = self._runs.get(key)
        if found is None:
            placed = assign_devices(model, self.default)
            partitioning = partition(placed, list(items), list(names), phase=phase, default=self.default)
            runners: list = []
            threads = self.session._runner.budget
            alone = len(partitioning.parts) == 1
            shapes = {p.name: p.attrs.get("shape") for p in model.inputs}
            for part in partitioning.parts:
                if is_ort_device(part.device):
                    declared = {port: shapes.get(feed) for port, feed in part.feeds.items()}
                    runners.append(OrtPart(part, provider_of(part.device), threads, _fallback(part, self.session),
                                           spin=alone, declared=declared))
                elif is_array_device(part.device):
                    runners.append(_DevicePart(part, self.session))
                else:
                    runners.append(_NumpyPart(part, self.session))
            found = self._runs[key] = (partitioning, runners)
        return found

    def run(self, model: Container, items: tuple, values: Mapping[Any, Any], phase: Any,
            seconds: float | None) -> list:
        """The fetches ``items`` given ``values``, in fetch order (None for effects)."""
        partitioning, runners = self._prepared(model, items, frozenset(values), phase)
        origin = time.perf_counter()
        self._events = []
        produced: list[dict] = []
        fed: dict = {}  # (feed name, device) -> the feed copied there: once per run
        records = []
        parts = partitioning.parts
        deadline = None if seconds is None else origin + seconds
        for part, runner in zip(parts, runners):
            if deadline is not None and time.perf_counter() > deadline:
                raise timed_out(part.name)
            inputs, moved = _inputs(parts, part, runner, values, produced, fed)
            start = time.perf_counter()
            produced.append(runner.run(inputs))
            records.append((part.name, part.device, start, time.perf_counter() - start, moved))
            if self.session._profile:
                self._events.extend(_events(part, runner, start, records[-1][3], moved, origin))
        self.records = records
        results = []
        for source in partitioning.sources:
            if source[0] == "part":
                results.append(arrays.to_host(self.session._read(produced[source[1]][source[2]])))
            elif source[0] == "feed":
                results.append(values[source[1]])
            else:
                results.append(None)
        return results

    def profile(self, model: Container, start: float, wall: float) -> Profile:
        """The last run's profile (``start``: when the session began the run, ``wall`` its time)."""
        return Profile(model, self._events, wall)

    def close(self) -> None:
        """Stop the numpy parts' worker threads."""
        for _, runners in self._runs.values():
            for runner in runners:
                session = runner.session if isinstance(runner, _NumpyPart) else None
                if session is not None:
                    session.close()

