"""Publishing a predicted tile: its maps under their final names, uploaded, and its record.

The map writers' scratch files of a tile (:class:`TileMaps`) become the published files
(COGs, a preview, the other writers' files), in a remote ``--out`` uploaded in order (a
sidecar before its map); :func:`publish_tile` returns the tile's
:class:`~landcover.inference.results.TileResult`. The
:class:`~landcover.inference.predict.TileMapper` runs it in its publisher thread while the next
tile is predicted.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from pathlib import Path

from landcover import storage
from landcover.errors import DataError
from landcover.inference.cogsink import CLASS, PREVIEW, PROBABILITIES, CogSink
from landcover.inference.mapwriters import TileSinks
from landcover.inference.results import ClassCounts, Grid, TileResult
from landcover.inference.writers import CLASS_NODATA

log = logging.getLogger("landcover")


@dataclass
class TileMaps:
    """A tile's maps in scratch files, waiting to be published.

    Attributes:
        tile: The tile (path or URL).
        writer: Its map writers.
        grid: The tile's grid.
        writes: The writes of its last strips still under way in the writer thread.
    """

    tile: str
    writer: TileSinks
    grid: Grid
    writes: list[Future]


def publish_tile(
    maps: TileMaps, work: ExitStack, start: float, num_classes: int, out: str
) -> TileResult:
    """Publishes a tile's maps (COGs, a preview, the other writers' files), uploads them.

    Args:
        maps: The tile's maps in scratch files.
        work: Closes the tile's scratch folder (and its local copy) when the maps are out.
        start: When the tile's prediction started (``time.perf_counter``).
        num_classes: The model's classes (the histogram's first entries).
        out: The output folder: a path or a blob URL.

    Returns:
        The tile's record.

    Raises:
        DataError: If a write or the publishing failed (the writers are closed).
    """
    with work:
        try:  # the tile's last strips, written while the next tile was predicted
            for write in maps.writes:
                write.result()
        except BaseException:
            with suppress(DataError):  # the first error is the one to report
                maps.writer.close()
            raise
        files = maps.writer.publish()
        counts = ClassCounts(
            [int(n) for n in maps.writer.histogram[:num_classes]],
            int(maps.writer.histogram[CLASS_NODATA]),
        )
        if storage.is_remote(out):  # in order: a sidecar before its map
            files = [f.moved(_upload(f.path, out)) for f in files]
    paths = {f.key: f.path for f in files if f.writer == CogSink.name}
    result = TileResult(
        maps.tile,
        paths[CLASS],
        paths.get(PROBABILITIES),
        paths.get(PREVIEW),
        maps.grid,
        counts,
        time.perf_counter() - start,
        tuple(files),
    )
    log.info(
        "%s -> %s (%.1f Mpx in %.1f s, %.2f Mpx/s)",
        maps.tile,
        result.class_map,
        result.width * result.height / 1e6,
        result.seconds,
        result.mpx_per_s,
    )
    return result


def _upload(local: str, out: str) -> str:
    """Uploads a published map to the remote output folder; returns its URL."""
    url = storage.join(out, Path(local).name)
    storage.upload_file(local, url)
    return url
