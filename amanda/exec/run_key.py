"""A session's repeated runs: the plan, feed slots and runner mode of a run looked up by one key.

A run's fixed cost on a small model is mostly its checks and lookups: fetch and feed names
made hashable and checked, the phase checked, the feeds' type signature worked out and looked
up, the runner chosen. A run whose fetches are a list or tuple of hashable names, whose feeds
are a dict of plain arrays and whose phase is None or a string is found again by
:func:`run_key`: the fetches, the phase, and each feed's name, dtype and shape, in the feeds'
order. What the key holds decides everything those steps found (the model is immutable), so a
key seen before gives its :class:`Prepared` run straight away; a run the key does not cover
takes the full path, and a run is kept only once it passed that path's checks (its feeds'
dtypes and shapes against the ports': what the key holds). A session with a value cache,
a profile, a timeout, a TensorFlow graph's names or Dask workers keeps none.

>>> import numpy as np
>>> run_key(["y"], {"x": np.zeros((2, 3), np.float32)}, None)
(('y',), None, 'x', dtype('float32'), (2, 3))
>>> run_key("y", {}, None) is None  # one name as a string: the full path
True
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from amanda.exec.plan import Plan

__all__ = ["Prepared", "run_key"]


class Prepared(NamedTuple):
    """What a run key stands for: the plan, the slot of each feed in the feeds' order (None for
    a feed nothing reads) and the runner mode."""

    plan: Plan
    slots: tuple[int | None, ...]
    mode: str

    def env(self, feeds: Any) -> list:
        """The plan's environment with ``feeds``' values (of this key's names, in its order) in place."""
        env = self.plan.template.copy()
        if feeds:
            for s, value in zip(self.slots, feeds.values()):
                if s is not None:
                    env[s] = value
        return env


def run_key(fetches: Any, feeds: Any, phase: Any) -> tuple | None:
    """The key of a run that this module's shortcut covers, else None."""
    kind = type(fetches)
    if (kind is not list and kind is not tuple) or (phase is not None and type(phase) is not str):
        return None
    key: list = [tuple(fetches), phase]
    if feeds is not None:
        if type(feeds) is not dict:
            return None
        for name, value in feeds.items():
            if type(value) is not np.ndarray or type(name) is not str:
                return None
            key += (name, value.dtype, value.shape)
    try:
        hash(key[0])
    except TypeError:  # a fetch given as a list ['op', 'port']
        return None
    return tuple(key)
