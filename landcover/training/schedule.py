"""Learning-rate schedule: warm-up to the peak rate, then cosine/step/constant.

The peak rate is the batch geometry's (:class:`~landcover.training.geometry.BatchGeometry`:
``optim.lr`` scaled to the global batch by ``optim.lr_scaling``). The schedule is a function of
training progress measured in epochs (fractional), so it is the same whatever the number of
workers: an epoch is a fixed global number of samples.
"""

from __future__ import annotations

import math

from landcover.config import OptimConfig
from landcover.training.geometry import BatchGeometry


def lr_at(optim: OptimConfig, geometry: BatchGeometry, progress: float) -> float:
    """Returns the learning rate at a point of training.

    Warm-up rises linearly from the unscaled ``lr`` (or the peak, if smaller) to the peak
    over ``warmup_epochs`` (Goyal et al., 2017); the schedule then decays the peak.

    Args:
        optim: The optimisation settings (warm-up and schedule).
        geometry: The run's batch geometry (its ``peak_lr``).
        progress: Epochs completed, fractional (0 at the start).

    Returns:
        The learning rate.
    """
    peak = geometry.peak_lr
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
