"""Pixel sizes in metres, and the same ground on a grid of another pixel size.

NAIP has 0.6 m pixels since about 2018, while the Chesapeake labels (and most models trained on
them) are 1 m. A model sees texture and object sizes in pixels, so it should predict at the
pixel size it was trained at. Training records that pixel size in its checkpoints; ``predict``
and ``evaluate`` resample each input to it (``--resolution``), and training can resample its
tiles to one pixel size on load (``data.resolution``).

A resampled grid covers exactly the tile's ground: it keeps the tile's corner, CRS and
orientation, and has ``round(width * pixel_x / metres)`` columns (rows likewise), so its pixels
are within half a pixel over the tile of the size asked for. Pixel sizes within 1 % of the
target are left as they are.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from affine import Affine
from rasterio.enums import Resampling
from rasterio.errors import CRSError
from rasterio.vrt import WarpedVRT

from landcover.data.bandview import alpha_as_data, has_dataset_mask

TOLERANCE = 0.01
"""Relative difference of pixel sizes treated as the same (no resampling)."""

FAR_OFF = 2.0
"""A tile whose pixels are more than this factor off the training pixel size gets a warning."""

MAX_FACTOR = 8.0
"""The most a tile may be enlarged by resampling in either axis, and the most it may be shrunk
when that leaves it smaller than one training patch (see :func:`silly_resampling`)."""

NATIVE = "native"
TRAIN = "train"


def parse_resolution(text: str) -> str | float:
    """Parses a ``--resolution`` value.

    Args:
        text: ``train``, ``native`` or a pixel size in metres (``0.6``, ``1``).

    Returns:
        ``"train"``, ``"native"`` or the pixel size as a float.

    Raises:
        ValueError: If the text is none of these, or the size is not a positive number.
    """
    value = text.strip().lower()
    if value in (TRAIN, NATIVE):
        return value
    try:
        metres = float(value.removesuffix("m"))
    except ValueError:
        raise ValueError(
            f"{text!r} is not train, native or a pixel size in metres (e.g. 1 or 0.6)"
        ) from None
    if not math.isfinite(metres) or metres <= 0:
        raise ValueError(f"{text!r}: a pixel size must be a positive number of metres")
    return metres


def metres_per_unit(crs: Any) -> float | None:
    """How many metres one unit of a CRS is, or ``None`` (no CRS, geographic, no unit).

    Args:
        crs: A rasterio CRS or ``None``.

    Returns:
        The factor, or ``None`` when pixel sizes in metres are unknown.
    """
    if crs is None or crs.is_geographic:
        return None
    try:
        return float(crs.linear_units_factor[1])
    except CRSError:
        return None


def pixel_sides_m(ds: Any) -> tuple[float, float] | None:
    """A raster's pixel width and height in metres.

    Args:
        ds: An open dataset (anything with ``crs`` and ``transform``).

    Returns:
        ``(x, y)`` in metres, or ``None`` when the CRS gives no metres (none, geographic).
    """
    factor = metres_per_unit(ds.crs)
    if factor is None:
        return None
    t = ds.transform
    return math.hypot(t.a, t.d) * factor, math.hypot(t.b, t.e) * factor


def pixel_size_m(ds: Any) -> float | None:
    """A raster's pixel size in metres: the side of a square pixel of the same area.

    Args:
        ds: An open dataset.

    Returns:
        The size, or ``None`` when the CRS gives no metres.
    """
    sides = pixel_sides_m(ds)
    return None if sides is None else math.sqrt(sides[0] * sides[1])


def describe_pixel_size(ds: Any) -> str:
    """A raster's pixel size for a log line, in metres where its CRS gives them.

    Args:
        ds: An open dataset.

    Returns:
        ``0.60 m pixels``; ``8.33e-06 degree pixels`` for a geographic CRS (or the CRS's
        own unit); ``1-unit pixels`` where there is no CRS.
    """
    sides = pixel_sides_m(ds)
    if sides is not None:
        return f"{sides[0]:.2f} m pixels"
    side = math.hypot(ds.transform.a, ds.transform.d)  # a rotated grid's too
    if ds.crs is None:
        return f"{side:.3g}-unit pixels"
    unit = "degree" if ds.crs.is_geographic else (ds.crs.linear_units or "unknown unit")
    return f"{side:.3g} {unit} pixels"


def same_size(a: float, b: float) -> bool:
    """Whether two pixel sizes are within :data:`TOLERANCE` of each other."""
    return abs(a - b) <= TOLERANCE * max(a, b)


def far_off(tile_m: float, train_m: float) -> bool:
    """Whether a tile's pixel size is more than :data:`FAR_OFF` times off the training one."""
    ratio = tile_m / train_m
    return ratio > FAR_OFF or ratio < 1 / FAR_OFF


