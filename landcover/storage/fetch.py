"""Reading many objects into memory at once, in parallel, optionally through the disk cache.

Above :mod:`~landcover.storage.io` (single reads) and :mod:`~landcover.storage.cache` (the
local copies), so the three form a chain rather than a cycle.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from landcover.storage.cache import cached_read
from landcover.storage.errors import StorageError
from landcover.storage.io import read_bytes
from landcover.storage.retry import RetryPolicy


@dataclass(frozen=True)
class Fetched:
    """Objects read into memory, with the time it took.

    Attributes:
        data: The contents, in the order of the URLs.
        seconds: Wall time of the whole fetch.
    """

    data: list[bytes]
    seconds: float

    @property
    def nbytes(self) -> int:
        """Total bytes."""
        return sum(len(d) for d in self.data)

    @property
    def mb_per_s(self) -> float:
        """Throughput in MB (10^6 bytes) per second."""
        return self.nbytes / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        """One line for a log: objects, MB, seconds, MB/s."""
        return (
            f"{len(self.data)} objects, {self.nbytes / 1e6:.1f} MB in {self.seconds:.2f} s "
            f"({self.mb_per_s:.1f} MB/s)"
        )


def read_many(
    urls: Sequence[str | Path],
    max_concurrency: int = 8,
    cache_dir: str | Path | None = None,
    policy: RetryPolicy | None = None,
) -> list[bytes]:
    """Reads many objects in parallel (threads; each read retried on its own).

    Args:
        urls: Paths or URLs.
        max_concurrency: Reads in flight at once.
        cache_dir: If given, a local cache folder (see :func:`cached_read`).
        policy: Retry settings.

    Returns:
        The contents, in the order of ``urls``.

    Raises:
        StorageError: The first read that failed.
    """
    return fetch_many(urls, max_concurrency, cache_dir, policy).data


def fetch_many(
    urls: Sequence[str | Path],
    max_concurrency: int = 8,
    cache_dir: str | Path | None = None,
    policy: RetryPolicy | None = None,
) -> Fetched:
    """Like :func:`read_many`, also timing it (for "N MB in S s (R MB/s)" log lines)."""
    if max_concurrency < 1:
        raise StorageError(f"max_concurrency must be >= 1, not {max_concurrency}")
    start = time.perf_counter()
    if not urls:
        return Fetched([], 0.0)

    def one(url: str | Path) -> bytes:
        if cache_dir is not None:
            return cached_read(url, cache_dir, policy=policy)
        return read_bytes(url, policy)

    workers = min(max_concurrency, len(urls))
    if workers == 1:
        data = [one(u) for u in urls]
    else:
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="storage-read")
        try:
            data = list(pool.map(one, urls))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    return Fetched(data, time.perf_counter() - start)
