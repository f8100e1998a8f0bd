"""Unwritable and full output folders: a preflight check and one-line errors.

A read-only file system, a folder the user may not write, a full disk or an exhausted quota
ends a command with one :class:`OutputError` line that names the folder and the cause (and,
for a full disk, the bytes free and those needed where known) instead of a traceback or
GDAL's raw messages. :func:`check_output_folder` is the preflight every writing command runs
before any work; :func:`output_errors` translates the errors of a write as it happens.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from landcover.errors import DiskFullError, OutputError

CAUSES: dict[int, str] = {
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.ENOTDIR: "a folder on its path is a file",
}
"""The causes we explain, by ``errno``."""

_MESSAGES: dict[str, int] = {
    "no space left on device": errno.ENOSPC,
    "disk quota exceeded": errno.EDQUOT,
    "read-only file system": errno.EROFS,
    "permission denied": errno.EACCES,
    "not a directory": errno.ENOTDIR,
}
"""Causes named only in a message's text (GDAL's errors carry no ``errno``)."""

FULL_BELOW = 4 * 1024 * 1024
"""A failed GDAL write counts as a full disk when fewer bytes than this are free: GDAL writes
at most a few MB at a time, so a write that ran out of room leaves less than this."""

_PROBE_BYTES = 4096
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def _is_url(folder: str | Path) -> bool:
    """Whether ``folder`` is a URL other than ``file://`` (a blob, checked by its service)."""
    match = _URL.match(str(folder))
    return match is not None and match.group(1).lower() not in ("file", "local")


def human_bytes(count: int) -> str:
    """A byte count for people: ``512 B``, ``3.4 MB``, ``1.2 GB`` (powers of 1000).

    Args:
        count: Bytes.

    Returns:
        The count with a unit.
    """
    value = float(count)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{count} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{count} B"  # pragma: no cover - the loop always returns


def free_bytes(folder: str | Path) -> int | None:
    """Bytes free for this user on the file system of ``folder`` (or its nearest parent).

    Args:
        folder: A folder, which need not exist yet.

    Returns:
        The free bytes, or ``None`` when they cannot be measured.
    """
    usage = _usage(folder)
    return None if usage is None else usage[1]


def disk_bytes(folder: str | Path) -> int | None:
    """The size of the file system of ``folder`` (or its nearest parent).

    Args:
        folder: A folder, which need not exist yet.

    Returns:
        Its total bytes, or ``None`` when they cannot be measured.
    """
    usage = _usage(folder)
    return None if usage is None else usage[0]


def _usage(folder: str | Path) -> tuple[int, int] | None:
    """``(total, free)`` bytes of the file system of ``folder`` or its nearest parent."""
    path = Path(folder).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return None
    return usage.total, usage.free


