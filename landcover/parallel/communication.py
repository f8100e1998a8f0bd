"""Communication options of data-parallel training: gradient compression and local SGD.

- ``grad_compression``: ``fp16`` casts gradients to half precision for the all-reduce (half
  the bytes on the wire); ``powersgd`` sends a rank-r approximation of each gradient matrix
  (Vogels et al., 2019) with error feedback, after ``powersgd_warmup_steps`` steps of plain
  all-reduce. Both are DDP communication hooks.
- ``local_sgd_period`` H: workers step on their own gradients (no all-reduce) and average
  their parameters every H steps and at the end of every epoch (periodic model averaging /
  local SGD, Lin et al., 2020): H times fewer, larger messages.
- ``optim.accumulate`` K (in the trainer): K micro-batches per optimizer step, one all-reduce
  per K micro-batches.

PowerSGD on Gloo: the hook issues its second all-reduce (of the Q matrices) from the
completion callback of the first, while DDP already calls the hook of the next gradient
bucket; Gloo matches collectives by the order each process issues them, and that order then
differs between processes (the run fails with "Received data size doesn't match expected
size"). On Gloo each bucket's collectives are therefore finished before the next bucket's
start, giving up the overlap of communication with the backward pass. NCCL orders
collectives on its stream, so it keeps the overlapped hook.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def configure_gradient_compression(
    ddp: nn.Module, mode: str, powersgd_rank: int = 1, powersgd_warmup_steps: int = 10
) -> None:
    """Registers the DDP communication hook for a gradient compression mode.

    Args:
        ddp: The DDP-wrapped model (a no-op for a bare model: one worker has nothing to send).
        mode: ``none``, ``fp16`` or ``powersgd``.
        powersgd_rank: Rank of PowerSGD's low-rank approximation.
        powersgd_warmup_steps: Optimizer steps of plain all-reduce before PowerSGD starts.

    Raises:
        ValueError: If the mode is unknown.
    """
    if not isinstance(ddp, DistributedDataParallel) or mode == "none":
        return
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    if mode == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif mode == "powersgd":
        state = powerSGD_hook.PowerSGDState(
            process_group=None,
            matrix_approximation_rank=powersgd_rank,
            # PowerSGD counts hook calls of the last bucket, i.e. optimizer steps
            start_powerSGD_iter=max(2, powersgd_warmup_steps),
            use_error_feedback=True,
            warm_start=True,
            random_seed=0,
        )
        hook = powerSGD_hook.powerSGD_hook
        if dist.get_backend() == "gloo":
            hook = _one_bucket_at_a_time(hook)
        ddp.register_comm_hook(state, hook)
    else:
        raise ValueError(f"unknown gradient compression {mode!r}")


def _one_bucket_at_a_time(hook: Any) -> Any:
    """Wraps a comm hook so that a bucket's collectives end before the next bucket's begin."""

    @functools.wraps(hook)  # keeps the hook's name, which DDP logs
    def serialized(state: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        result = hook(state, bucket).wait()
        done: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        done.set_result(result)
        return done

    # DDP checks the hook's annotations as objects (this module's are postponed strings)
    serialized.__annotations__ = {
        "state": object,
        "bucket": dist.GradBucket,
        "return": torch.futures.Future[torch.Tensor],
    }
    return serialized


Average = Callable[[Iterable[torch.Tensor]], None]
"""Replaces tensors by their mean over all workers, in place (an engine's ``all_reduce_mean_``)."""


class LocalSGD:
    """Periodic model averaging: call :meth:`after_step` after every optimizer step.

    Args:
        model: The bare model.
        period: Optimizer steps between averagings.
        average: The engine's in-place mean over all workers.
    """

    def __init__(self, model: nn.Module, period: int, average: Average) -> None:
        self.model = model
        self.period = period
        self.average = average
        self.steps = 0

    @torch.no_grad()
    def _average_parameters(self) -> None:
        """Replaces every parameter and buffer by its mean over all workers."""
        self.average([*self.model.parameters(), *self.model.buffers()])

    def after_step(self) -> None:
        """Counts a step; averages the workers' parameters every ``period`` steps."""
        self.steps += 1
        if self.steps % self.period == 0:
            self._average_parameters()

    def synchronize(self) -> None:
        """Averages now (end of an epoch), so every worker checkpoints the same model."""
        self._average_parameters()
