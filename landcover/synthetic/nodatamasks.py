"""Where a synthetic tile has no data: the image and label no-data masks of a scene."""

from __future__ import annotations

import numpy as np


def nodata_masks(
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
