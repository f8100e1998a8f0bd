"""The synthetic world's land cover: where water, forest, fields, roads and buildings lie.

:func:`land_cover` lays out a scene as *appearance codes*: the Chesapeake class codes 1..6
(:data:`WATER` ... :data:`ROAD`) and impervious surfaces with a look of their own (parking
lots, stall and road paint, sunlit and shaded roof halves); :data:`LABEL_OF` maps each code to
its label. Forest and field regions come from smooth multi-scale noise, with lakes, a
meandering river, roads crossing the tile and settlements of buildings and parking lots along
the roads. :mod:`landcover.synthetic.synthetic` renders the codes as imagery and writes the tiles.
"""

from __future__ import annotations

import math

import numpy as np

from landcover.synthetic.curves import (
    Curve,
    curve_at,
    curve_from_centre,
    fine_noise,
    paint_curve,
    random_river,
    random_road,
    smooth_noise,
    subsample,
    too_close,
)

# Chesapeake 7-class codes.
WATER, TREE, FIELD, BARREN, IMPERVIOUS, ROAD = 1, 2, 3, 4, 5, 6

# Appearance codes: what a pixel looks like. Codes 1..6 match the label codes; the others are
# impervious surfaces with their own look.
PARKING = 7  # asphalt lot, label IMPERVIOUS
STALL_PAINT = 8  # parking stall markings, label IMPERVIOUS
ROAD_PAINT = 9  # road centre line, label ROAD
ROOF0 = 16  # roofs: ROOF0 + 2k (sunlit) and ROOF0 + 2k + 1 (shaded half), label IMPERVIOUS
N_ROOF_PAIRS = (256 - ROOF0) // 2


def rect(
    curve: Curve, t: float, length: float, offset: float, depth: float
) -> tuple[int, int, int, int]:
    """Pixel rectangle (y0, y1, x0, x1) of a lot beside a curve.

    ``length`` runs along the curve from ``t``; ``offset`` is the signed distance from the
    centreline to the near edge of the lot; ``depth`` runs away from the curve.
    """
    c, _, _ = curve_at(curve, int(t + length / 2))
    near = c + offset if offset >= 0 else c + offset - depth
    a0, a1 = round(float(t)), round(float(t + length))
    b0, b1 = round(float(near)), round(float(near + depth))
    if curve.along == 1:
        return b0, b1, a0, a1
    return a0, a1, b0, b1


_BLOCKING = (WATER, ROAD, PARKING, STALL_PAINT, ROAD_PAINT)


def free(app: np.ndarray, y0: int, y1: int, x0: int, x1: int, pad: int = 2) -> bool:
    """True when the rectangle is inside the tile and clear of water, roads and buildings."""
    height, width = app.shape
    if y0 < 0 or x0 < 0 or y1 > height or x1 > width or y1 <= y0 or x1 <= x0:
        return False
    view = app[max(0, y0 - pad) : y1 + pad, max(0, x0 - pad) : x1 + pad]
    return not (np.isin(view, _BLOCKING).any() or (view >= ROOF0).any())


