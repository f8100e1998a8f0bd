"""Random training patches drawn from tiles held in memory.

Each worker holds its share of tiles (see :mod:`landcover.data.sharding`) and draws patches
from them: a tile is chosen with probability proportional to its labelled area, then a random
window. Two options centre windows on pixels of chosen classes (from a per-class index of
positions built once, :mod:`landcover.data.classindex`):

- class balance (``class_balance = f``): in every batch a share ``f`` of the patches (``f x B``
  rounded up or down at random, so ``f`` on average) is centred on a pixel of a class, the
  classes present in the share taking equal turns, so each of the ``K`` present classes is at
  the centre of at least ``floor(n / K)`` of the ``n`` class-centred patches of every batch;
- rare-class oversampling (``oversample_rare = p``): each other patch is centred, with
  probability ``p``, on a class drawn with probability inversely proportional to its pixel count.

Patches with too many ignored pixels are redrawn (a class-centred patch keeps its class). Draws
are reproducible: a batch is a function of the random generator it is drawn from, and training
seeds one for each batch from (seed, rank, epoch, batch) (:func:`landcover.feed.loader.batch_rng`),
so whichever thread or process draws it, it is the same.
"""

from __future__ import annotations

import numpy as np
import torch

from landcover.classes import IGNORE_INDEX
from landcover.config import DataConfig
from landcover.data.classindex import ClassIndex, index_classes
from landcover.data.raster import TileArrays
from landcover.feed.augment import D4, write_transformed

RANDOM = -1
"""A batch slot of :meth:`PatchSampler.plan` drawn without class balance."""


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
            class being chosen with probability inversely proportional to its frequency (for
            the patches ``class_balance`` leaves random).
        class_balance: Fraction of every batch's patches centred on a pixel of a class, the
            classes present in the tiles taking equal turns (0: off).
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
        class_balance: float = 0.0,
        augment: bool = True,
        max_tries: int = 10,
    ) -> None:
        self.tiles = [_pad_to(t, patch_size) for t in tiles]
        self.patch_size = patch_size
        self.num_classes = num_classes
        self.max_nodata_fraction = max_nodata_fraction
        self.oversample_rare = oversample_rare
        self.class_balance = class_balance
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
        self.index: ClassIndex | None = None
        self._class_p = np.zeros(num_classes)
        if oversample_rare > 0 or class_balance > 0:
            self.index = index_classes([t.label for t in self.tiles], counts)
            total = counts.sum(axis=0)
            inverse = np.where(total > 0, 1.0 / np.maximum(total, 1.0), 0.0)
            self._class_p = inverse / inverse.sum()

    @classmethod
    def from_config(
        cls, tiles: list[TileArrays], cfg: DataConfig, augment: bool | None = None
    ) -> PatchSampler:
        """The sampler the ``data`` settings describe, as training builds it.

        Args:
            tiles: The worker's tiles.
            cfg: The data settings (patch size, classes, no-data, rare classes, balance, D4).
            augment: Overrides ``cfg.augment`` (``None``: the setting's).

        Returns:
            The sampler.

        Raises:
            ValueError: If no tile has any labelled pixel.
        """
        return cls(
            tiles,
            cfg.patch_size,
            cfg.classes.num_classes,
            max_nodata_fraction=cfg.max_nodata_fraction,
            oversample_rare=cfg.oversample_rare,
            class_balance=cfg.class_balance,
            augment=cfg.augment if augment is None else augment,
        )

    @property
    def present_classes(self) -> np.ndarray:
        """The classes with at least one pixel in the tiles, ascending."""
        return np.flatnonzero(self.class_counts.sum(axis=0) > 0)

    def plan(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """Draws which slots of a batch are centred on which class.

        ``n`` slots, ``class_balance x batch_size`` rounded down or (with the probability of
        the remainder) up, get a class each: every present class ``n // K`` slots, and
        ``n % K`` classes drawn without replacement one more; the slots are placed at random.

        Args:
            batch_size: Patches in the batch.
            rng: The random generator.

        Returns:
            ``(batch_size,)`` int64: the class at the centre of each slot, or :data:`RANDOM`.
        """
        slots = np.full(batch_size, RANDOM, dtype=np.int64)
        if self.class_balance <= 0:
            return slots
        wanted = self.class_balance * batch_size
        n = min(int(wanted) + int(rng.random() < wanted - int(wanted)), batch_size)
        present = self.present_classes
        share, extra = divmod(n, len(present))
        classes = np.concatenate(
            [np.repeat(present, share), rng.choice(present, extra, replace=False)]
        )
        slots[rng.permutation(batch_size)[:n]] = classes
        return slots

    def _random_window(self, rng: np.random.Generator) -> tuple[int, int, int]:
        t = int(rng.choice(len(self.tiles), p=self.tile_p))
        height, width = self.tiles[t].label.shape
        y = int(rng.integers(0, height - self.patch_size + 1))
        x = int(rng.integers(0, width - self.patch_size + 1))
        return t, y, x

    def _class_window(self, c: int, rng: np.random.Generator) -> tuple[int, int, int]:
        """A window holding (near its centre) a pixel of class ``c``."""
        if self.index is None:
            raise RuntimeError("class-centred windows need oversample_rare or class_balance")
        t, flat = self.index.draw(c, rng)
        height, width = self.tiles[t].label.shape
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

    def _draw(
        self, rng: np.random.Generator, c: int = RANDOM
    ) -> tuple[int, np.ndarray, np.ndarray]:
        """Draws one patch's window: its tile's index and views of the tile (not augmented).

        ``c`` is the class to centre the window on, or :data:`RANDOM`.
        """
        size = self.patch_size
        limit = self.max_nodata_fraction * size * size
        for _ in range(self.max_tries):
            if c != RANDOM:
                t, y, x = self._class_window(c, rng)
            elif self.oversample_rare > 0 and rng.random() < self.oversample_rare:
                rare = int(rng.choice(self.num_classes, p=self._class_p))
                t, y, x = self._class_window(rare, rng)
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
        images, labels, tiles, _ = self._fill(batch_size, rng, d4_here=True)
        return images, labels, tiles

    def batch_for_device(
        self, batch_size: int, rng: np.random.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Draws the batch :meth:`batch_with_tiles` draws, leaving D4 to the device.

        The same random draws in the same order, so that
        :func:`~landcover.feed.augment.transform_batch` of the result equals
        :meth:`batch_with_tiles` from the same generator state.

        Args:
            batch_size: Number of patches.
            rng: The random generator.

        Returns:
            ``(images, labels, tiles, codes)``: untransformed patches, their tiles, and a
            ``(B,)`` int64 tensor of each patch's D4 code (0, the identity, without
            ``augment``).
        """
        return self._fill(batch_size, rng, d4_here=False)

    def _fill(
        self, batch_size: int, rng: np.random.Generator, d4_here: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        size, bands = self.patch_size, self.tiles[0].image.shape[2]
        images = torch.empty((batch_size, size, size, bands), dtype=torch.uint8)
        labels = torch.empty((batch_size, size, size), dtype=torch.uint8)
        tiles = torch.empty((batch_size,), dtype=torch.int64)
        codes = torch.zeros((batch_size,), dtype=torch.int64)
        for i, c in enumerate(self.plan(batch_size, rng)):
            t, image, label = self._draw(rng, int(c))
            tiles[i] = t
            transform = D4.draw(rng) if self.augment else None
            if not d4_here and transform is not None:
                codes[i], transform = transform.code, None
            write_transformed(images[i], image, transform)
            write_transformed(labels[i], label, transform)
        return images, labels, tiles, codes


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
