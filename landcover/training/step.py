"""One optimizer step: the forward and backward passes over K micro-batches, then the update.

Gradients are all-reduced once per step (DDP's hooks with the last micro-batch; Horovod's
``DistributedOptimizer`` counts backward passes itself) or never (local SGD). Under fp16 the
loss is scaled (:class:`torch.amp.GradScaler`) and gradients unscaled before clipping.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import nn

from landcover.config import Config
from landcover.parallel.devices import autocast

FUSED_DEVICES = ("cuda", "cpu")
"""Devices whose parameters take torch's fused optimizer step."""


def build_optimizer(params: Any, config: Config) -> torch.optim.Optimizer:
    """Builds the optimizer named in the config.

    Args:
        params: Model parameters.
        config: The run configuration.

    Returns:
        The optimizer (its learning rate is set every step by the schedule).
    """
    # fused kernels on the devices training runs on (the fused step updates every parameter
    # in one or a few kernels, the foreach step launches a dozen per group of tensors: on a
    # GPU, where a small batch's step is bound by launches, that is the optimizer's share of
    # them, benchmarks/step_bench.py); elsewhere (meta) torch's default step
    params = list(params)
    tensors = [t for p in params for t in (p["params"] if isinstance(p, dict) else [p])]
    fused = all(t.device.type in FUSED_DEVICES for t in tensors) or None
    o = config.optim
    if o.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=o.lr, momentum=o.momentum, weight_decay=o.weight_decay, fused=fused
        )
    cls = torch.optim.AdamW if o.optimizer == "adamw" else torch.optim.Adam
    return cls(params, lr=o.lr, betas=(o.momentum, 0.999), weight_decay=o.weight_decay, fused=fused)


def train_step(
    model: nn.Module,
    criterion: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    target: torch.Tensor,
    autocast_dtype: torch.dtype | None = None,
    grad_clip: float | None = None,
) -> torch.Tensor:
    """One synchronous data-parallel SGD step (DDP all-reduces gradients in ``backward``).

    Args:
        model: The model, DDP-wrapped when there are several workers.
        criterion: The loss.
        optimizer: The optimizer.
        inputs: ``(B, C, H, W)`` float input.
        target: ``(B, H, W)`` int64 class indices.
        autocast_dtype: Autocast dtype, or ``None`` for fp32.
        grad_clip: Optional gradient-norm clip.

    Returns:
        The detached loss.
    """
    return accumulation_step(
        model, criterion, optimizer, [(inputs, target)], autocast_dtype, grad_clip
    )


def accumulation_step(
    model: nn.Module,
    criterion: nn.Module,
    optimizer: torch.optim.Optimizer,
    micro_batches: list[tuple[torch.Tensor, torch.Tensor]],
    autocast_dtype: torch.dtype | None = None,
    grad_clip: float | None = None,
    sync: bool = True,
    scaler: torch.amp.GradScaler | None = None,
    no_sync: Callable[[], AbstractContextManager[Any]] | None = None,
) -> torch.Tensor:
    """One optimizer step over K micro-batches, all-reducing gradients once (or never).

    Args:
        model: The model, DDP-wrapped when there are several workers.
        criterion: The loss.
        optimizer: The optimizer.
        micro_batches: ``(inputs, target)`` pairs; their gradients are averaged.
        autocast_dtype: Autocast dtype, or ``None`` for fp32.
        grad_clip: Optional gradient-norm clip.
        sync: All-reduce the gradients with the last micro-batch (False for local SGD).
        scaler: The fp16 gradient scaler, or ``None``.
        no_sync: The replica's way to hold back its gradient all-reduce for a backward pass
            (DDP's ``no_sync``; ``None`` when the model all-reduces nothing itself).

    Returns:
        The detached mean loss over the micro-batches.
    """
    optimizer.zero_grad()  # None gradients (Horovod's zero_grad takes no arguments)
    k = len(micro_batches)
    total: torch.Tensor | None = None
    for i, (inputs, target) in enumerate(micro_batches):
        skip_sync = no_sync is not None and (i < k - 1 or not sync)
        with no_sync() if no_sync is not None and skip_sync else contextlib.nullcontext():
            with autocast(inputs.device, autocast_dtype):
                logits = model(inputs)
            loss = criterion(logits, target)
            if k > 1:  # one micro-batch: its loss as it is (no kernel to divide or add)
                loss = loss / k
            (scaler.scale(loss) if scaler is not None else loss).backward()
        total = loss.detach() if total is None else total + loss.detach()
    if total is None:
        raise ValueError("accumulation_step needs at least one micro-batch")
    _update(model, optimizer, grad_clip, scaler)
    return total


def _update(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    grad_clip: float | None,
    scaler: torch.amp.GradScaler | None,
) -> None:
    """Clips (after unscaling) and steps; Horovod's gradients are averaged before the clip."""
    # Horovod's DistributedOptimizer all-reduces in hooks and finishes them in synchronize()
    horovod = hasattr(optimizer, "synchronize")
    needs_grads = grad_clip is not None or scaler is not None
    if horovod and needs_grads:
        optimizer.synchronize()  # type: ignore[attr-defined]
    if scaler is not None:
        scaler.unscale_(optimizer)
    if grad_clip is not None:
        nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    skip = optimizer.skip_synchronize() if horovod and needs_grads else contextlib.nullcontext()  # type: ignore[attr-defined]
    with skip:
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
