"""Running a partitioning on the workers of a ``dask.distributed`` cluster.

``Session(model, client=client)`` runs each part on the worker that holds its device: a run is
one Dask graph of one task per part, each restricted to its device's worker, receiving the
values other parts send through Dask (the scheduler moves them between workers). Devices map
to workers by ``devices={"gpu:0": worker}`` (a worker's address or name); a device not named
there, or every device when no map is given, goes to the worker of the same name if there is
one, else round-robin over the workers in address order.

Variables live on their device's worker (in a per-process table keyed by session and device),
so they persist across runs without travelling. After each run the values the run changed come
back to the client as a checkpoint (``Session.state``). A run that fails (a kernel error, a
worker that died, a timeout) discards its variable updates: the next run seeds every device
from the checkpoint of the last successful run, under a new *epoch*. A part that Dask moves to
another worker (its own died), or that lands on a worker without its state, raises at once
instead of running with the wrong state, and the run's error names the part and the worker.

Parts travel as amanda's JSON text (containers are never pickled), once per epoch; the worker
keeps each part's compiled Session.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.containers import Container
from amanda.errors import AmandaError, ExecutionError
from amanda.exec.dispatch import ONNX, session_op_types
from amanda.exec.dist.partition import DONE, Partitioning, partition
from amanda.exec.dist.placement import DEFAULT_DEVICE, devices_of
from amanda.exec.feeds import check_feeds, feed_types
from amanda.exec.state import CORE, VariableRef
from amanda.exec.tensorflow import TENSORFLOW

__all__ = ["DaskRunner", "PartMoved", "assign_workers", "run_part_task"]

# op types whose kernels may change variables: parts holding one report their changes
WAIT_FOR_WORKERS = 30.0  # seconds a run waits for a worker when the cluster has none
SCATTER_BYTES = 1 << 16  # fed arrays at least this large are scattered to their worker
_STATEFUL = frozenset(t for family in (CORE, ONNX, TENSORFLOW) for t in session_op_types(family))


class PartMoved(Exception):
    """Raised on a worker by a part that is not where its state is (its worker died or
    restarted); the client turns it into an ExecutionError naming the part and the worker."""

    def __init__(self, part: str, expected: str, found: str, why: str) -> None:
        super().__init__(part, expected, found, why)
        self.part, self.expected, self.found, self.why = part, expected, found, why


# -- the worker side -------------------------------------------------------------------------

class _Device:
    """One device's variables on this worker for one session, and its parts' sessions."""

    def __init__(self) -> None:
        self.epoch: str | None = None
        self.state: dict[str, Any] = {}  # kept as one dict: the part sessions' plans hold it
        self.parts: dict[str, Any] = {}  # part token -> Session


_LOCK = threading.Lock()
_DEVICES: dict[tuple[str, str], _Device] = {}  # (session id, device) -> _Device, per process


def _worker_address() -> str:
    from distributed import get_worker

    return str(get_worker().address)


def _device(session_id: str, device: str, epoch: str, seed: Mapping | None, expected: str, part: str) -> _Device:
    """The device's table here, seeded when ``seed`` is given and this epoch has not yet been."""
    here = _worker_address()
    if here != expected:
        raise PartMoved(part, expected, here, "Dask moved the part to another worker")
    with _LOCK:
        entry = _DEVICES.get((session_id, device))
        if entry is None or entry.epoch != epoch:
            if seed is None:
                raise PartMoved(part, expected, here, "the worker has lost the device's variables (it restarted)")
            entry = _DEVICES.setdefault((session_id, device), _Device())
            entry.state.clear()  # in place: compiled plans hold this dict
            entry.state.update(seed)
            entry.epoch = epoch
        return entry


