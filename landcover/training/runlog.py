"""The run folder's ``metrics.jsonl``: one JSON line per epoch, written by rank 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from landcover.config import Config
from landcover.fileio import atomic_write_text
from landcover.redaction import redact
from landcover.training.callbacks import Callback
from landcover.training.records import EpochRecord
from landcover.training.runfolder import RunFolder

METRICS = "metrics.jsonl"
"""The per-epoch records' file in the run folder."""


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


class MetricsFile(Callback):
    """Appends each epoch's record to ``metrics.jsonl`` (:meth:`EpochRecord.to_dict`, redacted).

    On resume, records of epochs after the checkpoint are dropped (they belong to the
    interrupted attempt), so ``metrics.jsonl`` always matches the checkpoints.

    Args:
        folder: The run folder (the file of a remote run is uploaded after each epoch).
        resume_epoch: Completed epochs of the checkpoint resumed from (0 for a fresh run).
    """

    def __init__(self, folder: RunFolder, resume_epoch: int) -> None:
        self.folder = folder
        self.resume_epoch = resume_epoch
        self.path = folder.path(METRICS)

    def on_train_start(self, config: Config) -> None:
        """Keeps the records up to the checkpoint resumed from (none for a fresh run).

        Args:
            config: The run's configuration.
        """
        if self.resume_epoch > 0:
            self.folder.pull(METRICS)
        kept = [r for r in read_metrics(self.path) if r["epoch"] <= self.resume_epoch]
        atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in kept))

    def on_epoch_end(self, record: EpochRecord) -> None:
        """Appends the epoch's line.

        Args:
            record: The epoch's record.
        """
        with self.path.open("a") as handle:
            handle.write(redact(json.dumps(record.to_dict())) + "\n")
        self.folder.publish(METRICS)
