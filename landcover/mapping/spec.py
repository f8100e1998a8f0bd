"""What a predict job is: its options, its measured tiles, and how it ended.

The launcher (:mod:`.job`) and every worker (:mod:`.worker`) share these records; a
:class:`JobSpec` is pickled to spawned workers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from landcover.aoi import AreaOfInterest
from landcover.errors import DataError, LandcoverError
from landcover.inference.options import PredictOptions
from landcover.mapping.acquired import Acquired
from landcover.mapping.aoitiles import tiles_in_area
from landcover.mapping.tiles import TileEntry, measure_tiles, resolve_tiles
from landcover.storage.signing import Signing


class TilesFailedError(LandcoverError):
    """Some tiles of a predict job failed (the others were mapped)."""


@dataclass(frozen=True)
class JobOptions:
    """How a predict job runs, beside the per-tile :class:`PredictOptions`.

    Attributes:
        overwrite: Predict every tile, even those whose outputs are complete.
        fail_fast: Stop at the first failed tile.
        timeout_s: Longest wait for the other workers (the job's start and end).
        aoi: The area of interest (``--aoi``): only the tiles that meet it are mapped, and
            the job counts its classes inside it (:mod:`.aoiarea`).
        signing: ``--sign``: the blobs read with tokens from the Planetary Computer (every
            worker sets it up in its own process; no token travels with it).
        acquired: When the imagery of each tile a catalogue search found (``--stac``) was
            acquired, by tile: its STAC item's date, which the file need not carry.
    """

    overwrite: bool = False
    fail_fast: bool = False
    timeout_s: float = 3600.0
    aoi: AreaOfInterest | None = None
    signing: Signing | None = None
    acquired: dict[str, Acquired] = field(default_factory=dict)


@dataclass
class JobSpec:
    """Everything a worker needs (pickled to spawned workers).

    Attributes:
        inputs: The ``landcover predict`` arguments (files, globs, folders, lists).
        checkpoint: The checkpoint.
        options: Per-tile settings and the output folder.
        job: Job settings.
        device: ``auto``, ``cpu`` or ``cuda``.
        entries: The measured tiles, when the launcher measured them already.
    """

    inputs: list[str]
    checkpoint: str
    options: PredictOptions
    job: JobOptions
    device: str = "auto"
    entries: list[TileEntry] | None = None


@dataclass(frozen=True)
class JobOutcome:
    """How a job ended.

    Attributes:
        total: Tiles in the job.
        done: Tiles predicted.
        skipped: Tiles whose outputs were already complete.
        failed: Tiles that failed.
        not_run: Tiles not started (the job stopped first).
        first_error: The first failed tile's error.
        summary: The summary file.
        error: A problem of the job itself (writing its outputs), if any.
    """

    total: int
    done: int
    skipped: int
    failed: int
    not_run: int
    first_error: str | None = None
    summary: str | None = None
    error: str | None = None

    def raise_if_failed(self, fail_fast: bool = False) -> None:
        """Raises the job's one-line error, if anything failed.

        Args:
            fail_fast: Whether the job ran with ``--fail-fast``.

        Raises:
            LandcoverError: The job could not write its outputs.
            TilesFailedError: A tile failed.
        """
        if self.error:
            raise LandcoverError(self.error)
        if not self.failed:
            return
        where = f"; see {self.summary}" if self.summary else ""
        if fail_fast and self.not_run:
            raise TilesFailedError(
                f"stopped at the first failed tile (--fail-fast), {self.not_run} of "
                f"{self.total} tiles not run: {self.first_error}{where}"
            )
        raise TilesFailedError(
            f"{self.failed} of {self.total} tiles failed (first: {self.first_error}){where}"
        )


def measured_tiles(
    inputs: list[str],
    checkpoint: str,
    resolution: str | float = "native",
    geometry: tuple[int | None, int | None] = (None, None),
    area: AreaOfInterest | None = None,
    acquired: dict[str, Acquired] | None = None,
) -> list[TileEntry]:
    """Resolves and measures a job's tiles, largest first.

    Args:
        inputs: The ``landcover predict`` arguments.
        checkpoint: The checkpoint (its bands, image suffix, patch and pixel size).
        resolution: ``--resolution``: a local tile it would resample absurdly is refused
            here, before any work (see :mod:`landcover.inference.resolution`).
        geometry: ``--window`` and ``--overlap``, checked against the checkpoint's patch
            here, before any folder is made.
        area: ``--aoi``: the tiles that do not meet it are left out (:mod:`.aoitiles`).
        acquired: The search's dates of its tiles (:attr:`JobOptions.acquired`).

    Returns:
        The tiles; those that cannot be predicted carry their error.

    Raises:
        CheckpointError: If the checkpoint cannot be loaded.
        DataError: If the inputs name no tiles, no tile meets the area, or no tile can be
            predicted.
        ConfigError: If the window or overlap does not fit the model.
    """
    from landcover.inference.resolution import checked_grid, resolve_resolution
    from landcover.inference.runner import model_settings
    from landcover.inference.sliding import resolve_geometry

    settings = model_settings(checkpoint)  # a checkpoint's, or an exported model's
    data = settings.config.data
    resolve_geometry(data.patch_size, *geometry)
    resolved = resolve_resolution(resolution, settings.pixel_size_m, checkpoint, True)

    def check(src: Any, tile: str) -> None:
        checked_grid(src, tile, resolved, data.patch_size)

    tiles = resolve_tiles(inputs, data.image_suffix)
    if area is not None:
        tiles = tiles_in_area(tiles, area)
    entries = measure_tiles(tiles, len(data.bands), check=check, acquired=acquired)
    errors = [e.error for e in entries if e.error]
    if len(errors) == len(entries):
        if len(errors) == 1:
            raise DataError(errors[0])
        raise DataError(f"none of the {len(entries)} tiles can be predicted; first: {errors[0]}")
    return entries
