"""The run folder's ``curves.png``: training loss and validation mIoU per epoch (rank 0)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from landcover.fileio import atomic_write_bytes
from landcover.training.callbacks import Callback
from landcover.training.records import EpochRecord
from landcover.training.runfolder import RunFolder
from landcover.training.runlog import METRICS, read_metrics

CURVES = "curves.png"
"""The plot's file in the run folder."""


def plot_curves(records: list[dict[str, Any]], path: Path) -> None:
    """Writes the plot of ``metrics.jsonl`` records (atomically).

    Args:
        records: The records (``epoch``, ``train_loss``, ``val_miou``), in epoch order.
        path: The PNG file.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [r["epoch"] for r in records]
    fig, (ax_loss, ax_iou) = plt.subplots(1, 2, figsize=(10, 4))
    ax_loss.plot(epochs, [r["train_loss"] for r in records], marker="o")
    ax_loss.set(xlabel="epoch", ylabel="training loss", title="Training loss")
    val = [(r["epoch"], r["val_miou"]) for r in records if r.get("val_miou") is not None]
    if val:
        ax_iou.plot(*zip(*val, strict=True), marker="o", color="tab:green")
    ax_iou.set(xlabel="epoch", ylabel="mIoU", title="Validation mean IoU", ylim=(0, 1))
    for ax in (ax_loss, ax_iou):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())


class CurvesPlot(Callback):
    """Redraws ``curves.png`` from ``metrics.jsonl`` after each epoch.

    It plots the file :class:`~landcover.training.runlog.MetricsFile` writes, so it comes
    after that callback in a list.

    Args:
        folder: The run folder (the plot of a remote run is uploaded after each epoch).
    """

    def __init__(self, folder: RunFolder) -> None:
        self.folder = folder

    def on_epoch_end(self, record: EpochRecord) -> None:
        """Redraws the plot with the epoch.

        Args:
            record: The epoch's record (already in ``metrics.jsonl``).
        """
        plot_curves(read_metrics(self.folder.path(METRICS)), self.folder.path(CURVES))
        self.folder.publish(CURVES)
