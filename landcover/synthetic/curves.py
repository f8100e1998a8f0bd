"""Noise fields, curves and masks the synthetic world is drawn with.

Smooth multi-scale noise (:func:`smooth_noise`) shapes forest, fields and lakes; a
:class:`Curve` is a centre line with a width (roads and rivers: :func:`random_road`,
:func:`random_river`), painted into an appearance array by :func:`paint_curve`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.ndimage import gaussian_filter, gaussian_filter1d


@dataclass
class Curve:
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
        """The position along the tile just past the curve's end."""
        return self.t0 + len(self.centre)


def smooth_noise(shape: tuple[int, int], sigma: float, rng: np.random.Generator) -> np.ndarray:
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


def fine_noise(shape: tuple[int, int], sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Unit-variance float32 noise smoothed at a small scale ``sigma`` (a few pixels)."""
    noise = gaussian_filter(rng.standard_normal(shape, dtype=np.float32), sigma, output=np.float32)
    noise *= np.float32(2.0 * math.sqrt(math.pi) * sigma)
    return noise


def smooth_1d(n: int, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Unit-variance smooth 1-D noise of length ``n``."""
    pad = int(3 * sigma) + 1
    x = gaussian_filter1d(rng.standard_normal(n + 2 * pad), sigma, mode="wrap")[pad : pad + n]
    return x / (x.std() + 1e-9)


def subsample(a: np.ndarray, max_points: int = 250_000) -> np.ndarray:
    """A strided view with at most about ``max_points`` elements, for quantiles."""
    stride = max(1, int(math.sqrt(a.size / max_points)))
    return a[::stride, ::stride]


def paint_curve(
    app: np.ndarray,
    curve: Curve,
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


def curve_from_centre(along: int, t0: int, centre: np.ndarray, width: np.ndarray) -> Curve:
    """Builds a curve whose perpendicular width is ``width`` (slope-corrected half width)."""
    slope = np.gradient(centre) if len(centre) > 1 else np.zeros_like(centre)
    half = 0.5 * width * np.sqrt(1.0 + slope * slope)
    return Curve(along=along, t0=t0, centre=centre.astype(np.float64), half=half)


def random_road(shape: tuple[int, int], rng: np.random.Generator, width: float) -> Curve:
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
    return curve_from_centre(along, 0, centre, np.full(n, width))


def too_close(a: Curve, b: Curve, gap: float = 60.0) -> bool:
    """True when two full-length curves run side by side (closer than ``gap`` px for long)."""
    if a.along != b.along or len(a.centre) != len(b.centre):
        return False
    return bool(np.mean(np.abs(a.centre - b.centre) < gap) > 0.25)


def random_river(shape: tuple[int, int], rng: np.random.Generator) -> Curve:
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
    width = rng.uniform(8.0, 25.0) * (1.0 + 0.15 * smooth_1d(n, 60.0, rng))
    return curve_from_centre(along, 0, centre, np.maximum(width, 6.0))


def curve_at(curve: Curve, t: int) -> tuple[float, float, float]:
    """Centre, half width and slope of a curve at position ``t`` (inside its range)."""
    k = min(max(t - curve.t0, 0), len(curve.centre) - 1)
    k2 = min(k + 1, len(curve.centre) - 1)
    k1 = max(k2 - 1, 0)
    slope = float(curve.centre[k2] - curve.centre[k1])
    return float(curve.centre[k]), float(curve.half[k]), slope


def shift_mask(mask: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """The mask moved by (dy, dx) pixels (dy, dx >= 0 down/right, < 0 up/left)."""
    out = np.zeros_like(mask)
    h, w = mask.shape
    if abs(dy) >= h or abs(dx) >= w:
        return out
    src = mask[max(0, -dy) : h - max(0, dy), max(0, -dx) : w - max(0, dx)]
    out[max(0, dy) : h - max(0, -dy), max(0, dx) : w - max(0, -dx)] = src
    return out
