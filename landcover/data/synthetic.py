"""Synthetic NAIP-like imagery with Chesapeake land-cover labels.

The generator paints scenes with real spatial structure so that a segmentation model can learn
them: forest and field regions from smooth multi-scale noise with a patchwork of field parcels,
a few barren patches, lakes and a meandering river, roads crossing the tile, settlements of
buildings and parking lots along the roads, and some no-data. Each class has its own spectrum
(R, G, B, NIR) and texture; the spectra overlap a little, so context matters.

Files are written as GeoTIFF pairs on the same 1 m grid in EPSG:26918 (NAD83 / UTM 18N, the
Chesapeake zone): ``{name}_naip.tif`` (4 bands uint8, nodata 0) and ``{name}_lc.tif``
(1 band uint8 Chesapeake 7-class codes, nodata 15). The same seed gives byte-identical files.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import rasterio
from rasterio.transform import Affine
from scipy.ndimage import gaussian_filter, gaussian_filter1d

CHESAPEAKE_NODATA: int = 15
"""Label code of no-data pixels in Chesapeake land-cover rasters."""

IMAGE_NODATA: int = 0
"""Image value (in all bands) of no-data pixels."""

MIN_SIZE: int = 16
"""Smallest tile height or width the generator accepts."""

# Chesapeake 7-class codes.
WATER, TREE, FIELD, BARREN, IMPERVIOUS, ROAD = 1, 2, 3, 4, 5, 6

# Appearance codes: what a pixel looks like. Codes 1..6 match the label codes; the others are
# impervious surfaces with their own look.
_PARKING = 7  # asphalt lot, label IMPERVIOUS
_STALL_PAINT = 8  # parking stall markings, label IMPERVIOUS
_ROAD_PAINT = 9  # road centre line, label ROAD
_ROOF0 = 16  # roofs: _ROOF0 + 2k (sunlit) and _ROOF0 + 2k + 1 (shaded half), label IMPERVIOUS
_N_ROOF_PAIRS = (256 - _ROOF0) // 2

_ORIGIN_EASTING = 350_000.0
_ORIGIN_NORTHING = 4_300_000.0
_TILE_GAP_M = 1000.0


@dataclass
class _Curve:
    """A band (river or road) along a centreline.

    ``along == 1``: the band runs along x; ``centre[k]`` is the row coordinate at column
    ``t0 + k``. ``along == 0``: it runs along y; ``centre[k]`` is the column coordinate at
    row ``t0 + k``. ``half`` is the half width measured across the axis (slope-corrected).
    """

    along: int
    t0: int
    centre: np.ndarray
    half: np.ndarray

    @property
    def t1(self) -> int:
        return self.t0 + len(self.centre)


def _smooth_noise(shape: tuple[int, int], sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Gaussian random field with unit variance everywhere and correlation length ``sigma``.

    Sums Gaussian bumps with random weights on a coarse lattice, separably as two matrix
    products, which is fast and memory-light even for very large tiles.
    """
    height, width = shape
    step = max(0.7 * sigma, 1.0)
    pad = 3.0 * sigma

    def weights(n: int) -> np.ndarray:
        count = math.ceil((n + 2 * pad) / step) + 1
        lattice = -pad + step * np.arange(count, dtype=np.float32)
        pos = np.arange(n, dtype=np.float32) + 0.5
        w = np.exp(-0.5 * ((pos[:, None] - lattice[None, :]) / np.float32(sigma)) ** 2)
        w /= np.sqrt((w * w).sum(axis=1, keepdims=True))
        return w.astype(np.float32)

    wy = weights(height)
    wx = weights(width)
    coarse = rng.standard_normal((wy.shape[1], wx.shape[1]), dtype=np.float32)
    if wy.shape[1] <= wx.shape[1]:
        return wy @ (coarse @ wx.T)
    return (wy @ coarse) @ wx.T


