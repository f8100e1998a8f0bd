"""Collective helpers that run on whichever engine the worker joined.

:func:`all_reduce_sum`, :func:`all_reduce_mean_`, :func:`barrier` and :func:`all_gather_object`
use torch.distributed's process group, or Horovod once ``horovod.torch`` is initialised (found
through ``sys.modules``, so that a torch-engine worker never imports Horovod).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Any

import torch
import torch.distributed as dist


def _horovod() -> ModuleType | None:
    """``horovod.torch`` when this worker runs on the Horovod engine, else ``None``."""
    hvd = sys.modules.get("horovod.torch")
    return hvd if hvd is not None and hvd.is_initialized() else None


def world_size() -> int:
    """Number of workers in the joined group (1 without one)."""
    hvd = _horovod()
    if hvd is not None:
        return hvd.size()
    return dist.get_world_size() if dist.is_initialized() else 1


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Sums a tensor across workers in place (a no-op without a group).

    Args:
        tensor: The tensor; on the collective backend's device.

    Returns:
        The same tensor, now holding the sum.
    """
    if world_size() == 1:
        return tensor
    hvd = _horovod()
    if hvd is not None:
        tensor.copy_(hvd.allreduce(tensor, op=hvd.Sum))
    else:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def all_reduce_mean_(tensors: Iterable[torch.Tensor]) -> None:
    """Replaces each floating-point tensor by its mean over all workers, in place.

    Args:
        tensors: The tensors (parameters and buffers, say); others are left alone.
    """
    world = world_size()
    if world == 1:
        return
    for tensor in tensors:
        if tensor.is_floating_point():
            all_reduce_sum(tensor.data)
            tensor.data.div_(world)


def all_gather_object(obj: Any) -> list[Any]:
    """Gathers a picklable object from every worker.

    Args:
        obj: This worker's object.

    Returns:
        Every worker's object, by rank.
    """
    if world_size() == 1:
        return [obj]
    hvd = _horovod()
    if hvd is not None:
        return list(hvd.allgather_object(obj))
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, obj)
    return gathered


def barrier() -> None:
    """Waits for every worker (a no-op without a group)."""
    if world_size() == 1:
        return
    hvd = _horovod()
    if hvd is not None:
        hvd.barrier()
    else:
        dist.barrier()
