"""Training progress on rank 0 (:class:`~landcover.progress.ProgressReporter`): a bar or lines.

After each epoch, one line with its loss, validation scores and speed.
"""

from __future__ import annotations

import logging

import torch

from landcover.progress import ProgressReporter, clock
from landcover.training.callbacks import Callback
from landcover.training.records import EpochRecord

log = logging.getLogger("landcover")


class Progress(Callback):
    """Reports steps of an epoch with loss, samples/s and ETA, and each epoch's result.

    Args:
        every_s: Seconds between lines when not on a terminal.
        total_epochs: Target epochs, for the run's ETA.
    """

    def __init__(self, every_s: float, total_epochs: int) -> None:
        self.every_s = every_s
        self.total_epochs = total_epochs
        self._reporter: ProgressReporter | None = None
        self._epoch = 0
        self._steps = 1

    def on_epoch_start(self, epoch: int, steps: int) -> None:
        """Begins an epoch.

        Args:
            epoch: The epoch number (1-based).
            steps: Steps in the epoch.
        """
        self._epoch, self._steps = epoch, steps
        label = f"epoch {epoch}/{self.total_epochs}"
        self._reporter = ProgressReporter(label, steps, self.every_s).start()

    def on_step(self, step: int, loss: torch.Tensor, samples: int) -> None:
        """Reports progress after a step.

        The loss is read (a device synchronisation on GPU) only when it is shown.

        Args:
            step: Steps done in this epoch.
            loss: Recent training loss (a scalar tensor).
            samples: Global samples done in this epoch.
        """
        reporter = self._reporter
        if reporter is None:
            return
        reporter.advance(step)
        if not reporter.due(last=step == self._steps):
            return
        elapsed = reporter.elapsed
        rate = samples / elapsed if elapsed > 0 else 0.0
        epoch_eta = elapsed / step * (self._steps - step)
        run_eta = epoch_eta + elapsed / step * self._steps * (self.total_epochs - self._epoch)
        value = float(loss)
        line = (
            f"epoch {self._epoch}/{self.total_epochs} step {step}/{self._steps} loss "
            f"{value:.4f} {rate:.1f} samples/s ETA epoch {clock(epoch_eta)} run {clock(run_eta)}"
        )
        reporter.show(step, f"loss {value:.4f} {rate:.1f} samples/s", line)

    def on_epoch_end(self, record: EpochRecord) -> None:
        """Removes the bar and logs the epoch's line.

        Args:
            record: The epoch's record.
        """
        self._stop()
        val_text = (
            f"val mIoU {record.val_miou:.3f} acc {record.val_accuracy:.3f}"
            if record.validation is not None
            else "no validation"
        )
        log.info(
            "epoch %d/%d loss %.4f %s | %.1f samples/s, %.1f s (+%.1f s val)%s",
            record.epoch,
            self.total_epochs,
            record.train_loss,
            val_text,
            record.samples_per_s,
            record.epoch_s,
            record.val_s,
            " *best*" if record.best else "",
        )

    def on_train_end(self, completed: bool) -> None:
        """Removes a bar left by a failed epoch.

        Args:
            completed: Whether every epoch was trained.
        """
        self._stop()

    def _stop(self) -> None:
        if self._reporter is not None:
            self._reporter.stop()
            self._reporter = None
