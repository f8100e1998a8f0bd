"""Training progress on rank 0: a rich progress bar on a terminal, periodic lines otherwise.

After each epoch, one line with its loss, validation scores and speed.
"""

from __future__ import annotations

import logging
import sys
import time
from datetime import timedelta

import torch

from landcover.training.callbacks import Callback
from landcover.training.records import EpochRecord

log = logging.getLogger("landcover")


def _eta(seconds: float) -> str:
    return str(timedelta(seconds=int(max(seconds, 0))))


class Progress(Callback):
    """Reports steps of an epoch with loss, samples/s and ETA, and each epoch's result.

    Args:
        every_s: Seconds between lines when not on a terminal.
        total_epochs: Target epochs, for the run's ETA.
    """

    def __init__(self, every_s: float, total_epochs: int) -> None:
        self.every_s = every_s
        self.total_epochs = total_epochs
        self._bar = None
        self._task = None
        self._epoch = 0
        self._steps = 1
        self._start = 0.0
        self._last = 0.0

    def on_epoch_start(self, epoch: int, steps: int) -> None:
        """Begins an epoch.

        Args:
            epoch: The epoch number (1-based).
            steps: Steps in the epoch.
        """
        self._epoch, self._steps = epoch, steps
        self._start = self._last = time.perf_counter()
        if sys.stderr.isatty():
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn(f"epoch {epoch}/{self.total_epochs}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"),
                TimeRemainingColumn(),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("train", total=steps, info="")

    def on_step(self, step: int, loss: torch.Tensor, samples: int) -> None:
        """Reports progress after a step.

        The loss is read (a device synchronisation on GPU) only when it is shown.

        Args:
            step: Steps done in this epoch.
            loss: Recent training loss (a scalar tensor).
            samples: Global samples done in this epoch.
        """
        now = time.perf_counter()
        elapsed = now - self._start
        rate = samples / elapsed if elapsed > 0 else 0.0
        epoch_eta = elapsed / step * (self._steps - step)
        run_eta = epoch_eta + elapsed / step * self._steps * (self.total_epochs - self._epoch)
        if self._bar is not None:
            self._bar.update(self._task, completed=step)
            if now - self._last >= 0.5 or step == self._steps:
                self._last = now
                info = f"loss {float(loss):.4f} {rate:.1f} samples/s"
                self._bar.update(self._task, info=info)
        elif now - self._last >= self.every_s or step == self._steps:
            self._last = now
            log.info(
                "epoch %d/%d step %d/%d loss %.4f %.1f samples/s ETA epoch %s run %s",
                self._epoch,
                self.total_epochs,
                step,
                self._steps,
                float(loss),
                rate,
                _eta(epoch_eta),
                _eta(run_eta),
            )

    def on_epoch_end(self, record: EpochRecord) -> None:
        """Removes the bar and logs the epoch's line.

        Args:
            record: The epoch's record.
        """
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
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
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
