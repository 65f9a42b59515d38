"""Layer weights: initialisation rules, draws, and uids derived from a weight's path and a seed.

A weight is a ``Constant`` initializer child of a layer whose ``weights`` attribute maps its name
to its rule and fans, ``[rule, fan_in, fan_out]`` (rules: ``glorot_uniform``, ``he_normal``,
``zeros``, ``ones`` …). Running statistics are ``amanda/core`` ``Variable`` children listed there too.

Every layer instance has an identity of its own: its weights get fresh uids when it is built
(:func:`drawn`), drawn from the layer's ``seed`` and the weight's path, or without a seed from
the instance's number in the process (so two layers built apart start from different weights,
and the same script draws the same ones). :func:`seeded` then gives every weight of a whole
model the uid ``<seed>:<path>`` and draws it again from a numpy Generator seeded by (seed, path):
the same code builds the same weights and uids in any process, so saved weights pair by uid.

>>> import numpy as np
>>> w = Weights()
>>> kernel = w.add("kernel", (3, 2), "glorot_uniform", (3, 2)).producer.op
>>> from amanda.containers.container import Container
>>> layer = seeded(Container("Layer", "dense", children=[kernel], attrs={"weights": w.specs}), 0, prefix=("dense",))
>>> kernel = layer.child("kernel")
>>> kernel.uid, kernel.attrs["value"].shape, bool(np.abs(kernel.attrs["value"]).max() <= np.sqrt(6 / 5))
('0:dense/kernel', (3, 2), True)
"""

from __future__ import annotations

import itertools
import math
import os
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from amanda.build.builder import DEFAULT_NAMESPACE
from amanda.build.values import Call, Value
from amanda.containers.arguments import brief
from amanda.containers.container import Container
from amanda.containers.identity import same_content
from amanda.errors import ArgumentError
from amanda.types.tensor_type import TensorType

__all__ = ["RULES", "Weights", "drawn", "key", "layer_seed", "seeded", "weight_value"]


def _fan_scale(fans: tuple[int, int], mode: str) -> float:
    fan_in, fan_out = fans
    return float(max(1, fan_in + fan_out if mode == "avg" else fan_in))


def _glorot_uniform(rng: np.random.Generator, shape: tuple, fans: tuple[int, int]) -> np.ndarray:
    limit = np.sqrt(6.0 / _fan_scale(fans, "avg"))
    return rng.uniform(-limit, limit, shape)


def _glorot_normal(rng: np.random.Generator, shape: tuple, fans: tuple[int, int]) -> np.ndarray:
    return rng.standard_normal(shape) * np.sqrt(2.0 / _fan_scale(fans, "avg"))


def _he_normal(rng: np.random.Generator, shape: tuple, fans: tuple[int, int]) -> np.ndarray:
    return rng.standard_normal(shape) * np.sqrt(2.0 / _fan_scale(fans, "in"))


def _he_uniform(rng: np.random.Generator, shape: tuple, fans: tuple[int, int]) -> np.ndarray:
    limit = np.sqrt(6.0 / _fan_scale(fans, "in"))
    return rng.uniform(-limit, limit, shape)


def _normal(rng: np.random.Generator, shape: tuple, fans: tuple[int, int]) -> np.ndarray:
    return rng.standard_normal(shape) * 0.02  # BERT's and GPT's embedding initialisation


#: initialisation rules by name: ``rule(rng, shape, (fan_in, fan_out)) -> array``
RULES: dict[str, Callable[[np.random.Generator, tuple, tuple[int, int]], np.ndarray]] = {
    "glorot_uniform": _glorot_uniform,
    "glorot_normal": _glorot_normal,
    "he_normal": _he_normal,
    "he_uniform": _he_uniform,
    "normal": _normal,
    "zeros": lambda rng, shape, fans: np.zeros(shape),
    "ones": lambda rng, shape, fans: np.ones(shape),
}
_CONSTANT_RULES = ("zeros", "ones")


