"""What a predict job needs from the parallel layer, in one place.

The launcher starts the workers under torchrun's elastic agent (:func:`launch`). A predict
job's workers do not all-reduce anything: they join a CPU group of the region engine
(:func:`~landcover.parallel.engines.region_engine`, whatever device predicts) for its shared
counters, where they claim tiles, for one broadcast of the tile list from rank 0, and for one
gather of the tiles' records to rank 0 at the end. Everything here is a no-op for a job of one
worker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from landcover.config import RunConfig
from landcover.errors import PeerFailureError, first_line
from landcover.parallel.engines import region_engine
from landcover.parallel.env import DistEnv, env_from_environ


@contextmanager
def _collective(what: str) -> Iterator[None]:
    """Turns a failed collective or store operation into one :class:`PeerFailureError` line.

    The operations here fail only when another worker (or the store's host) died, hung or
    cannot be reached; its own error, when it had one, explains the job's end better, and the
    launcher prefers it.
    """
    try:
        yield
    except RuntimeError as exc:  # torch's DistError and the Gloo transport's errors
        first = first_line(exc, 200)
        raise PeerFailureError(
            f"the job's {what} failed ({first}): another worker died, hung or is unreachable"
        ) from None


def started_by_a_launcher() -> bool:
    """Whether an external launcher (torchrun, Azure ML, mpirun) started this process."""
    return env_from_environ() is not None


def launch(
    worker: Callable[[Any], Any], spec: Any, settings: RunConfig, nproc: int, default_id: str
) -> dict[int, Any]:
    """Runs ``worker(spec)`` in this node's worker processes under torchrun's elastic agent.

    Args:
        worker: The worker's entry point (a module-level function).
        spec: Its argument (picklable).
        settings: Nodes, rendezvous and restarts (``run`` settings, as for ``train``).
        nproc: Workers on this node.
        default_id: The rendezvous id when ``settings`` names none.

    Returns:
        The return value of each of this node's workers, by global rank.

    Raises:
        LandcoverError: If a worker fails (and restarts are exhausted) or the rendezvous fails.
    """
    from landcover.parallel.launch import launch_node

    return launch_node(worker, (spec,), settings, nproc, default_id)


def worker_env() -> DistEnv:
    """This worker's place: from the launcher's variables, or a job of one."""
    return env_from_environ() or DistEnv()


def join(env: DistEnv, timeout_s: float) -> None:
    """Joins the job's CPU group (a no-op for one worker).

    Args:
        env: This worker's place.
        timeout_s: Longest wait in a collective (the job's start and end).
    """
    region_engine().join(env, RunConfig(timeout_s=timeout_s), torch.device("cpu"))


def leave() -> None:
    """Leaves the job's group, if joined."""
    region_engine().leave()


def wait_for_all() -> None:
    """Waits for every worker."""
    with _collective("barrier"):
        region_engine().barrier()


def broadcast(obj: Any, env: DistEnv) -> Any:
    """Rank 0's object, on every rank.

    Args:
        obj: The object (rank 0's is sent; others are ignored).
        env: This worker's place.

    Returns:
        Rank 0's object.
    """
    if not env.distributed:
        return obj
    with _collective("broadcast"):
        return region_engine().broadcast_object(obj)


def gather(obj: Any, env: DistEnv) -> list[Any] | None:
    """Every rank's object, on rank 0 only (the others get ``None``).

    Args:
        obj: This rank's object.
        env: This worker's place.

    Returns:
        The objects by rank on rank 0; ``None`` elsewhere.
    """
    if not env.distributed:
        return [obj]
    with _collective("gather of the tiles' records"):
        return region_engine().gather_object(obj)


class JobStore:
    """The job's c10d store, for the tile counters (see :mod:`.deal`).

    Under torchrun's elastic agent it is the agent's store (with the restart attempt's
    prefix, so a restarted group counts afresh); otherwise the one rank 0 hosts at
    ``MASTER_ADDR:MASTER_PORT``.
    """

    def __init__(self) -> None:
        counters = region_engine().counters()
        if counters is None:
            raise PeerFailureError("the job's group has no shared store: join it first")
        self._store = counters

    def add(self, key: str, amount: int) -> int:
        """Adds to a counter atomically.

        Args:
            key: The counter.
            amount: What to add (0 reads it).

        Returns:
            The counter's new value.

        Raises:
            PeerFailureError: If the store cannot be reached.
        """
        with _collective("store"):
            return int(self._store.add(key, amount))
