"""Communication options of data-parallel training: gradient compression and local SGD.

- ``grad_compression``: ``fp16`` casts gradients to half precision for the all-reduce (half
  the bytes on the wire), a DDP communication hook. (PowerSGD is not offered yet: torch's
  PowerSGD hook desynchronised Gloo collectives after its warm-up steps in our tests.)
- ``local_sgd_period`` H: workers step on their own gradients (no all-reduce) and average
  their parameters every H steps and at the end of every epoch (periodic model averaging /
  local SGD, Lin et al., 2020): H times fewer, larger messages.
- ``optim.accumulate`` K (in the trainer): K micro-batches per optimizer step, one all-reduce
  per K micro-batches.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from landcover.distributed import all_reduce_mean_


def configure_gradient_compression(ddp: nn.Module, mode: str) -> None:
    """Registers the DDP communication hook for a gradient compression mode.

    Args:
        ddp: The DDP-wrapped model (a no-op for a bare model: one worker has nothing to send).
        mode: ``none`` or ``fp16``.

    Raises:
        ValueError: If the mode is unknown.
    """
    if not isinstance(ddp, DistributedDataParallel) or mode == "none":
        return
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    if mode == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    else:
        raise ValueError(f"unknown gradient compression {mode!r}")


@torch.no_grad()
def average_parameters(model: nn.Module) -> None:
    """Replaces every parameter and buffer by its mean over all workers (either engine).

    Args:
        model: The bare model (not a DDP wrapper).
    """
    all_reduce_mean_([*model.parameters(), *model.buffers()])


class LocalSGD:
    """Periodic model averaging: call :meth:`after_step` after every optimizer step.

    Args:
        model: The bare model.
        period: Optimizer steps between averagings.
    """

    def __init__(self, model: nn.Module, period: int) -> None:
        self.model = model
        self.period = period
        self.steps = 0

    def after_step(self) -> None:
        """Counts a step; averages the workers' parameters every ``period`` steps."""
        self.steps += 1
        if self.steps % self.period == 0:
            average_parameters(self.model)

    def synchronize(self) -> None:
        """Averages now (end of an epoch), so every worker checkpoints the same model."""
        average_parameters(self.model)
