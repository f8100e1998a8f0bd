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
from dataclasses import dataclass

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


@dataclass
class _Pairs:
    """The average's tensors and the model's, float and integer, index for index.

    ``flat``: where every float tensor of the model is dense, of one dtype and device, the
    average's float tensors are views into one buffer (laid out as the model's, in its
    order) and ``flat_new`` holds the model's tensors as flat views in memory order: the
    captured step's update is then one concatenation and one ``lerp_`` (:meth:`ModelEMA.lerp`).
    """

    floats_ema: list[torch.Tensor]
    floats_new: list[torch.Tensor]
    ints_ema: list[torch.Tensor]
    ints_new: list[torch.Tensor]
    flat: torch.Tensor | None = None
    flat_new: list[torch.Tensor] | None = None


def memory_view(tensor: torch.Tensor) -> torch.Tensor | None:
    """A dense tensor's elements as one flat view, in the order they lie in memory.

    Args:
        tensor: Any tensor.

    Returns:
        The 1-D view, or ``None`` when the tensor is not contiguous (nor channels-last).
    """
    dense = tensor.is_contiguous() or (
        tensor.dim() == 4 and tensor.is_contiguous(memory_format=torch.channels_last)
    )
    return tensor.as_strided((tensor.numel(),), (1,)) if dense else None


class ModelEMA:
    """The moving average of a model's weights, held as a second, frozen copy of the model.

    Args:
        model: The bare model (not the DDP wrapper); the average starts as a copy of it.
        decay: ``optim.ema_decay`` (in (0, 1)).
    """

    def __init__(self, model: nn.Module, decay: float) -> None:
        self.decay = decay
        self.updates = 0
        self._module = copy.deepcopy(model).eval()
        for param in self._module.parameters():
            param.requires_grad_(False)
        self._paired: tuple[nn.Module, _Pairs] | None = None
        self._counts_stale = False

    @property
    def module(self) -> nn.Module:
        """The average, as a frozen copy of the model (its integer buffers up to date)."""
        if self._counts_stale and self._paired is not None:
            pairs = self._paired[1]
            for ours, theirs in zip(pairs.ints_ema, pairs.ints_new, strict=True):
                ours.copy_(theirs)
            self._counts_stale = False
        return self._module

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Moves the average toward the model's current weights (after an optimizer step).

        One fused ``lerp`` over every float tensor (torch's own EMA step,
        :func:`~torch.optim.swa_utils.get_ema_multi_avg_fn`); the integer buffers (batch-norm
        step counts) are copied when the average is read (:attr:`module`), not every step.
        The tensors are paired once per model (their storage does not change: loading
        weights copies into it), so a step builds no state dict.

        Args:
            model: The bare model being trained.
        """
        pairs = self._pairs(model)
        if pairs.floats_ema:
            get_ema_multi_avg_fn(ema_decay_at(self.decay, self.updates))(
                pairs.floats_ema, pairs.floats_new, None
            )
        self._counts_stale = True
        self.updates += 1

    @torch.no_grad()
    def lerp(self, model: nn.Module, weight: torch.Tensor) -> None:
        """The update with its weight ``1 - d_t`` in a device tensor (a captured step's).

        The same arithmetic as :meth:`update`, without reading the weight on the host and
        without counting the update: the caller fills ``weight`` with :meth:`next_weight`
        and calls :meth:`count` for every step the graph replays.

        Args:
            model: The bare model being trained.
            weight: A 0-d float tensor on the model's device holding ``1 - d_t``.
        """
        pairs = self._pairs(model)
        if pairs.flat is not None and pairs.flat_new is not None:
            # one buffer: two kernels, not one a tensor (232 for the default U-Net, each a
            # node of the captured step; about 0.2 GB a step more at its 24 M weights)
            pairs.flat.lerp_(torch.cat(pairs.flat_new), weight)
        else:
            for ours, theirs in zip(pairs.floats_ema, pairs.floats_new, strict=True):
                ours.lerp_(theirs, weight)
        self._counts_stale = True

    def next_weight(self) -> float:
        """The next update's ``1 - d_t``.

        Returns:
            The weight of the model's weights in the next update.
        """
        return 1.0 - ema_decay_at(self.decay, self.updates)

    def count(self) -> None:
        """Counts an update made by :meth:`lerp`."""
        self.updates += 1

    def _pairs(self, model: nn.Module) -> _Pairs:
        """The average's tensors beside the model's, in state-dict order (made once)."""
        if self._paired is not None and self._paired[0] is model:
            return self._paired[1]
        ours = self._module.state_dict(keep_vars=True)  # the module's own tensors
        pairs = _Pairs([], [], [], [])
        seen: set[int] = set()
        for name, value in model.state_dict().items():
            target = ours[name]
            if id(target) in seen:  # a tensor under two names (tied weights) moves once
                continue
            seen.add(id(target))
            if target.is_floating_point():
                pairs.floats_ema.append(target)
                pairs.floats_new.append(value.detach())
            else:
                pairs.ints_ema.append(target)
                pairs.ints_new.append(value.detach())
        _flatten(pairs)
        self._paired = (model, pairs)
        return pairs

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
        self._module.load_state_dict(weights)
        self.updates = updates
        self._counts_stale = False


@torch.no_grad()
def _flatten(pairs: _Pairs) -> None:
    """Moves the average's float tensors into one buffer laid out as the model's (in place).

    Sets ``pairs.flat`` and ``pairs.flat_new``; leaves them ``None`` where the model's float
    tensors are not all dense, of one dtype and on one device.

    Args:
        pairs: The tensors, the average's being the module's own (rebound to the buffer).
    """
    new = pairs.floats_new
    views = [memory_view(t) for t in new]
    if not new or len({(t.dtype, t.device) for t in new}) > 1 or None in views:
        return
    if new[0].device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return  # a copy captured would only run on replay: the tensors stay as they are
    flat = torch.empty(sum(t.numel() for t in new), dtype=new[0].dtype, device=new[0].device)
    offset = 0
    for ours, theirs in zip(pairs.floats_ema, new, strict=True):
        place = flat.as_strided(theirs.size(), theirs.stride(), offset)
        place.copy_(ours)
        ours.data = place  # the module's tensor, now in the buffer
        offset += theirs.numel()
    pairs.flat = flat
    pairs.flat_new = [v for v in views if v is not None]


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