def _rule(init: Any, where: str) -> Any:
    if not isinstance(init, str) or init not in RULES:
        raise ArgumentError.at(where, f"an initialisation rule among {sorted(RULES)}", brief(init))
    return RULES[init]


#: bytes one weight element takes while it is drawn: the float64 sample and its float32 copy
DRAW_BYTES = 12


def available_memory() -> int | None:
    """Bytes of memory this machine can still give (Linux ``MemAvailable``, else free physical
    pages), or None where it cannot tell."""
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return None


def _zeros(name: str, shape: Sequence[int], fill: int) -> np.ndarray:
    """A float32 array of ``shape`` filled with ``fill``; an ArgumentError naming the weight,
    before anything is allocated, when drawing it would need more memory than is available."""
    elements = math.prod(int(d) for d in shape)
    needed, free = elements * DRAW_BYTES, available_memory()
    if free is not None and needed > free:
        raise ArgumentError.at(name, f"a weight that fits in memory ({free / 2**30:.1f} GiB available)",
                               f"shape {tuple(shape)}: {elements:,} elements, {needed / 2**30:,.1f} GiB to draw",
                               "the layer's sizes (features, units, channels, kernel size) make this shape")
    try:
        return np.ones(tuple(shape), np.float32) if fill else np.zeros(tuple(shape), np.float32)
    except MemoryError:
        raise ArgumentError.at(name, "a weight that fits in memory", f"shape {tuple(shape)}") from None


class Weights:
    """The weights a layer function creates: each a Constant op and its rule, which the layer
    records in its ``weights`` attribute (``{name: [rule, fan_in, fan_out]}``)."""

    def __init__(self) -> None:
        self.specs: dict[str, list] = {}

    def add(self, name: str, shape: Sequence[int], init: str, fans: tuple[int, int]) -> Value:
        """A weight of ``shape`` (zeros, or ones for ``init="ones"``, until :func:`seeded` draws it)."""
        _rule(init, name)
        self.specs[name] = [init, int(fans[0]), int(fans[1])]
        value = _zeros(name, shape, 1 if init == "ones" else 0)
        op = Container("Constant", name, inputs=(), outputs=["output"],
                       attrs={"value": value, "namespace": DEFAULT_NAMESPACE, "initializer": True})
        return weight_value(op)

    def variable(self, name: str, shape: Sequence[int], init: str) -> Value:
        """A session variable (``amanda/core`` ``Variable``) initialised by ``init``; its reference."""
        _rule(init, name)
        self.specs[name] = [init, 1, 1]
        value = _zeros(name, shape, 1 if init == "ones" else 0)
        op = Container("Variable", name, inputs=(), outputs=["ref"], attrs={"value": value, "namespace": "amanda/core"})
        return Value(Call(op, ()), "ref", None, f"{name}.ref")


def weight_value(op: Container) -> Value:
    """The builder's Value for a Constant op: its output, typed."""
    value = op.attrs["value"]
    return Value(Call(op, ()), "output", TensorType(str(value.dtype), value.shape), f"{op.name}.output")


def key(seed: int, path: Sequence[str]) -> str:
    """The uid of the weight at ``path`` in a model seeded with ``seed``."""
    return f"{seed}:{'/'.join(path)}"


_instances = itertools.count()  # layer instances built in this process without a seed


def layer_seed(layer: str, seed: Any) -> int | None:
    """A layer's ``seed`` argument checked: None or a non-negative int."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ArgumentError.at((layer, "seed"), "None or a non-negative int", brief(seed))
    return int(seed)


def _words(seed: int, where: str, instance: bool = False) -> list[int]:
    """The Generator's seed words for a weight at ``where``: from a seed, or (``instance``) from a
    layer instance's number, which draws apart from every seed."""
    words = [seed & 0xFFFFFFFF, seed >> 32 & 0xFFFFFFFF, zlib.crc32(where.encode())]
    return [*words, 1] if instance else words


