"""Running leanseg jobs on a Ray cluster (the optional `leanseg[cluster]` extra).

Nothing here imports ray at module level: `leanseg.core.cluster` imports without it, and the
functions that need it raise RayBatchError saying how to install it.
"""
from .local_cluster import LocalRayCluster, NodeSpec
from .ray_batch import INSTALL_HINT, RayBatchError, RayOptions, import_ray, run_batch_on_ray

__all__ = ["INSTALL_HINT", "LocalRayCluster", "NodeSpec", "RayOptions", "RayBatchError", "import_ray",
           "run_batch_on_ray"]
