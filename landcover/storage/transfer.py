"""Recursive, parallel copies between local disk and blob storage (``landcover data upload``).

A folder is copied file by file, several files at a time; each file is written atomically
(see :mod:`landcover.storage.io`), so an interrupted copy leaves whole files only and can simply
be run again. Progress is a rich bar of bytes on a terminal, and a line every few seconds
otherwise.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from landcover.storage.errors import StorageError, StorageNotFoundError
from landcover.storage.filesystems import filesystem
from landcover.storage.io import (
    Progress,
    download_file,
    is_file,
    list_files,
    stat,
    upload_file,
)
from landcover.storage.retry import RetryPolicy
from landcover.storage.urls import is_remote, join, name


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
        """The one-line summary the CLI prints."""
        return (
            f"{self.verb} {self.files} files, {self.nbytes / 1e6:.1f} MB in {self.seconds:.1f} s "
            f"({self.mb_per_s:.1f} MB/s) to {self.dest}"
        )


class _LineProgress:
    """Progress lines on stderr every ``every_s`` seconds (when not on a terminal)."""

    def __init__(self, verb: str, total_files: int, total_bytes: int, every_s: float) -> None:
        self.verb, self.total_files, self.total_bytes = verb, total_files, total_bytes
        self.every_s = every_s
        self.files = self.nbytes = 0
        self.start = self.last = time.perf_counter()
        self.lock = threading.Lock()

    def advance(self, nbytes: int = 0, files: int = 0) -> None:
        with self.lock:
            self.nbytes += nbytes
            self.files += files
            now = time.perf_counter()
            if now - self.last >= self.every_s and self.files < self.total_files:
                self.last = now
                rate = self.nbytes / 1e6 / (now - self.start)
                print(
                    f"{self.verb} {self.files}/{self.total_files} files, "
                    f"{self.nbytes / 1e6:.1f}/{self.total_bytes / 1e6:.1f} MB, {rate:.1f} MB/s",
                    file=sys.stderr,
                    flush=True,
                )


@contextmanager
def _progress(
    verb: str, total_files: int, total_bytes: int, show: bool
) -> Iterator[Callable[[int, int], None]]:
    """Yields ``advance(nbytes, files)`` that drives a bar or progress lines."""
    if not show:
        yield lambda nbytes, files: None
        return
    if not sys.stderr.isatty():
        lines = _LineProgress(verb, total_files, total_bytes, every_s=5.0)
        yield lambda nbytes, files: lines.advance(nbytes, files)
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
    from rich.progress import Progress as RichProgress

    bar = RichProgress(
        TextColumn(verb),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TextColumn(f"{{task.fields[files]}}/{total_files} files"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = bar.add_task(verb, total=total_bytes, files=0)
    counted = [0]
    lock = threading.Lock()

    def advance(nbytes: int, files: int) -> None:
        with lock:
            counted[0] += files
            bar.update(task, advance=nbytes, files=counted[0])

    with bar:
        yield advance


def _run(
    jobs: list[tuple[Callable[[Progress], int], int]],
    verb: str,
    dest: str,
    max_concurrency: int,
    show_progress: bool,
) -> TransferSummary:
    """Runs copy jobs ``(copy(progress) -> bytes, expected bytes)`` a few at a time."""
    if max_concurrency < 1:
        raise StorageError(f"--concurrency must be >= 1, not {max_concurrency}")
    start = time.perf_counter()
    total = sum(size for _, size in jobs)
    copied = 0
    with _progress(verb, len(jobs), total, show_progress) as advance:

        def one(job: Callable[[Progress], int]) -> int:
            nbytes = job(lambda delta: advance(delta, 0))
            advance(0, 1)
            return nbytes

        pool = ThreadPoolExecutor(max_workers=min(max_concurrency, len(jobs)))
        try:
            futures = [pool.submit(one, job) for job, _ in jobs]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for future in futures:
                if future in done and future.exception() is not None:
                    raise future.exception()  # type: ignore[misc]
            copied = sum(f.result() for f in futures)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
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
        max_concurrency: Files copied at once.
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

    if not is_remote(url):  # a copy to a local path or NFS mount: one line if it cannot fit
        _check_destination([Path(dst) for _, dst, _ in files], sum(s for *_, s in files))

    def job(src: Path, dst: str) -> Callable[[Progress], int]:
        return lambda progress: upload_file(src, dst, progress, policy)

    jobs = [(job(src, dst), size) for src, dst, size in files]
    return _run(jobs, "uploaded", url, max_concurrency, show_progress)


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
        max_concurrency: Files copied at once.
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
        jobs_spec = [(url, target, stat(url, policy).size)]
    else:
        found = list_files(url, policy)
        if not found:
            raise StorageNotFoundError(f"nothing to download: no files under {url}")
        jobs_spec = [(join(url, rel), dest / rel, size) for rel, size in found]

    _check_destination([dst for _, dst, _ in jobs_spec], sum(s for *_, s in jobs_spec))

    def job(src: str, dst: Path) -> Callable[[Progress], int]:
        return lambda progress: download_file(src, dst, progress, policy)

    jobs = [(job(src, dst), size) for src, dst, size in jobs_spec]
    return _run(jobs, "downloaded", str(local), max_concurrency, show_progress)
