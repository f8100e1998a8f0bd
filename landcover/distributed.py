"""The distributed environment: who am I, process-group setup and collective helpers.

Workers learn their place from the environment, so the same entry point runs under landcover's
own launcher (torchrun's elastic agent), an external ``torchrun``, Azure ML's ``pytorch``
distribution (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``) or
``mpirun`` (Open MPI's ``OMPI_COMM_WORLD_*`` or MPICH/Intel MPI's ``PMI_*`` variables, with
``MASTER_ADDR``/``MASTER_PORT`` set by the user) or ``horovodrun`` (``HOROVOD_*``).

The collective helpers (:func:`all_reduce_sum`, :func:`all_reduce_mean_`, :func:`barrier`,
:func:`all_gather_object`) run on whichever engine the worker joined: torch.distributed's
process group, or Horovod once ``horovod.torch`` is initialised.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from types import ModuleType
from typing import Any

import torch
import torch.distributed as dist

from landcover.errors import ConfigError

_LAUNCHER_VARS = (
    ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE"),
    (
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
)


@dataclass(frozen=True)
class DistEnv:
    """A worker's place in the job.

    Attributes:
        rank: Global rank.
        world_size: Number of workers in the job.
        local_rank: Rank on this node (selects the GPU).
        local_world_size: Workers on this node.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1

    @property
    def is_main(self) -> bool:
        """Whether this worker writes the run folder (rank 0)."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """Whether there is more than one worker."""
        return self.world_size > 1


def env_from_environ(environ: dict[str, str] | None = None) -> DistEnv | None:
    """Reads the worker's place from launcher environment variables.

    Args:
        environ: The environment (defaults to ``os.environ``).

    Returns:
        The worker's place, or ``None`` when no launcher variables are set.
    """
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env:
        world = int(env["WORLD_SIZE"])
        return DistEnv(
            rank=int(env["RANK"]),
            world_size=world,
            local_rank=int(env.get("LOCAL_RANK", "0")),
            local_world_size=int(env.get("LOCAL_WORLD_SIZE", str(world))),
        )
    for rank_var, size_var, local_var, local_size_var in _LAUNCHER_VARS:
        if rank_var in env and size_var in env:
            world = int(env[size_var])
            return DistEnv(
                rank=int(env[rank_var]),
                world_size=world,
                local_rank=int(env.get(local_var, "0")),
                local_world_size=int(env.get(local_size_var, str(world))),
            )
    return None


def init_process_group(env: DistEnv, backend: str, timeout_s: float) -> None:
    """Joins the job's process group (a no-op for a single worker).

    Under ``mpirun`` the torch variables ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` are filled in
    from MPI's; ``MASTER_ADDR`` and ``MASTER_PORT`` must be set by the user.

    Args:
        env: The worker's place.
        backend: ``gloo`` or ``nccl``.
        timeout_s: Timeout of collective operations, in seconds.

    Raises:
        ConfigError: If the rendezvous address is not set.
    """
    if not env.distributed or dist.is_initialized():
        return
    os.environ.setdefault("RANK", str(env.rank))
    os.environ.setdefault("WORLD_SIZE", str(env.world_size))
    os.environ.setdefault("LOCAL_RANK", str(env.local_rank))
    if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
        raise ConfigError(
            "MASTER_ADDR and MASTER_PORT must be set to rank 0's host and a free port "
            "(torchrun and Azure ML set them; under mpirun export them yourself)"
        )
    timeout = timedelta(seconds=timeout_s)
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        # Under an elastic agent, keys of a failed attempt can linger in the agent's store;
        # a restarted group must not read a dead worker's address, so each attempt gets its
        # own key prefix.
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        store = dist.TCPStore(
            os.environ["MASTER_ADDR"],
            int(os.environ["MASTER_PORT"]),
            env.world_size,
            is_master=False,
            timeout=timeout,
        )
        dist.init_process_group(
            backend=backend,
            store=dist.PrefixStore(f"landcover/attempt_{attempt}", store),
            rank=env.rank,
            world_size=env.world_size,
            timeout=timeout,
        )
        return
    dist.init_process_group(backend=backend, timeout=timeout)


def destroy_process_group() -> None:
    """Leaves the process group if one was joined."""
    if dist.is_initialized():
        dist.destroy_process_group()


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
