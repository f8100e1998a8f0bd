"""The run folder's ``metrics.jsonl``: one JSON line per epoch, written by rank 0."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from landcover.checkpoint import Checkpoint
from landcover.config import Config
from landcover.fileio import atomic_write_text
from landcover.redaction import redact
from landcover.training.callbacks import Callback
from landcover.training.records import EpochRecord
from landcover.training.runfolder import RunFolder

METRICS = "metrics.jsonl"
"""The per-epoch records' file in the run folder."""
log = logging.getLogger("landcover")


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Reads a ``metrics.jsonl`` file.

    Args:
        path: The file (missing is fine).

    Returns:
        One dict per epoch line; a line that is not a JSON record (cut short by a crash while
        an older landcover appended it) is left out with a warning.
    """
    path = Path(path)
    if not path.is_file():
        return []
    records = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        try:
            record = json.loads(line) if line.strip() else None
        except ValueError:
            record = False
        if isinstance(record, dict) and isinstance(record.get("epoch"), int):
            records.append(record)
        elif record is not None:
            log.warning("%s: line %d is not an epoch's record: left out", path, number)
    return records


def _records_through(folder: RunFolder, epoch: int) -> list[dict[str, Any]]:
    """The run's records of epochs up to ``epoch`` (a resumed remote run's file pulled first)."""
    if epoch > 0:
        folder.pull(METRICS)
    return [r for r in read_metrics(folder.path(METRICS)) if r["epoch"] <= epoch]


def _write_records(path: Path, records: list[dict[str, Any]]) -> None:
    """Writes ``metrics.jsonl`` with these records, one JSON line each (atomically)."""
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in records))


class MetricsFile(Callback):
    """Adds each epoch's record to ``metrics.jsonl`` (:meth:`EpochRecord.to_dict`, redacted).

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
        self.records: list[dict[str, Any]] = []

    def on_train_start(self, config: Config) -> None:
        """Keeps the records up to the checkpoint resumed from (none for a fresh run).

        Args:
            config: The run's configuration.
        """
        self.records = _records_through(self.folder, self.resume_epoch)
        _write_records(self.path, self.records)

    def on_epoch_end(self, record: EpochRecord) -> None:
        """Adds the epoch's line, the whole file written again atomically.

        A crash while it is written leaves the previous file whole, never a line cut short.

        Args:
            record: The epoch's record.
        """
        self.records.append(json.loads(redact(json.dumps(record.to_dict()))))
        _write_records(self.path, self.records)
        self.folder.publish(METRICS)


def restore_record(folder: RunFolder, state: Checkpoint, writer: bool) -> bool:
    """Writes the resumed epoch's line into ``metrics.jsonl`` again, if the run lost it.

    An epoch's checkpoint is written before its line: a run stopped between the two (a kill,
    a full disk) resumed without that epoch's line, and ``metrics.jsonl``, ``curves.png`` and
    what reads them lacked it for good, the final epoch's too when nothing was left to train.
    The checkpoint holds the same record (its ``metrics``, redacted as the line is).

    Args:
        folder: The run folder.
        state: The checkpoint resumed from.
        writer: Whether this worker writes the run folder (rank 0).

    Returns:
        Whether the line was written.
    """
    record = state.metrics
    if not writer or not record or record.get("epoch") != state.epoch:
        return False
    kept = _records_through(folder, state.epoch)
    if any(r["epoch"] == state.epoch for r in kept):
        return False
    _write_records(folder.path(METRICS), [*kept, record])
    folder.publish(METRICS)
    log.info("%s: epoch %d's line written again from its checkpoint", METRICS, state.epoch)
    return True
