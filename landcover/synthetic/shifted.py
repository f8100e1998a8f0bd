"""The shifted world: scenes whose tiles differ the way real NAIP tiles do.

Beside the easy sample (one radiometry, generous classes), this profile has the difficulties
a model meets on real imagery (``landcover data synth OUT --profile shifted``):

- tiles belong to **flights** (:mod:`landcover.synthetic.flights`) that differ in calibration,
  gamma, haze, sun and shadows, season, noise and JPEG compression; training tiles come from
  three flights, validation and test tiles from three others, and ``train_reflown/`` holds the
  training scenes (byte-identical labels) as a seventh flight, seen by no split;
- the class mix varies by tile: mostly-forest tiles, farmland, and small towns;
- buildings (impervious, code 5) are **rare**: single houses and sheds 8-20 m across, within a
  budget per tile kind that keeps them at or under 0.5 % of the training pixels; roads are
  lanes that run partly under the canopy.

Canopy over a road is labelled tree canopy (2), as the Chesapeake 7-class edition labels it
(the label says what is seen from above); the visible road pieces between crowns are road (6).
The world has no no-data pixels.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.ndimage import gaussian_filter

from landcover.fileio import atomic_write_text
from landcover.synthetic.curves import Curve, curve_at, fine_noise, paint_curve, smooth_noise
from landcover.synthetic.flights import Flight, Ground, flight_plan, render_flight
from landcover.synthetic.landscape import (
    FIELD,
    ROAD,
    TREE,
    WATER,
    free,
    paint_building,
    paint_water,
    pick_roads,
    rect,
    settlement,
    vegetation,
)
from landcover.synthetic.synthetic import (
    LABEL_OF,
    appearance_tables,
    parcels,
    surface_mult,
    tile_origin,
    write_pair,
)

MIN_SHIFTED_SIZE: int = 128
"""Smallest tile side of the shifted world (a tile must hold a few 8-20 m buildings)."""


@dataclass(frozen=True)
class TileKind:
    """What a tile is mostly made of.

    Attributes:
        name: ``forest``, ``farmland`` or ``town``.
        forest: Range of the forest fraction.
        roads: Range (inclusive) of the number of roads crossing the tile.
        road_width: Range of the road width in metres.
        building_share: Most pixels of the tile that buildings may cover (a fraction).
        settlement: Whether the tile has a town centre with lawns and side streets.
    """

    name: str
    forest: tuple[float, float]
    roads: tuple[int, int]
    road_width: tuple[float, float]
    building_share: float
    settlement: bool


FOREST = TileKind("forest", (0.74, 0.86), (1, 1), (5.0, 7.0), 0.0015, False)
FARMLAND = TileKind("farmland", (0.06, 0.18), (1, 2), (6.0, 9.0), 0.0030, False)
TOWN = TileKind("town", (0.22, 0.36), (2, 3), (7.0, 10.0), 0.0100, True)

TRAIN_KINDS: tuple[TileKind, ...] = (FARMLAND, FOREST, TOWN)
"""Kinds of the training tiles in turn. Any run of them averages <= 0.49 % building pixels."""

HELD_OUT_KINDS: tuple[TileKind, ...] = (TOWN, FARMLAND, FOREST)
"""Kinds of the validation and test tiles in turn (a town first: buildings in every split)."""


def _canopy_over_roads(app: np.ndarray, forest: np.ndarray, rng: np.random.Generator) -> None:
    """Closes the canopy over road pixels inside the forest, in patches along the road."""
    cover = gaussian_filter(forest.astype(np.float32), 5.0) > 0.5
    gaps = smooth_noise(app.shape, 7.0, rng) > -0.2
    app[(app == ROAD) & cover & gaps] = TREE


def _place_buildings(
    app: np.ndarray, rng: np.random.Generator, curves: list[Curve], budget: int
) -> int:
    """Places single 8-20 m buildings beside the curves, never more than ``budget`` pixels.

    Returns:
        The building pixels placed.
    """
    placed = 0
    for _ in range(400):
        if budget - placed < 64 or not curves:
            break
        curve = curves[int(rng.integers(0, len(curves)))]
        length, depth = rng.uniform(8.0, 20.0, size=2)
        if curve.t1 - curve.t0 <= length + 2:
            continue
        t = rng.uniform(curve.t0, curve.t1 - length - 1)
        _, half, slope = curve_at(curve, int(t + length / 2))
        setback = half + abs(slope) * length / 2 + rng.uniform(3.0, 12.0)
        side = 1.0 if rng.random() < 0.5 else -1.0
        y0, y1, x0, x1 = rect(curve, t, length, side * setback, depth)
        area = (y1 - y0) * (x1 - x0)
        if placed + area <= budget and free(app, y0, y1, x0, x1, pad=4):
            paint_building(app, rng, y0, y1, x0, x1)
            placed += area
    return placed


def shifted_layout(size: int, kind: TileKind, rng: np.random.Generator) -> np.ndarray:
    """Builds the appearance-code map of one shifted-world tile.

    Args:
        size: Tile side in pixels (1 m).
        kind: What the tile is mostly made of.
        rng: Random generator.

    Returns:
        (size, size) uint8 appearance codes; ``synthetic.LABEL_OF`` maps them to labels.
    """
    app = np.full((size, size), FIELD, dtype=np.uint8)
    vegetation(app, rng, kind.forest)
    n_roads = int(rng.integers(kind.roads[0], kind.roads[1] + 1))
    roads = pick_roads(app.shape, rng, n_roads, kind.road_width)
    streets: list[Curve] = []
    if kind.settlement:
        _, _, streets = settlement(app, rng, roads)
    forest = app == TREE
    paint_water(app, rng, roads)
    for road in roads:
        paint_curve(app, road, ROAD)
    for street in streets:
        paint_curve(app, street, ROAD, never=(WATER,))
    _canopy_over_roads(app, forest, rng)
    budget = int(kind.building_share * size * size)
    _place_buildings(app, rng, streets + roads, budget)
    return app


def shifted_ground(size: int, kind: TileKind, rng: np.random.Generator) -> Ground:
    """One shifted-world scene on the ground: layout, summer spectra, texture, crops.

    Args:
        size: Tile side in pixels (1 m).
        kind: What the tile is mostly made of.
        rng: Random generator; the scene depends only on its state.

    Returns:
        The ground, ready for :func:`landcover.synthetic.flights.render_flight`.
    """
    app = shifted_layout(size, kind, rng)
    means, texture = appearance_tables(rng)
    mult = surface_mult(app, texture, rng)
    parcel, offsets = parcels(app, rng)
    crown = fine_noise(app.shape, 2.5, rng)
    return Ground(
        app=app,
        means=means,
        mult=mult,
        parcel=parcel,
        parcel_offsets=offsets,
        crown=crown,
        tree_height=float(rng.uniform(12.0, 20.0)),
        building_height=float(rng.uniform(5.0, 9.0)),
    )


def ground_label(ground: Ground) -> np.ndarray:
    """Chesapeake label codes of a scene.

    Args:
        ground: The scene.

    Returns:
        (H, W) uint8 label codes.
    """
    return LABEL_OF[ground.app]


SPLITS: tuple[str, ...] = ("train", "val", "test")
"""The splits of the shifted world, each a folder of pairs."""

REFLOWN: str = "train_reflown"
"""Folder of the training scenes rendered as a flight that no split saw."""


@dataclass(frozen=True)
class WorldTile:
    """One written tile of the shifted world.

    Attributes:
        name: Tile name (files ``{name}_naip.tif`` and ``{name}_lc.tif``).
        split: ``train``, ``val``, ``test`` or ``train_reflown``.
        kind: Name of the tile's kind (``forest``, ``farmland``, ``town``).
        flight: The flight the imagery comes from.
        image: Path of the imagery.
        label: Path of the label raster.
    """

    name: str
    split: str
    kind: str
    flight: Flight
    image: Path
    label: Path


def split_sizes(tiles: int) -> dict[str, int]:
    """Tiles per split for ``tiles`` training tiles (validation a quarter, test a half).

    Args:
        tiles: Training tiles.

    Returns:
        Split name to tile count, each at least 1.
    """
    return {"train": tiles, "val": max(1, round(tiles / 4)), "test": max(1, round(tiles / 2))}


def write_shifted_world(
    out_dir: str | Path, tiles: int = 16, size: int = 256, seed: int = 0, prefix: str = "synth"
) -> list[WorldTile]:
    """Writes the shifted world: train/val/test folders, train_reflown, flights and manifest.

    Tile ``i`` of split ``s`` is drawn from ``np.random.default_rng([seed, s, i])`` (its
    ground) and its flight's noise from a stream of its own, so the same seed gives
    byte-identical files. ``flights.csv`` lists every tile with its split, kind and flight
    parameters; ``manifest.csv`` (columns image, label, split) lists train, val and test.

    Args:
        out_dir: Output folder (created if missing).
        tiles: Training tiles; validation gets a quarter as many, test half as many.
        size: Tile side in pixels (1 m).
        seed: Random seed (non-negative).
        prefix: File-name prefix; tile ``i`` of a split is ``f"{prefix}_{split}_{i:03d}"``.

    Returns:
        The written tiles, train_reflown included.

    Raises:
        ValueError: If ``tiles`` < 1, ``seed`` < 0 or ``size`` < :data:`MIN_SHIFTED_SIZE`.
    """
    if tiles < 1:
        raise ValueError(f"tiles must be >= 1, got {tiles}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    if size < MIN_SHIFTED_SIZE:
        raise ValueError(f"size must be >= {MIN_SHIFTED_SIZE} for the shifted world, got {size}")
    out = Path(out_dir)
    plan = flight_plan(seed)
    written: list[WorldTile] = []
    index = 0
    for split_id, (split, count) in enumerate(split_sizes(tiles).items()):
        kinds = TRAIN_KINDS if split == "train" else HELD_OUT_KINDS
        flights = plan[split]
        for i in range(count):
            kind = kinds[i % len(kinds)]
            flight = flights[(i + i // len(kinds)) % len(flights)]
            name = f"{prefix}_{split}_{i:03d}"
            ground = shifted_ground(size, kind, np.random.default_rng([seed, split_id, i]))
            label = ground_label(ground)
            origin = tile_origin(index, size)
            index += 1
            renders = [(split, flight, 1)]
            if split == "train":
                renders.append((REFLOWN, plan["reflown"][0], 2))
            for folder, seen_by, stream in renders:
                noise = np.random.default_rng([seed, split_id, i, stream])
                image = render_flight(ground, seen_by, noise)
                paths = write_pair(out / folder, name, image, label, origin)
                written.append(WorldTile(name, folder, kind.name, seen_by, *paths))
    atomic_write_text(out / "flights.csv", _flights_csv(written))
    atomic_write_text(out / "manifest.csv", _manifest_csv(written, out))
    return written


def world_files(out: Path) -> list[Path]:
    """The files of a shifted world already in a folder, as its ``flights.csv`` lists them.

    Args:
        out: The folder.

    Returns:
        Its tile pairs that exist and ``flights.csv`` and ``manifest.csv``; none without a
        ``flights.csv``.
    """
    flights = out / "flights.csv"
    if not flights.is_file():
        return []
    with flights.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    tiles = [
        out / row["split"] / f"{row['tile']}{suffix}"
        for row in rows
        for suffix in ("_naip.tif", "_lc.tif")
    ]
    return [f for f in (*tiles, flights, out / "manifest.csv") if f.is_file()]


def _flights_csv(tiles: list[WorldTile]) -> str:
    """``flights.csv``: tile, split, kind, flight and the flight's parameters."""
    rows = [{"tile": t.name, "split": t.split, "kind": t.kind, **t.flight.record()} for t in tiles]
    rows = [{"flight" if k == "name" else k: v for k, v in row.items()} for row in rows]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def _manifest_csv(tiles: list[WorldTile], out: Path) -> str:
    """``manifest.csv``: image and label paths relative to ``out``, split train/val/test."""
    lines = ["image,label,split"]
    for t in tiles:
        if t.split in SPLITS:
            image, label = t.image.relative_to(out), t.label.relative_to(out)
            lines.append(f"{image.as_posix()},{label.as_posix()},{t.split}")
    return "\n".join(lines) + "\n"
