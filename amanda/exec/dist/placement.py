"""Placement: every leaf op gets a device, as a pure transform.

A ``device`` attribute on any container is inherited by everything inside it, like all
metadata. ``place`` gives each leaf op its effective device (its own, the nearest
ancestor's, or ``default``) as its own attribute, and colocates the ops that read or write a
variable (``amanda/core`` ``Read``, ``Assign``, ``AssignAdd``) with the ``Variable`` they
take their reference from: state lives where its variable lives. An op whose *own* device
names another device than its variable's is a conflict; every conflict is reported, by path,
in one ``PlacementError``.

>>> import amanda
>>> g = amanda.Container("G", "g", attrs={"device": "worker-1"},
...                      children=[amanda.op("Relu", "a"), amanda.op("Tanh", "b", attrs={"device": "worker-0"})])
>>> [op.attrs["device"] for op in place(g)]
['worker-1', 'worker-0']
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from amanda.containers import flatten, walk, with_attrs
from amanda.containers.records import Path
from amanda.errors import ArgumentError, InvariantError, Problem
from amanda.ops.effects import Effect
from amanda.ops.registry import effect_of

if TYPE_CHECKING:
    from amanda.containers import Container

__all__ = ["DEFAULT_DEVICE", "PlacementError", "devices_of", "place"]

DEFAULT_DEVICE = "cpu:0"

class PlacementError(InvariantError):
    """Ops whose devices cannot all hold: ``problems`` names each by path."""


def devices_of(model: Container, default: str = DEFAULT_DEVICE) -> dict[Path, str]:
    """Leaf path -> device after placement (effective device, colocated with variables)."""
    if not isinstance(default, str) or not default:
        raise ArgumentError.at("default", "a device name (a non-empty string)", repr(default))
    flat = flatten(model)
    devices: dict[Path, str] = {}
    own: dict[Path, bool] = {}
    for path, node, attrs in walk(model):
        if path in flat.ops:
            device = attrs.get("device", default)
            if not isinstance(device, str) or not device:
                raise PlacementError([Problem(path, "a device name (a non-empty string)", repr(device))])
            devices[path] = device
            own[path] = "device" in node.attrs
    problems = []
    for edge in flat.edges:
        src, dst = edge[0], edge[1]
        if not isinstance(src[0], tuple) or not isinstance(dst[0], tuple):
            continue
        producer, consumer = flat.ops[src[0]], flat.ops[dst[0]]
        if producer.type != "Variable" or effect_of(str(consumer.type)) is not Effect.STATEFUL or src[1] == -1:
            continue
        wanted = devices[src[0]]
        if devices[dst[0]] != wanted and own[dst[0]]:
            problems.append(Problem(dst[0], f"device {wanted!r}, where its variable "
                                    f"`{'/'.join(src[0])}` lives", repr(devices[dst[0]])))
        devices[dst[0]] = wanted
    if problems:
        raise PlacementError(problems, "ops that touch a variable must run on its device")
    return devices


def place(model: Container, default: str = DEFAULT_DEVICE) -> Container:
    """``model`` with every leaf op's device set as its own ``device`` attribute.

    Ops already carrying the right device as their own attribute are shared, not rebuilt.
    """
    by_device: dict[str, list[Path]] = defaultdict(list)
    ops = flatten(model).ops
    for path, device in devices_of(model, default).items():
        if ops[path].attrs.get("device") != device:
            by_device[device].append(path)
    placed = model
    for device, paths in sorted(by_device.items()):
        if paths == [()]:  # the model is one op
            placed = placed.with_attrs(device=device)
        else:
            placed = with_attrs(placed, paths, device=device)
    return placed
