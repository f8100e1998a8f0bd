"""Checks of the workers' weights: bit-identical replicas at the end, finite after an epoch.

DDP (and Horovod) keep the replicas identical by all-reducing gradients; a bug or a fault
that let one drift would otherwise go unnoticed. Each worker hashes its weights (and its
moving average) and the digests are compared across workers. A run that diverged (weights
inf or nan) must not checkpoint: :func:`any_not_finite` asks every worker.
"""

from __future__ import annotations

import hashlib
import logging

import torch
from torch import nn

from landcover.errors import TrainingError
from landcover.parallel.engine import Engine

log = logging.getLogger("landcover")


def parameter_digest(model: nn.Module) -> str:
    """A SHA-256 digest of a model's parameters, to compare replicas across workers.

    Args:
        model: The model.

    Returns:
        The hex digest.
    """
    h = hashlib.sha256()
    for name, param in sorted(model.named_parameters()):
        h.update(name.encode())
        h.update(param.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def verify_replicas(model: nn.Module, average: nn.Module | None, engine: Engine) -> None:
    """Checks that every worker ends with bit-identical weights (a collective call).

    Args:
        model: The worker's bare model.
        average: The weights' moving average (``optim.ema_decay``), if kept.
        engine: The data-parallel engine.

    Raises:
        TrainingError: If the workers' weights differ.
    """
    digest = parameter_digest(model)
    if average is not None:
        digest = hashlib.sha256((digest + parameter_digest(average)).encode()).hexdigest()
    digests = engine.all_gather_object(digest)
    if len(set(digests)) != 1:
        raise TrainingError(f"worker weights diverged: parameter digests {digests}")
    log.info(
        "replica check: weights identical on all %d worker(s) (sha256 %s)",
        len(digests),
        digest[:16],
    )


def any_not_finite(
    model: nn.Module, average: nn.Module | None, engine: Engine, device: torch.device
) -> bool:
    """Whether any floating-point weight or buffer is inf or nan on any worker (collective).

    Args:
        model: The worker's bare model.
        average: The weights' moving average (``optim.ema_decay``), if kept.
        engine: The data-parallel engine.
        device: Where the engine reduces (the GPU under NCCL, else the CPU).

    Returns:
        The same answer on every worker.
    """
    modules = [model] if average is None else [model, average]
    finite = all(
        bool(torch.isfinite(t).all())
        for m in modules
        for t in m.state_dict().values()
        if t.is_floating_point()
    )
    flag = torch.tensor(0.0 if finite else 1.0, device=device)
    engine.all_reduce_sum(flag)
    return float(flag) > 0
