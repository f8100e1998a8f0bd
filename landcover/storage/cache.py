"""A local disk cache of remote objects, so a second run reads tiles from local disk.

Like blobfuse's file cache: each object is stored under the cache folder as
``{sha256(url)[:32]}-{size}-{sha256(version)[:16]}.bin``, where the version is the blob's
ETag. The name changes when the object changes, so a stale copy is never taken for the new
one; entries are written atomically (temporary name + rename), so concurrent workers or runs
can share a folder. Local paths and NFS mounts are read directly, not cached.

Why not fsspec's ``filecache::`` (``WholeFileCacheFileSystem`` with ``check_files``): it
downloads in place, under one name per path, and each process trusts its own snapshot of the
metadata file for ``cache_check`` seconds; so processes sharing a folder tear each other's
copies (two readers of one tile at once), and a reader killed while refreshing a copy leaves
a partial file that the metadata, whose ETag still matches, serves to every later reader.
``tests/storage/test_storage.py`` shows the second; ``benchmarks/storage_bench.py`` counts the torn
reads of the first (and times both caches).
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from landcover.fileio import atomic_write_bytes
from landcover.storage.files import IncompleteTransferError
from landcover.storage.filesystems import filesystem_of
from landcover.storage.io import read_bytes
from landcover.storage.retry import RetryPolicy, retrying
from landcover.storage.urls import parse

log = logging.getLogger("landcover")


def _digest(text: str, length: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _entries(cache: Path, key: str) -> list[Path]:
    """Cached copies of one URL, newest first."""
    found = []
    for path in cache.glob(f"{key}-*.bin"):
        try:
            found.append((path.stat().st_mtime, path))
        except FileNotFoundError:
            continue  # removed by another process meanwhile
    return [p for _, p in sorted(found, reverse=True)]


def _read_entry(path: Path) -> bytes | None:
    """An entry's bytes, or None when it is gone or not the size its name says."""
    try:
        size = int(path.stem.split("-")[1])
        data = path.read_bytes()
    except (OSError, ValueError, IndexError):
        return None
    return data if len(data) == size else None


def cached_read(
    url: str | Path,
    cache_dir: str | Path,
    revalidate: bool = True,
    policy: RetryPolicy | None = None,
) -> bytes:
    """Reads an object through a local cache folder.

    Args:
        url: The object's URL (a local path is just read).
        cache_dir: The cache folder (created if needed).
        revalidate: Ask the server for the object's size and ETag (one HEAD request) and use
            the cached copy only if they match; when false, any cached copy of the URL is used
            without contacting the server (for objects that never change).
        policy: Retry settings.

    Returns:
        The object's bytes.

    Raises:
        StorageError: The object could not be read (and no usable copy was cached).
    """
    location = parse(url)
    if location.is_local:
        return read_bytes(url, policy)
    cache = Path(cache_dir)
    key = _digest(location.url, 32)
    if not revalidate:
        for entry in _entries(cache, key):
            data = _read_entry(entry)
            if data is not None:
                return data
    fs, path = filesystem_of(location, policy)

    def fetch() -> tuple[Path, bytes, bool]:
        info = fs.info(path)
        if info.get("type") != "file":
            raise FileNotFoundError(path)
        size = int(info["size"])
        version = str(info.get("etag") or info.get("mtime") or info.get("created") or "")
        entry = cache / f"{key}-{size}-{_digest(version, 16)}.bin"
        cached = _read_entry(entry) if entry.is_file() else None
        if cached is not None:
            return entry, cached, True
        data = bytes(fs.cat_file(path))
        if len(data) != size:
            raise IncompleteTransferError(f"got {len(data)} of {size} bytes")
        return entry, data, False

    entry, data, hit = retrying("read", location.url, fetch, policy)
    if hit:
        return data
    try:
        atomic_write_bytes(entry, data)
        for old in _entries(cache, key):
            if old != entry:
                old.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("storage: cannot cache %s in %s: %s", location.url, cache, exc.strerror)
    return data
