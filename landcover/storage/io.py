"""Reading and writing paths and blob URLs: whole objects, atomically, with bounded retries.

Every function takes any URL form of :mod:`landcover.storage.urls` and raises a one-line
:class:`~landcover.storage.errors.StorageError` (:class:`StorageNotFoundError` for a missing
object) after the retries of :mod:`landcover.storage.retry`.

Readers never see a partial object:

- local paths and NFS mounts are written to a hidden temporary name in the destination folder
  and renamed over the final name (``os.replace``), with the umask's file mode;
- a blob is written as one block-blob upload: small objects in a single Put Blob, large ones
  as staged blocks committed by one Put Block List at the end. Azure makes the new content
  visible only when that last call succeeds, so readers see the old object or the whole new
  one, never a part;
- whole-file uploads and downloads (:mod:`landcover.storage.files`) follow the same rules,
  downloads checked against the remote object's size before they are renamed into place.
"""

from __future__ import annotations

import glob as globlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from landcover.fileio import atomic_write_bytes, atomic_write_set
from landcover.redaction import redact
from landcover.storage.filesystems import filesystem_of
from landcover.storage.retry import RetryPolicy, retrying
from landcover.storage.urls import Location, join, parse


@dataclass(frozen=True)
class ObjectInfo:
    """Size and version of a stored object.

    Attributes:
        size: Bytes.
        version: The blob's ETag, or the file's modification time: changes when it is rewritten.
    """

    size: int
    version: str


def _local(location: Location) -> Path:
    return Path(os.path.abspath(location.path))


def exists(url: str | Path, policy: RetryPolicy | None = None) -> bool:
    """Whether a file, folder, blob or blob prefix exists at ``url``."""
    location = parse(url)
    if location.is_local:
        return _local(location).exists()
    fs, path = filesystem_of(location, policy)
    return retrying("check", location.url, lambda: bool(fs.exists(path)), policy)


def is_file(url: str | Path, policy: RetryPolicy | None = None) -> bool:
    """Whether ``url`` is a file or blob (not a folder or prefix)."""
    location = parse(url)
    if location.is_local:
        return _local(location).is_file()
    fs, path = filesystem_of(location, policy)

    def check() -> bool:
        try:  # not fs.isfile: adlfs's returns False on any error, a dead server included
            return fs.info(path).get("type") == "file"
        except FileNotFoundError:
            return False

    return retrying("check", location.url, check, policy)


def stat(url: str | Path, policy: RetryPolicy | None = None) -> ObjectInfo:
    """Size and version of a file or blob.

    Raises:
        StorageNotFoundError: Nothing there.
        StorageError: Any other failure.
    """
    location = parse(url)
    fs, path = filesystem_of(location, policy)

    def run() -> ObjectInfo:
        info = fs.info(path)
        if info.get("type") != "file":
            raise FileNotFoundError(path)
        version = info.get("etag") or info.get("mtime") or info.get("created") or ""
        return ObjectInfo(int(info["size"]), str(version))

    return retrying("stat", location.url, run, policy)


def listdir(url: str | Path, policy: RetryPolicy | None = None) -> list[str]:
    """The entries directly inside a folder or blob prefix, as URLs of the same form, sorted.

    Raises:
        StorageNotFoundError: The folder or prefix does not exist.
    """
    location = parse(url)
    if location.is_local:
        folder = _local(location)
        names = retrying("list", location.url, lambda: sorted(os.listdir(folder)), policy)
        base = location.url.rstrip("/")
        return [f"{base}/{n}" for n in names]
    fs, path = filesystem_of(location, policy)
    entries = retrying("list", location.url, lambda: fs.ls(path, detail=False), policy)
    return sorted(location.url_for(str(e).rstrip("/")) for e in entries)


def glob(pattern: str | Path, policy: RetryPolicy | None = None) -> list[str]:
    """Paths or URLs matching a glob pattern (``*``, ``?``, ``[...]``, ``**``), sorted."""
    location = parse(pattern)
    if location.is_local:
        matches = sorted(globlib.glob(location.path, recursive=True))
        if location.url.startswith("file://"):
            return [location.url_for(os.path.abspath(m)) for m in matches]
        return matches
    fs, path = filesystem_of(location, policy)
    matches = retrying("list", location.url, lambda: fs.glob(path), policy)
    return sorted(location.url_for(str(m)) for m in matches)


