"""Band statistics and class frequencies of tile pairs, measured exactly in bounded memory.

:class:`DataStats` is the one accumulator behind ``landcover data stats`` and ``data.mean:
auto``: it keeps a 256-bin histogram of every band's valid pixels and the pixel count of every
class, all int64. Mean and standard deviation follow exactly from the histograms (sums of
integers), so the result does not depend on the order in which tiles or windows were added,
and histograms of several workers add up to the histogram of their union.

The no-data rules are every command's (:func:`landcover.data.raster.nodata_mask`): an image
pixel is no-data when the file declares a nodata value and every band equals it, or when its
per-dataset mask marks it (a band tagged alpha is data); such pixels count in neither the band
statistics nor the class counts. Label codes the mapping ignores count in no
class (but their image pixels do count in the band statistics).

:func:`landcover.data.measure.measure_pairs` fills one from files, window by window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from landcover.classes import IGNORE_INDEX
from landcover.data.raster import (
    TileArrays,
)
from landcover.errors import DataError

WINDOW_PIXELS = 1 << 18
"""Pixels per window read from a file (512 x 512: 1 MB of 4-band imagery)."""


@dataclass
class DataStats:
    """Exact pixel statistics of tile pairs: band histograms and class pixel counts.

    Attributes:
        band_hist: ``(bands, 256)`` int64 counts of each value of each band, over valid pixels.
        class_counts: ``(num_classes,)`` int64 labelled pixels of each class.
        tiles: Number of tiles added.
    """

    band_hist: np.ndarray
    class_counts: np.ndarray
    tiles: int = 0

    @classmethod
    def empty(cls, bands: int, num_classes: int) -> DataStats:
        """An accumulator with nothing added yet.

        Args:
            bands: Number of image bands.
            num_classes: Number of training classes.

        Returns:
            The empty accumulator.
        """
        return cls(np.zeros((bands, 256), dtype=np.int64), np.zeros(num_classes, dtype=np.int64), 0)

    @property
    def bands(self) -> int:
        """Number of image bands."""
        return self.band_hist.shape[0]

    @property
    def num_classes(self) -> int:
        """Number of training classes."""
        return self.class_counts.shape[0]

    @property
    def valid_pixels(self) -> int:
        """Image pixels with data (the band statistics' sample size)."""
        return int(self.band_hist[0].sum()) if self.bands else 0

    @property
    def labelled_pixels(self) -> int:
        """Pixels of some class (ignored codes and image no-data excluded)."""
        return int(self.class_counts.sum())

    def add(self, image: np.ndarray, classes: np.ndarray, nodata: np.ndarray | None) -> None:
        """Adds pixels: an image array and its class indices on the same grid.

        Works on any size: large arrays are processed in strips of about
        :data:`WINDOW_PIXELS` pixels, so the temporaries stay small.

        Args:
            image: ``(H, W, C)`` uint8 imagery (channels last, as training holds it).
            classes: ``(H, W)`` uint8 class indices; :data:`IGNORE_INDEX` counts in no class.
            nodata: ``(H, W)`` bool, True where the image has no data
                (:func:`landcover.data.raster.nodata_mask`), or ``None`` when all has data.
        """
        height, width = classes.shape
        rows = max(1, WINDOW_PIXELS // max(width, 1))
        for top in range(0, height, rows):
            strip = None if nodata is None else nodata[top : top + rows]
            self._add_strip(image[top : top + rows], classes[top : top + rows], strip)

    def _add_strip(self, image: np.ndarray, classes: np.ndarray, nodata: np.ndarray | None) -> None:
        valid = None if nodata is None else ~nodata
        for band in range(self.bands):
            values = image[..., band]
            values = values.ravel() if valid is None else values[valid]
            self.band_hist[band] += np.bincount(values, minlength=256)[:256]
        if valid is not None:
            classes = np.where(valid, classes, IGNORE_INDEX)
        counts = np.bincount(classes.ravel(), minlength=256)
        self.class_counts += counts[: self.num_classes]

    def add_tile(self, tile: TileArrays) -> None:
        """Adds a tile held in memory (its labels already mark image no-data as ignored).

        Args:
            tile: The tile.
        """
        self.add(tile.image, tile.label, tile.nodata)
        self.tiles += 1

    def to_vector(self) -> np.ndarray:
        """Every count in one int64 vector (for an all-reduce across workers).

        Returns:
            ``[band_hist..., class_counts..., tiles]``.
        """
        return np.concatenate([self.band_hist.ravel(), self.class_counts, [self.tiles]])

    @classmethod
    def from_vector(cls, vector: np.ndarray, bands: int, num_classes: int) -> DataStats:
        """Rebuilds an accumulator from :meth:`to_vector`'s layout.

        Args:
            vector: The int64 vector.
            bands: Number of image bands.
            num_classes: Number of training classes.

        Returns:
            The accumulator.
        """
        vector = np.asarray(vector, dtype=np.int64)
        split = bands * 256
        return cls(
            vector[:split].reshape(bands, 256).copy(),
            vector[split : split + num_classes].copy(),
            int(vector[split + num_classes]),
        )

    def _mean_var(self, band: int) -> tuple[float, float]:
        """Mean and population variance of a band's valid values (0..255), from exact sums."""
        if self.valid_pixels == 0:
            raise DataError("no valid image pixel to measure (every pixel is no-data)")
        hist = [int(h) for h in self.band_hist[band]]  # Python ints: no overflow, no rounding
        count = sum(hist)
        total = sum(v * h for v, h in enumerate(hist))
        squares = sum(v * v * h for v, h in enumerate(hist))
        return total / count, (squares * count - total * total) / (count * count)

    def mean(self) -> list[float]:
        """Per-band mean of the valid pixels on the 0..1 scale (value / 255).

        Returns:
            One value per band.

        Raises:
            DataError: If no valid pixel was added.
        """
        return [self._mean_var(band)[0] / 255.0 for band in range(self.bands)]

    def std(self) -> list[float]:
        """Per-band population standard deviation of the valid pixels on the 0..1 scale.

        Returns:
            One value per band (``sqrt(E[x^2] - E[x]^2) / 255``; the numerator is exact).

        Raises:
            DataError: If no valid pixel was added.
        """
        return [math.sqrt(self._mean_var(band)[1]) / 255.0 for band in range(self.bands)]

    def frequencies(self) -> list[float]:
        """Each class's share of the labelled pixels (zeros when nothing is labelled).

        Returns:
            One value per class, summing to 1 (or all 0).
        """
        total = self.labelled_pixels
        return [int(c) / total if total else 0.0 for c in self.class_counts]
