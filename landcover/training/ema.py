"""An exponential moving average (EMA) of the model's weights (``optim.ema_decay``).

After every optimizer step each float parameter and buffer of the average moves toward the
model's: ``ema = d_t * ema + (1 - d_t) * w`` with ``d_t = min(decay, (1 + t) / (10 + t))``
for the t-th update (t = 0, 1, ...): the warm-up keeps the first, poor weights of a short run
from dominating the average (the rule of TensorFlow's ``ExponentialMovingAverage`` with
``num_updates`` and of timm's ``ModelEmaV2``). Integer buffers (batch-norm step counts) are
copied. Every worker updates its own copy from the same weights (DDP keeps the weights
identical), so the averages are identical too.

The average is what validation scores and what checkpoints store as ``model`` (used by
``predict``, ``evaluate`` and as initial weights); the raw weights are stored as
``train_model`` and the update count as ``ema_updates``, so a resumed run trains on from the raw
weights and continues the average.
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.optim.swa_utils import get_ema_multi_avg_fn

from landcover.checkpoint import Checkpoint
from landcover.parallel.engine import Engine

WARMUP_OFFSET = 10
"""The ``10`` of ``d_t = (1 + t) / (10 + t)``."""


def ema_decay_at(decay: float, updates: int) -> float:
    """The decay of the update that follows ``updates`` earlier ones.

    Args:
        decay: ``optim.ema_decay``.
        updates: Updates made so far.

    Returns:
        ``min(decay, (1 + updates) / (10 + updates))``.
    """
    return min(decay, (1.0 + updates) / (WARMUP_OFFSET + updates))


class ModelEMA:
    """The moving average of a model's weights, held as a second, frozen copy of the model.

    Args:
        model: The bare model (not the DDP wrapper); the average starts as a copy of it.
        decay: ``optim.ema_decay`` (in (0, 1)).
    """

    def __init__(self, model: nn.Module, decay: float) -> None:
        self.decay = decay
        self.updates = 0
        self.module = copy.deepcopy(model).eval()
        for param in self.module.parameters():
            param.requires_grad_(False)

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Moves the average toward the model's current weights (after an optimizer step).

        Args:
            model: The bare model being trained.
        """
        d = ema_decay_at(self.decay, self.updates)
        ours = self.module.state_dict()
        floats_ema, floats_new = [], []
        for name, value in model.state_dict().items():
            target = ours[name]
            if target.is_floating_point():
                floats_ema.append(target)
                floats_new.append(value.detach())
            else:
                target.copy_(value)
        if floats_ema:
            # torch's own EMA step (one fused lerp over every tensor)
            get_ema_multi_avg_fn(d)(floats_ema, floats_new, None)
        self.updates += 1

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The averaged weights.

        Returns:
            The average's state dict (the model's keys).
        """
        return self.module.state_dict()

    def load(self, weights: dict[str, torch.Tensor], updates: int) -> None:
        """Restores an average from a checkpoint.

        Args:
            weights: The averaged weights.
            updates: The updates they include.
        """
        self.module.load_state_dict(weights)
        self.updates = updates


def start_ema(model: nn.Module, decay: float, resumed: Checkpoint | None) -> ModelEMA | None:
    """The run's moving average: a copy of the model, or the resumed checkpoint's average.

    Args:
        model: The bare model, with its initial (or resumed raw) weights.
        decay: ``optim.ema_decay``; 0 keeps no average.
        resumed: The checkpoint the run resumed from, if any. One written with an average
            (``train_model`` set) continues it; one without starts it from the model.

    Returns:
        The average, or ``None`` when ``decay`` is 0.
    """
    if decay <= 0:
        return None
    ema = ModelEMA(model, decay)
    if resumed is not None and resumed.train_model:
        ema.load(resumed.model, resumed.ema_updates)
    return ema


@torch.no_grad()
def average_across_workers(module: nn.Module, engine: Engine) -> None:
    """Replaces a module's float weights by their mean over all workers (a collective).

    Under local SGD each worker's average follows its own steps; averaging them at the end of
    an epoch, as local SGD averages the models, keeps the workers' averages identical.

    Args:
        module: The moving average's module.
        engine: The engine the worker joined.
    """
    engine.all_reduce_mean_(module.state_dict().values())
