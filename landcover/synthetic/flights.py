"""The radiometry of a NAIP flight, applied to a synthetic scene.

NAIP is flown state by state every two or three years, by different contractors and cameras,
in different seasons and at different times of day. A :class:`Flight` holds what makes one
acquisition look unlike another, and :func:`render_flight` draws a :class:`Ground` (the scene's
land cover and surface, the same whatever the flight) as that flight saw it:

1. season: ``senescence`` 0 is summer, 1 late autumn / leaf-off: tree canopy and fields lose
   NIR, tree crowns turn red-brown (each crown its own way), fields go browner (red up,
   green down);
2. shadows cast by trees and buildings away from the sun, ``height / tan(elevation)`` long,
   filled by diffuse light as the haze grows;
3. optics: a blur (the sensor's point spread);
4. calibration: a gamma curve, then a per-band gain and offset (tens of DN between flights);
5. haze: a veil that lifts dark values and lowers contrast, strongest in blue, weakest in NIR;
6. sensor noise, then a JPEG round trip (RGB as YCbCr with chroma subsampling, NIR as a grey
   image) at the flight's quality, as NAIP's compressed deliveries carry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import numpy as np
from rasterio.io import MemoryFile
from rasterio.transform import Affine
from scipy.ndimage import gaussian_filter

from landcover.synthetic.curves import shift_mask
from landcover.synthetic.landscape import FIELD, ROOF0, TREE

_HAZE_WEIGHT = np.array([0.55, 0.7, 1.0, 0.25], dtype=np.float32)  # R, G, B, NIR
_HAZE_VEIL = np.array([150.0, 160.0, 185.0, 125.0], dtype=np.float32)


@dataclass(frozen=True)
class Flight:
    """One acquisition's look: season, sun, calibration, atmosphere and sensor.

    Attributes:
        name: Flight name, e.g. ``train-a``.
        year: Nominal acquisition year (for the record only).
        senescence: 0 summer (full leaf), 1 late autumn / leaf-off.
        gain: Per-band gain (R, G, B, NIR) after the gamma curve.
        offset: Per-band offset in DN (R, G, B, NIR) after the gain.
        gamma: Exponent of the tone curve on values scaled to 0..1 (< 1 brightens).
        haze: Strength of the veil, 0 (clear) to about 0.35 (milky).
        sun_azimuth: Sun azimuth in degrees clockwise from north.
        sun_elevation: Sun elevation in degrees above the horizon.
        noise: Standard deviation of the sensor noise in DN.
        blur: Standard deviation of the optical blur in pixels.
        jpeg_quality: JPEG quality of the compressed delivery (1-100).
    """

    name: str
    year: int
    senescence: float
    gain: tuple[float, float, float, float]
    offset: tuple[float, float, float, float]
    gamma: float
    haze: float
    sun_azimuth: float
    sun_elevation: float
    noise: float
    blur: float
    jpeg_quality: int

    @property
    def season(self) -> str:
        """``summer``, ``early autumn`` or ``autumn`` from the senescence."""
        if self.senescence < 0.25:
            return "summer"
        return "early autumn" if self.senescence < 0.6 else "autumn"

    def record(self) -> dict[str, str]:
        """The flight as flat CSV columns (bands spelled out, numbers rounded).

        Returns:
            Column name to text, in field order, with ``season`` after ``year``.
        """
        row: dict[str, str] = {}
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, tuple):
                for band, v in zip(("r", "g", "b", "nir"), value, strict=True):
                    row[f"{field.name}_{band}"] = f"{v:.3f}"
            elif isinstance(value, float):
                row[field.name] = f"{value:.3f}"
            else:
                row[field.name] = str(value)
            if field.name == "year":
                row["season"] = self.season
        return row


@dataclass(frozen=True)
class Ground:
    """A scene as it is on the ground, whatever the flight.

    Attributes:
        app: (H, W) uint8 appearance codes (see :mod:`landcover.synthetic.synthetic`).
        means: (256, 4) float32 summer spectrum (R, G, B, NIR) of each appearance code.
        mult: (H, W) float32 brightness and texture shared by all bands.
        parcel: (H, W) int32 field-parcel index (the last index: not a field).
        parcel_offsets: (n_parcels + 1, 4) float32 band offsets of each parcel's crop.
        crown: (H, W) float32 unit-variance crown-scale noise (autumn colours of tree crowns).
        tree_height: Canopy height in metres.
        building_height: Building height in metres.
    """

    app: np.ndarray
    means: np.ndarray
    mult: np.ndarray
    parcel: np.ndarray
    parcel_offsets: np.ndarray
    crown: np.ndarray
    tree_height: float
    building_height: float


def _seasonal_means(means: np.ndarray, senescence: float) -> np.ndarray:
    """Appearance spectra of a season: vegetation loses NIR, fields go browner."""
    out = means.copy()
    s = np.float32(senescence)
    out[TREE] = out[TREE] * np.array([1.0, 1.0, 1.0, 1.0 - 0.45 * s], dtype=np.float32)
    out[TREE] += np.array([38.0, -14.0, -8.0, 0.0], dtype=np.float32) * s
    out[FIELD] = out[FIELD] * np.array([1.0, 1.0, 1.0, 1.0 - 0.4 * s], dtype=np.float32)
    out[FIELD] += np.array([32.0, -22.0, -6.0, 0.0], dtype=np.float32) * s
    return np.clip(out, 5.0, 250.0)


def shadow_mask(ground: Ground, flight: Flight) -> np.ndarray:
    """Pixels in the shadow of trees or buildings under the flight's sun.

    Args:
        ground: The scene.
        flight: The flight (sun azimuth and elevation).

    Returns:
        (H, W) bool mask, False on the trees and roofs themselves.
    """
    az = math.radians(flight.sun_azimuth)
    # Shadows point away from the sun; rows grow southwards, columns eastwards.
    dy, dx = math.cos(az), -math.sin(az)
    reach = 1.0 / math.tan(math.radians(flight.sun_elevation))
    trees = ground.app == TREE
    roofs = ground.app >= ROOF0
    shadow = np.zeros_like(trees)
    for tall, height in ((trees, ground.tree_height), (roofs, ground.building_height)):
        if not tall.any():
            continue
        for step in range(1, max(1, round(height * reach)) + 1):
            shadow |= shift_mask(tall, round(step * dy), round(step * dx))
    return shadow & ~(trees | roofs)


def _jpeg_round_trip(image: np.ndarray, quality: int) -> np.ndarray:
    """The image after JPEG compression: RGB as YCbCr (chroma subsampled), NIR as grey."""
    _, height, width = image.shape
    out = np.empty_like(image)
    parts = ((slice(0, 3), "YCBCR"), (slice(3, 4), "MINISBLACK"))
    for bands, photometric in parts:
        data = image[bands]
        profile = {
            "driver": "GTiff",
            "height": height,
            "width": width,
            "count": data.shape[0],
            "dtype": "uint8",
            "compress": "JPEG",
            "jpeg_quality": int(quality),
            "photometric": photometric,
            "transform": Affine(1.0, 0.0, 1000.0, 0.0, -1.0, 1000.0),  # any grid: no warning
        }
        with MemoryFile() as mem:
            with mem.open(**profile) as dst:
                dst.write(data)
            with mem.open() as src:
                out[bands] = src.read()
    return out


def render_flight(ground: Ground, flight: Flight, rng: np.random.Generator) -> np.ndarray:
    """Renders the ground as the flight saw it.

    Args:
        ground: The scene.
        flight: The flight.
        rng: Random generator of the sensor noise.

    Returns:
        (4, H, W) uint8 image, bands R, G, B, NIR, values 1..255 (0 is kept for no data).
    """
    app = ground.app
    means = _seasonal_means(ground.means, flight.senescence)
    offsets = ground.parcel_offsets.copy()
    offsets[:, 3] *= np.float32(1.0 - 0.4 * flight.senescence)
    trees = app == TREE
    # Autumn crowns: each its own shade between green and red-brown.
    crown = ground.crown[trees] * np.float32(22.0 * flight.senescence)
    shade = np.float32(0.55 + 0.3 * min(flight.haze / 0.35, 1.0))
    shadow = shadow_mask(ground, flight)

    value = np.empty((4, *app.shape), dtype=np.float32)
    for band in range(4):
        plane = means[:, band][app]
        if band < 2:
            plane[trees] += crown if band == 0 else -0.5 * crown
        plane *= ground.mult
        plane += offsets[:, band][ground.parcel]
        plane[shadow] *= shade
        value[band] = gaussian_filter(plane, flight.blur, output=np.float32)

    np.clip(value, 0.0, 255.0, out=value)
    value /= np.float32(255.0)
    np.power(value, np.float32(flight.gamma), out=value)
    value *= np.float32(255.0)
    value *= np.asarray(flight.gain, dtype=np.float32)[:, None, None]
    value += np.asarray(flight.offset, dtype=np.float32)[:, None, None]
    veil = np.float32(flight.haze) * _HAZE_WEIGHT[:, None, None]
    value *= 1.0 - veil
    value += veil * _HAZE_VEIL[:, None, None]
    value += rng.standard_normal(value.shape, dtype=np.float32) * np.float32(flight.noise)
    np.clip(value, 1.0, 255.0, out=value)
    image = np.rint(value).astype(np.uint8)
    image = _jpeg_round_trip(image, flight.jpeg_quality)
    np.maximum(image, 1, out=image)
    return image


# The flights' nominal looks by role, jittered by the seed in flight_plan. Fields: name, year,
# senescence, gain, offset, gamma, haze, sun azimuth and elevation, noise, blur, JPEG quality.
_NOMINAL: tuple[tuple[str, Flight], ...] = (
    ("train", Flight("train-a", 2013, 0.05, (1.0, 1.0, 1.0, 1.0), (0, 0, 0, 0), 1.0, 0.05, 140, 60, 2.0, 0.6, 90)),
    ("train", Flight("train-b", 2015, 0.65, (1.08, 0.95, 0.92, 1.0), (12, 6, 10, -5), 0.92, 0.15, 165, 40, 3.0, 0.8, 75)),
    ("train", Flight("train-c", 2017, 0.2, (0.88, 0.92, 0.95, 1.12), (-8, -6, 4, 10), 1.1, 0.25, 120, 52, 2.5, 0.7, 82)),
    ("val", Flight("val-a", 2014, 0.4, (1.05, 1.05, 1.0, 0.9), (8, 10, 14, -12), 1.05, 0.1, 200, 48, 3.0, 0.7, 80)),
    ("test", Flight("test-a", 2016, 0.85, (1.12, 1.0, 0.95, 0.95), (16, 8, 18, -15), 0.9, 0.28, 170, 36, 4.0, 0.9, 65)),
    ("test", Flight("test-b", 2018, 0.1, (1.15, 1.12, 1.05, 1.2), (-12, -10, -4, 8), 1.15, 0.02, 225, 62, 1.5, 0.5, 88)),
    ("reflown", Flight("reflown-a", 2011, 0.05, (0.9, 0.95, 1.0, 1.3), (14, 10, 20, 12), 0.95, 0.12, 235, 58, 2.5, 0.6, 80)),
)  # fmt: skip


def flight_plan(seed: int) -> dict[str, list[Flight]]:
    """The flights of the shifted world, by role, jittered by the seed.

    Roles: ``train`` (three flights: summer, early autumn and a hazy one), ``val`` (one),
    ``test`` (a hazy late-autumn flight with a low sun, and a bright summer one) and
    ``reflown`` (an earlier summer with a brighter NIR, for the training scenes).

    Args:
        seed: Random seed; the same seed gives the same flights.

    Returns:
        Role to flights, in a fixed order.
    """
    rng = np.random.default_rng([seed, 7919])
    plan: dict[str, list[Flight]] = {}
    for role, f in _NOMINAL:
        flight = replace(
            f,
            senescence=float(np.clip(f.senescence + rng.normal(0.0, 0.04), 0.0, 1.0)),
            gain=tuple(float(g * (1.0 + rng.normal(0.0, 0.02))) for g in f.gain),
            offset=tuple(float(o + rng.normal(0.0, 3.0)) for o in f.offset),
            gamma=float(f.gamma + rng.normal(0.0, 0.02)),
            haze=float(max(0.0, f.haze + rng.normal(0.0, 0.02))),
            sun_azimuth=float((f.sun_azimuth + rng.uniform(-10.0, 10.0)) % 360.0),
            sun_elevation=float(f.sun_elevation + rng.uniform(-3.0, 3.0)),
            noise=float(max(0.5, f.noise + rng.normal(0.0, 0.2))),
            blur=float(f.blur),
            jpeg_quality=int(f.jpeg_quality + rng.integers(-3, 4)),
        )
        plan.setdefault(role, []).append(flight)
    return plan