def _fine_noise(shape: tuple[int, int], sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Unit-variance float32 noise smoothed at a small scale ``sigma`` (a few pixels)."""
    noise = gaussian_filter(rng.standard_normal(shape, dtype=np.float32), sigma, output=np.float32)
    noise *= np.float32(2.0 * math.sqrt(math.pi) * sigma)
    return noise


def _smooth_1d(n: int, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Unit-variance smooth 1-D noise of length ``n``."""
    pad = int(3 * sigma) + 1
    x = gaussian_filter1d(rng.standard_normal(n + 2 * pad), sigma, mode="wrap")[pad : pad + n]
    return x / (x.std() + 1e-9)


def _subsample(a: np.ndarray, max_points: int = 250_000) -> np.ndarray:
    """A strided view with at most about ``max_points`` elements, for quantiles."""
    stride = max(1, int(math.sqrt(a.size / max_points)))
    return a[::stride, ::stride]


def _paint_curve(
    app: np.ndarray,
    curve: _Curve,
    value: int,
    extra_half: float | np.ndarray = 0.0,
    only: tuple[int, ...] | None = None,
    never: tuple[int, ...] | None = None,
) -> None:
    """Paints ``value`` into ``app`` where a pixel is within the curve's band.

    Args:
        app: Appearance codes, modified in place.
        curve: The band.
        value: Code to paint.
        extra_half: Added to the curve's half width (may be negative, or per position).
        only: Overwrite only these codes.
        never: Never overwrite these codes.
    """
    height, width = app.shape
    across = height if curve.along == 1 else width
    half = curve.half + extra_half
    if np.all(half <= 0):
        return
    lo = max(0, math.floor(float(np.min(curve.centre - half))))
    hi = min(across, math.ceil(float(np.max(curve.centre + half))) + 1)
    if lo >= hi:
        return
    coords = np.arange(lo, hi, dtype=np.float32) + np.float32(0.5)
    centre = curve.centre.astype(np.float32)
    half32 = np.asarray(half, dtype=np.float32)
    if curve.along == 1:
        mask = np.abs(coords[:, None] - centre[None, :]) <= half32[None, :]
        view = app[lo:hi, curve.t0 : curve.t1]
    else:
        mask = np.abs(coords[None, :] - centre[:, None]) <= half32[:, None]
        view = app[curve.t0 : curve.t1, lo:hi]
    if only is not None:
        mask &= np.isin(view, only)
    if never is not None:
        mask &= ~np.isin(view, never)
    view[mask] = value


def _curve_from_centre(along: int, t0: int, centre: np.ndarray, width: np.ndarray) -> _Curve:
    """Builds a curve whose perpendicular width is ``width`` (slope-corrected half width)."""
    slope = np.gradient(centre) if len(centre) > 1 else np.zeros_like(centre)
    half = 0.5 * width * np.sqrt(1.0 + slope * slope)
    return _Curve(along=along, t0=t0, centre=centre.astype(np.float64), half=half)


def _random_road(shape: tuple[int, int], rng: np.random.Generator, width: float) -> _Curve:
    """A straight or gently curved road crossing the whole tile."""
    along = int(rng.integers(0, 2))
    n = shape[1] if along == 1 else shape[0]
    across = shape[0] if along == 1 else shape[1]
    t = np.arange(n, dtype=np.float64)
    slope = rng.uniform(-0.35, 0.35) if rng.random() < 0.6 else rng.uniform(-0.08, 0.08)
    centre = rng.uniform(0.1, 0.9) * across + slope * (t - n / 2)
    if rng.random() < 0.5:
        amp = rng.uniform(5.0, 30.0)
        wavelength = rng.uniform(300.0, 900.0)
        centre = centre + amp * np.sin(2 * np.pi * t / wavelength + rng.uniform(0, 2 * np.pi))
    return _curve_from_centre(along, 0, centre, np.full(n, width))


def _too_close(a: _Curve, b: _Curve, gap: float = 60.0) -> bool:
    """True when two full-length curves run side by side (closer than ``gap`` px for long)."""
    if a.along != b.along or len(a.centre) != len(b.centre):
        return False
    return bool(np.mean(np.abs(a.centre - b.centre) < gap) > 0.25)


def _random_river(shape: tuple[int, int], rng: np.random.Generator) -> _Curve:
    """A meandering river crossing the tile (width about 8-25 px)."""
    along = int(rng.integers(0, 2))
    n = shape[1] if along == 1 else shape[0]
    across = shape[0] if along == 1 else shape[1]
    t = np.arange(n, dtype=np.float64)
    a1, l1 = rng.uniform(15.0, 50.0), rng.uniform(180.0, 400.0)
    a2, l2 = rng.uniform(4.0, 15.0), rng.uniform(60.0, 140.0)
    walk = gaussian_filter1d(np.cumsum(rng.normal(0.0, 0.6, n)), 40.0, mode="nearest")
    centre = (
        rng.uniform(0.2, 0.8) * across
        + a1 * np.sin(2 * np.pi * t / l1 + rng.uniform(0, 2 * np.pi))
        + a2 * np.sin(2 * np.pi * t / l2 + rng.uniform(0, 2 * np.pi))
        + walk
        - walk[n // 2]
    )
    width = rng.uniform(8.0, 25.0) * (1.0 + 0.15 * _smooth_1d(n, 60.0, rng))
    return _curve_from_centre(along, 0, centre, np.maximum(width, 6.0))


def _curve_at(curve: _Curve, t: int) -> tuple[float, float, float]:
    """Centre, half width and slope of a curve at position ``t`` (inside its range)."""
    k = min(max(t - curve.t0, 0), len(curve.centre) - 1)
    k2 = min(k + 1, len(curve.centre) - 1)
    k1 = max(k2 - 1, 0)
    slope = float(curve.centre[k2] - curve.centre[k1])
    return float(curve.centre[k]), float(curve.half[k]), slope


def _rect(
    curve: _Curve, t: float, length: float, offset: float, depth: float
) -> tuple[int, int, int, int]:
    """Pixel rectangle (y0, y1, x0, x1) of a lot beside a curve.

    ``length`` runs along the curve from ``t``; ``offset`` is the signed distance from the
    centreline to the near edge of the lot; ``depth`` runs away from the curve.
    """
    c, _, _ = _curve_at(curve, int(t + length / 2))
    near = c + offset if offset >= 0 else c + offset - depth
    a0, a1 = round(float(t)), round(float(t + length))
    b0, b1 = round(float(near)), round(float(near + depth))
    if curve.along == 1:
        return b0, b1, a0, a1
    return a0, a1, b0, b1


_BLOCKING = (WATER, ROAD, _PARKING, _STALL_PAINT, _ROAD_PAINT)


def _free(app: np.ndarray, y0: int, y1: int, x0: int, x1: int, pad: int = 2) -> bool:
    """True when the rectangle is inside the tile and clear of water, roads and buildings."""
    height, width = app.shape
    if y0 < 0 or x0 < 0 or y1 > height or x1 > width or y1 <= y0 or x1 <= x0:
        return False
    view = app[max(0, y0 - pad) : y1 + pad, max(0, x0 - pad) : x1 + pad]
    return not (np.isin(view, _BLOCKING).any() or (view >= _ROOF0).any())


def _paint_building(
    app: np.ndarray, rng: np.random.Generator, y0: int, y1: int, x0: int, x1: int
) -> None:
    """Paints one roof, split into a sunlit and a shaded half for gabled roofs."""
    pair = _ROOF0 + 2 * int(rng.integers(0, _N_ROOF_PAIRS))
    app[y0:y1, x0:x1] = pair
    h, w = y1 - y0, x1 - x0
    if max(h, w) <= 30 and rng.random() < 0.7:
        if w >= h:
            app[y0 + h // 2 : y1, x0:x1] = pair + 1
        else:
            app[y0:y1, x0 + w // 2 : x1] = pair + 1


def _paint_parking(app: np.ndarray, along: int, y0: int, y1: int, x0: int, x1: int) -> None:
    """Paints a parking lot with stall markings perpendicular to the access road."""
    app[y0:y1, x0:x1] = _PARKING
    h, w = y1 - y0, x1 - x0
    if along == 1 and h >= 14:
        band = [y0 + 2, y0 + h // 3], [y1 - h // 3, y1 - 2]
        for b0, b1 in band:
            app[b0:b1, x0 + 2 : x1 - 2 : 6] = _STALL_PAINT
    elif along == 0 and w >= 14:
        band = [x0 + 2, x0 + w // 3], [x1 - w // 3, x1 - 2]
        for b0, b1 in band:
            app[y0 + 2 : y1 - 2 : 6, b0:b1] = _STALL_PAINT


def _build_along(
    app: np.ndarray,
    rng: np.random.Generator,
    curve: _Curve,
    t_start: int,
    t_end: int,
    centre: tuple[float, float] | None,
    radius: float,
    density: float,
) -> int:
    """Places buildings on both sides of a curve between ``t_start`` and ``t_end``.

    Returns:
        The number of buildings placed.
    """
    placed = 0
    for side in (-1.0, 1.0):
        t = float(t_start) + rng.uniform(0.0, 10.0)
        while t < t_end:
            if rng.random() < 0.1:
                length, depth = rng.uniform(24.0, 40.0), rng.uniform(20.0, 36.0)
            else:
                length, depth = rng.uniform(9.0, 24.0), rng.uniform(8.0, 20.0)
            if rng.random() < density:
                _, half, slope = _curve_at(curve, int(t + length / 2))
                setback = half + abs(slope) * length / 2 + rng.uniform(3.0, 10.0)
                y0, y1, x0, x1 = _rect(curve, t, length, side * setback, depth)
                inside = True
                if centre is not None:
                    cy, cx = (y0 + y1) / 2, (x0 + x1) / 2
                    inside = math.hypot(cy - centre[0], cx - centre[1]) <= radius
                if inside and _free(app, y0, y1, x0, x1):
                    _paint_building(app, rng, y0, y1, x0, x1)
                    placed += 1
            t += length + rng.uniform(4.0, 14.0)
    return placed


def _add_parking(
    app: np.ndarray, rng: np.random.Generator, curve: _Curve, t_start: int, t_end: int
) -> bool:
    """Tries to place one parking lot beside a curve; returns whether it was placed."""
    for _ in range(8):
        length, depth = rng.uniform(25.0, 60.0), rng.uniform(20.0, 45.0)
        if t_end - t_start <= length:
            return False
        t = rng.uniform(t_start, t_end - length)
        _, half, slope = _curve_at(curve, int(t + length / 2))
        setback = half + abs(slope) * length / 2 + rng.uniform(1.0, 3.0)
        side = 1.0 if rng.random() < 0.5 else -1.0
        y0, y1, x0, x1 = _rect(curve, t, length, side * setback, depth)
        if _free(app, y0, y1, x0, x1):
            _paint_parking(app, curve.along, y0, y1, x0, x1)
            return True
    return False


def _settlement(
    app: np.ndarray, rng: np.random.Generator, roads: list[_Curve]
) -> tuple[tuple[float, float], float, list[_Curve]]:
    """Chooses a settlement on a road, clears most of its forest and lays out side streets.

    Returns:
        The centre (row, col), the radius, and the side streets (not yet painted).
    """
    height, width = app.shape
    road = roads[int(rng.integers(0, len(roads)))]
    n = road.t1 - road.t0
    t = int(rng.uniform(0.15, 0.85) * n) + road.t0
    c, _, _ = _curve_at(road, t)
    cy, cx = (c, float(t)) if road.along == 1 else (float(t), c)
    radius = min(rng.uniform(70.0, 150.0), 0.4 * min(height, width))

    y0, y1 = max(0, int(cy - radius)), min(height, int(cy + radius) + 1)
    x0, x1 = max(0, int(cx - radius)), min(width, int(cx + radius) + 1)
    if y1 - y0 >= 2 and x1 - x0 >= 2:
        yy = np.arange(y0, y1, dtype=np.float32)[:, None] - np.float32(cy)
        xx = np.arange(x0, x1, dtype=np.float32)[None, :] - np.float32(cx)
        dist = np.sqrt(yy * yy + xx * xx) / np.float32(radius * 1.15)
        lawn = _smooth_noise((y1 - y0, x1 - x0), 10.0, rng) > (dist * 2.0 - 1.2)
        view = app[y0:y1, x0:x1]
        view[lawn & (view == TREE)] = FIELD

    streets: list[_Curve] = []
    if rng.random() < 0.55 and radius >= 60:
        spacing = rng.uniform(45.0, 75.0)
        for along in (0, 1):
            lo_t = int(max(0, (cx if along == 1 else cy) - radius))
            hi_t = int(min(width if along == 1 else height, (cx if along == 1 else cy) + radius))
            if hi_t - lo_t < 20:
                continue
            mid = cy if along == 1 else cx
            k = int(radius // spacing)
            for j in range(-k, k + 1):
                pos = mid + j * spacing + rng.uniform(-4.0, 4.0)
                if rng.random() < 0.25:
                    continue
                centre = np.full(hi_t - lo_t, pos)
                streets.append(
                    _curve_from_centre(along, lo_t, centre, np.full(hi_t - lo_t, rng.uniform(5, 8)))
                )
    return (cy, cx), radius, streets


def _lake(app: np.ndarray, rng: np.random.Generator, roads: list[_Curve]) -> None:
    """Paints a lake or pond blob, preferably away from the roads."""
    height, width = app.shape
    radius = float(np.clip(rng.uniform(0.04, 0.10) * min(height, width), 5.0, 120.0))
    cy = cx = 0.0
    for _ in range(20):
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        clear = True
        for road in roads:
            t = int(cx if road.along == 1 else cy)
            if road.t0 <= t < road.t1:
                c, half, _ = _curve_at(road, t)
                if abs((cy if road.along == 1 else cx) - c) < 1.5 * radius + half + 10:
                    clear = False
                    break
        if clear:
            break
    reach = 1.6 * radius
    y0, y1 = max(0, int(cy - reach)), min(height, int(cy + reach) + 1)
    x0, x1 = max(0, int(cx - reach)), min(width, int(cx + reach) + 1)
    if y1 - y0 < 2 or x1 - x0 < 2:
        return
    yy = (np.arange(y0, y1, dtype=np.float32)[:, None] - np.float32(cy)) / np.float32(radius)
    xx = (np.arange(x0, x1, dtype=np.float32)[None, :] - np.float32(cx)) / np.float32(radius)
    stretch = np.float32(rng.uniform(0.6, 1.0))
    dist = np.sqrt(yy * yy * stretch + xx * xx / stretch)
    dist += 0.3 * _smooth_noise((y1 - y0, x1 - x0), max(radius / 3.0, 2.0), rng)
    app[y0:y1, x0:x1][dist < 1.0] = WATER


def _vegetation(
    app: np.ndarray, rng: np.random.Generator, forest: tuple[float, float] = (0.3, 0.55)
) -> None:
    """Paints forest and field from multi-scale noise, and barren patches in the open land.

    Args:
        app: Appearance codes (all FIELD), modified in place.
        rng: Random generator.
        forest: Range of the forest fraction, drawn uniformly.
    """
    shape = app.shape
    base = _smooth_noise(shape, 45.0, rng)
    base *= np.float32(0.8)
    base += np.float32(0.45) * _smooth_noise(shape, 12.0, rng)
    base += np.float32(0.1) * _fine_noise(shape, 3.0, rng)  # ragged crown-scale edges
    forest_frac = rng.uniform(*forest)
    threshold = np.quantile(_subsample(base), 1.0 - forest_frac)
    app[base > threshold] = TREE
    del base
    bare = _smooth_noise(shape, 9.0, rng)
    open_land = _subsample(bare)[_subsample(app) == FIELD]
    if open_land.size:
        frac = min(0.5, rng.uniform(0.025, 0.05) / max(1.0 - forest_frac, 0.1))
        app[(bare > np.quantile(open_land, 1.0 - frac)) & (app == FIELD)] = BARREN


def _paint_water(app: np.ndarray, rng: np.random.Generator, roads: list[_Curve]) -> None:
    """Paints lakes and ponds, and a meandering river in most tiles (with riparian trees)."""
    height, width = app.shape
    scale = max(height, width) / 512.0
    for _ in range(int(rng.integers(1, 3)) + int(rng.poisson(height * width / 1500.0**2))):
        _lake(app, rng, roads)
    n_rivers = int(rng.random() < 0.8) + int(rng.poisson(max(0.0, scale - 1.0) / 4.0))
    for _ in range(n_rivers):
        river = _random_river(app.shape, rng)
        if rng.random() < 0.6:
            _paint_curve(app, river, TREE, extra_half=rng.uniform(4.0, 12.0), only=(FIELD,))
        _paint_curve(app, river, WATER)


def _pick_roads(
    shape: tuple[int, int],
    rng: np.random.Generator,
    n_roads: int,
    widths: tuple[float, float] = (7.0, 12.0),
) -> list[_Curve]:
    """Roads crossing the tile (not yet painted), avoiding near-duplicate parallel roads."""
    roads: list[_Curve] = []
    for _ in range(n_roads):
        for _ in range(10):
            road = _random_road(shape, rng, rng.uniform(*widths))
            if not any(_too_close(road, other) for other in roads):
                break
        roads.append(road)
    return roads


def _land_cover(height: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """Builds the appearance-code map of a scene (before no-data)."""
    shape = (height, width)
    app = np.full(shape, FIELD, dtype=np.uint8)
    _vegetation(app, rng)

    # Roads (curves only for now), settlements with lawns and side streets.
    scale = max(height, width) / 512.0
    n_roads = int(rng.integers(1 if scale < 0.4 else 2, 4)) + max(0, round(scale) - 1)
    roads = _pick_roads(shape, rng, n_roads)
    n_settle = 1 + int(rng.poisson(height * width / 800.0**2))
    settlements = [_settlement(app, rng, roads) for _ in range(n_settle)]

    _paint_water(app, rng, roads)

    # Roads over everything (bridges), side streets stop at water.
    for road in roads:
        _paint_curve(app, road, ROAD)
    for _, _, streets in settlements:
        for street in streets:
            _paint_curve(app, street, ROAD, never=(WATER,))

    # Buildings and parking lots along the roads and streets of each settlement.
    placed = 0
    for (cy, cx), radius, streets in settlements:
        for curve in roads + streets:
            pos = cx if curve.along == 1 else cy
            t0, t1 = max(curve.t0, int(pos - radius)), min(curve.t1, int(pos + radius))
            if t1 - t0 > 8:
                placed += _build_along(app, rng, curve, t0, t1, (cy, cx), radius, 0.75)
        near = [c for c in roads + streets if c.t0 <= (cx if c.along == 1 else cy) < c.t1]
        for _ in range(int(rng.integers(1, 3))):
            curve = near[int(rng.integers(0, len(near)))] if near else roads[0]
            pos = cx if curve.along == 1 else cy
            t0, t1 = max(curve.t0, int(pos - radius)), min(curve.t1, int(pos + radius))
            _add_parking(app, rng, curve, t0, t1)
    # A few farmsteads along the roads anywhere; retry if the tile has no building at all.
    n_farms = 1 + int(rng.poisson(1.5 * scale * scale))
    for attempt in range(n_farms + 60):
        if attempt >= n_farms and placed > 0:
            break
        road = roads[int(rng.integers(0, len(roads)))]
        t = int(rng.uniform(road.t0, road.t1))
        placed += _build_along(app, rng, road, t, t + 40, None, 0.0, 0.9)

    # Dashed centre lines on wide roads.
    for road in roads:
        if float(np.median(road.half)) >= 4.5:
            t = np.arange(road.t0, road.t1)
            dash = np.where((t % 24) < 12, 0.5, -1.0)
            _paint_curve(app, road, _ROAD_PAINT, extra_half=dash - road.half, only=(ROAD,))
    return app


def _nodata_masks(
    height: int, width: int, rng: np.random.Generator
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """No-data masks: image no-data (corner or strip) and label-only no-data patches."""
    image_nd: np.ndarray | None = None
    if rng.random() < 1.0 / 3.0:
        image_nd = np.zeros((height, width), dtype=bool)
        if rng.random() < 0.5:
            a = rng.uniform(0.2, 0.4) * width
            b = rng.uniform(0.2, 0.4) * height
            yy = np.arange(height, dtype=np.float32)[:, None] + np.float32(0.5)
            xx = np.arange(width, dtype=np.float32)[None, :] + np.float32(0.5)
            if rng.random() < 0.5:
                yy = np.float32(height) - yy
            if rng.random() < 0.5:
                xx = np.float32(width) - xx
            image_nd = (yy / np.float32(b) + xx / np.float32(a)) < 1.0
        else:
            edge = int(rng.integers(0, 4))
            frac = rng.uniform(0.03, 0.07)
            n = max(1, int(frac * (height if edge < 2 else width)))
            if edge == 0:
                image_nd[:n, :] = True
            elif edge == 1:
                image_nd[-n:, :] = True
            elif edge == 2:
                image_nd[:, :n] = True
            else:
                image_nd[:, -n:] = True
    label_nd: np.ndarray | None = None
    if rng.random() < 0.8:
        label_nd = np.zeros((height, width), dtype=bool)
        for _ in range(int(rng.integers(1, 3))):
            h = max(2, int(rng.uniform(0.07, 0.16) * height))
            w = max(2, int(rng.uniform(0.07, 0.16) * width))
            y0 = int(rng.integers(0, max(1, height - h)))
            x0 = int(rng.integers(0, max(1, width - w)))
            label_nd[y0 : y0 + h, x0 : x0 + w] = True
    return image_nd, label_nd


_SPECTRA: dict[int, tuple[tuple[int, int, int, int], float, int]] = {
    # appearance: ((R, G, B, NIR) mean, texture strength, label code)
    WATER: ((40, 55, 60, 20), 0.05, WATER),
    TREE: ((55, 82, 52, 150), 0.30, TREE),
    FIELD: ((110, 135, 90, 170), 0.06, FIELD),
    BARREN: ((170, 150, 125, 140), 0.08, BARREN),
    ROAD: ((95, 95, 100, 85), 0.05, ROAD),
    _PARKING: ((108, 108, 112, 95), 0.05, IMPERVIOUS),
    _STALL_PAINT: ((205, 205, 200, 180), 0.03, IMPERVIOUS),
    _ROAD_PAINT: ((200, 185, 120, 160), 0.03, ROAD),
}


def _label_table() -> np.ndarray:
    """Label code of every appearance code (256 entries)."""
    labels = np.full(256, CHESAPEAKE_NODATA, dtype=np.uint8)
    for code, (_, _, label) in _SPECTRA.items():
        labels[code] = label
    labels[_ROOF0:] = IMPERVIOUS
    return labels


_LABEL_OF = _label_table()


def _appearance_tables(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per-appearance mean spectra (256, 4) and texture strength (256,) for one tile."""
    means = np.zeros((256, 4), dtype=np.float32)
    texture = np.zeros(256, dtype=np.float32)
    for code, (spectrum, tex, _) in _SPECTRA.items():
        means[code] = spectrum
        texture[code] = tex
    # Tile-level colour shift (season, sun angle, sensor calibration).
    shift = rng.normal(0.0, 4.0, size=4).astype(np.float32)
    means[1:10] = np.clip(means[1:10] + shift, 5.0, 250.0)
    # Roofs: mostly grey, some red-brown, some dark, a few bright; the shaded half darker.
    kinds = rng.choice(4, size=_N_ROOF_PAIRS, p=[0.55, 0.2, 0.15, 0.1])
    for k, kind in enumerate(kinds):
        if kind == 0:
            g = rng.uniform(135.0, 175.0)
            rgb = g + rng.uniform(-6.0, 6.0, 3) + np.array([-2.0, 0.0, 4.0])
        elif kind == 1:
            rgb = np.array([rng.uniform(140, 175), rng.uniform(95, 120), rng.uniform(85, 105)])
        elif kind == 2:
            g = rng.uniform(85.0, 110.0)
            rgb = np.array([g, g + 2.0, g + 6.0])
        else:
            rgb = np.full(3, rng.uniform(185.0, 215.0)) + rng.uniform(-3.0, 3.0, 3)
        sunlit = np.append(rgb, rng.uniform(105.0, 128.0)).astype(np.float32)
        means[_ROOF0 + 2 * k] = sunlit
        means[_ROOF0 + 2 * k + 1] = sunlit * np.float32(0.82)
    texture[_ROOF0:] = 0.03
    return means, texture


def _parcels(app: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Rectangular field parcels with their own crop colour.

    Returns:
        A parcel index map (int32, the last index means "not a field") and per-parcel band
        offsets of shape (n_parcels + 1, 4).
    """
    height, width = app.shape

    def cuts(n: int) -> np.ndarray:
        edges = np.cumsum(rng.uniform(50.0, 180.0, size=int(n / 50) + 2))
        return np.searchsorted(edges - rng.uniform(0, 50.0), np.arange(n) + 0.5)

    yi = cuts(height).astype(np.int32)
    xi = cuts(width).astype(np.int32)
    nx = int(xi.max()) + 1
    n_parcels = (int(yi.max()) + 1) * nx
    crops = np.array(
        [
            (0, 0, 0, 0),  # pasture
            (-8, 6, -6, 18),  # lush green crop
            (28, 10, 18, -30),  # dry / ploughed
            (-22, -16, -14, 4),  # dark green
            (14, 14, 6, -12),  # hay
        ],
        dtype=np.float32,
    )
    kinds = rng.choice(len(crops), size=n_parcels, p=[0.35, 0.2, 0.15, 0.15, 0.15])
    offsets = np.zeros((n_parcels + 1, 4), dtype=np.float32)
    offsets[:-1] = crops[kinds] + rng.normal(0.0, 4.0, size=(n_parcels, 4)).astype(np.float32)
    pid = yi[:, None] * np.int32(nx) + xi[None, :]
    pid[app != FIELD] = n_parcels
    return pid, offsets


def _shift_mask(mask: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """The mask moved by (dy, dx) pixels (dy, dx >= 0 down/right, < 0 up/left)."""
    out = np.zeros_like(mask)
    h, w = mask.shape
    if abs(dy) >= h or abs(dx) >= w:
        return out
    src = mask[max(0, -dy) : h - max(0, dy), max(0, -dx) : w - max(0, dx)]
    out[max(0, dy) : h - max(0, -dy), max(0, dx) : w - max(0, -dx)] = src
    return out


def _surface_mult(app: np.ndarray, texture: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One multiplicative map shared by all bands: regional brightness and texture.

    Texture is fine grain plus crown-sized blobs, strong for trees and weak elsewhere
    (``texture`` holds the strength of each appearance code).
    """
    mult = _smooth_noise(app.shape, 60.0, rng)
    mult *= np.float32(0.07)
    mult += np.float32(1.0)
    grain = _fine_noise(app.shape, 1.0, rng)
    grain *= np.float32(0.5)
    grain += np.float32(0.85) * _fine_noise(app.shape, 2.2, rng)
    grain *= texture[app]
    grain += np.float32(1.0)
    mult *= grain
    return mult


def _render(app: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Renders the appearance map as a (4, H, W) uint8 image (values 1..255)."""
    height, width = app.shape
    means, texture = _appearance_tables(rng)
    mult = _surface_mult(app, texture, rng)
    sx = int(rng.integers(2, 5)) * (1 if rng.random() < 0.5 else -1)
    sy = int(rng.integers(2, 5))
    tall = (app == TREE) | (app >= _ROOF0)
    shadow = _shift_mask(tall, sy, sx) & ~tall
    del tall
    mult[shadow] *= np.float32(0.62)
    del shadow

    pid, offsets = _parcels(app, rng)
    image = np.empty((4, height, width), dtype=np.uint8)
    noise = np.empty(app.shape, dtype=np.float32)
    for band in range(4):
        value = means[:, band][app]
        value *= mult
        value += offsets[:, band][pid]
        value = gaussian_filter(value, 0.6, output=np.float32)
        rng.standard_normal(dtype=np.float32, out=noise)
        noise *= np.float32(2.5)
        value += noise
        np.clip(value, 1.0, 255.0, out=value)
        np.rint(value, out=value)
        image[band] = value
        del value
    return image


def synthesize_scene(
    height: int, width: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Synthesizes one NAIP-like scene with its Chesapeake land-cover label.

    Args:
        height: Rows in pixels (1 m each).
        width: Columns in pixels.
        rng: Random generator; the scene depends only on its state.

    Returns:
        ``(image, label)``: image is (4, H, W) uint8 with bands R, G, B, NIR (0 only where the
        image has no data, in all bands); label is (H, W) uint8 Chesapeake 7-class codes
        (1 water, 2 tree canopy, 3 low vegetation, 4 barren, 5 impervious, 6 road, 15 no data).

    Raises:
        ValueError: If ``height`` or ``width`` is smaller than :data:`MIN_SIZE`.
    """
    if height < MIN_SIZE or width < MIN_SIZE:
        raise ValueError(
            f"scene must be at least {MIN_SIZE} x {MIN_SIZE} px, got {height} x {width}"
        )
    app = _land_cover(height, width, rng)
    image_nd, label_nd = _nodata_masks(height, width, rng)
    image = _render(app, rng)
    label = _LABEL_OF[app]
    del app
    if label_nd is not None:
        label[label_nd] = CHESAPEAKE_NODATA
    if image_nd is not None:
        label[image_nd] = CHESAPEAKE_NODATA
        image[:, image_nd] = IMAGE_NODATA
    return image, label


def _block_size(n: int) -> int:
    """GeoTIFF block size along one axis: 256, else the largest multiple of 16 that fits."""
    return 256 if n >= 256 else (n // 16) * 16


def _write_tif(path: Path, array: np.ndarray, profile: dict, descriptions: list[str]) -> None:
    """Writes a GeoTIFF atomically (temporary file in the same folder, then rename).

    Raises:
        OutputError: If the folder is read-only, not writable or full (GDAL's own messages
            stay off the console).
    """
    from landcover.diskerrors import output_errors
    from landcover.gdalnoise import quiet_gdal

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with (
            quiet_gdal(),
            output_errors(path.parent),
            rasterio.Env(GDAL_PAM_ENABLED="NO"),
            rasterio.open(tmp, "w", **profile) as dst,
        ):
            dst.write(array)
            for band, text in enumerate(descriptions, start=1):
                dst.set_band_description(band, text)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_pair(
    out_dir: Path,
    name: str,
    image: np.ndarray,
    label: np.ndarray,
    origin: tuple[float, float],
    crs: str = "EPSG:26918",
) -> tuple[Path, Path]:
    """Writes an image/label GeoTIFF pair on exactly the same 1 m grid.

    Args:
        out_dir: Output folder (created if missing).
        name: Base name; files are ``{name}_naip.tif`` and ``{name}_lc.tif``.
        image: (4, H, W) uint8 image, bands R, G, B, NIR; 0 in all bands means no data.
        label: (H, W) uint8 Chesapeake label codes; 15 means no data.
        origin: Upper-left corner ``(x, y)`` in CRS units (metres).
        crs: Coordinate reference system of the grid.

    Returns:
        The paths of the image and the label file.

    Raises:
        ValueError: If the arrays do not have the expected shapes or dtype.
    """
    if image.ndim != 3 or image.shape[0] != 4 or image.dtype != np.uint8:
        raise ValueError(f"image must be (4, H, W) uint8, got {image.shape} {image.dtype}")
    if label.shape != image.shape[1:] or label.dtype != np.uint8:
        raise ValueError(
            f"label must be {image.shape[1:]} uint8 like the image, got {label.shape} {label.dtype}"
        )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    height, width = label.shape
    common: dict = {
        "driver": "GTiff",
        "height": height,
        "width": width,
        "dtype": "uint8",
        "crs": crs,
        "transform": Affine(1.0, 0.0, float(origin[0]), 0.0, -1.0, float(origin[1])),
        "compress": "deflate",
    }
    bx, by = _block_size(width), _block_size(height)
    if bx >= 16 and by >= 16:
        common.update(tiled=True, blockxsize=bx, blockysize=by)
    else:
        common["tiled"] = False
    image_path = out_dir / f"{name}_naip.tif"
    label_path = out_dir / f"{name}_lc.tif"
    _write_tif(
        image_path,
        image,
        {**common, "count": 4, "nodata": IMAGE_NODATA, "photometric": "RGB", "alpha": "NO"},
        ["red", "green", "blue", "nir"],
    )
    _write_tif(
        label_path,
        label[None],
        {**common, "count": 1, "nodata": CHESAPEAKE_NODATA},
        ["land_cover"],
    )
    return image_path, label_path


def tile_origin(index: int, size: int) -> tuple[float, float]:
    """Upper-left UTM corner of synthetic tile ``index`` (tiles never overlap).

    Args:
        index: Tile number.
        size: Tile size in pixels (metres).

    Returns:
        ``(easting, northing)`` in metres.
    """
    return (_ORIGIN_EASTING + index * (size + _TILE_GAP_M), _ORIGIN_NORTHING)


def write_synthetic_dataset(
    out_dir: str | Path, tiles: int, size: int, seed: int, prefix: str = "synth"
) -> list[tuple[Path, Path]]:
    """Writes a synthetic dataset of image/label GeoTIFF pairs.

    Tile ``i`` is drawn from ``np.random.default_rng([seed, i])``, so it is the same whatever
    ``tiles`` is, and the same seed gives byte-identical files.

    Args:
        out_dir: Output folder (created if missing).
        tiles: Number of tiles.
        size: Tile height and width in pixels (1 m).
        seed: Random seed (non-negative).
        prefix: File name prefix; tile ``i`` is named ``f"{prefix}_{i:03d}"``.

    Returns:
        The ``(image, label)`` paths, one pair per tile.

    Raises:
        ValueError: If ``tiles`` or ``seed`` is negative or ``size`` is below :data:`MIN_SIZE`.
    """
    if tiles < 0:
        raise ValueError(f"tiles must be >= 0, got {tiles}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    if size < MIN_SIZE:
        raise ValueError(f"size must be >= {MIN_SIZE}, got {size}")
    out = Path(out_dir)
    pairs = []
    for i in range(tiles):
        image, label = synthesize_scene(size, size, np.random.default_rng([seed, i]))
        pairs.append(write_pair(out, f"{prefix}_{i:03d}", image, label, tile_origin(i, size)))
    return pairs
