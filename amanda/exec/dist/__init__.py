"""Beyond one machine: device placement, partitioning into per-device parts joined by
Send/Recv ops, and running the parts (in this process, or on Dask workers)."""

from amanda.exec.dist.local import run_partitioned
from amanda.exec.dist.partition import DIST, Part, Partitioning, describe, partition
from amanda.exec.dist.placement import DEFAULT_DEVICE, PlacementError, devices_of, place

__all__ = [
    "DEFAULT_DEVICE",
    "DIST",
    "Part",
    "Partitioning",
    "PlacementError",
    "describe",
    "devices_of",
    "partition",
    "place",
    "run_partitioned",
]
