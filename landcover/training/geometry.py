"""The batch geometry of a run: global batch, steps per epoch and the peak learning rate.

One record, :class:`BatchGeometry`, holds what the worker count and the ``optim`` settings
imply, so the trainer, the schedule, ``landcover cluster plan`` and the cost model agree (the
cost model, which has no learning rate, uses :func:`global_batch` and :func:`steps_per_epoch`):

- global batch = workers x ``batch_size`` x ``accumulate`` (samples per optimizer step);
- steps per epoch = ceil(``samples_per_epoch`` / global batch);
- peak learning rate = ``lr`` scaled from ``ref_batch`` to the global batch by the rule in
  ``optim.lr_scaling``: ``linear`` (``lr x global/ref``, Goyal et al. 2017, for SGD), ``sqrt``
  (``lr x sqrt(global/ref)``, Malladi et al. 2022, for Adam and AdamW) or ``none``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from landcover.config import LrScaling, OptimConfig

OPTIMIZER_NAMES = {"adamw": "AdamW", "adam": "Adam", "sgd": "SGD"}
"""How each ``optim.optimizer`` value is written in logs and plans."""


def global_batch(workers: int, batch_size: int, accumulate: int) -> int:
    """Samples per optimizer step over all workers.

    Args:
        workers: Worker processes.
        batch_size: Samples per worker per micro-batch.
        accumulate: Micro-batches per optimizer step.

    Returns:
        ``workers x batch_size x accumulate``.
    """
    return workers * batch_size * accumulate


def steps_per_epoch(samples_per_epoch: int, global_batch: int) -> int:
    """Optimizer steps per epoch: an epoch is a fixed global number of samples.

    Args:
        samples_per_epoch: Global samples per epoch.
        global_batch: Samples per optimizer step over all workers.

    Returns:
        ``ceil(samples_per_epoch / global_batch)``.
    """
    return math.ceil(samples_per_epoch / global_batch)


@dataclass(frozen=True)
class BatchGeometry:
    """How many samples each optimizer step takes, and the learning rate that fits them.

    Attributes:
        workers: Worker processes (the data-parallel world size).
        batch_size: Samples per worker per micro-batch (``optim.batch_size``).
        accumulate: Micro-batches per optimizer step (``optim.accumulate``).
        samples_per_epoch: Global samples per epoch (``optim.samples_per_epoch``).
        optimizer: ``adamw``, ``adam`` or ``sgd``.
        base_lr: The learning rate at a global batch of ``ref_batch`` (``optim.lr``).
        ref_batch: The global batch at which ``base_lr`` applies.
        lr_scaling: The scaling rule: ``linear``, ``sqrt`` or ``none``.
    """

    workers: int
    batch_size: int
    accumulate: int
    samples_per_epoch: int
    optimizer: str
    base_lr: float
    ref_batch: int
    lr_scaling: LrScaling

    @classmethod
    def from_optim(cls, optim: OptimConfig, workers: int) -> BatchGeometry:
        """The geometry of a run of ``workers`` workers with these ``optim`` settings.

        Args:
            optim: The optimisation settings (their ``lr_scaling`` is already resolved).
            workers: Worker processes (>= 1).

        Returns:
            The geometry.

        Raises:
            ValueError: If ``workers`` is below 1.
        """
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        return cls(
            workers=workers,
            batch_size=optim.batch_size,
            accumulate=optim.accumulate,
            samples_per_epoch=optim.samples_per_epoch,
            optimizer=optim.optimizer,
            base_lr=optim.lr,
            ref_batch=optim.ref_batch,
            lr_scaling=optim.lr_scaling,
        )

    @property
    def global_batch(self) -> int:
        """Samples per optimizer step over all workers: workers x batch x accumulate."""
        return global_batch(self.workers, self.batch_size, self.accumulate)

    @property
    def steps_per_epoch(self) -> int:
        """Optimizer steps each worker takes per epoch."""
        return steps_per_epoch(self.samples_per_epoch, self.global_batch)

    @property
    def epoch_samples(self) -> int:
        """Samples an epoch actually trains on: steps x global batch (>= samples_per_epoch)."""
        return self.steps_per_epoch * self.global_batch

    @property
    def lr_factor(self) -> float:
        """What the rule multiplies ``base_lr`` by for this global batch."""
        ratio = self.global_batch / self.ref_batch
        if self.lr_scaling == "linear":
            return ratio
        if self.lr_scaling == "sqrt":
            return math.sqrt(ratio)
        return 1.0

    @property
    def peak_lr(self) -> float:
        """The learning rate after warm-up: ``base_lr`` scaled by the rule."""
        return self.base_lr * self.lr_factor

    def describe_batch(self) -> str:
        """The global batch as a product, e.g. ``8 workers x batch 16 x accumulate 2 = 256``.

        Returns:
            The text (``x accumulate K`` only when K > 1).
        """
        accumulate = f" x accumulate {self.accumulate}" if self.accumulate > 1 else ""
        return (
            f"{self.workers:,} worker{'' if self.workers == 1 else 's'} x batch "
            f"{self.batch_size:,}{accumulate} = global batch {self.global_batch:,}"
        )

    def describe_lr(self) -> str:
        """The peak rate and the rule that gave it.

        For example ``peak lr 1.22e-02 (AdamW, sqrt rule: 0.001 x sqrt(2368/16))``.

        Returns:
            The text.
        """
        name = OPTIMIZER_NAMES.get(self.optimizer, self.optimizer)
        ratio = f"{self.global_batch}/{self.ref_batch}"
        if self.lr_scaling == "linear":
            how = f"linear rule: {self.base_lr:g} x {ratio}"
        elif self.lr_scaling == "sqrt":
            how = f"sqrt rule: {self.base_lr:g} x sqrt({ratio})"
        else:
            how = "no scaling"
        return f"peak lr {self.peak_lr:.2e} ({name}, {how})"
