"""The run folder's TensorBoard event files (``RUN/tensorboard``), written by rank 0."""

from __future__ import annotations

from typing import TYPE_CHECKING

from landcover.config import Config
from landcover.training.callbacks import Callback
from landcover.training.records import EpochRecord
from landcover.training.runfolder import RunFolder

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

SCALARS = ("train_loss", "lr", "samples_per_s", "epoch_s", "val_miou", "val_accuracy")
"""The record's values logged as scalars under their own names (``val_iou/{class}`` besides)."""


class TensorBoardLog(Callback):
    """Logs each epoch's scalars to TensorBoard, at the step of the epoch's number.

    On resume, events of epochs after the checkpoint are purged.

    Args:
        folder: The run folder (its files of a remote run are uploaded after each epoch).
        resume_epoch: Completed epochs of the checkpoint resumed from (0 for a fresh run).
    """

    def __init__(self, folder: RunFolder, resume_epoch: int) -> None:
        self.folder = folder
        self.resume_epoch = resume_epoch
        self.writer: SummaryWriter | None = None

    def on_train_start(self, config: Config) -> None:
        """Opens the event file.

        Args:
            config: The run's configuration.
        """
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(
            str(self.folder.path("tensorboard")), purge_step=self.resume_epoch + 1
        )

    def on_epoch_end(self, record: EpochRecord) -> None:
        """Adds the epoch's scalars.

        Args:
            record: The epoch's record.
        """
        if self.writer is None:
            return
        values = record.to_dict()
        for key in SCALARS:
            if values[key] is not None:
                self.writer.add_scalar(key, values[key], record.epoch)
        for name, iou in (record.val_iou or {}).items():
            if iou is not None:
                self.writer.add_scalar(f"val_iou/{name}", iou, record.epoch)
        self.writer.flush()
        self.folder.publish("tensorboard")

    def on_train_end(self, completed: bool) -> None:
        """Closes the event file.

        Args:
            completed: Whether every epoch was trained.
        """
        if self.writer is not None:
            self.writer.close()
            self.writer = None
