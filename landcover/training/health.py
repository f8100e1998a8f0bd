"""Is training learning every class? A check on each validation's per-class recall.

A run can look healthy (the loss falls, the mean IoU rises) while one class is never
predicted: a rare class whose units in the last decoder stage died (see
:func:`landcover.models.factory.final_stage_warning`) stays at recall 0 for the whole run. The
trainer logs a warning naming such classes after each validation past the warm-up and records
them in ``metrics.jsonl`` (``unlearned``), so the user sees it at the epoch it happens.
"""

from __future__ import annotations

import logging
from typing import Any

from landcover.training.callbacks import Callback
from landcover.training.records import EpochRecord, ValidationMetrics

log = logging.getLogger("landcover")

MIN_RECALL = 0.05
"""Validation recall below which a class present in the validation tiles counts as unlearned."""


def unlearned_classes(metrics: dict[str, Any], min_recall: float = MIN_RECALL) -> list[str]:
    """Classes present in the validation tiles that the model (almost) never predicts there.

    Args:
        metrics: Metrics from :func:`metrics_from_confusion` (``recall`` and ``support`` per
            class name).
        min_recall: Recall below which a class counts as unlearned.

    Returns:
        The names of those classes, in class order.
    """
    return [
        name
        for name, recall in metrics["recall"].items()
        if metrics["support"][name] > 0 and recall is not None and recall < min_recall
    ]


def unlearned_message(metrics: dict[str, Any], names: list[str], epoch: int) -> str:
    """The warning for classes that are not being learned.

    Args:
        metrics: The validation metrics.
        names: The unlearned classes (from :func:`unlearned_classes`).
        epoch: Epochs done.

    Returns:
        One line naming each class with its validation recall and IoU, and what to try.
    """
    parts = ", ".join(
        f"{name} (recall {metrics['recall'][name]:.1%}, IoU {metrics['iou'][name] or 0.0:.3f})"
        for name in names
    )
    return (
        f"after epoch {epoch} the model does not predict {parts} on the validation tiles: "
        "the class is not being learned (check its share of the training pixels in the rank "
        "logs, data.class_balance, data.oversample_rare, optim.loss.class_weights, the "
        "optim.loss focal/lovasz/tversky terms, a lower optim.lr, and that "
        "model.decoder_channels[-1] is at least twice the number of classes)"
    )


def unlearned_after(
    validation: ValidationMetrics | None, epoch: int, warmup_epochs: float
) -> tuple[str, ...] | None:
    """The classes an epoch's validation finds unlearned, once past the warm-up.

    Args:
        validation: The epoch's validation scores (``None`` when it did not validate).
        epoch: Epochs done.
        warmup_epochs: The run's warm-up (``optim.warmup_epochs``); the check waits for at
            least one epoch.

    Returns:
        The names of the unlearned classes (empty when every class is learned); ``None``
        without a validation or in the warm-up.
    """
    if validation is None or epoch <= max(1.0, warmup_epochs):
        return None
    return tuple(unlearned_classes(validation.as_metrics()))


class HealthCheck(Callback):
    """Logs a warning naming the classes an epoch's record finds unlearned (rank 0)."""

    def on_epoch_end(self, record: EpochRecord) -> None:
        """Warns when the epoch's validation found classes unlearned.

        Args:
            record: The epoch's record.
        """
        if record.unlearned and record.validation is not None:
            metrics = record.validation.as_metrics()
            log.warning("%s", unlearned_message(metrics, list(record.unlearned), record.epoch))