def resampled_grid(ds: Any, metres: float | None) -> tuple[Affine, int, int] | None:
    """The grid with pixels of ``metres`` over exactly a raster's ground.

    Args:
        ds: An open dataset.
        metres: The pixel size wanted; ``None`` keeps the raster's own.

    Returns:
        ``(transform, width, height)``, or ``None`` when the raster stays as it is (no size
        asked for, the size is already within :data:`TOLERANCE`, or the CRS gives no metres).
    """
    sides = pixel_sides_m(ds) if metres is not None else None
    if sides is None or metres is None:
        return None
    if same_size(sides[0], metres) and same_size(sides[1], metres):
        return None
    width = max(1, round(ds.width * sides[0] / metres))
    height = max(1, round(ds.height * sides[1] / metres))
    transform = ds.transform * Affine.scale(ds.width / width, ds.height / height)
    return transform, width, height


def resampling_factors(ds: Any, grid: tuple[Affine, int, int]) -> tuple[float, float]:
    """How much a grid enlarges a raster: ``(columns, rows)`` of the grid over the raster's.

    Args:
        ds: An open dataset (anything with ``width`` and ``height``).
        grid: ``(transform, width, height)`` of the resampled grid.

    Returns:
        ``(x, y)``: above 1 the grid has more pixels than the raster in that axis.
    """
    _, width, height = grid
    return width / ds.width, height / ds.height


def silly_resampling(ds: Any, grid: tuple[Affine, int, int], patch: int) -> str | None:
    """Why resampling a raster onto a grid makes no sense, if it does not.

    A resampling is refused when it enlarges the raster more than :data:`MAX_FACTOR` times
    in either axis (the model would see blurred, blown-up pixels, and the work grows with the
    square of the factor), or when it shrinks it more than :data:`MAX_FACTOR` times in an axis
    and leaves it smaller than one training patch there (a handful of pixels: ``--resolution
    1e6`` makes any tile 1 x 1 px). Shrinking by less, as 0.6 m NAIP predicted at 1 m, is fine
    whatever the tile's size.

    Args:
        ds: An open dataset.
        grid: ``(transform, width, height)`` of the resampled grid.
        patch: The model's training patch size in pixels.

    Returns:
        ``None`` when it is sensible, else a few words naming the factor.
    """
    _, width, height = grid
    fx, fy = resampling_factors(ds, grid)
    for axis, factor, size in (("x", fx, width), ("y", fy, height)):
        if factor > MAX_FACTOR:
            return f"it enlarges it {factor:.3g}x in {axis}, more than {MAX_FACTOR:g}x"
        if factor < 1 / MAX_FACTOR and size < patch:
            return (
                f"it shrinks it {1 / factor:.3g}x in {axis}, to fewer pixels than one "
                f"{patch} px model patch"
            )
    return None


@contextmanager
def on_grid(ds: Any, grid: tuple[Affine, int, int] | None, resampling: Resampling) -> Iterator[Any]:
    """A raster seen on another grid of the same CRS, resampled as it is read (window by window).

    A band tagged alpha stays data (:func:`alpha_as_data`): GDAL's warper would take it for the
    image's mask, and NAIP often tags its NIR band alpha.

    Args:
        ds: The open dataset.
        grid: ``(transform, width, height)``; ``None`` yields ``ds`` itself.
        resampling: How pixels are resampled (bilinear for imagery and probabilities, nearest
            for classes and labels).

    Yields:
        A dataset-like object (a :class:`~rasterio.vrt.WarpedVRT`, or ``ds``): ``read`` and
        ``dataset_mask`` take windows of the new grid, and memory stays that of the window.
    """
    if grid is None:
        yield ds
        return
    transform, width, height = grid
    # a file with an internal mask and no nodata value (JPEG-compressed NAIP): the warper's
    # pixels outside the mask get nodata 0 in every band (GDAL moves a valid 0 to 1), which
    # nodata_mask reads; without it they were zeros counted as data
    unmarked = all(v is None for v in ds.nodatavals)
    extra = {"nodata": 0} if unmarked and has_dataset_mask(ds) else {}
    with (
        alpha_as_data(ds) as source,
        WarpedVRT(
            source,
            crs=ds.crs,
            transform=transform,
            width=width,
            height=height,
            resampling=resampling,
            **extra,
        ) as vrt,
    ):
        yield vrt
