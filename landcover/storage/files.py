"""Copying whole files between local disk and storage: atomic, checked, with progress.

An upload is written as :func:`~landcover.storage.io.write_bytes` writes (a temporary name
renamed into place on local disk, one block-blob commit on Azure). A download goes to a
temporary name beside the destination, is checked against the remote object's size, and only
then renamed into place. Both are retried as a whole (:mod:`landcover.storage.retry`), and a
retry takes back the progress the failed attempt reported.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from landcover.fileio import make_temp_beside
from landcover.storage.errors import StorageNotFoundError
from landcover.storage.filesystems import filesystem_of
from landcover.storage.retry import RetryPolicy, retrying
from landcover.storage.urls import parse

Progress = Callable[[int], None]
"""Called with the number of bytes just transferred (negative when a retry starts over)."""

_CHUNK = 8 * 1024 * 1024


class IncompleteTransferError(ConnectionError):
    """Fewer (or more) bytes arrived than the object holds; the transfer is tried again."""


class _Reporter:
    """Turns absolute progress of one attempt into increments; undoes it when retried."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.done = 0

    def restart(self) -> None:
        if self.progress is not None and self.done:
            self.progress(-self.done)
        self.done = 0

    def absolute(self, value: int) -> None:
        if self.progress is not None and value != self.done:
            self.progress(value - self.done)
        self.done = value

    def fsspec_callback(self) -> Any:
        from fsspec.callbacks import Callback

        reporter = self

        class _Callback(Callback):
            def call(self, *args: Any, **kwargs: Any) -> None:
                reporter.absolute(int(self.value))

        return _Callback()


def _copy_local(source: Path, dest: Path, reporter: _Reporter) -> int:
    """Copies a local file to a temporary name beside ``dest``, then renames it into place."""
    tmp = make_temp_beside(dest)
    try:
        with open(source, "rb") as src, open(tmp, "wb") as out:
            done = 0
            while chunk := src.read(_CHUNK):
                out.write(chunk)
                done += len(chunk)
                reporter.absolute(done)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return done


def upload_file(
    local: str | Path,
    url: str | Path,
    progress: Progress | None = None,
    policy: RetryPolicy | None = None,
) -> int:
    """Copies a local file to a path or blob URL (atomically, as :func:`write_bytes`).

    Args:
        local: The local file.
        url: The destination file or blob.
        progress: Called with byte increments.
        policy: Retry settings.

    Returns:
        The bytes uploaded.

    Raises:
        StorageNotFoundError: ``local`` is not a file, or the container does not exist.
        StorageError: The upload failed after bounded retries.
    """
    source = Path(local)
    if not source.is_file():
        raise StorageNotFoundError(f"cannot upload {source}: no such file")
    location = parse(url)
    reporter = _Reporter(progress)
    if location.is_local:
        dest = Path(location.path)

        def copy() -> int:
            reporter.restart()
            return _copy_local(source, dest, reporter)

        return retrying("write", location.url, copy, policy)
    fs, path = filesystem_of(location, policy)
    size = source.stat().st_size

    def put() -> int:
        reporter.restart()
        fs.put_file(str(source), path, callback=reporter.fsspec_callback(), overwrite=True)
        reporter.absolute(size)
        return size

    return retrying("upload to", location.url, put, policy)


def download_file(
    url: str | Path,
    local: str | Path,
    progress: Progress | None = None,
    policy: RetryPolicy | None = None,
) -> int:
    """Copies a file or blob to a local file, atomically and checked against the remote size.

    The bytes go to a hidden temporary file beside ``local``; only when its size equals the
    remote object's is it renamed to ``local``, so a half-downloaded file is never left under
    the final name. A short download is retried.

    Args:
        url: The source file or blob.
        local: The destination file (its folder is created).
        progress: Called with byte increments.
        policy: Retry settings.

    Returns:
        The bytes downloaded.

    Raises:
        StorageNotFoundError: No such file or blob.
        StorageError: The download failed after bounded retries.
    """
    location = parse(url)
    dest = Path(local)
    reporter = _Reporter(progress)
    if location.is_local:
        source = Path(location.path)

        def copy() -> int:
            reporter.restart()
            return _copy_local(source, dest, reporter)

        return retrying("read", location.url, copy, policy)
    fs, path = filesystem_of(location, policy)

    def get() -> int:
        reporter.restart()
        expected = int(fs.info(path)["size"])
        tmp = make_temp_beside(dest)
        try:
            fs.get_file(path, str(tmp), callback=reporter.fsspec_callback())
            got = tmp.stat().st_size
            if got != expected:
                raise IncompleteTransferError(
                    f"got {got} of {expected} bytes (the object changed or the transfer broke)"
                )
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
            os.replace(tmp, dest)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        reporter.absolute(expected)
        return expected

    return retrying("download", location.url, get, policy)
