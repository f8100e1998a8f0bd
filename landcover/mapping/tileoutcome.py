"""What a predict worker makes of one tile: its maps found complete, predicted, or a failure.

Each ends as a :class:`~landcover.mapping.records.TileRecord`: :func:`complete_maps` finds a
previous run's maps that fit (and their class counts), :func:`settle_maps` takes a
predicted tile's, :func:`tile_record` and :func:`failed_record` make the record and its log
line.
"""

from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass

import rasterio

from landcover.errors import LandcoverError, first_line
from landcover.inference.loader import InferenceModel
from landcover.inference.options import PredictOptions
from landcover.inference.results import ClassCounts, Grid, TileResult
from landcover.mapping.outputs import (
    Fingerprint,
    acquisition,
    count_classes,
    incomplete_reason,
    output_paths,
    read_grid,
    read_stats,
    tile_outputs,
    write_stats,
)
from landcover.mapping.records import TileOutputs, TileRecord
from landcover.mapping.spec import JobOptions
from landcover.mapping.tiles import TileEntry

log = logging.getLogger("landcover")


@dataclass
class WorkerContext:
    """What every tile of a worker needs.

    Attributes:
        im: The loaded model.
        options: The job's predict options.
        fingerprint: The job's fingerprint (a previous run's maps must carry it).
        job: The job's options (overwrite, fail fast).
        rank: The worker's rank.
        total: The job's tiles.
    """

    im: InferenceModel
    options: PredictOptions
    fingerprint: Fingerprint
    job: JobOptions
    rank: int
    total: int


def _pixel_area(tile: str, grid: Grid) -> float | None:
    try:
        return grid.pixel_area_m2()
    except ValueError as exc:
        log.warning("%s: hectares are left out: %s", tile, exc)
        return None


MapsFound = tuple[Grid, ClassCounts, TileOutputs]
"""A tile's maps: their grid, class counts and paths."""


def complete_maps(entry: TileEntry, ctx: WorkerContext) -> MapsFound | None:
    """The maps of a tile whose outputs are complete, or ``None`` (predict it).

    Args:
        entry: The tile.
        ctx: The worker's context.

    Returns:
        The maps' grid, class counts and paths (counted again, and their stats file written,
        when the stats file is missing or stale), or ``None``.
    """
    outputs = output_paths(entry.path, ctx.options)
    try:
        grid = read_grid(entry.path)
    except Exception:  # an unreadable input: predicting it reports why
        return None
    num_classes = ctx.im.mapping.num_classes
    check = ctx.fingerprint.check(grid, num_classes, ctx.options.prob_dtype)
    digest = ctx.fingerprint.digest
    reason = incomplete_reason(outputs, check, ctx.options.writers)
    stored = None if reason is not None else read_stats(outputs.stats, digest, grid, num_classes)
    made = stored.input_version if stored is not None else None
    if made is not None and entry.version is not None and made != entry.version:
        reason = "its input changed since its maps were made"
    if reason is not None:
        if not reason.endswith(": missing"):
            log.info("%s: predicting it again (%s)", entry.path, reason)
        return None
    assert stored is not None  # read when the maps were complete
    counts = stored.counts
    if counts is None:
        counts = count_classes(outputs.class_map, num_classes)
        write_stats(outputs.stats, entry.path, digest, grid, counts, entry.version)
    log.info("%s: skipped, its outputs are complete", entry.path)
    return grid, counts, outputs


def settle_maps(result: TileResult, entry: TileEntry, ctx: WorkerContext) -> MapsFound:
    """A predicted tile's grid, counts and files (its map writers'); writes its stats file.

    Args:
        result: The predicted tile.
        entry: The tile.
        ctx: The worker's context.

    Returns:
        The maps' grid, class counts and paths.
    """
    stats = output_paths(entry.path, ctx.options).stats
    outputs = tile_outputs(list(result.files), stats)
    digest = ctx.fingerprint.digest
    write_stats(outputs.stats, entry.path, digest, result.grid, result.counts, entry.version)
    return result.grid, result.counts, outputs


def error_line(exc: Exception, tile: str) -> str:
    """A tile's failure in one line, naming the tile.

    Args:
        exc: The failure (a bug's traceback is printed: it is not bad input).
        tile: The tile.

    Returns:
        The line.
    """
    if isinstance(exc, rasterio.errors.RasterioError):
        cause = exc.__cause__ or exc  # rasterio's "Read failed" names GDAL's error as cause
        message = f"not a readable GeoTIFF ({first_line(cause)})"
    elif isinstance(exc, LandcoverError | OSError):
        message = first_line(exc)
    else:  # a bug rather than bad input: keep its traceback
        traceback.print_exc()
        message = first_line(exc, 300, typed=True)
    return message if tile in message else f"{tile}: {message}"


def failed_record(
    entry: TileEntry, index: int, ctx: WorkerContext, exc: Exception, start: float
) -> TileRecord:
    """A ``failed`` record and its one log line.

    Args:
        entry: The tile.
        index: Its place in the job.
        ctx: The worker's context.
        exc: The failure.
        start: When the tile's work started (``time.perf_counter``).

    Returns:
        The record.
    """
    message = error_line(exc, entry.path)
    log.error("tile %d of %d failed: %s", index + 1, ctx.total, message)
    return TileRecord(
        entry.path, index, "failed", ctx.rank, time.perf_counter() - start, error=message
    )


def tile_record(
    entry: TileEntry, index: int, ctx: WorkerContext, status: str, found: MapsFound, start: float
) -> TileRecord:
    """The record of a tile whose maps exist (skipped or predicted).

    Args:
        entry: The tile.
        index: Its place in the job.
        ctx: The worker's context.
        status: ``skipped`` or ``predicted``.
        found: Its maps' grid, class counts and paths.
        start: When the tile's work started (``time.perf_counter``).

    Returns:
        The record (a tile with no valid pixel is warned about).
    """
    grid, counts, outputs = found
    if counts.valid == 0:
        log.warning(
            "%s: every pixel is no-data: its maps hold no class and it adds nothing to the totals",
            entry.path,
        )
    return TileRecord(
        entry.path,
        index,
        status,
        ctx.rank,
        time.perf_counter() - start,
        grid=grid,
        counts=counts,
        pixel_area_m2=_pixel_area(entry.path, grid),
        outputs=outputs,
        acquired=entry.acquired or acquisition(entry.path),  # a STAC item's date first
    )
