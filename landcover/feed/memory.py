"""Loading a worker's share of tile pairs into memory once, with timing for the log.

The files are fetched in parallel (from local disk, an NFS mount or blob storage, optionally
through a local cache folder) and then decoded from memory, several at a time; an image's
external mask file (``tile.tif.msk``), where it has one, is read with it.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from landcover import storage
from landcover.classes import ClassMapping
from landcover.data.maskfile import read_mask_file
from landcover.data.pairs import TilePair
from landcover.data.raster import TileArrays, read_pair

log = logging.getLogger("landcover")


@dataclass
class LoadReport:
    """What a worker loaded.

    Attributes:
        tiles: Names of the tiles held.
        nbytes: Bytes held in memory (decoded arrays).
        file_bytes: Bytes of the files fetched (what crossed the network for blob data).
        fetch_seconds: Wall time of the fetch.
        seconds: Wall time of the whole load (fetch and decode).
    """

    tiles: list[str]
    nbytes: int
    file_bytes: int
    fetch_seconds: float
    seconds: float

    @property
    def megabytes(self) -> float:
        """Memory held, in MB (10^6 bytes)."""
        return self.nbytes / 1e6

    @property
    def fetch_mb_per_s(self) -> float:
        """Fetch rate in MB/s."""
        return self.file_bytes / 1e6 / max(self.fetch_seconds, 1e-9)


def load_tiles(
    pairs: list[TilePair],
    mapping: ClassMapping,
    bands: int,
    concurrency: int = 8,
    cache_dir: str | None = None,
    resolution: float | None = None,
) -> tuple[list[TileArrays], LoadReport]:
    """Fetches tile pairs and decodes them into memory.

    Args:
        pairs: The pairs to load.
        mapping: The class mapping for the labels.
        bands: Expected number of image bands.
        concurrency: Files fetched (and tiles decoded) at once.
        cache_dir: Optional local cache folder for remote files (a second run reads from it).
        resolution: Pixel size in metres every tile is resampled to on load (imagery
            bilinear, labels nearest); ``None`` keeps each tile's own.

    Returns:
        The tiles, in the order given, and a report of what was loaded.

    Raises:
        DataError: If any pair cannot be read (see :func:`read_pair`).
        StorageError: If fetching a file fails after bounded retries.
    """
    start = time.perf_counter()
    urls = [u for p in pairs for u in (p.image, p.label)]
    fetched = storage.fetch_many(urls, max_concurrency=concurrency, cache_dir=cache_dir)
    blobs = fetched.data

    def decode(i: int) -> TileArrays:
        # the image's external mask file, where it has one, read as the image is
        mask = read_mask_file(pairs[i].image, cache_dir)
        return read_pair(pairs[i], mapping, bands, blobs[2 * i], blobs[2 * i + 1], resolution, mask)

    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(pairs)))) as pool:
        tiles = list(pool.map(decode, range(len(pairs))))
    report = LoadReport(
        tiles=[t.name for t in tiles],
        nbytes=sum(t.nbytes for t in tiles),
        file_bytes=fetched.nbytes,
        fetch_seconds=fetched.seconds,
        seconds=time.perf_counter() - start,
    )
    return tiles, report


def training_pixel_size(tiles: list[TileArrays], resolution: float | None) -> float | None:
    """The pixel size a model is trained at, in metres, as its checkpoints record it.

    Args:
        tiles: The training tiles held (after any resampling on load).
        resolution: ``data.resolution``: when set, the tiles were resampled to it.

    Returns:
        ``resolution`` when set; else the most common pixel size of the tiles (rounded to the
        centimetre); ``None`` when no tile's size is known in metres.
    """
    if resolution is not None:
        return float(resolution)
    sizes = Counter(round(t.pixel_size_m, 2) for t in tiles if t.pixel_size_m is not None)
    if not sizes:
        return None
    if len(sizes) > 1:
        found = ", ".join(f"{s:g} m ({n})" for s, n in sorted(sizes.items()))
        log.warning(
            "training tiles have several pixel sizes (%s): the model records the most common; "
            "set data.resolution to resample them all to one",
            found,
        )
    return float(sizes.most_common(1)[0][0])
