"""Loading a worker's share of tile pairs into memory once, with timing for the log."""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from landcover.classes import ClassMapping
from landcover.data.pairs import TilePair
from landcover.data.raster import TileArrays, read_pair

log = logging.getLogger(__name__)


@dataclass
class LoadReport:
    """What a worker loaded.

    Attributes:
        tiles: Names of the tiles held.
        nbytes: Bytes held in memory.
        seconds: Wall time of the load.
    """

    tiles: list[str]
    nbytes: int
    seconds: float

    @property
    def megabytes(self) -> float:
        """Memory held, in MB (10^6 bytes)."""
        return self.nbytes / 1e6


def load_tiles(
    pairs: list[TilePair], mapping: ClassMapping, bands: int, threads: int = 4
) -> tuple[list[TileArrays], LoadReport]:
    """Reads tile pairs into memory, several files at a time.

    Args:
        pairs: The pairs to load.
        mapping: The class mapping for the labels.
        bands: Expected number of image bands.
        threads: Files read concurrently (GDAL releases the GIL while decoding).

    Returns:
        The tiles, in the order given, and a report of what was loaded.

    Raises:
        DataError: If any pair cannot be read (see :func:`read_pair`).
    """
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(pairs)))) as pool:
        tiles = list(pool.map(lambda p: read_pair(p, mapping, bands), pairs))
    report = LoadReport(
        tiles=[t.name for t in tiles],
        nbytes=sum(t.nbytes for t in tiles),
        seconds=time.perf_counter() - start,
    )
    return tiles, report
