"""``--resolution`` of predict and evaluate: at which pixel size the model sees each tile.

``train`` (the default) resamples each tile to the pixel size the checkpoint was trained at,
``native`` predicts every tile as it is, and a number of metres resamples to that. A tile is
resampled as it is read (bilinear, window by window through a
:class:`~rasterio.vrt.WarpedVRT`), predicted on that grid, and its maps are brought back
onto the tile's own grid (:func:`maps_onto_grid`): the class map by nearest neighbour, the
probabilities bilinear. So the outputs always lie on exactly the input's grid.

Checkpoints written before the training pixel size was recorded treat ``train`` as
``native`` (said once). A resolution that would enlarge a tile more than 8x, or shrink it more
than 8x to fewer pixels than one training patch, is refused naming the tile and the factor
(:func:`~landcover.data.resolution.silly_resampling`); a predict job checks every local tile
before it starts.
"""

from __future__ import annotations

import logging
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
from rasterio.enums import Resampling
from rasterio.windows import Window

from landcover.data.resolution import (
    NATIVE,
    TRAIN,
    far_off,
    parse_resolution,
    pixel_size_m,
    resampled_grid,
    silly_resampling,
)
from landcover.errors import DataError

log = logging.getLogger("landcover")

BACK_ROWS = 256
"""Rows per strip when maps are brought back onto the tile's grid."""


@dataclass(frozen=True)
class Resolution:
    """A resolved ``--resolution``.

    Attributes:
        choice: As given: ``train``, ``native`` or metres.
        metres: The pixel size tiles are predicted at; ``None`` for each tile's own.
        train_m: The checkpoint's training pixel size; ``None`` when it does not record it.
    """

    choice: str | float
    metres: float | None
    train_m: float | None

    @property
    def fingerprint(self) -> str | float:
        """What changes the maps' pixels: the metres, or ``native``."""
        return NATIVE if self.metres is None else round(self.metres, 6)

    def describe(self) -> str:
        """A few words for logs."""
        if self.metres is None:
            return "each tile's native pixel size"
        origin = ", the training pixel size" if self.choice == TRAIN else ""
        return f"{self.metres:g} m pixels{origin}"


def resolve_resolution(
    choice: str | float, train_m: float | None, checkpoint: str, quiet: bool = False
) -> Resolution:
    """Resolves ``--resolution`` against a checkpoint's training pixel size.

    Args:
        choice: ``train``, ``native``, metres, or their text.
        train_m: The checkpoint's training pixel size (``None``: not recorded).
        checkpoint: The checkpoint, for the message.
        quiet: Do not log (a second resolution of the same choice).

    Returns:
        The resolution.

    Raises:
        DataError: If ``choice`` is text that is not a resolution.
    """
    if isinstance(choice, str):
        try:
            choice = parse_resolution(choice)
        except ValueError as exc:
            raise DataError(f"--resolution: {exc}") from None
    if choice == NATIVE:
        return Resolution(choice, None, train_m)
    if choice == TRAIN:
        if train_m is None and not quiet:
            log.warning(
                "%s records no training pixel size (written by an older landcover): "
                "predicting each tile at its native pixel size; pass --resolution METRES "
                "to resample",
                checkpoint,
            )
        return Resolution(choice, train_m, train_m)
    return Resolution(choice, float(choice), train_m)


