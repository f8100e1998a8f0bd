"""The worker's place in a job, read from whichever launcher started it.

Workers learn their place from the environment, so the same entry point runs under landcover's
own launcher (torchrun's elastic agent), an external ``torchrun``, Azure ML's ``pytorch``
distribution (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``) or
``mpirun`` (Open MPI's ``OMPI_COMM_WORLD_*`` or MPICH/Intel MPI's ``PMI_*`` variables, with
``MASTER_ADDR``/``MASTER_PORT`` set by the user) or ``horovodrun`` (``HOROVOD_*``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

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
