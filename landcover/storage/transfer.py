"""Recursive copies between local disk and blob storage (``landcover data upload``/``download``).

Blob transfers are fsspec's: one ``put`` or ``get`` copies every file, concurrently in adlfs's
async loop (``batch_size`` files at once; for a few large files, ``max_concurrency`` blocks
at once per file). Around that call this module keeps what the commands promise:

- an interrupted copy leaves whole files only and can simply be run again: a blob is a block
  blob that Azure commits only when complete; a download goes to a hidden temporary name
  beside its destination and is renamed into place once it holds all of the blob's bytes;
- transient failures are retried by :func:`~landcover.storage.retry.retrying` (tenacity, for
  a bounded time), each retry copying only the files not yet done; every failure ends in one
  :class:`~landcover.storage.errors.StorageError` line;
- progress is a rich bar of bytes on a terminal, a line every few seconds otherwise; no
  printed line holds a credential.

Copies from one local path to another (an NFS mount, say) use the atomic per-file copies of
:mod:`landcover.storage.files`, a few at a time.
"""

from __future__ import annotations

import os
import time
import traceback
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsspec.asyn import AsyncFileSystem
from fsspec.callbacks import Callback

from landcover.fileio import make_temp_beside
from landcover.redaction import redact
from landcover.storage.errors import StorageError, StorageNotFoundError
from landcover.storage.files import IncompleteTransferError, download_file, upload_file
from landcover.storage.filesystems import filesystem
from landcover.storage.io import is_file, list_files, stat
from landcover.storage.progress import Advance, transfer_progress
from landcover.storage.retry import RetryPolicy, retrying
from landcover.storage.urls import is_remote, join, name, parse

_UNAWAITED = r"coroutine '.*\._(get|put)_file' was never awaited"


@dataclass(frozen=True)
class TransferSummary:
    """What a copy did.

    Attributes:
        verb: "uploaded" or "downloaded".
        files: Files copied.
        nbytes: Bytes copied.
        seconds: Wall time.
        dest: Where they went.
    """

    verb: str
    files: int
    nbytes: int
    seconds: float
    dest: str

    @property
    def mb_per_s(self) -> float:
        """Throughput in MB (10^6 bytes) per second."""
        return self.nbytes / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        """The one-line summary the CLI prints (credentials redacted)."""
        return redact(
            f"{self.verb} {self.files} files, {self.nbytes / 1e6:.1f} MB in {self.seconds:.1f} s "
            f"({self.mb_per_s:.1f} MB/s) to {self.dest}"
        )


