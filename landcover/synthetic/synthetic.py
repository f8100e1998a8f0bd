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

from pathlib import Path

import numpy as np
from rasterio.transform import Affine
from scipy.ndimage import gaussian_filter

from landcover.synthetic.curves import fine_noise, shift_mask, smooth_noise
from landcover.synthetic.landscape import (
    BARREN,
    FIELD,
    IMPERVIOUS,
    N_ROOF_PAIRS,
    PARKING,
    ROAD,
    ROAD_PAINT,
    ROOF0,
    STALL_PAINT,
    TREE,
    WATER,
    land_cover,
)
from landcover.synthetic.nodatamasks import nodata_masks
from landcover.synthetic.tiffile import block_size, write_tif

CHESAPEAKE_NODATA: int = 15
"""Label code of no-data pixels in Chesapeake land-cover rasters."""

IMAGE_NODATA: int = 0
"""Image value (in all bands) of no-data pixels."""

MIN_SIZE: int = 16
"""Smallest tile height or width the generator accepts."""

_ORIGIN_EASTING = 350_000.0
_ORIGIN_NORTHING = 4_300_000.0
_TILE_GAP_M = 1000.0


_SPECTRA: dict[int, tuple[tuple[int, int, int, int], float, int]] = {
    # appearance: ((R, G, B, NIR) mean, texture strength, label code)
    WATER: ((40, 55, 60, 20), 0.05, WATER),
    TREE: ((55, 82, 52, 150), 0.30, TREE),
    FIELD: ((110, 135, 90, 170), 0.06, FIELD),
    BARREN: ((170, 150, 125, 140), 0.08, BARREN),
    ROAD: ((95, 95, 100, 85), 0.05, ROAD),
    PARKING: ((108, 108, 112, 95), 0.05, IMPERVIOUS),
    STALL_PAINT: ((205, 205, 200, 180), 0.03, IMPERVIOUS),
    ROAD_PAINT: ((200, 185, 120, 160), 0.03, ROAD),
}


def label_table() -> np.ndarray:
    """Label code of every appearance code (256 entries)."""
    labels = np.full(256, CHESAPEAKE_NODATA, dtype=np.uint8)
    for code, (_, _, label) in _SPECTRA.items():
        labels[code] = label
    labels[ROOF0:] = IMPERVIOUS
    return labels


LABEL_OF = label_table()


def appearance_tables(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
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
    kinds = rng.choice(4, size=N_ROOF_PAIRS, p=[0.55, 0.2, 0.15, 0.1])
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
        means[ROOF0 + 2 * k] = sunlit
        means[ROOF0 + 2 * k + 1] = sunlit * np.float32(0.82)
    texture[ROOF0:] = 0.03
    return means, texture


def parcels(app: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
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


def surface_mult(app: np.ndarray, texture: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One multiplicative map shared by all bands: regional brightness and texture.

    Texture is fine grain plus crown-sized blobs, strong for trees and weak elsewhere
    (``texture`` holds the strength of each appearance code).
    """
    mult = smooth_noise(app.shape, 60.0, rng)
    mult *= np.float32(0.07)
    mult += np.float32(1.0)
    grain = fine_noise(app.shape, 1.0, rng)
    grain *= np.float32(0.5)
    grain += np.float32(0.85) * fine_noise(app.shape, 2.2, rng)
    grain *= texture[app]
    grain += np.float32(1.0)
    mult *= grain
    return mult


def _render(app: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Renders the appearance map as a (4, H, W) uint8 image (values 1..255)."""
    height, width = app.shape
    means, texture = appearance_tables(rng)
    mult = surface_mult(app, texture, rng)
    sx = int(rng.integers(2, 5)) * (1 if rng.random() < 0.5 else -1)
    sy = int(rng.integers(2, 5))
    tall = (app == TREE) | (app >= ROOF0)
    shadow = shift_mask(tall, sy, sx) & ~tall
    del tall
    mult[shadow] *= np.float32(0.62)
    del shadow

    pid, offsets = parcels(app, rng)
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
    app = land_cover(height, width, rng)
    image_nd, label_nd = nodata_masks(height, width, rng)
    image = _render(app, rng)
    label = LABEL_OF[app]
    del app
    if label_nd is not None:
        label[label_nd] = CHESAPEAKE_NODATA
    if image_nd is not None:
        label[image_nd] = CHESAPEAKE_NODATA
        image[:, image_nd] = IMAGE_NODATA
    return image, label


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
    bx, by = block_size(width), block_size(height)
    if bx >= 16 and by >= 16:
        common.update(tiled=True, blockxsize=bx, blockysize=by)
    else:
        common["tiled"] = False
    image_path = out_dir / f"{name}_naip.tif"
    label_path = out_dir / f"{name}_lc.tif"
    write_tif(
        image_path,
        image,
        {**common, "count": 4, "nodata": IMAGE_NODATA, "photometric": "RGB", "alpha": "NO"},
        ["red", "green", "blue", "nir"],
    )
    write_tif(
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
