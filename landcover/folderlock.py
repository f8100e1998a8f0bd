"""One landcover job at a time in an output folder: an advisory lock on ``.landcover.lock``.

A run folder (``train --out``) or a map folder (``predict --out``) is cleaned when a job
starts: temporaries an interrupted job left (``.*.tmp``, ``.landcover-tmp-*``) are removed.
Two jobs pointed at the same folder would remove each other's live temporaries and write
over each other's checkpoints and summaries, so the worker that cleans (rank 0) holds an
exclusive ``flock`` on the folder's ``.landcover.lock`` for the whole job, and a second job
stops with one line naming the holder (its pid and host, written in the file). The job
removes the file when it ends; the operating system releases the lock when the holding
process ends, however it ends (a SIGKILL, a lost node), so a file left behind holds no lock.

File systems without ``flock`` (some FUSE mounts, NFS without a lock manager) answer with an
error; the job then runs without the lock, as before. Blob folders are not locked (a blob
store has no such lock); a remote run's local staging folder is.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from landcover.errors import OutputError

log = logging.getLogger("landcover")

LOCK_NAME = ".landcover.lock"


@contextmanager
def folder_lock(folder: str | Path, option: str = "--out") -> Iterator[None]:
    """Holds the folder's lock while the block runs.

    Args:
        folder: The local output folder (created if missing).
        option: The option that chose the folder, for the message.

    Yields:
        Nothing; the lock is held until the block ends.

    Raises:
        OutputError: If another process holds the lock.
    """
    path = Path(folder) / LOCK_NAME
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = _locked(path, folder, option)
    except OSError as exc:  # a read-only folder: the job's own checks say so
        log.debug("no lock on %s: %s", folder, exc)
        yield
        return
    try:
        if fd is not None:
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
            except OSError:  # a full disk: the lock holds all the same
                pass
        yield
    finally:
        if fd is not None:
            path.unlink(missing_ok=True)  # still locked: a job that opens it now retries
            os.close(fd)  # releases the lock


def _locked(path: Path, folder: str | Path, option: str) -> int | None:
    """Opens and locks ``path``; the descriptor, or None where the file system cannot lock.

    The lock file is removed when its job ends, so a job may open it just before that and
    lock it just after: it then holds a file no longer in the folder. Hence the check that
    the locked file is still the one at ``path``, and a new try if not.

    Raises:
        OutputError: If another process holds the lock.
        OSError: If the file cannot be opened.
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "a process"
            os.close(fd)
            raise OutputError(
                f"{folder}: another landcover job is writing to this folder ({holder}); wait "
                f"for it to end, or give another {option}"
            ) from None
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise
            log.debug("no lock on %s: %s", folder, exc)
            return None
        try:
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # removed by the job that just ended: lock the new one
