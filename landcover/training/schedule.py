"""Learning-rate schedule: the linear scaling rule with warm-up, then cosine/step/constant.

The schedule is a function of training progress measured in epochs (fractional), so it is the
same whatever the number of workers: an epoch is a fixed global number of samples.
"""

from __future__ import annotations

import math

from landcover.config import OptimConfig


def scaled_lr(optim: OptimConfig, global_batch: int) -> float:
    """Returns the peak learning rate for a global batch (the linear scaling rule).

    Args:
        optim: The optimisation settings (``lr`` applies at ``ref_batch``).
        global_batch: Samples per optimizer step across all workers.

    Returns:
        ``lr * global_batch / ref_batch`` when ``scale_lr`` is set, else ``lr``.
    """
    if not optim.scale_lr:
        return optim.lr
    return optim.lr * global_batch / optim.ref_batch


def lr_at(optim: OptimConfig, global_batch: int, progress: float) -> float:
    """Returns the learning rate at a point of training.

    Warm-up rises linearly from the unscaled ``lr`` (or the peak, if smaller) to the peak
    over ``warmup_epochs`` (Goyal et al., 2017); the schedule then decays the peak.

    Args:
        optim: The optimisation settings.
        global_batch: Samples per optimizer step across all workers.
        progress: Epochs completed, fractional (0 at the start).

    Returns:
        The learning rate.
    """
    peak = scaled_lr(optim, global_batch)
    start = min(optim.lr, peak)
    if optim.warmup_epochs > 0 and progress < optim.warmup_epochs:
        return start + (peak - start) * progress / optim.warmup_epochs
    if optim.schedule == "constant":
        return peak
    if optim.schedule == "step":
        return peak * optim.gamma ** int(progress // optim.step_epochs)
    span = max(optim.epochs - optim.warmup_epochs, 1e-9)
    t = min(max((progress - optim.warmup_epochs) / span, 0.0), 1.0)
    floor = peak * optim.min_lr_ratio
    return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * t))