def list_files(url: str | Path, policy: RetryPolicy | None = None) -> list[tuple[str, int]]:
    """All files under a folder or blob prefix, recursively.

    Args:
        url: A folder or prefix.
        policy: Retry settings.

    Returns:
        ``(relative path with '/' separators, size in bytes)`` of every file, sorted.
    """
    location = parse(url)
    if location.is_local:
        root = _local(location)

        def walk() -> list[tuple[str, int]]:
            if not root.is_dir():
                raise FileNotFoundError(str(root))
            found = []
            for folder, _, names in os.walk(root):
                for n in names:
                    full = Path(folder) / n
                    if n.startswith(".") and n.endswith(".tmp"):
                        continue  # an unfinished atomic write
                    try:
                        size = full.stat().st_size
                    except OSError:  # a dangling or looping link: listed, its reader says why
                        size = 0
                    found.append((full.relative_to(root).as_posix(), size))
            return sorted(found)

        return retrying("list", location.url, walk, policy)
    fs, path = filesystem_of(location, policy)
    base = path.rstrip("/")

    def find() -> list[tuple[str, int]]:
        found = fs.find(base, detail=True)
        files = [
            (name[len(base) :].lstrip("/"), int(info.get("size") or 0))
            for name, info in found.items()
            if info.get("type") == "file" and name.startswith(base + "/")
        ]
        return sorted(files)

    return retrying("list", location.url, find, policy)


def read_bytes(url: str | Path, policy: RetryPolicy | None = None) -> bytes:
    """The whole content of a file or blob.

    Raises:
        StorageNotFoundError: No such file or blob.
        StorageError: Any other failure, after bounded retries of transient ones.
    """
    location = parse(url)
    if location.is_local:
        path = _local(location)
        return retrying("read", location.url, path.read_bytes, policy)
    fs, path = filesystem_of(location, policy)
    return retrying("read", location.url, lambda: bytes(fs.cat_file(path)), policy)


def write_bytes(url: str | Path, data: bytes, policy: RetryPolicy | None = None) -> None:
    """Writes ``data`` so that readers see the old content or the new, never a part.

    Local: temporary file in the same folder, fsync, ``os.replace`` (parent folders are
    created). Blob: one block-blob upload, committed by Azure only when complete.

    Raises:
        StorageError: The write failed (the previous content, if any, is intact).
    """
    location = parse(url)
    if location.is_local:
        path = _local(location)
        retrying("write", location.url, lambda: atomic_write_bytes(path, data), policy)
        return
    fs, path = filesystem_of(location, policy)
    retrying("write", location.url, lambda: fs.pipe_file(path, data, overwrite=True), policy)


def write_set(
    folder: str | Path, files: Mapping[str, bytes], policy: RetryPolicy | None = None
) -> None:
    """Writes files that belong together into a folder.

    Local: all or none (:func:`~landcover.fileio.atomic_write_set`: a full disk leaves the
    earlier set whole). Blob: one upload each, each whole; Azure has no multi-blob commit.

    Args:
        folder: Destination folder path or URL.
        files: File names and their contents.
        policy: Retry settings for blob URLs.

    Raises:
        StorageError: A blob write failed.
        OutputError: A local folder is read-only, not writable or full.
    """
    location = parse(folder)
    if location.is_local:
        path = _local(location)
        retrying("write", location.url, lambda: atomic_write_set(path, files), policy)
        return
    for name, data in files.items():
        write_bytes(join(folder, name), data, policy)


def write_text(url: str | Path, text: str, policy: RetryPolicy | None = None) -> None:
    """Writes a text record like :func:`write_bytes`, with every credential redacted.

    Args:
        url: Destination path or URL.
        text: The content (written as UTF-8).
        policy: Retry settings for blob URLs.

    Raises:
        StorageError: The write failed (the previous content, if any, is intact).
    """
    write_bytes(url, redact(text).encode(), policy)


def remove(url: str | Path, missing_ok: bool = True, policy: RetryPolicy | None = None) -> None:
    """Deletes a file or blob.

    Raises:
        StorageNotFoundError: It does not exist and ``missing_ok`` is false.
    """
    location = parse(url)
    if location.is_local:
        path = _local(location)

        def unlink() -> None:
            path.unlink(missing_ok=missing_ok)

        retrying("delete", location.url, unlink, policy)
        return
    fs, path = filesystem_of(location, policy)

    def rm() -> None:
        try:
            fs.rm_file(path)
        except FileNotFoundError:
            if not missing_ok:
                raise

    retrying("delete", location.url, rm, policy)
