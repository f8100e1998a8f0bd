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
from landcover.parallel.engine import Engine, Replica, local_sgd_for, move_model
from landcover.parallel.env import DistEnv

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
) -> None:
    """Joins the job's process group (a no-op for a single worker).

    Under ``mpirun`` the torch variables ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` are filled in
    from MPI's; ``MASTER_ADDR`` and ``MASTER_PORT`` must be set by the user. On NCCL the group
    is bound to the worker's GPU (``device_id``), so its collectives, barriers and object
    collectives never fall back to GPU 0.

    Args:
        env: The worker's place.
        backend: ``gloo`` or ``nccl``.
        timeout_s: Timeout of collective operations, in seconds.
        device: The worker's device.

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
    bound = device if device is not None and device.type == "cuda" else None
    timeout = timedelta(seconds=timeout_s)
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        # Under an elastic agent torch's env:// rendezvous connects to the agent's store
        # without a per-attempt prefix, and the keys of a failed attempt linger there: a
        # restarted group then reads a dead worker's Gloo address and cannot connect
        # (tests/test_scale_out.py and test_predict_job.py kill a worker and see it). So each
        # attempt gets its own key prefix, as torch's elastic launcher once did itself.
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
            device_id=bound,
        )
        return
    dist.init_process_group(backend=backend, init_method="env://", timeout=timeout, device_id=bound)


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

    name = "torch"
    display = "torch DDP"
    azureml_distribution = "pytorch"
    maps_regions = True
    restarts = True
    multi_node_launcher = True
    compressions = ("none", "fp16", "powersgd")

    def backend(self, run: RunConfig, device: torch.device) -> str:
        """See :meth:`Engine.backend`."""
        return choose_backend(run.backend, device)

    def join(self, env: DistEnv, run: RunConfig, device: torch.device) -> None:
        """See :meth:`Engine.join`."""
        init_process_group(env, self.backend(run, device), run.timeout_s, device)

    def leave(self) -> None:
        """See :meth:`Engine.leave`."""
        destroy_process_group()

    def replicate(
        self, model: nn.Module, env: DistEnv, run: RunConfig, device: torch.device
    ) -> Replica:
        """See :meth:`Engine.replicate`.

        SyncBatchNorm (statistics all-gathered on every forward pass) is used only where
        workers synchronise every step: under local SGD each worker keeps its own statistics
        between averages, as it keeps its own weights.
        """
        local_sgd = local_sgd_for(model, env, run)
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
        return Replica(model, ddp)

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
