"""A refused ``train`` leaves the run folder as it found it (issue 42, item 8).

Some of a run's checks can only be made in its workers, after their log files are open: the
labels' codes (the pixels are read there), the device, the model and its initial weights. The
run's ``config.yaml`` is written once they have passed (:class:`~landcover.training.trainer.
Trainer`), so a run that stopped without writing it never started. :class:`RunStart` notes
what the run folder held before the command and, when such a run fails, removes what the
command added: its log files, and the folder itself (and the parents it made) when the command
created it. Nothing else is removed, nor anything while another job holds the folder's lock.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from landcover import storage
from landcover.errors import OutputError
from landcover.folderlock import folder_lock

STARTED = "config.yaml"
"""Written by a run once its checks have passed."""

_UNSTARTED = re.compile(r"logs|logs/rank\d+\.log|\.landcover\.lock|\.landcover-probe-.*\.tmp")
"""What a run that stopped before its checks passed writes: its log files, lock and probe."""


@dataclass
class RunStart:
    """What a local run folder held before a command, to undo a refused run's files.

    Attributes:
        folder: The run folder (absolute), or ``None`` for a blob URL (nothing is undone).
        created: The outermost folder the command creates (the run folder or its first
            missing parent), or ``None`` if the run folder exists.
        before: The run folder's entries the command may add (``logs`` and its log files),
            as they were.
        started: ``config.yaml``'s identity before the command (``None``: there was none).
    """

    folder: Path | None
    created: Path | None = None
    before: set[str] = field(default_factory=set)
    started: tuple[int, int, int] | None = None

    @classmethod
    def capture(cls, out: str) -> RunStart:
        """Notes what the run folder ``out`` holds before the command writes anything.

        Args:
            out: The run folder: a path or a blob URL.

        Returns:
            The record.
        """
        if storage.is_remote(out):
            return cls(None)
        folder = Path(out).absolute()
        if not (folder.exists() or folder.is_symlink()):
            created = folder
            while not (created.parent.exists() or created.parent.is_symlink()):
                created = created.parent
            return cls(folder, created)
        return cls(folder, None, set(_added(folder)), _identity(folder / STARTED))

    def undo(self) -> bool:
        """Removes what the command added, if its run never passed its checks.

        Returns:
            Whether the folder is as the command found it (missing, if it created it).
        """
        folder = self.folder
        if folder is None or _identity(folder / STARTED) != self.started:  # the run started
            return False
        if folder.exists():
            try:
                with folder_lock(folder):  # another job's live files are not ours to remove
                    if not self._remove_added(folder):
                        return False
            except (OutputError, OSError):  # held by another job, or unreadable: left as is
                return False
        if self.created is not None:
            for parent in [folder, *folder.parents]:
                if not parent.is_relative_to(self.created):
                    break
                try:
                    if parent.exists():
                        parent.rmdir()  # a folder the command created, now empty
                except OSError:
                    break
        return self.created is None or not folder.exists()

    def _remove_added(self, folder: Path) -> bool:
        """Removes the log files the command added; False if it added anything else."""
        entries = [p.relative_to(folder).as_posix() for p in folder.rglob("*")]
        if self.created is not None and any(not _UNSTARTED.fullmatch(e) for e in entries):
            return False
        for name in sorted(set(_added(folder)) - self.before, reverse=True):  # files first
            path = folder / name
            with contextlib.suppress(OSError):
                path.rmdir() if path.is_dir() else path.unlink()  # logs/ only when empty
        return True


def _added(folder: Path) -> list[str]:
    """The entries of ``folder`` that an unstarted run writes and keeps: ``logs`` and its logs."""
    logs = folder / "logs"
    if not logs.is_dir() or logs.is_symlink():
        return []
    return ["logs", *(f"logs/{p.name}" for p in logs.glob("rank*.log") if p.is_file())]


def _identity(path: Path) -> tuple[int, int, int] | None:
    """A file's inode, size and modification time, or ``None`` when there is none."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns
