"""The Horovod engine, worker side: ``hvd.DistributedOptimizer`` instead of DDP.

Each worker joins Horovod (Gloo controller on CPU; MPI or NCCL where Horovod was built with
them), wraps its optimizer in ``hvd.DistributedOptimizer`` (gradients averaged by all-reduce,
optionally fp16-compressed, once per ``optim.accumulate`` backward passes) and takes the model's
parameters, and on a resume the optimizer state, from rank 0. Everything else (data shards,
metrics reduced across workers, rank 0's checkpoints, the run folder) is the trainer's own, so
a Horovod checkpoint resumes and predicts under the torch engine and back.
"""

from __future__ import annotations

from types import ModuleType

import torch
from torch import nn

from landcover.errors import ConfigError

INSTALL_HINT = (
    "install it with: bash scripts/install-horovod.sh (builds Horovod 0.28.1 against the "
    "installed torch once, a few minutes, then reuses the cached wheel)"
)


def import_horovod() -> ModuleType:
    """Imports ``horovod.torch``.

    Returns:
        The ``horovod.torch`` module.

    Raises:
        ConfigError: If Horovod is not installed (or was built without torch support).
    """
    try:
        import horovod.torch as hvd
    except ImportError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise ConfigError(
            f"--engine horovod needs Horovod with PyTorch support, which this environment "
            f"lacks ({reason}); {INSTALL_HINT}"
        ) from None
    return hvd


def init_horovod() -> tuple[int, int, int, int]:
    """Joins the Horovod job (a job of one when not started by ``horovodrun``/``mpirun``).

    Returns:
        ``(rank, size, local_rank, local_size)`` as Horovod sees them.

    Raises:
        ConfigError: If Horovod is not installed.
    """
    hvd = import_horovod()
    hvd.init()
    return hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size()


def shutdown_horovod() -> None:
    """Leaves the Horovod job if this process joined one."""
    try:
        import horovod.torch as hvd
    except ImportError:
        return
    if hvd.is_initialized():
        hvd.shutdown()


def distributed_optimizer(
    optimizer: torch.optim.Optimizer, model: nn.Module, compression: str, accumulate: int
) -> torch.optim.Optimizer:
    """Wraps an optimizer so that ``step`` applies gradients averaged over all workers.

    Args:
        optimizer: The worker's optimizer.
        model: The bare model whose parameters it updates.
        compression: ``none`` or ``fp16`` (Horovod's fp16 compression of the all-reduce).
        accumulate: Backward passes per optimizer step (one all-reduce per step).

    Returns:
        The ``hvd.DistributedOptimizer``; its ``state_dict`` has the wrapped optimizer's format.

    Raises:
        ConfigError: If the compression is not available in Horovod.
    """
    hvd = import_horovod()
    codecs = {"none": hvd.Compression.none, "fp16": hvd.Compression.fp16}
    if compression not in codecs:
        raise ConfigError(
            f"--grad-compression {compression} is a DDP communication hook of the torch "
            "engine; Horovod offers none or fp16"
        )
    return hvd.DistributedOptimizer(
        optimizer,
        named_parameters=list(model.named_parameters()),
        compression=codecs[compression],
        backward_passes_per_step=accumulate,
    )


def broadcast_state(model: nn.Module, optimizer: torch.optim.Optimizer, resumed: bool) -> None:
    """Gives every worker rank 0's parameters and buffers, and on a resume its optimizer state.

    A fresh optimizer has no state to send (Horovod would make some up by taking a step with
    zero gradients, which moves the weights under weight decay), so it is sent only on resume.

    Args:
        model: The bare model.
        optimizer: The (distributed) optimizer.
        resumed: Whether the run resumed from a checkpoint.
    """
    hvd = import_horovod()
    if hvd.size() == 1:
        return
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    if resumed:
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)