def disk_errno(exc: BaseException) -> int | None:
    """The disk-related ``errno`` behind an error or any error it was raised from.

    Args:
        exc: An error (an :class:`OSError`, or a GDAL error whose text names the cause).

    Returns:
        One of :data:`CAUSES`' keys, or ``None``.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in CAUSES:
            return current.errno
        text = str(current).lower()
        for needle, code in _MESSAGES.items():
            if needle in text:
                return code
        current = current.__cause__ or current.__context__
    return None


def is_gdal_error(exc: BaseException) -> bool:
    """Whether ``exc`` is one of rasterio's or GDAL's own errors.

    Args:
        exc: An error.

    Returns:
        True for :class:`rasterio.errors.RasterioError` and GDAL's ``CPLE_*`` errors.
    """
    from rasterio._err import CPLE_BaseError
    from rasterio.errors import RasterioError

    return isinstance(exc, RasterioError | CPLE_BaseError)


def output_failure(folder: str | Path, code: int, need: int | None = None) -> OutputError:
    """The one-line error of a folder that cannot be written.

    Args:
        folder: The output folder.
        code: The cause, one of :data:`CAUSES`' keys.
        need: Bytes the outputs need, where known.

    Returns:
        An :class:`OutputError` (a :class:`DiskFullError` for a full disk or quota).
    """
    cause = CAUSES.get(code, os.strerror(code).lower())
    if code not in (errno.ENOSPC, errno.EDQUOT):
        return OutputError(f"cannot write to {folder}: {cause}")
    return FullDiskError(str(folder), cause, need)


class FullDiskError(DiskFullError):
    """A full disk, whose free space is measured when the message is read.

    The error is made while the write that filled the disk still holds its partial file;
    measured then, a disk with 60 MB free before the command reads ``0 B free``. The message
    is read once the error has unwound, the partial file removed: the room the user has.

    Args:
        folder: The output folder.
        cause: What failed (``no space left on device``, ``disk quota exceeded``).
        need: Bytes the outputs need, where known.
    """

    def __init__(self, folder: str, cause: str, need: int | None = None) -> None:
        super().__init__(folder, cause, need)
        self.folder, self.cause, self.need = folder, cause, need

    def __str__(self) -> str:
        """The one-line message, with the free space as it is now."""
        return full_disk_message(self.folder, self.cause, free_bytes(self.folder), self.need)


def full_disk_message(folder: str, cause: str, free: int | None, need: int | None) -> str:
    """The message of a full destination.

    Args:
        folder: The output folder.
        cause: What failed.
        free: Bytes free for this user, where measured.
        need: Bytes the outputs need, where known.

    Returns:
        ``cannot write to FOLDER: CAUSE (N free, about M needed); free some space or ...``.
    """
    room = [] if free is None else [f"{human_bytes(free)} free"]
    if need:
        room.append(f"about {human_bytes(need)} needed")
    detail = f" ({', '.join(room)})" if room else ""
    return f"cannot write to {folder}: {cause}{detail}; free some space or write elsewhere"


def output_error(
    exc: BaseException, folder: str | Path, need: int | None = None
) -> OutputError | None:
    """Translates a failed write into an :class:`OutputError`, when the folder is to blame.

    An ``errno`` of :data:`CAUSES` (or its text in a GDAL message) names the cause. A GDAL
    write error without one (``TIFFRewriteDirectory: Error fetching directory count``, say)
    counts as a full disk when fewer than :data:`FULL_BELOW` bytes are free.

    Args:
        exc: The error.
        folder: The folder being written.
        need: Bytes the outputs need, where known.

    Returns:
        The error to raise instead, or ``None`` when the folder is not to blame.
    """
    if isinstance(exc, OutputError):
        return exc
    code = disk_errno(exc)
    if code is None and is_gdal_error(exc):
        free = free_bytes(folder)
        if free is not None and free < FULL_BELOW:
            code = errno.ENOSPC
    return None if code is None else output_failure(folder, code, need)


@contextmanager
def output_errors(folder: str | Path, need: int | None = None) -> Iterator[None]:
    """Turns the errors of writes into ``folder`` that the folder causes into one line.

    Args:
        folder: The folder written.
        need: Bytes the writes need, where known.

    Yields:
        Nothing; wrap the writes.

    Raises:
        OutputError: If a write failed for lack of permission or room.
    """
    try:
        yield
    except (OSError, RuntimeError) as exc:  # torch.save reports a full disk as RuntimeError
        translated = output_error(exc, folder, need)
        if translated is None or translated is exc:
            raise
        raise translated from None
    except Exception as exc:
        translated = output_error(exc, folder, need) if is_gdal_error(exc) else None
        if translated is None:
            raise
        raise translated from None


def check_output_folder(folder: str | Path, need: int | None = None) -> None:
    """Preflight of an output folder: it can be created and written, with room to spare.

    Creates the folder (and its parents), writes and deletes a small probe file, and compares
    the free bytes with ``need``. Blob URLs are not checked (their errors come from the
    storage service; a SAS token in one is refused by the command, before any work).

    Args:
        folder: The output folder: a local path (blob URLs pass).
        need: Bytes the outputs need at least, where known.

    Raises:
        OutputError: If the folder is a file, cannot be created or written, or has too
            little room.
    """
    if _is_url(folder):
        return
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise OutputError(f"cannot write to {folder}: it is a file, not a folder")
    try:
        with output_errors(path, need):
            path.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(prefix=".landcover-probe-", suffix=".tmp", dir=path)
            try:
                os.write(fd, b"\0" * _PROBE_BYTES)
                os.fsync(fd)
            finally:
                os.close(fd)
                os.unlink(probe)
    except OSError as exc:  # another cause (no folder can be made there: /proc, a stale NFS
        # handle, an I/O error): the folder is to blame all the same
        cause = (exc.strerror or type(exc).__name__).lower()
        raise OutputError(f"cannot write to {folder}: {cause}") from None
    free = free_bytes(path)
    if need and free is not None and free < need:
        raise output_failure(path, errno.ENOSPC, need)


def uncaught_output_error(exc: BaseException) -> OutputError | None:
    """The one-line error of a disk error no write site translated (the CLI's last resort).

    Args:
        exc: An error that reached the top of a command or a worker.

    Returns:
        An :class:`OutputError` naming the file or folder of the error, or ``None`` when the
        error is not a read-only, permission or full-disk one.
    """
    if isinstance(exc, OutputError):
        return exc
    code = disk_errno(exc)
    if code is None:
        return None
    where: str | None = None
    current: BaseException | None = exc
    while current is not None and where is None:
        filename = getattr(current, "filename", None)
        where = None if filename is None else os.fsdecode(filename)
        current = current.__cause__ or current.__context__
    if where is None:
        return OutputError(f"cannot write: {CAUSES[code]}")
    return output_failure(where, code)
