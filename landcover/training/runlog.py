"""The readable run folder: metrics.jsonl, TensorBoard event files and curves.png."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from landcover.fileio import atomic_write_bytes, atomic_write_text
from landcover.redaction import redact
from landcover.training.runfolder import RunFolder


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Reads a ``metrics.jsonl`` file.

    Args:
        path: The file (missing is fine).

    Returns:
        One dict per epoch line.
    """
    path = Path(path)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class RunLog:
    """Writes per-epoch records of rank 0 into the run folder.

    On resume, records of epochs after the checkpoint are dropped (they belong to the
    interrupted attempt), so ``metrics.jsonl`` always matches the checkpoints.

    Args:
        folder: The run folder (files of a remote run are uploaded after each epoch).
        resume_epoch: Completed epochs of the checkpoint resumed from (0 for a fresh run).
    """

    def __init__(self, folder: RunFolder, resume_epoch: int) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.folder = folder
        self.out = folder.local
        if resume_epoch > 0:
            folder.pull("metrics.jsonl")
        self.metrics_path = self.out / "metrics.jsonl"
        kept = [r for r in read_metrics(self.metrics_path) if r["epoch"] <= resume_epoch]
        self.records = kept
        atomic_write_text(self.metrics_path, self._jsonl(kept))
        self.writer = SummaryWriter(str(self.out / "tensorboard"), purge_step=resume_epoch + 1)

    @staticmethod
    def _jsonl(records: list[dict[str, Any]]) -> str:
        return "".join(json.dumps(r) + "\n" for r in records)

    def log_epoch(self, record: dict[str, Any]) -> None:
        """Appends an epoch's record and updates TensorBoard and the curves.

        Args:
            record: The epoch's metrics (``epoch`` is the count of completed epochs).
        """
        self.records.append(record)
        with self.metrics_path.open("a") as handle:
            handle.write(redact(json.dumps(record)) + "\n")
        step = record["epoch"]
        for key in ("train_loss", "lr", "samples_per_s", "epoch_s", "val_miou", "val_accuracy"):
            if record.get(key) is not None:
                self.writer.add_scalar(key, record[key], step)
        for name, iou in (record.get("val_iou") or {}).items():
            if iou is not None:
                self.writer.add_scalar(f"val_iou/{name}", iou, step)
        self.writer.flush()
        self.plot_curves()
        self.folder.publish("metrics.jsonl", "curves.png", "tensorboard")

    def plot_curves(self) -> None:
        """Writes ``curves.png``: training loss and validation mIoU per epoch."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        epochs = [r["epoch"] for r in self.records]
        fig, (ax_loss, ax_iou) = plt.subplots(1, 2, figsize=(10, 4))
        ax_loss.plot(epochs, [r["train_loss"] for r in self.records], marker="o")
        ax_loss.set(xlabel="epoch", ylabel="training loss", title="Training loss")
        val = [(r["epoch"], r["val_miou"]) for r in self.records if r.get("val_miou") is not None]
        if val:
            ax_iou.plot(*zip(*val, strict=True), marker="o", color="tab:green")
        ax_iou.set(xlabel="epoch", ylabel="mIoU", title="Validation mean IoU", ylim=(0, 1))
        for ax in (ax_loss, ax_iou):
            ax.grid(alpha=0.3)
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100)
        plt.close(fig)
        atomic_write_bytes(self.out / "curves.png", buffer.getvalue())

    def close(self) -> None:
        """Closes the TensorBoard writer."""
        self.writer.close()
