"""How busy the machine is: the tasks that want a core now, and whether cores are to spare.

The BLAS tuner asks before it tries BLAS on more than one thread: OpenBLAS's threads spin at
barriers, so where another task holds a core a multi-threaded product waits for it to be
scheduled again, and one run can take ten to thirty times its single-threaded time. A try that
the load says must lose is not made. Linux says how many tasks are runnable (running or waiting
for a core) in ``/proc/loadavg``'s fourth field; reading it costs about 15 µs. Elsewhere nothing
is known (None), and the tuner judges by timing alone.

>>> isinstance(runnable_tasks(), (int, type(None)))
True
>>> spare_cores([1, 1], cores=2), spare_cores([2, 3], cores=2), spare_cores([], cores=2)
(1, 0, None)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable

__all__ = ["runnable_tasks", "spare_cores"]

_LOADAVG = "/proc/loadavg"
_fd: int | None = None
_unknown = False  # the file could not be read once: never again
_lock = threading.Lock()


def runnable_tasks() -> int | None:
    """Tasks on the machine that are running or waiting for a core now, the calling thread
    included; None where the system does not say."""
    global _fd, _unknown
    if _unknown:
        return None
    try:
        if _fd is None:
            with _lock:
                if _fd is None:
                    _fd = os.open(_LOADAVG, os.O_RDONLY)
        # "0.52 0.58 0.59 3/412 12345": the runnable count comes before the slash
        return int(os.pread(_fd, 128, 0).split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        _unknown = True
        return None


def spare_cores(samples: Iterable[int], cores: int | None = None) -> int | None:
    """Cores no other task wanted in the least busy of ``samples`` (runnable counts taken by a
    thread that was itself running, so each counts that thread once); None without samples.

    The least busy sample, not the latest: a task that holds a core is runnable in every
    sample, one passing through (a short-lived process, a kernel thread) in few of them.
    """
    found = list(samples)
    if not found:
        return None
    total = cores if cores is not None else (os.cpu_count() or 1)
    others = min(found) - 1
    return max(0, total - 1 - others)
