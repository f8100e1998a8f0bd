"""Segmentation metrics from confusion matrices: per-class IoU, mean IoU, pixel accuracy.

The confusion matrix is summed over whole tiles (and across workers) first; the metrics are
computed from the totals, so they are exact over the validation set, not averages of batches.
Rows are the true class, columns the predicted class; ignored pixels never enter it.
"""

from __future__ import annotations

import numpy as np
import torch

from landcover.classes import IGNORE_INDEX


def confusion_matrix(pred: torch.Tensor, target: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Counts (true, predicted) class pairs, skipping ignored pixels.

    Args:
        pred: Predicted class indices, any shape.
        target: True class indices, same shape; :data:`IGNORE_INDEX` pixels are skipped.
        num_classes: Number of classes.

    Returns:
        A ``(K, K)`` int64 matrix, rows true, columns predicted.
    """
    target = target.reshape(-1).long()
    pred = pred.reshape(-1).long()
    keep = (target != IGNORE_INDEX) & (target < num_classes)
    index = target[keep] * num_classes + pred[keep]
    return torch.bincount(index, minlength=num_classes * num_classes).reshape(
        num_classes, num_classes
    )


def metrics_from_confusion(confusion: np.ndarray, names: list[str]) -> dict:
    """Computes segmentation metrics from a confusion matrix.

    A class absent from both the labels and the predictions has no IoU (``None``) and is left
    out of the mean IoU.

    Args:
        confusion: ``(K, K)`` counts, rows true, columns predicted.
        names: Class names.

    Returns:
        A dict with ``miou``, ``accuracy``, and per-class ``iou``, ``precision``, ``recall``,
        ``f1`` and ``support`` (dicts keyed by class name).
    """
    cm = np.asarray(confusion, dtype=np.float64)
    tp = np.diag(cm)
    support = cm.sum(axis=1)
    predicted = cm.sum(axis=0)
    union = support + predicted - tp

    def ratio(num: np.ndarray, den: np.ndarray) -> list[float | None]:
        return [float(n / d) if d > 0 else None for n, d in zip(num, den, strict=True)]

    iou = ratio(tp, union)
    precision = ratio(tp, predicted)
    recall = ratio(tp, support)
    f1 = ratio(2 * tp, support + predicted)
    valid = [v for v in iou if v is not None]
    total = cm.sum()
    return {
        "miou": float(np.mean(valid)) if valid else None,
        "accuracy": float(tp.sum() / total) if total > 0 else None,
        "iou": dict(zip(names, iou, strict=True)),
        "precision": dict(zip(names, precision, strict=True)),
        "recall": dict(zip(names, recall, strict=True)),
        "f1": dict(zip(names, f1, strict=True)),
        "support": {n: int(s) for n, s in zip(names, support, strict=True)},
    }