def checked_grid(src: Any, tile: str, resolution: Resolution, patch: int | None = None) -> Any:
    """The grid a tile is predicted on, refusing a resolution that makes no sense for it.

    Args:
        src: The open tile.
        tile: Its path, for messages.
        resolution: The resolved ``--resolution``.
        patch: The model's training patch size (``None``: only enlargements are checked).

    Returns:
        ``(transform, width, height)``, or ``None`` to predict on the tile's own grid.

    Raises:
        DataError: If a pixel size in metres is asked for but the tile's CRS gives none, or
            the resampling would enlarge or shrink the tile absurdly.
    """
    if pixel_size_m(src) is None:
        if resolution.metres is not None and resolution.choice != TRAIN:
            raise DataError(
                f"{tile}: --resolution {resolution.choice:g} needs pixel sizes in metres, but "
                f"the tile's CRS ({src.crs}) gives none; use --resolution native"
            )
        return None
    grid = resampled_grid(src, resolution.metres)
    if grid is None:
        return None
    problem = silly_resampling(src, grid, patch if patch is not None else 0)
    if problem:
        raise DataError(
            f"{tile}: --resolution {_choice_text(resolution)} refused: predicting its "
            f"{src.width} x {src.height} px ({pixel_size_m(src):.3g} m pixels) at "
            f"{grid[1]} x {grid[2]} px, {problem}; use --resolution native or a pixel size "
            "nearer the tile's"
        )
    return grid


def _choice_text(resolution: Resolution) -> str:
    if resolution.choice == TRAIN:
        return f"train ({resolution.metres:g} m)"
    return f"{resolution.choice:g}" if isinstance(resolution.choice, float) else resolution.choice


def working_grid(src: Any, tile: str, resolution: Resolution, patch: int | None = None) -> Any:
    """The grid a tile is predicted on, with a warning when the tile is far off the training size.

    Args:
        src: The open tile.
        tile: Its path, for messages.
        resolution: The resolved ``--resolution``.
        patch: The model's training patch size (see :func:`checked_grid`).

    Returns:
        ``(transform, width, height)``, or ``None`` to predict on the tile's own grid.

    Raises:
        DataError: If a pixel size in metres is asked for but the tile's CRS gives no metres,
            or the resolution is refused for this tile (see :func:`checked_grid`).
    """
    grid = checked_grid(src, tile, resolution, patch)
    size = pixel_size_m(src)
    if size is None:
        if resolution.metres is not None:
            log.warning(
                "%s: CRS %s gives no pixel size in metres: predicted at its native grid",
                tile,
                src.crs,
            )
        return None
    if resolution.train_m is not None and far_off(size, resolution.train_m):
        log.warning(
            "%s: %.3g m pixels, more than %gx off the %.3g m the model was trained at "
            "(predicted at %s)",
            tile,
            size,
            2.0,
            resolution.train_m,
            resolution.describe(),
        )
    return grid


def maps_onto_grid(
    class_path: Path, prob_path: Path | None, src: Any, write: Any, rows: int = BACK_ROWS
) -> None:
    """Brings maps made on a working grid back onto a tile's own grid, strip by strip.

    Args:
        class_path: The class map on the working grid (no-data 255).
        prob_path: The probability map on the working grid (one band per class, masked);
            ``None`` without one.
        src: The open tile, whose grid (CRS, transform, size) the maps are wanted on; its
            mask marks the pixels without data.
        write: Called with each :class:`~landcover.inference.encode.EncodedStrip` in order.
        rows: Rows per strip (memory: ``rows x width x classes``).
    """
    from landcover.data.raster import nodata_mask
    from landcover.data.resolution import on_grid
    from landcover.inference.encode import EncodedStrip

    grid = (src.transform, src.width, src.height)
    with ExitStack() as stack:
        cls = stack.enter_context(rasterio.open(class_path))
        cls_back = stack.enter_context(on_grid(cls, grid, Resampling.nearest))
        prob_back = None
        if prob_path is not None:
            prob = stack.enter_context(rasterio.open(prob_path))
            prob_back = stack.enter_context(on_grid(prob, grid, Resampling.bilinear))
        for row in range(0, src.height, rows):
            window = Window(0, row, src.width, min(rows, src.height - row))
            classes = cls_back.read(1, window=window)
            probs = None if prob_back is None else prob_back.read(window=window)
            valid = ~nodata_mask(src, window)
            write(EncodedStrip(row, np.ascontiguousarray(classes), probs, valid))
