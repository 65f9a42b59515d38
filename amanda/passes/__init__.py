"""Optimisation passes: pure transforms of containers that keep outputs unchanged.

``optimize(model, passes=None)`` runs a pipeline of them; each is public on its own and returns
a :class:`PassResult` (the new model and a :class:`PassReport` of what changed). Surviving ops
are the same objects, so they keep their paths, uids and metadata.
"""

from amanda.passes.cleanup import eliminate_common_subexpressions, eliminate_dead_code, remove_identities
from amanda.passes.fold import fold_constants, specialize
from amanda.passes.fuse import fuse_conv_batchnorm, fuse_gelu, fuse_matmul_add
from amanda.passes.optimize import DEFAULT_PASSES, PASSES, SESSION_PASSES, optimize, session_pipeline
from amanda.passes.reorder import pool_before_relu
from amanda.passes.report import OptimizeResult, PassReport, PassResult

__all__ = [
    "DEFAULT_PASSES",
    "PASSES",
    "OptimizeResult",
    "PassReport",
    "PassResult",
    "SESSION_PASSES",
    "eliminate_common_subexpressions",
    "eliminate_dead_code",
    "fold_constants",
    "fuse_conv_batchnorm",
    "fuse_gelu",
    "fuse_matmul_add",
    "optimize",
    "pool_before_relu",
    "remove_identities",
    "session_pipeline",
    "specialize",
]
