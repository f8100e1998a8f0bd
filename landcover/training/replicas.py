"""The replica check at the end of training: every worker holds bit-identical weights.

DDP (and Horovod) keep the replicas identical by all-reducing gradients; a bug or a fault
that let one drift would otherwise go unnoticed. Each worker hashes its weights (and its
moving average) and the digests are compared across workers.
"""

from __future__ import annotations

import hashlib
import logging

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
