"""The torch engine: DistributedDataParallel over a torch.distributed process group.

Workers start under torchrun's elastic agent (:mod:`~landcover.parallel.launch`), an external
``torchrun``, Azure ML's ``pytorch`` distribution or ``mpirun``. Each joins the group through
torch's ``env://`` rendezvous, or under an elastic agent through the agent's store with a key
prefix per restart (see :func:`init_process_group`), bound to its GPU on NCCL. The model is
converted to SyncBatchNorm on multi-GPU runs that synchronise every step, wrapped in DDP with
the configured communication hook, or left bare with periodic averaging under local SGD.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from landcover.config import Config, RunConfig
from landcover.errors import ConfigError
from landcover.parallel.communication import configure_gradient_compression
from landcover.parallel.engine import Counters, Engine, Replica, move_model
from landcover.parallel.env import DistEnv
from landcover.registry import ENGINES

log = logging.getLogger("landcover")


def choose_backend(requested: str, device: torch.device) -> str:
    """The torch.distributed backend: NCCL for CUDA workers, Gloo for CPU ones.

    Args:
        requested: ``auto``, ``gloo`` or ``nccl``.
        device: The worker's device.

    Returns:
        The backend's name.

    Raises:
        ConfigError: If NCCL is requested for CPU workers.
    """
    if requested == "auto":
        return "nccl" if device.type == "cuda" else "gloo"
    if requested == "nccl" and device.type != "cuda":
        raise ConfigError("--backend nccl needs CUDA workers; use gloo (or auto) on the CPU")
    return requested


def init_process_group(
    env: DistEnv, backend: str, timeout_s: float, device: torch.device | None = None
) -> dist.Store | None:
    """Joins the job's process group (a no-op for a single worker).

    The group's c10d store is made here rather than by torch's ``env://`` handler, so the
    worker keeps it (for a predict job's tile counters) without torch's private accessors:
    under torchrun's elastic agent it is the agent's store (``TORCHELASTIC_USE_AGENT_STORE``)
    with a key prefix per restart attempt; otherwise the store rank 0 hosts at
    ``MASTER_ADDR:MASTER_PORT``, as ``env://`` would make it. Under ``mpirun`` the torch
    variables ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` are filled in from MPI's; ``MASTER_ADDR``
    and ``MASTER_PORT`` must be set by the user. On NCCL the group is bound to the worker's GPU
    (``device_id``), so its collectives, barriers and object collectives never fall back to
    GPU 0.

    Args:
        env: The worker's place.
        backend: ``gloo`` or ``nccl``.
        timeout_s: Timeout of collective operations, in seconds.
        device: The worker's device.

    Returns:
        The group's store, or ``None`` when no group was joined here.

    Raises:
        ConfigError: If the rendezvous address is not set.
    """
    if not env.distributed or dist.is_initialized():
        return None
    os.environ.setdefault("RANK", str(env.rank))
    os.environ.setdefault("WORLD_SIZE", str(env.world_size))
    os.environ.setdefault("LOCAL_RANK", str(env.local_rank))
    if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
        raise ConfigError(
            "MASTER_ADDR and MASTER_PORT must be set to rank 0's host and a free port "
            "(torchrun and Azure ML set them; under mpirun export them yourself)"
        )
    bound = device if device is not None and device.type == "cuda" else None
    timeout = timedelta(seconds=timeout_s)
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    tcp = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        env.world_size,
        is_master=not agent and env.rank == 0,
        timeout=timeout,
    )
    # Under an elastic agent the keys of a failed attempt linger in the agent's store: a
    # restarted group would read a dead worker's Gloo address and could not connect
    # (tests/parallel/test_scale_out.py and tests/mapping/test_predict_job.py kill a worker and see it). So each
    # attempt gets its own key prefix, as torch's elastic launcher once did itself.
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") if agent else "0"
    store = dist.PrefixStore(f"landcover/attempt_{attempt}", tcp)
    dist.init_process_group(
        backend=backend,
        store=store,
        rank=env.rank,
        world_size=env.world_size,
        timeout=timeout,
        device_id=bound,
    )
    return store


def destroy_process_group() -> None:
    """Leaves the process group if one was joined."""
    if dist.is_initialized():
        dist.destroy_process_group()


def wants_sync_batchnorm(env: DistEnv, device: torch.device, local_sgd: bool) -> bool:
    """Whether batch-norm statistics are synchronised across workers (SyncBatchNorm).

    Only for CUDA workers that synchronise every step: SyncBatchNorm all-gathers statistics
    on every forward pass, which local SGD (workers step alone between averages) must not do;
    on the CPU (Gloo) each worker keeps its own statistics.

    Args:
        env: The worker's place.
        device: The worker's device.
        local_sgd: Whether the workers average models periodically instead of gradients.

    Returns:
        True to convert the model to SyncBatchNorm.
    """
    return env.distributed and device.type == "cuda" and not local_sgd


class TorchEngine(Engine):
    """DDP under torchrun's elastic agent (or any launcher that sets ``RANK``/``WORLD_SIZE``)."""

    spec = ENGINES["torch"]

    def __init__(self) -> None:
        self._store: dist.Store | None = None

    def backend(self, run: RunConfig, device: torch.device) -> str:
        """See :meth:`Engine.backend`."""
        return choose_backend(run.backend, device)

    def join(self, env: DistEnv, run: RunConfig, device: torch.device) -> None:
        """See :meth:`Engine.join`."""
        store = init_process_group(env, self.backend(run, device), run.timeout_s, device)
        self._store = store if store is not None else self._store

    def leave(self) -> None:
        """See :meth:`Engine.leave`."""
        destroy_process_group()
        self._store = None

    def world_size(self) -> int:
        """See :meth:`Engine.world_size`."""
        return dist.get_world_size() if dist.is_initialized() else 1

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """See :meth:`Engine.all_reduce_sum`."""
        if self.world_size() > 1:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def all_gather_object(self, obj: Any) -> list[Any]:
        """See :meth:`Engine.all_gather_object`."""
        if self.world_size() == 1:
            return [obj]
        gathered: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, obj)
        return gathered

    def gather_object(self, obj: Any) -> list[Any] | None:
        """See :meth:`Engine.gather_object`."""
        if self.world_size() == 1:
            return [obj]
        main = dist.get_rank() == 0
        gathered: list[Any] | None = [None] * dist.get_world_size() if main else None
        dist.gather_object(obj, gathered, dst=0)
        return gathered

    def broadcast_object(self, obj: Any) -> Any:
        """See :meth:`Engine.broadcast_object`."""
        if self.world_size() == 1:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        """See :meth:`Engine.barrier`."""
        if self.world_size() > 1:
            dist.barrier()

    def counters(self) -> Counters | None:
        """See :meth:`Engine.counters`: the c10d store the group was joined with."""
        return self._store

    def replicate(
        self, model: nn.Module, env: DistEnv, run: RunConfig, device: torch.device
    ) -> Replica:
        """See :meth:`Engine.replicate`.

        SyncBatchNorm (statistics all-gathered on every forward pass) is used only where
        workers synchronise every step: under local SGD each worker keeps its own statistics
        between averages, as it keeps its own weights.
        """
        local_sgd = self.local_sgd(model, env, run)
        if wants_sync_batchnorm(env, device, local_sgd is not None):
            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        move_model(model, run, device)
        if not env.distributed or local_sgd is not None:
            return Replica(model, model, local_sgd)
        ids = [device.index] if device.type == "cuda" else None
        ddp = DistributedDataParallel(model, device_ids=ids)
        configure_gradient_compression(
            ddp, run.grad_compression, run.powersgd_rank, run.powersgd_warmup_steps
        )
        return Replica(model, ddp, no_sync=ddp.no_sync)

    def broadcast_initial(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, resumed: bool
    ) -> None:
        """See :meth:`Engine.broadcast_initial`.

        DDP broadcasts rank 0's parameters when it wraps the model; a bare model (local SGD)
        gets them here, so that its workers start from one model as DDP's do.
        """
        if not dist.is_initialized() or dist.get_world_size() == 1:
            return
        with torch.no_grad():
            for tensor in [*model.parameters(), *model.buffers()]:
                dist.broadcast(tensor.data, src=0)

    def launch(self, entry: Callable[[dict[str, Any]], Any], config: Config) -> None:
        """See :meth:`Engine.launch`: torchrun's elastic agent with c10d rendezvous."""
        from landcover.parallel.launch import launch_node

        run = config.run
        if run.nnodes > 1:
            log.info(
                "starting %d workers on this node of %d (c10d rendezvous at %s)",
                run.nproc_per_node,
                run.nnodes,
                run.rdzv_endpoint,
            )
        else:
            log.info("starting %d workers (torch elastic agent, c10d rendezvous)", run.workers)
        launch_node(entry, (config.to_dict(),), run)
