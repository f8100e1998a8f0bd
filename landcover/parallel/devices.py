"""Devices: binding a worker to its device, and the mixed precision that device supports."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from landcover.errors import ConfigError
from landcover.parallel.env import DistEnv
from landcover.threads import usable_cores

BF16_MIN_CAPABILITY = (8, 0)
"""Compute capability from which GPUs have bf16 tensor cores (Ampere: A100, A10, H100...)."""


def gpu_index(env: DistEnv, count: int, share: bool = False) -> int:
    """The GPU of a worker on a node with ``count`` GPUs.

    Args:
        env: The worker's place (its local rank selects the GPU).
        count: GPUs on the node.
        share: Let workers beyond ``count`` share GPUs, round-robin (predict, whose host work
            one process cannot do fast enough to keep a GPU busy); otherwise one worker per
            GPU (training: NCCL allows one rank per GPU).

    Returns:
        The GPU's index.

    Raises:
        ConfigError: If the node has no GPU, or more workers than GPUs and ``share`` is off.
    """
    if count < 1:
        raise ConfigError("no CUDA GPU is visible to torch on this node")
    if share:
        return env.local_rank % count
    if env.local_rank >= count:
        raise ConfigError(
            f"{env.local_world_size} workers on this node but only {count} GPUs; "
            f"use --workers {count} (one worker per GPU)"
        )
    return env.local_rank


def device_available(requested: str) -> bool:
    """Whether the requested device means a CUDA GPU, and that one is there.

    No CUDA context is made: a launcher checks this before it writes anything.

    Args:
        requested: ``auto``, ``cpu`` or ``cuda``.

    Returns:
        True for a CUDA GPU (``cuda``, or ``auto`` where torch sees one); False for the CPU.

    Raises:
        ConfigError: If CUDA is requested but absent.
    """
    cuda = torch.cuda.is_available()
    if requested == "cpu" or (requested == "auto" and not cuda):
        return False
    if not cuda:
        raise ConfigError(
            "--device cuda: no CUDA GPU is visible to torch; use --device cpu, or install a "
            "CUDA build of torch on a GPU machine"
        )
    return True


def resolve_device(requested: str, env: DistEnv, share_gpus: bool = False) -> torch.device:
    """Picks the worker's device and makes it the current CUDA device.

    Binding the current device matters beyond the model: NCCL's object collectives and
    barriers, pinned-memory threads and ``torch.cuda`` calls without an explicit device all use
    the current device, which would otherwise be GPU 0 on every rank of a node.

    Args:
        requested: ``auto``, ``cpu`` or ``cuda``.
        env: The worker's place (its local rank selects the GPU).
        share_gpus: Workers beyond the node's GPUs share them (see :func:`gpu_index`).

    Returns:
        The device.

    Raises:
        ConfigError: If CUDA is requested but absent, or there are fewer GPUs than workers
            (without ``share_gpus``).
    """
    if not device_available(requested):
        return torch.device("cpu")
    device = torch.device("cuda", gpu_index(env, torch.cuda.device_count(), share_gpus))
    torch.cuda.set_device(device)
    return device


@dataclass(frozen=True)
class Precision:
    """The arithmetic a worker trains and predicts in.

    Attributes:
        autocast_dtype: The autocast dtype, or ``None`` for fp32.
        grad_scaling: Whether losses are scaled (fp16, whose range gradients underflow).
    """

    autocast_dtype: torch.dtype | None = None
    grad_scaling: bool = False

    def describe(self) -> str:
        """A short name: ``fp32``, ``bf16`` or ``fp16 + grad scaling``."""
        if self.autocast_dtype is None:
            return "fp32"
        if self.autocast_dtype == torch.bfloat16:
            return "bf16"
        return "fp16 + grad scaling" if self.grad_scaling else "fp16"


def choose_precision(
    device: torch.device, mixed: bool, capability: tuple[int, int] | None = None
) -> Precision:
    """Chooses mixed precision for a device.

    bf16 autocast where the GPU has bf16 tensor cores (compute capability 8.0 and up); fp16
    autocast with gradient scaling on older GPUs (V100, T4), whose bf16 is emulated and slower
    than fp32; fp32 on the CPU and when mixed precision is off.

    Args:
        device: The worker's device.
        mixed: Whether mixed precision is wanted (``run.bf16``).
        capability: The GPU's compute capability (default: asked from the device).

    Returns:
        The precision.
    """
    if device.type != "cuda" or not mixed:
        return Precision()
    if capability is None:
        capability = torch.cuda.get_device_capability(device)
    if tuple(capability) >= BF16_MIN_CAPABILITY:
        return Precision(torch.bfloat16)
    return Precision(torch.float16, grad_scaling=True)


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    """Returns an autocast context for ``dtype`` on ``device``, or a no-op for fp32.

    Args:
        device: The device the computation runs on.
        dtype: The autocast dtype, or ``None`` for full precision.

    Returns:
        A context manager.
    """
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


WORKERS_PER_GPU = 4
"""Predict workers sharing one GPU under ``--workers auto``: on one H100 (16 host cores,
2026-11-27) 1, 2 and 4 workers mapped 9.9, 18.3 and 25.8 Mpx/s with probabilities; one
worker's host work (decode, blend, COG writing) keeps the GPU busy about a tenth of the time."""

CORES_PER_WORKER = 3
"""Host cores each predict worker gets at least under ``--workers auto`` (the 4 workers
measured had 4 cores each; an Azure ND H100 v5 has 12 per GPU)."""


def predict_workers(
    setting: str, device: str, gpus: int | None = None, cores: int | None = None
) -> int:
    """The number of predict workers on this node that ``--workers`` asks for.

    ``auto`` is one worker on the CPU (its threads use every core) and, with GPUs,
    :data:`WORKERS_PER_GPU` per GPU, fewer where the host has under :data:`CORES_PER_WORKER`
    cores for each, but never fewer than one per GPU.

    Args:
        setting: A number of workers (1 or more), or ``auto``.
        device: ``auto``, ``cpu`` or ``cuda`` (``--device``).
        gpus: GPUs on this node (default: those torch sees; asked only for ``auto``).
        cores: Host cores of this process (default: its CPU affinity).

    Returns:
        The number of workers.

    Raises:
        ConfigError: If ``setting`` is neither ``auto`` nor a whole number of 1 or more.
    """
    if setting != "auto":
        try:
            workers = int(setting)
        except ValueError:
            workers = 0
        if workers < 1 or str(workers) != setting.strip():
            raise ConfigError(f"--workers {setting}: a number of processes (1 or more) or auto")
        return workers
    if device == "cpu":
        return 1
    if gpus is None:
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus < 1:
        return 1
    if cores is None:
        cores = usable_cores()
    return min(WORKERS_PER_GPU * gpus, max(gpus, cores // CORES_PER_WORKER))
