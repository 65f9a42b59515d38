"""A kernel that ends its worker process: imported on Dask workers by the fault tests."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.exec.kernels.registry import kernel

FAULTS = "amanda/test-faults"


@kernel("ExitIf", family=FAULTS)
def exit_if(attrs: Mapping[str, Any], x: Any) -> tuple:
    """Ends the process at once when ``x`` is positive, as a crashing worker does; else passes ``x`` on."""
    if np.any(np.asarray(x) > 0):
        os._exit(1)
    return (x,)


@kernel("Sleep", family=FAULTS)
def sleep(attrs: Mapping[str, Any], x: Any) -> tuple:
    """Waits ``seconds`` before passing ``x`` on, as a slow kernel does."""
    time.sleep(float(attrs["seconds"]))
    return (x,)
