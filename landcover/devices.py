"""Devices: choosing a worker's device and mixed precision."""

from __future__ import annotations

import contextlib

import torch

from landcover.distributed import DistEnv
from landcover.errors import ConfigError


def resolve_device(requested: str, env: DistEnv) -> torch.device:
    """Picks the worker's device.

    Args:
        requested: ``auto``, ``cpu`` or ``cuda``.
        env: The worker's place (its local rank selects the GPU).

    Returns:
        The device.

    Raises:
        ConfigError: If CUDA is requested but absent, or there are fewer GPUs than workers.
    """
    cuda = torch.cuda.is_available()
    if requested == "cpu" or (requested == "auto" and not cuda):
        return torch.device("cpu")
    if not cuda:
        raise ConfigError(
            "--device cuda: no CUDA GPU is visible to torch; use --device cpu, or install a "
            "CUDA build of torch on a GPU machine"
        )
    count = torch.cuda.device_count()
    if env.local_rank >= count:
        raise ConfigError(
            f"{env.local_world_size} workers on this node but only {count} GPUs; "
            f"use --workers {count} (one worker per GPU)"
        )
    return torch.device("cuda", env.local_rank)


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    """Returns an autocast context for ``dtype`` on ``device``, or a no-op for fp32.

    Args:
        device: The device the computation runs on.
        dtype: The autocast dtype (bf16 on CUDA), or ``None`` for full precision.

    Returns:
        A context manager.
    """
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)
