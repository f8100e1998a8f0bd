"""The typed record of a training epoch that the trainer hands to its callbacks.

:class:`EpochRecord` is what every logger of a run reads (``metrics.jsonl``, TensorBoard,
``curves.png``, the health check, the progress lines, MLflow: see
:mod:`~landcover.training.callbacks`); :meth:`EpochRecord.to_dict` is its plain form, one line
of ``metrics.jsonl`` and the ``metrics`` of the epoch's checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ValidationMetrics:
    """An epoch's validation scores over every worker's validation tiles.

    Attributes:
        miou: Mean IoU of the classes present in labels or predictions (``None``: none was).
        accuracy: Pixel accuracy (``None`` without a labelled pixel).
        iou: IoU per class name (``None`` for a class absent from labels and predictions).
        precision: Precision per class name.
        recall: Recall per class name.
        f1: F1 score per class name.
        support: Labelled pixels per class name.
        seconds: Time the validation took.
    """

    miou: float | None
    accuracy: float | None
    iou: Mapping[str, float | None]
    precision: Mapping[str, float | None]
    recall: Mapping[str, float | None]
    f1: Mapping[str, float | None]
    support: Mapping[str, int]
    seconds: float

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, Any], seconds: float) -> ValidationMetrics:
        """The record of :func:`~landcover.metrics.metrics_from_confusion`'s result.

        Args:
            metrics: The metrics dict (``miou``, ``accuracy`` and the per-class dicts).
            seconds: Time the validation took.

        Returns:
            The record.
        """
        return cls(
            miou=metrics["miou"],
            accuracy=metrics["accuracy"],
            iou=dict(metrics["iou"]),
            precision=dict(metrics["precision"]),
            recall=dict(metrics["recall"]),
            f1=dict(metrics["f1"]),
            support=dict(metrics["support"]),
            seconds=seconds,
        )

    def as_metrics(self) -> dict[str, Any]:
        """The scores in :func:`~landcover.metrics.metrics_from_confusion`'s form.

        Returns:
            A new dict (``miou``, ``accuracy``, ``iou``, ``precision``, ``recall``, ``f1``,
            ``support``).
        """
        return {
            "miou": self.miou,
            "accuracy": self.accuracy,
            "iou": dict(self.iou),
            "precision": dict(self.precision),
            "recall": dict(self.recall),
            "f1": dict(self.f1),
            "support": dict(self.support),
        }


@dataclass(frozen=True)
class EpochRecord:
    """One completed training epoch.

    Attributes:
        epoch: Completed epochs of the run (1 after the first).
        train_loss: Mean training loss over every worker's steps.
        lr: Learning rate of the epoch's last step.
        samples_per_s: Global training samples per second (validation not counted).
        epoch_s: Seconds the epoch's training steps took.
        workers: Workers in the job.
        global_batch: Samples per optimizer step over all workers.
        steps: Optimizer steps per epoch.
        validation: The epoch's validation scores; ``None`` when it did not validate (or has
            no validation tiles).
        unlearned: Classes the model does not predict on the validation tiles (see
            :mod:`~landcover.training.health`); ``None`` without a validation or in the warm-up.
        best: Whether the validation mIoU is the best of the run so far.
        time: When the epoch ended (UTC, ISO 8601, seconds).
    """

    epoch: int
    train_loss: float
    lr: float
    samples_per_s: float
    epoch_s: float
    workers: int
    global_batch: int
    steps: int
    validation: ValidationMetrics | None
    unlearned: tuple[str, ...] | None
    best: bool
    time: str

    @property
    def val_s(self) -> float:
        """Seconds the validation took (0 without one)."""
        return self.validation.seconds if self.validation is not None else 0.0

    @property
    def val_miou(self) -> float | None:
        """The validation mIoU (``None`` without a validation)."""
        return self.validation.miou if self.validation is not None else None

    @property
    def val_accuracy(self) -> float | None:
        """The validation pixel accuracy (``None`` without a validation)."""
        return self.validation.accuracy if self.validation is not None else None

    @property
    def val_iou(self) -> dict[str, float | None] | None:
        """The validation IoU per class name (``None`` without a validation)."""
        return dict(self.validation.iou) if self.validation is not None else None

    def to_dict(self) -> dict[str, Any]:
        """The record as plain data: a ``metrics.jsonl`` line, a checkpoint's ``metrics``.

        Returns:
            ``epoch``, ``train_loss``, ``lr``, ``samples_per_s``, ``epoch_s``, ``val_s``,
            ``workers``, ``global_batch``, ``steps``, ``val_miou``, ``val_accuracy``,
            ``val_iou`` (by class name), ``unlearned`` (a list) and ``time``, in that order.
        """
        return {
            "epoch": self.epoch,
            "train_loss": self.train_loss,
            "lr": self.lr,
            "samples_per_s": self.samples_per_s,
            "epoch_s": self.epoch_s,
            "val_s": self.val_s,
            "workers": self.workers,
            "global_batch": self.global_batch,
            "steps": self.steps,
            "val_miou": self.val_miou,
            "val_accuracy": self.val_accuracy,
            "val_iou": self.val_iou,
            "unlearned": None if self.unlearned is None else list(self.unlearned),
            "time": self.time,
        }