def paint_building(
    app: np.ndarray, rng: np.random.Generator, y0: int, y1: int, x0: int, x1: int
) -> None:
    """Paints one roof, split into a sunlit and a shaded half for gabled roofs."""
    pair = ROOF0 + 2 * int(rng.integers(0, N_ROOF_PAIRS))
    app[y0:y1, x0:x1] = pair
    h, w = y1 - y0, x1 - x0
    if max(h, w) <= 30 and rng.random() < 0.7:
        if w >= h:
            app[y0 + h // 2 : y1, x0:x1] = pair + 1
        else:
            app[y0:y1, x0 + w // 2 : x1] = pair + 1


def _paint_parking(app: np.ndarray, along: int, y0: int, y1: int, x0: int, x1: int) -> None:
    """Paints a parking lot with stall markings perpendicular to the access road."""
    app[y0:y1, x0:x1] = PARKING
    h, w = y1 - y0, x1 - x0
    if along == 1 and h >= 14:
        band = [y0 + 2, y0 + h // 3], [y1 - h // 3, y1 - 2]
        for b0, b1 in band:
            app[b0:b1, x0 + 2 : x1 - 2 : 6] = STALL_PAINT
    elif along == 0 and w >= 14:
        band = [x0 + 2, x0 + w // 3], [x1 - w // 3, x1 - 2]
        for b0, b1 in band:
            app[y0 + 2 : y1 - 2 : 6, b0:b1] = STALL_PAINT


def _build_along(
    app: np.ndarray,
    rng: np.random.Generator,
    curve: Curve,
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
                _, half, slope = curve_at(curve, int(t + length / 2))
                setback = half + abs(slope) * length / 2 + rng.uniform(3.0, 10.0)
                y0, y1, x0, x1 = rect(curve, t, length, side * setback, depth)
                inside = True
                if centre is not None:
                    cy, cx = (y0 + y1) / 2, (x0 + x1) / 2
                    inside = math.hypot(cy - centre[0], cx - centre[1]) <= radius
                if inside and free(app, y0, y1, x0, x1):
                    paint_building(app, rng, y0, y1, x0, x1)
                    placed += 1
            t += length + rng.uniform(4.0, 14.0)
    return placed


def _add_parking(
    app: np.ndarray, rng: np.random.Generator, curve: Curve, t_start: int, t_end: int
) -> bool:
    """Tries to place one parking lot beside a curve; returns whether it was placed."""
    for _ in range(8):
        length, depth = rng.uniform(25.0, 60.0), rng.uniform(20.0, 45.0)
        if t_end - t_start <= length:
            return False
        t = rng.uniform(t_start, t_end - length)
        _, half, slope = curve_at(curve, int(t + length / 2))
        setback = half + abs(slope) * length / 2 + rng.uniform(1.0, 3.0)
        side = 1.0 if rng.random() < 0.5 else -1.0
        y0, y1, x0, x1 = rect(curve, t, length, side * setback, depth)
        if free(app, y0, y1, x0, x1):
            _paint_parking(app, curve.along, y0, y1, x0, x1)
            return True
    return False


def settlement(
    app: np.ndarray, rng: np.random.Generator, roads: list[Curve]
) -> tuple[tuple[float, float], float, list[Curve]]:
    """Chooses a settlement on a road, clears most of its forest and lays out side streets.

    Returns:
        The centre (row, col), the radius, and the side streets (not yet painted).
    """
    height, width = app.shape
    road = roads[int(rng.integers(0, len(roads)))]
    n = road.t1 - road.t0
    t = int(rng.uniform(0.15, 0.85) * n) + road.t0
    c, _, _ = curve_at(road, t)
    cy, cx = (c, float(t)) if road.along == 1 else (float(t), c)
    radius = min(rng.uniform(70.0, 150.0), 0.4 * min(height, width))

    y0, y1 = max(0, int(cy - radius)), min(height, int(cy + radius) + 1)
    x0, x1 = max(0, int(cx - radius)), min(width, int(cx + radius) + 1)
    if y1 - y0 >= 2 and x1 - x0 >= 2:
        yy = np.arange(y0, y1, dtype=np.float32)[:, None] - np.float32(cy)
        xx = np.arange(x0, x1, dtype=np.float32)[None, :] - np.float32(cx)
        dist = np.sqrt(yy * yy + xx * xx) / np.float32(radius * 1.15)
        lawn = smooth_noise((y1 - y0, x1 - x0), 10.0, rng) > (dist * 2.0 - 1.2)
        view = app[y0:y1, x0:x1]
        view[lawn & (view == TREE)] = FIELD

    streets: list[Curve] = []
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
                    curve_from_centre(along, lo_t, centre, np.full(hi_t - lo_t, rng.uniform(5, 8)))
                )
    return (cy, cx), radius, streets


def _lake(app: np.ndarray, rng: np.random.Generator, roads: list[Curve]) -> None:
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
                c, half, _ = curve_at(road, t)
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
    dist += 0.3 * smooth_noise((y1 - y0, x1 - x0), max(radius / 3.0, 2.0), rng)
    app[y0:y1, x0:x1][dist < 1.0] = WATER


def vegetation(
    app: np.ndarray, rng: np.random.Generator, forest: tuple[float, float] = (0.3, 0.55)
) -> None:
    """Paints forest and field from multi-scale noise, and barren patches in the open land.

    Args:
        app: Appearance codes (all FIELD), modified in place.
        rng: Random generator.
        forest: Range of the forest fraction, drawn uniformly.
    """
    shape = app.shape
    base = smooth_noise(shape, 45.0, rng)
    base *= np.float32(0.8)
    base += np.float32(0.45) * smooth_noise(shape, 12.0, rng)
    base += np.float32(0.1) * fine_noise(shape, 3.0, rng)  # ragged crown-scale edges
    forest_frac = rng.uniform(*forest)
    threshold = np.quantile(subsample(base), 1.0 - forest_frac)
    app[base > threshold] = TREE
    del base
    bare = smooth_noise(shape, 9.0, rng)
    open_land = subsample(bare)[subsample(app) == FIELD]
    if open_land.size:
        frac = min(0.5, rng.uniform(0.025, 0.05) / max(1.0 - forest_frac, 0.1))
        app[(bare > np.quantile(open_land, 1.0 - frac)) & (app == FIELD)] = BARREN


def paint_water(app: np.ndarray, rng: np.random.Generator, roads: list[Curve]) -> None:
    """Paints lakes and ponds, and a meandering river in most tiles (with riparian trees)."""
    height, width = app.shape
    scale = max(height, width) / 512.0
    for _ in range(int(rng.integers(1, 3)) + int(rng.poisson(height * width / 1500.0**2))):
        _lake(app, rng, roads)
    n_rivers = int(rng.random() < 0.8) + int(rng.poisson(max(0.0, scale - 1.0) / 4.0))
    for _ in range(n_rivers):
        river = random_river(app.shape, rng)
        if rng.random() < 0.6:
            paint_curve(app, river, TREE, extra_half=rng.uniform(4.0, 12.0), only=(FIELD,))
        paint_curve(app, river, WATER)


def pick_roads(
    shape: tuple[int, int],
    rng: np.random.Generator,
    n_roads: int,
    widths: tuple[float, float] = (7.0, 12.0),
) -> list[Curve]:
    """Roads crossing the tile (not yet painted), avoiding near-duplicate parallel roads."""
    roads: list[Curve] = []
    for _ in range(n_roads):
        for _ in range(10):
            road = random_road(shape, rng, rng.uniform(*widths))
            if not any(too_close(road, other) for other in roads):
                break
        roads.append(road)
    return roads


def land_cover(height: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """Builds the appearance-code map of a scene (before no-data)."""
    shape = (height, width)
    app = np.full(shape, FIELD, dtype=np.uint8)
    vegetation(app, rng)

    # Roads (curves only for now), settlements with lawns and side streets.
    scale = max(height, width) / 512.0
    n_roads = int(rng.integers(1 if scale < 0.4 else 2, 4)) + max(0, round(scale) - 1)
    roads = pick_roads(shape, rng, n_roads)
    n_settle = 1 + int(rng.poisson(height * width / 800.0**2))
    settlements = [settlement(app, rng, roads) for _ in range(n_settle)]

    paint_water(app, rng, roads)

    # Roads over everything (bridges), side streets stop at water.
    for road in roads:
        paint_curve(app, road, ROAD)
    for _, _, streets in settlements:
        for street in streets:
            paint_curve(app, street, ROAD, never=(WATER,))

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
            paint_curve(app, road, ROAD_PAINT, extra_half=dash - road.half, only=(ROAD,))
    return app
