"""Scaling out: cluster.json, the Azure GPU VM table, run plans and Azure ML job files.

- :mod:`~landcover.cluster.vmsizes`: GPUs per node, GPU model and memory, InfiniBand and
  retirement of the Azure GPU VM sizes.
- :mod:`~landcover.cluster.spec`: ``cluster.json`` (validated, never holding secrets).
- :mod:`~landcover.cluster.secrets`: what counts as a secret in it (names and values).
- :mod:`~landcover.cluster.plan`: nodes, processes, global batch, learning rate and each
  worker's share of the data for a worker count; :mod:`~landcover.cluster.planlines` prints it
  (``landcover cluster plan``).
- :mod:`~landcover.cluster.azureml`: Azure ML compute, environment and job files
  (``landcover cluster azureml``).
"""

from landcover.cluster.spec import ClusterError, ClusterSpec, load_cluster, parse_cluster
from landcover.cluster.vmsizes import VM_SIZES, VmSize, close_matches, find_vm_size

__all__ = [
    "VM_SIZES",
    "ClusterError",
    "ClusterSpec",
    "VmSize",
    "close_matches",
    "find_vm_size",
    "load_cluster",
    "parse_cluster",
]