def _drawn(node: Container, spec: Any, words: list[int], where: str, uid: str) -> Container:
    attrs = node.attrs
    old = attrs["value"]
    if not isinstance(spec, (list, tuple)) or len(spec) != 3:
        raise ArgumentError.at(where, "a weight rule [rule, fan_in, fan_out]", brief(spec))
    init, fans = spec[0], (int(spec[1]), int(spec[2]))
    if init in _CONSTANT_RULES:
        value = np.full(old.shape, 1 if init == "ones" else 0, old.dtype)
    else:
        value = np.asarray(_rule(init, where)(np.random.default_rng(words), old.shape, fans), old.dtype)
    return Container(node.type, node.name, inputs=node.inputs, outputs=node.outputs, children=(), edges=(), tombstones=(),
                     attrs={**attrs, "value": value},
                     uid=uid, controls=node.controls)


def _rebuilt(model: Container, leaf: Callable[[Container, Any, tuple[str, ...]], Container],
             prefix: tuple[str, ...]) -> Container:
    """``model`` with each weight a layer lists replaced by ``leaf(node, spec, path)``."""

    def visit(node: Container, path: tuple[str, ...]) -> Container:
        specs = node.attrs.get("weights") or {}
        children = [leaf(c, specs[c.name], (*path, c.name)) if c.is_op and c.name in specs
                    else c if c.is_op else visit(c, (*path, c.name)) for c in node.children]
        if all(a is b for a, b in zip(children, node.children)):
            return node
        return node.evolve(children=children)

    return visit(model, prefix)


def drawn(model: Container, seed: int | None, *, prefix: Sequence[str] = ()) -> Container:
    """A newly built layer with each weight drawn from ``seed`` and its path (after ``prefix``),
    or, with ``seed=None``, from the number of this layer instance in the process; every weight
    keeps the uid of its own it was built with. A weight object in several places stays one."""
    instance = seed is None
    base = next(_instances) if seed is None else seed
    done: dict[int, Container] = {}

    def leaf(node: Container, spec: Any, path: tuple[str, ...]) -> Container:
        if not isinstance(node.attrs.get("value"), np.ndarray):
            return node
        if id(node) not in done:
            where = "/".join(path)
            done[id(node)] = _drawn(node, spec, _words(base, where, instance), where, node.uid)
        return done[id(node)]

    return _rebuilt(model, leaf, tuple(prefix))


def seeded(model: Container, seed: int = 0, *, prefix: Sequence[str] = ()) -> Container:
    """``model`` with each weight keyed ``<seed>:<path>`` (its path from ``model``, after
    ``prefix``) and drawn from a Generator seeded by ``seed`` and that path, unless it already
    had that uid (it was drawn so, or loaded into). A shared weight (one uid in several places
    with the same content: a layer applied twice, a tie) stays one weight, keyed by its first
    path; weights of one uid whose content differs (a clash) are keyed and drawn apart, each by
    its own path. The keys are relative to ``model``: seed the whole model, not parts of it (two
    parts seeded apart hold the same keys where their paths agree). ``model`` itself if nothing
    changes."""
    if not isinstance(model, Container):
        raise ArgumentError.at("model", "a Container", type(model).__name__)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ArgumentError.at("seed", "a non-negative int", brief(seed))
    if not isinstance(prefix, (list, tuple)) or not all(isinstance(p, str) and p for p in prefix):
        raise ArgumentError.at("prefix", "a sequence of names (non-empty strings)", brief(prefix)[:80])
    seed = int(seed)
    done: dict[str, list[tuple[Container, Container]]] = {}  # uid -> (node met, its keyed weight)

    def leaf(node: Container, spec: Any, path: tuple[str, ...]) -> Container:
        if not isinstance(node.attrs.get("value"), np.ndarray):
            return node
        group = done.setdefault(node.uid, [])
        for met, keyed in group:
            if met is node or same_content(met, node):  # one weight in several places
                return keyed if keyed.name == node.name else keyed.with_name(str(node.name))
        target = key(seed, path)
        where = "/".join(path)
        keyed = node if node.uid == target else _drawn(node, spec, _words(seed, where), where, target)
        group.append((node, keyed))
        return keyed

    return _rebuilt(model, leaf, tuple(prefix))