def run_part_task(session_id: str, device: str, epoch: str, seed: Mapping | None, token: str, text: str | None,
                  part: str, expected: str, threads: int | None, deadline: float | None, inputs: dict,
                  receives: dict, scattered: tuple, sources: tuple, *values: Any) -> tuple[dict, dict]:
    """Run one part on this worker: its output values by port, and the variables it changed.

    ``values`` are the fed arrays of the ``scattered`` ports, then the results of the parts
    numbered in ``sources`` (what each part sent), in that order. ``deadline`` (a ``time.time()``
    value: the run's timeout, set on the client) bounds the part as ``Session.run(timeout=...)``
    does: no step starts after it, so a run that timed out does not leave its parts running on
    the workers (and the next run waiting behind them) for longer than the step under way.
    """
    from amanda.exec.runner import timed_out
    from amanda.exec.session import Session
    from amanda.engines import engine

    remaining = None if deadline is None else deadline - time.time()
    if remaining is not None and remaining <= 0:
        raise timed_out(part)  # the run is over: start nothing

    entry = _device(session_id, device, epoch, seed, expected, part)
    session = entry.parts.get(token)
    if session is None:
        if text is None:
            raise PartMoved(part, expected, _worker_address(), "the worker has lost the part (it restarted)")
        session = Session(engine("loads")(text, "json"), threads=threads)
        session._state = entry.state  # the device's variables, shared by all its parts
        entry.parts[token] = session
    feeds = dict(inputs)
    feeds.update(zip(scattered, values))
    sent = dict(zip(sources, values[len(scattered):]))
    feeds.update({port: sent[i][0][out] for port, (i, out) in receives.items()})
    outputs = list(session.model.output_names)
    before = dict(entry.state)
    results = session.run([*outputs, DONE], feeds, timeout=remaining)
    changes = {k: v for k, v in entry.state.items() if before.get(k) is not v}
    return dict(zip(outputs, results)), changes


def forget(session_id: str) -> int:
    """Drop a session's tables from this process; how many devices it held here."""
    with _LOCK:
        keys = [k for k in _DEVICES if k[0] == session_id]
        for k in keys:
            del _DEVICES[k]
    return len(keys)


# -- the client side -------------------------------------------------------------------------

def assign_workers(devices: list[str], workers: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, str]:
    """Device -> worker address: ``wanted`` (address or name) first, then a worker named like
    the device, then round-robin over the remaining devices in sorted order.

    >>> assign_workers(["a", "b", "c"], {"tcp://1": {"name": 0}, "tcp://2": {"name": "b"}}, {})
    {'b': 'tcp://2', 'a': 'tcp://1', 'c': 'tcp://2'}
    """
    if not workers:
        raise ExecutionError.at("client", "a cluster with at least one worker", "no workers")
    by_name = {str(info.get("name")): address for address, info in workers.items()}
    addresses = sorted(workers)
    found: dict[str, str] = {}
    for device, worker in wanted.items():
        address = worker if worker in workers else by_name.get(str(worker))
        if address is None:
            raise ExecutionError.at(f"devices[{device!r}]", f"a worker of the cluster ({', '.join(addresses)})",
                                    repr(worker))
        found[device] = address
    rest = [d for d in sorted(devices) if d not in found]
    for device in rest:
        if device in by_name:
            found[device] = by_name[device]
    for i, device in enumerate(d for d in rest if d not in found):
        found[device] = addresses[i % len(addresses)]
    return found


class _Compiled:
    """A partitioning ready to ship: each part's JSON text and token, the fed types, and
    which parts the client gathers (those with fetches or with ops that may change state)."""

    def __init__(self, partitioning: Partitioning, model: Container, feeds: list) -> None:
        from amanda.engines import engine

        dumps = engine("dumps")  # installed by amanda.io, above the executor
        self.partitioning = partitioning
        self.texts = [dumps(p.container, "json") for p in partitioning.parts]
        self.tokens = [uuid.uuid4().hex for _ in partitioning.parts]
        self.types = feed_types(model, feeds)
        self.gathered = [bool(p.fetches) or any(c.type in _STATEFUL for c in p.container.children)
                         for p in partitioning.parts]


