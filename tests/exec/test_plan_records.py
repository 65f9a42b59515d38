"""Named records of the executor: plan steps and resolved fetch and feed specs."""

from __future__ import annotations

import numpy as np

from amanda import Container, op
from amanda.containers import SELF, Endpoint, flatten
from amanda.exec.plan import Step, compile_plan
from amanda.exec.resolve import FeedSpec, FetchSpec, Into, resolve_feed, resolve_fetch


def graph() -> Container:
    return Container("G", "g", inputs=["x"], outputs=["y"], attrs={"namespace": "amanda/onnx/17"},
                     children=[op("Relu", "r", ["X"], ["Y"]), op("Neg", "n", ["X"], ["Y"])],
                     edges=[("g:x", "r:X"), ("r:Y", "n:X"), ("n:Y", "g:y")])


def test_plan_steps_are_named() -> None:
    """Each plan step is a Step whose fields name the kernel, its input, output and freed slots."""
    plan = compile_plan(graph(), ("y",), ("x",))
    relu, neg = plan.steps
    assert all(type(s) is Step for s in plan.steps)
    assert relu.ins == (plan.feed_slots["x"],) and relu.frees == relu.ins
    assert neg.ins == (relu.outs[0][1],) and plan.fetch_slots == (neg.outs[0][1],)
    fn, attrs, ins, outs, frees = neg  # the runners unpack it as a tuple
    assert fn(attrs, np.array([1.0, -2.0]))[0].tolist() == [-1.0, 2.0]


def test_fetch_and_feed_specs_are_named() -> None:
    """resolve_fetch and resolve_feed return FetchSpec and FeedSpec records with kind and key."""
    g = graph()
    flat = flatten(g)
    assert resolve_fetch(g, flat, "y", None) == FetchSpec("value", Endpoint(("n",), "Y"))
    assert resolve_fetch(g, flat, "r", None) == FetchSpec(kind="effect", key=(("r",),))
    spec = resolve_feed(g, flat, "n:X", None)
    assert type(spec) is FeedSpec and spec.kind == "into" and spec.key == (Into(("n",), "X"),)
    assert (spec.key[0].path, spec.key[0].port) == (("n",), "X")
    assert resolve_feed(g, flat, "x", None) == FeedSpec("value", Endpoint(SELF, "x"))
