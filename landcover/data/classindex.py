"""Where each class lies in a worker's tiles: a bounded sample of pixel positions per class.

Class-centred patches (``data.class_balance``, ``data.oversample_rare``) need, for a class, a
tile holding it and a pixel of it there. :func:`index_classes` scans each tile once, in chunks
(so the scan never holds more than a chunk's worth of positions), and keeps every position of
a class with up to ``per_class`` pixels in the tile, else a uniform sample of ``per_class`` of
them: about ``8 x per_class x classes`` bytes per tile whatever its size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

POINTS_PER_CLASS = 4096
"""Positions kept per class and tile."""

_CHUNK_PIXELS = 1 << 20


@dataclass(frozen=True)
class ClassIndex:
    """Sampled positions of each class in each tile of a share.

    Attributes:
        counts: ``(tiles, classes)`` pixel count of each class in each tile.
        points: ``points[t][c]``: flat (row-major) positions of class ``c`` in tile ``t``
            (int64; all of them, or a uniform sample of :data:`POINTS_PER_CLASS`).
    """

    counts: np.ndarray
    points: list[list[np.ndarray]]

    @property
    def present(self) -> np.ndarray:
        """The classes with at least one pixel in the share, ascending."""
        return np.flatnonzero(self.counts.sum(axis=0) > 0)

    def draw(self, c: int, rng: np.random.Generator) -> tuple[int, int]:
        """Draws a pixel of a class: a tile in proportion to its count, then a stored position.

        Args:
            c: A class present in the share.
            rng: The random generator.

        Returns:
            ``(tile, flat_position)``.

        Raises:
            ValueError: If the class has no pixel in the share.
        """
        column = self.counts[:, c]
        total = column.sum()
        if total <= 0:
            raise ValueError(f"class {c} has no pixel in this worker's tiles")
        t = int(rng.choice(len(column), p=column / total))
        return t, int(rng.choice(self.points[t][c]))


def index_classes(
    labels: Sequence[np.ndarray],
    counts: np.ndarray,
    per_class: int = POINTS_PER_CLASS,
    seed: int = 0,
) -> ClassIndex:
    """Indexes the positions of each class in each label array.

    Args:
        labels: One ``(H, W)`` uint8 class-index array per tile (other values are ignored).
        counts: ``(tiles, classes)`` pixel count of each class in each tile (as
            ``np.bincount`` gives them).
        per_class: Positions kept per class and tile.
        seed: Seed of the subsample (the index does not depend on the training seed).

    Returns:
        The index.
    """
    rng = np.random.default_rng(seed)
    points = [
        _tile_points(label.ravel(), row, per_class, rng)
        for label, row in zip(labels, counts, strict=True)
    ]
    return ClassIndex(counts=np.asarray(counts, dtype=np.float64), points=points)


def _tile_points(
    flat: np.ndarray, counts: np.ndarray, per_class: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """The kept positions of each class in one flattened label array.

    A class with more than ``per_class`` pixels keeps those whose rank (in scan order) is among
    ``per_class`` ranks drawn without replacement: a uniform sample, found in one chunked scan.
    """
    n_classes = len(counts)
    wanted: list[np.ndarray | None] = []
    for c in range(n_classes):
        n = int(counts[c])
        wanted.append(np.sort(rng.choice(n, per_class, replace=False)) if n > per_class else None)
    kept: list[list[np.ndarray]] = [[] for _ in range(n_classes)]
    seen = np.zeros(n_classes, dtype=np.int64)
    for start in range(0, flat.size, _CHUNK_PIXELS):
        chunk = flat[start : start + _CHUNK_PIXELS]
        for c in range(n_classes):
            if counts[c] <= 0:
                continue
            idx = np.flatnonzero(chunk == c)
            first, n_here = int(seen[c]), len(idx)
            seen[c] += n_here
            ranks = wanted[c]
            if ranks is not None:
                lo, hi = np.searchsorted(ranks, [first, first + n_here])
                idx = idx[ranks[lo:hi] - first]
            kept[c].append(idx.astype(np.int64) + start)
    return [np.concatenate(k) if k else np.empty(0, dtype=np.int64) for k in kept]