class DaskRunner:
    """What ``Session(model, client=...)`` runs with (see the module docstring)."""

    def __init__(self, model: Container, client: Any, devices: Mapping[str, Any] | None, threads: int | None,
                 state: dict[str, Any], default: str = DEFAULT_DEVICE) -> None:
        if not hasattr(client, "compute") or not hasattr(client, "scheduler_info"):
            raise ExecutionError.at("client", "a dask.distributed Client", type(client).__name__)
        if devices is not None and not isinstance(devices, Mapping):
            raise ExecutionError.at("devices", "a mapping {device: worker address or name}", type(devices).__name__)
        self.client, self.threads, self.default = client, threads, default
        self.wanted = dict(devices or {})
        self.id = uuid.uuid4().hex
        self.devices = sorted(set(devices_of(model, default).values()))
        self.state = state  # the session's state: the client's checkpoint of every device
        self.checkpoint: dict[str, dict[str, Any]] = {}
        self.compiled: dict[tuple, _Compiled] = {}
        self.workers: dict[str, str] | None = None
        self.epoch: str | None = None  # None: seed every device on the next run
        self.shipped: set[tuple] = set()  # partitionings whose texts the workers have this epoch
        self.seeded: set[str] = set()  # devices whose workers hold this epoch's variables
        self.runs = 0

    def _compiled(self, model: Container, fetches: tuple, feeds: dict, phase: Any) -> _Compiled:
        key = (fetches, frozenset(feeds), phase)
        found = self.compiled.get(key)
        if found is None:
            names = list(feeds)
            found = self.compiled[key] = _Compiled(partition(model, list(fetches), names, phase=phase,
                                                             default=self.default), model, names)
        return found

    def run(self, model: Container, fetches: tuple, feeds: dict, phase: Any, timeout: float | None) -> list:
        """Run on the cluster; the fetches in order (see ``Session.run``)."""
        from dask.highlevelgraph import HighLevelGraph, MaterializedLayer
        from dask.task_spec import Task, TaskRef

        compiled = self._compiled(model, fetches, feeds, phase)
        if compiled.types:
            check_feeds(compiled.types, feeds)
        if self.workers is None:
            self.workers = assign_workers(self.devices, self._live_workers(), self.wanted)
        if self.epoch is None:
            self.epoch, self.shipped, self.seeded = uuid.uuid4().hex, set(), set()
        # a device's first run in an epoch sets its worker's variables from the checkpoint
        seeds = {p.device: dict(self.checkpoint.get(p.device, {})) for p in compiled.partitioning.parts
                 if p.device not in self.seeded}
        key = (fetches, frozenset(feeds), phase)
        ship = key not in self.shipped
        parts = compiled.partitioning.parts
        self.runs += 1
        deadline = None if timeout is None else time.time() + timeout  # wall clock: workers share it
        # one graph, one layer per part: a layer's annotations restrict its task to the
        # device's worker (loosely, so a dead worker's part moves and raises PartMoved)
        keys: list[str] = []
        held: list = []
        layers: dict[str, Any] = {}
        needs: dict[str, set[str]] = {}
        for part, token, text in zip(parts, compiled.tokens, compiled.texts):
            address = self.workers[part.device]
            name = f"amanda-{self.id[:8]}-{self.runs}-{part.number}"
            inputs: dict[str, Any] = {}
            big: dict[str, Any] = {}
            for port, fed in part.feeds.items():
                (big if self._large(feeds[fed]) else inputs)[port] = feeds[fed]
            scattered = self._scatter(big, address)
            sources = tuple(sorted({i for i, _ in part.receives.values()}))
            refs = [TaskRef(f.key) for f in scattered.values()] + [TaskRef(keys[i]) for i in sources]
            task = Task(name, run_part_task, self.id, part.device, self.epoch, seeds.get(part.device), token,
                        text if ship else None, part.name, address, self.threads, deadline, inputs, dict(part.receives),
                        tuple(scattered), sources, *refs)
            layers[name] = MaterializedLayer({name: task}, annotations={"workers": [address],
                                                                        "allow_other_workers": True})
            needs[name] = {keys[i] for i in sources}
            keys.append(name)
            held.extend(scattered.values())  # the scattered feeds live while the run does
        futures = self.client.get(HighLevelGraph(layers, needs), keys, sync=False)
        results = self._results(compiled, futures, timeout)
        self.shipped.add(key)
        self.seeded.update(seeds)
        for part, result in zip(parts, results):
            if result is not None and result[1]:
                self.checkpoint.setdefault(part.device, {}).update(result[1])
                self.state.update(result[1])
        return [self._fetch(source, results, feeds) for source in compiled.partitioning.sources]

    def _live_workers(self) -> dict[str, Any]:
        """The cluster's workers; after a failure they may be restarting, so wait a little
        for at least one."""
        workers = self.client.scheduler_info()["workers"]
        if not workers:
            try:
                self.client.wait_for_workers(1, timeout=WAIT_FOR_WORKERS)
            except Exception:  # noqa: BLE001 - assign_workers says there are none
                return {}
            workers = self.client.scheduler_info()["workers"]
        return dict(workers)

    @staticmethod
    def _large(value: Any) -> bool:
        return isinstance(value, np.ndarray) and value.nbytes >= SCATTER_BYTES

    def _scatter(self, values: dict, address: str) -> dict:
        """Large fed arrays go straight to the worker that needs them, so they do not travel
        through the scheduler inside the graph: port -> future."""
        if not values:
            return {}
        futures = self.client.scatter(list(values.values()), workers=[address], direct=True, hash=False)
        return dict(zip(values, futures))

    def _results(self, compiled: _Compiled, futures: list, timeout: float | None) -> list:
        """The gathered parts' results (None for the others); on any failure, the run's
        error, and the next run reseeds every device."""
        from distributed import wait

        wanted = [f for f, g in zip(futures, compiled.gathered) if g]
        try:
            if timeout is not None:
                wait(futures, timeout=timeout)
            got = iter(self.client.gather(wanted))
            return [next(got) if g else None for g in compiled.gathered]
        except BaseException as exc:
            error = self._explain(compiled, futures, exc)
            self.epoch, self.workers = None, None
            self.client.cancel(futures)
            if error is None:
                raise
            raise error from exc

    def _explain(self, compiled: _Compiled, futures: list, exc: BaseException) -> BaseException | None:
        """The first failing part's error, in running order: a kernel's own error as it is, a
        lost or moved part as an ExecutionError naming the part and the worker."""
        if isinstance(exc, TimeoutError):
            return ExecutionError.at("timeout", "the distributed run to end before its timeout",
                                     "the timeout passed", "raise Session(timeout=...) or run(timeout=...)")
        if not isinstance(exc, Exception):
            return None  # KeyboardInterrupt and the like pass through
        from distributed import wait

        wait(futures, timeout=10)
        for part, future in zip(compiled.partitioning.parts, futures):
            if future.status in ("pending", "finished"):
                continue
            address = (self.workers or {}).get(part.device, "?")
            try:
                error = future.exception(timeout=1)
            except Exception as other:  # noqa: BLE001 - a cancelled or lost future
                error = other
            if isinstance(error, AmandaError):
                return error
            if isinstance(error, PartMoved):
                return _lost(part.name, error.expected, f"{error.why} (the part reached {error.found})")
            return _lost(part.name, address, f"{type(error).__name__}: {error}")
        if isinstance(exc, AmandaError):
            return exc
        return ExecutionError.at("client", "the cluster to run every part", f"{type(exc).__name__}: {exc}")

    def _fetch(self, source: tuple, results: list, feeds: Mapping) -> Any:
        if source[0] == "feed":
            return feeds[source[1]]
        if source[0] == "effect":
            return None
        value = results[source[1]][0][source[2]]
        if isinstance(value, VariableRef):  # a fetched reference reads as its value, as locally
            return self.state.get(value.key)
        return value

    def close(self) -> None:
        """Drop this session's variables and parts from the workers (the checkpoint stays)."""
        try:
            if self.client.status == "running":
                self.client.run(forget, self.id)
        except Exception:  # noqa: BLE001, S110 - a closed cluster has nothing left to drop
            pass
        self.epoch, self.workers = None, None


def _lost(part: str, worker: str, why: str) -> ExecutionError:
    return ExecutionError(
        f"part `{part}` failed on worker {worker}: {why}; the run's variable updates are discarded and the "
        "next run starts again from the variables of the last successful run",
        path=part, expected=f"part `{part}` to run on worker {worker}", found=why)