@dataclass
class _Copy:
    """One file of a copy: fsspec paths, the listed size, and (downloads) its temporary file."""

    source: str
    dest: str
    size: int
    temp: Path | None = None
    copied: int | None = None

    def discard(self) -> None:
        """Removes an unfinished download's temporary file."""
        if self.temp is not None:
            self.temp.unlink(missing_ok=True)
            self.temp = None

    def finish(self, reported: int | None) -> None:
        """Records a finished file; a download is checked, flushed and renamed into place.

        Args:
            reported: The size the server reported while sending it, if it did.

        Raises:
            IncompleteTransferError: The download holds fewer or more bytes (retried).
        """
        if self.temp is None:
            self.copied = self.size
            return
        expected = self.size if reported is None else reported
        got = self.temp.stat().st_size
        if got != expected:
            raise IncompleteTransferError(
                f"got {got} of {expected} bytes of {self.source} (the blob changed or the "
                "transfer broke)"
            )
        with open(self.temp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(self.temp, self.dest)
        self.temp, self.copied = None, got


class _FileCallback(Callback):
    """fsspec's callback for one file: byte progress, then finishing or undoing it."""

    def __init__(self, job: _Copy, advance: Advance) -> None:
        super().__init__()
        self.job, self.advance, self.shown = job, advance, 0

    def call(self, *args: Any, **kwargs: Any) -> None:
        """Moves the display to the bytes adlfs reported (``absolute_update``)."""
        value = int(self.value or 0)
        if value != self.shown:
            self.advance(value - self.shown, 0)
            self.shown = value

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        try:
            if exc_type is None:
                self.job.finish(self.size)
                self.advance(int(self.job.copied or 0) - self.shown, 1)
                return
        except BaseException:
            self.job.discard()
            self.advance(-self.shown, 0)
            raise
        self.job.discard()  # failed or cancelled: the retry starts this file over
        self.advance(-self.shown, 0)


class _BatchCallback(Callback):
    """fsspec's callback for a ``put``/``get``: hands each file its own :class:`_FileCallback`."""

    def __init__(self, jobs: list[_Copy], advance: Advance) -> None:
        super().__init__()
        self.jobs = {(job.source, str(job.temp or job.dest)): job for job in jobs}
        self.advance = advance

    def branched(self, path_1: str, path_2: str, **kwargs: Any) -> _FileCallback:
        """The callback for one file (fsspec's hook for child transfers)."""
        return _FileCallback(self.jobs[(path_1, path_2)], self.advance)


def _fsspec_copy(
    url: str,
    jobs: list[_Copy],
    upload: bool,
    max_concurrency: int,
    advance: Advance,
    policy: RetryPolicy | None,
) -> None:
    """Copies every job with one fsspec ``put``/``get`` per attempt, retrying the rest."""
    fs, _ = filesystem(url, policy)

    def attempt() -> None:
        todo = [job for job in jobs if job.copied is None]
        options: dict[str, Any] = {}
        if isinstance(fs, AsyncFileSystem):  # files at once, and blocks at once per file
            options["batch_size"] = min(max_concurrency, len(todo))
            options["max_concurrency"] = max(1, max_concurrency // len(todo))
        try:
            for job in todo if not upload else ():
                job.temp = make_temp_beside(Path(job.dest))
            sources = [job.source for job in todo]
            dests = [str(job.temp or job.dest) for job in todo]
            callback = _BatchCallback(todo, advance)
            if upload:
                fs.put(sources, dests, callback=callback, **options)
            else:
                fs.get(sources, dests, callback=callback, **options)
        except Exception as exc:  # fsspec never started some files' coroutines: drop them now
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", _UNAWAITED, RuntimeWarning)
                traceback.clear_frames(exc.__traceback__)
            raise
        finally:
            for job in todo:
                if job.copied is None:
                    job.discard()

    retrying("upload to" if upload else "download", url, attempt, policy)


def _local_copy(jobs: list[_Copy], upload: bool, max_concurrency: int, advance: Advance) -> None:
    """Copies between local paths with io's atomic per-file copies, a few at a time."""
    copy = upload_file if upload else download_file

    def one(job: _Copy) -> None:
        job.copied = copy(job.source, job.dest, lambda delta: advance(delta, 0))
        advance(0, 1)

    pool = ThreadPoolExecutor(max_workers=min(max_concurrency, len(jobs)))
    try:
        list(pool.map(one, jobs))
    finally:  # the first failure ends the copy: files not started are not started
        pool.shutdown(wait=True, cancel_futures=True)


def _run(
    jobs: list[_Copy],
    upload: bool,
    url: str,
    dest: str,
    max_concurrency: int,
    show_progress: bool,
    policy: RetryPolicy | None,
) -> TransferSummary:
    """Copies the jobs, showing progress; returns the summary."""
    if max_concurrency < 1:
        raise StorageError(f"--concurrency must be >= 1, not {max_concurrency}")
    verb = "uploaded" if upload else "downloaded"
    start = time.perf_counter()
    with transfer_progress(verb, len(jobs), sum(j.size for j in jobs), show_progress) as advance:
        if is_remote(url):
            _fsspec_copy(url, jobs, upload, max_concurrency, advance, policy)
        else:
            _local_copy(jobs, upload, max_concurrency, advance)
    copied = sum(job.copied or 0 for job in jobs)
    return TransferSummary(verb, len(jobs), copied, time.perf_counter() - start, dest)


def upload(
    local: str | Path,
    url: str,
    max_concurrency: int = 8,
    show_progress: bool = True,
    policy: RetryPolicy | None = None,
) -> TransferSummary:
    """Copies a local file or folder (recursively) to a blob URL or another path.

    A folder's files keep their relative paths under ``url``. A single file goes to ``url``
    itself, or into it when ``url`` ends with ``/``.

    Args:
        local: The local file or folder.
        url: The destination prefix (or blob, for a file).
        max_concurrency: Transfers at once (files, or blocks of a few large files).
        show_progress: Show a progress bar (or lines when stderr is not a terminal).
        policy: Retry settings.

    Returns:
        Files, bytes and time.

    Raises:
        StorageError: Nothing to upload, or a file failed after retries (the files already
            copied are complete).
    """
    source = Path(local)
    filesystem(url, policy)  # unsupported URLs and missing credentials fail before any work
    if source.is_file():
        dest = join(url, source.name) if url.endswith("/") else url
        files = [(source, dest, source.stat().st_size)]
    elif source.is_dir():
        found = list_files(source, policy)
        if not found:
            raise StorageNotFoundError(f"nothing to upload: {source} holds no files")
        files = [(source / rel, join(url, rel), size) for rel, size in found]
    else:
        raise StorageNotFoundError(f"cannot upload {source}: no such file or folder")

    remote = is_remote(url)
    if not remote:  # a copy to a local path or NFS mount: one line if it cannot fit
        _check_destination([Path(dst) for _, dst, _ in files], sum(s for *_, s in files))
    jobs = [_Copy(str(src), parse(dst).path if remote else dst, size) for src, dst, size in files]
    return _run(jobs, True, url, url, max_concurrency, show_progress, policy)


def _check_destination(files: list[Path], need: int) -> None:
    """Preflight of a copy's local destination: writable, with room for every file.

    Raises:
        OutputError: If the folder is read-only, not writable or has too little room.
    """
    from landcover.diskerrors import check_output_folder

    folder = Path(os.path.commonpath([str(f.absolute().parent) for f in files]))
    check_output_folder(folder, need)


def download(
    url: str,
    local: str | Path,
    max_concurrency: int = 8,
    show_progress: bool = True,
    policy: RetryPolicy | None = None,
) -> TransferSummary:
    """Copies a blob or every blob under a prefix (recursively) to a local folder.

    Blobs keep their paths relative to ``url`` under ``local``. A single blob goes to
    ``local`` itself, or into it when ``local`` is a folder or ends with ``/``.

    Args:
        url: The source blob or prefix (or a path).
        local: The destination folder (or file, for one blob).
        max_concurrency: Transfers at once (files, or blocks of a few large files).
        show_progress: Show a progress bar (or lines when stderr is not a terminal).
        policy: Retry settings.

    Returns:
        Files, bytes and time.

    Raises:
        StorageError: Nothing at ``url``, or a file failed after retries (files already
            copied are complete; none is left half-written under its final name).
    """
    dest = Path(local)
    if is_file(url, policy):
        target = dest / name(url) if dest.is_dir() or str(local).endswith("/") else dest
        found = [(url, target, stat(url, policy).size)]
    else:
        listed = list_files(url, policy)
        if not listed:
            raise StorageNotFoundError(f"nothing to download: no files under {url}")
        found = [(join(url, rel), dest / rel, size) for rel, size in listed]

    _check_destination([dst for _, dst, _ in found], sum(s for *_, s in found))
    remote = is_remote(url)
    jobs = [
        _Copy(parse(src).path if remote else src, str(dst.absolute()), size)
        for src, dst, size in found
    ]
    return _run(jobs, False, url, str(local), max_concurrency, show_progress, policy)
