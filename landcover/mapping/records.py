"""What a predict job knows about each tile: its outcome, its grid, its class counts, its outputs.

Workers make one :class:`TileRecord` per tile; the job's outputs (summary, mosaic, STAC items)
are all written from these records by rank 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from landcover.inference.results import ClassCounts, Grid, MapFile
from landcover.mapping.acquired import Acquired

Status = Literal["done", "skipped", "failed", "not_run"]
"""``done``: predicted by this job; ``skipped``: its outputs were already complete;
``failed``: an error (in ``error``); ``not_run``: the job stopped first (``--fail-fast``)."""


@dataclass
class TileOutputs:
    """Where a tile's outputs are: paths or URLs.

    The first three are the ``cog`` writer's (the mosaics and the summary read them);
    ``files`` holds every map writer's files, those three among them.

    Attributes:
        class_map: ``{stem}_class.tif``.
        prob_map: ``{stem}_prob.tif`` (``None`` with ``--no-probs``).
        preview: ``{stem}_preview.png`` (``None`` with ``--no-preview``).
        stats: ``{stem}_stats.json``.
        files: What the map writers wrote (a predicted tile) or what a complete tile has (a
            skipped one), writer by writer (:mod:`landcover.inference.sinks`).
    """

    class_map: str
    prob_map: str | None
    preview: str | None
    stats: str
    files: tuple[MapFile, ...] = ()


@dataclass
class TileRecord:
    """One tile's outcome in a predict job.

    Attributes:
        tile: The input image (path or URL).
        index: Its position in the job's largest-first order.
        status: ``done``, ``skipped``, ``failed`` or ``not_run``.
        rank: The worker that handled it (``None`` if none did).
        seconds: Time spent on it by that worker.
        error: The one-line error of a failed tile.
        grid: The tile's grid (when it could be read).
        counts: Pixels per class of its class map (done and skipped tiles).
        pixel_area_m2: Area of one pixel (``None`` for geographic or missing CRSs).
        outputs: Its outputs (done and skipped tiles).
        acquired: When its imagery was acquired (done and skipped tiles; ``None``: unknown).
    """

    tile: str
    index: int
    status: Status
    rank: int | None = None
    seconds: float = 0.0
    error: str | None = None
    grid: Grid | None = None
    counts: ClassCounts | None = None
    pixel_area_m2: float | None = None
    outputs: TileOutputs | None = None
    acquired: Acquired | None = None

    @property
    def mpx(self) -> float:
        """Megapixels of the tile (0 when its grid is unknown)."""
        return self.grid.width * self.grid.height / 1e6 if self.grid else 0.0

    @property
    def has_maps(self) -> bool:
        """Whether the tile's maps exist (done or skipped)."""
        return self.status in ("done", "skipped") and self.outputs is not None

    def hectares(self) -> list[float] | None:
        """Area per class in hectares, or ``None`` when the pixel area is unknown."""
        if self.counts is None or self.pixel_area_m2 is None:
            return None
        return [n * self.pixel_area_m2 / 1e4 for n in self.counts.pixels]

    def fractions(self) -> list[float] | None:
        """Share of each class among the tile's valid pixels."""
        if self.counts is None:
            return None
        valid = self.counts.valid
        return [n / valid if valid else 0.0 for n in self.counts.pixels]

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-safe data."""
        return asdict(self)
