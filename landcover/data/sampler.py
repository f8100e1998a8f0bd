"""Random training patches drawn from tiles held in memory.

Each worker holds its share of tiles (see :mod:`landcover.data.sharding`) and draws patches
from them: a tile is chosen with probability proportional to its labelled area, then a random
window (or, with rare-class oversampling, a window centred on a pixel of a rare class). Patches
with too many ignored pixels are redrawn. Draws are reproducible: the random generator is
seeded from (seed, rank, epoch).
"""

from __future__ import annotations

import numpy as np
import torch

from landcover.classes import IGNORE_INDEX
from landcover.data.augment import D4, write_transformed
from landcover.data.raster import TileArrays

_POINTS_PER_CLASS = 4096


def _pad_to(tile: TileArrays, size: int) -> TileArrays:
    height, width = tile.label.shape
    if height >= size and width >= size:
        return tile
    ph, pw = max(0, size - height), max(0, size - width)
    image = np.pad(tile.image, ((0, ph), (0, pw), (0, 0)))
    label = np.pad(tile.label, ((0, ph), (0, pw)), constant_values=IGNORE_INDEX)
    return TileArrays(tile.name, image, label)


class PatchSampler:
    """Draws augmented random patches from in-memory tiles.

    Args:
        tiles: The worker's tiles (smaller ones are padded with no-data to the patch size).
        patch_size: Side of the square patches.
        num_classes: Number of training classes.
        max_nodata_fraction: Patches with a larger ignored fraction are redrawn (up to
            ``max_tries`` times; the last draw is kept).
        oversample_rare: Probability that a patch is centred on a pixel of a rare class, the
            class being chosen with probability inversely proportional to its frequency.
        augment: Apply D4 augmentation.
        max_tries: Draws per patch before accepting one with too much no-data.

    Raises:
        ValueError: If no tile has any labelled pixel.
    """

    def __init__(
        self,
        tiles: list[TileArrays],
        patch_size: int,
        num_classes: int,
        max_nodata_fraction: float = 0.5,
        oversample_rare: float = 0.0,
        augment: bool = True,
        max_tries: int = 10,
    ) -> None:
        self.tiles = [_pad_to(t, patch_size) for t in tiles]
        self.patch_size = patch_size
        self.num_classes = num_classes
        self.max_nodata_fraction = max_nodata_fraction
        self.oversample_rare = oversample_rare
        self.max_tries = max_tries
        self.augment = augment
        counts = np.stack(
            [np.bincount(t.label.ravel(), minlength=256)[:num_classes] for t in self.tiles]
        ).astype(np.float64)
        valid = counts.sum(axis=1)
        if valid.sum() == 0:
            names = ", ".join(t.name for t in tiles)
            raise ValueError(f"tiles {names} hold no labelled pixels")
        self.class_counts = counts
        self.tile_p = valid / valid.sum()
        self._points: list[list[np.ndarray]] = []
        self._class_p = np.zeros(num_classes)
        if oversample_rare > 0:
            self._index_class_points()

    def _index_class_points(self) -> None:
        rng = np.random.default_rng(0)
        for tile in self.tiles:
            flat = tile.label.ravel()
            per_class = []
            for c in range(self.num_classes):
                idx = np.flatnonzero(flat == c)
                if len(idx) > _POINTS_PER_CLASS:
                    idx = rng.choice(idx, _POINTS_PER_CLASS, replace=False)
                per_class.append(idx)
            self._points.append(per_class)
        total = self.class_counts.sum(axis=0)
        inverse = np.where(total > 0, 1.0 / np.maximum(total, 1.0), 0.0)
        self._class_p = inverse / inverse.sum()

    def _random_window(self, rng: np.random.Generator) -> tuple[int, int, int]:
        t = int(rng.choice(len(self.tiles), p=self.tile_p))
        height, width = self.tiles[t].label.shape
        y = int(rng.integers(0, height - self.patch_size + 1))
        x = int(rng.integers(0, width - self.patch_size + 1))
        return t, y, x

    def _rare_window(self, rng: np.random.Generator) -> tuple[int, int, int]:
        c = int(rng.choice(self.num_classes, p=self._class_p))
        tile_w = self.class_counts[:, c] / self.class_counts[:, c].sum()
        t = int(rng.choice(len(self.tiles), p=tile_w))
        height, width = self.tiles[t].label.shape
        flat = int(rng.choice(self._points[t][c]))
        cy, cx = divmod(flat, width)
        half = self.patch_size // 2
        y = min(max(cy - half, 0), height - self.patch_size)
        x = min(max(cx - half, 0), width - self.patch_size)
        return t, y, x

    def sample(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Draws one patch.

        Args:
            rng: The random generator.

        Returns:
            ``(image, label)``: ``(P, P, C)`` uint8 imagery and ``(P, P)`` uint8 class indices.
        """
        images, labels = self.batch(1, rng)
        return images[0].numpy(), labels[0].numpy()

    def _draw(self, rng: np.random.Generator) -> tuple[int, np.ndarray, np.ndarray]:
        """Draws one patch's window: its tile's index and views of the tile (not augmented)."""
        size = self.patch_size
        limit = self.max_nodata_fraction * size * size
        for _ in range(self.max_tries):
            if self.oversample_rare > 0 and rng.random() < self.oversample_rare:
                t, y, x = self._rare_window(rng)
            else:
                t, y, x = self._random_window(rng)
            label = self.tiles[t].label[y : y + size, x : x + size]
            if np.count_nonzero(label == IGNORE_INDEX) <= limit:
                break
        return t, self.tiles[t].image[y : y + size, x : x + size], label

    def batch(self, batch_size: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Draws a batch of patches.

        Args:
            batch_size: Number of patches.
            rng: The random generator.

        Returns:
            ``(images, labels)``: a ``(B, P, P, C)`` uint8 tensor (channels last, as stored)
            and a ``(B, P, P)`` uint8 tensor of class indices.
        """
        images, labels, _ = self.batch_with_tiles(batch_size, rng)
        return images, labels

    def batch_with_tiles(
        self, batch_size: int, rng: np.random.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Draws a batch of patches and says which tile each came from.

        Args:
            batch_size: Number of patches.
            rng: The random generator.

        Returns:
            ``(images, labels, tiles)``: as :meth:`batch`, and a ``(B,)`` int64 tensor of
            each patch's index in the sampler's tiles (for per-tile normalisation).
        """
        size, bands = self.patch_size, self.tiles[0].image.shape[2]
        images = torch.empty((batch_size, size, size, bands), dtype=torch.uint8)
        labels = torch.empty((batch_size, size, size), dtype=torch.uint8)
        tiles = torch.empty((batch_size,), dtype=torch.int64)
        for i in range(batch_size):
            t, image, label = self._draw(rng)
            tiles[i] = t
            transform = D4.draw(rng) if self.augment else None
            write_transformed(images[i], image, transform)
            write_transformed(labels[i], label, transform)
        return images, labels, tiles


def epoch_rng(seed: int, rank: int, epoch: int) -> np.random.Generator:
    """Returns the patch generator's random state for one worker and epoch.

    Args:
        seed: The run's base seed.
        rank: The worker's rank.
        epoch: The epoch (0-based).

    Returns:
        A generator that is the same on every run with the same (seed, rank, epoch).
    """
    return np.random.default_rng([seed, rank, epoch])
