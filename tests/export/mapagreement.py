"""The acceptance rule of a map through an exported model against its checkpoint's map.

Class maps agree on at least :data:`MIN_AGREEMENT` of the pixels and on every pixel where the
checkpoint's top two probabilities differ by more than 1/255; float32 probabilities within a
tolerance (:data:`PROB_TOLERANCE`, :data:`DEEP_PROB_TOLERANCE`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import rasterio

PROB_TOLERANCE = 1e-4
"""Largest difference of a float32 probability through ONNX Runtime from torch's, for the tiny
trained model (three stages): they differ by float32 rounding in the convolutions, about 1e-6."""
DEEP_PROB_TOLERANCE = 5e-4
"""The same for five-stage models: float32 rounding alone puts either runtime's probabilities
about 1e-4 from float64's (the default config's ResNet-34 U-Net, untrained, logits spread 3:
torch 9.2e-5, ONNX Runtime 7.2e-5 on one 512 px batch), so the two may differ by twice that;
5e-4 is an eighth of a uint8 probability map's step (1/255)."""
MIN_AGREEMENT = 0.999


def read(path: Path) -> np.ndarray:
    """A raster's bands."""
    with rasterio.open(path) as ds:
        return ds.read()


def clear_pixels(probs: np.ndarray) -> np.ndarray:
    """Where the top two probabilities differ by more than 1/255."""
    top2 = np.sort(probs, axis=0)[-2:]
    return (top2[1] - top2[0]) > 1 / 255


def assert_maps_agree(
    torch_out: Path,
    onnx_out: Path,
    tiles: list[tuple[str, int, int]],
    tolerance: float = PROB_TOLERANCE,
) -> tuple[float, float]:
    """Compares two region jobs' class and probability maps, tile by tile.

    Args:
        torch_out: The job's output folder with the checkpoint.
        onnx_out: The job's output folder with the exported model.
        tiles: ``(name, height, width)`` of each input tile (``NAME_naip.tif``).
        tolerance: The largest difference of a probability.

    Returns:
        The share of pixels whose classes agree, and the largest difference of a probability.
    """
    agree = total = 0
    worst = 0.0
    for name, height, width in tiles:
        classes_t = read(torch_out / f"{name}_naip_class.tif")[0]
        classes_o = read(onnx_out / f"{name}_naip_class.tif")[0]
        probs_t = read(torch_out / f"{name}_naip_prob.tif")
        probs_o = read(onnx_out / f"{name}_naip_prob.tif")
        assert classes_o.shape == (height, width)
        worst = max(worst, float(np.abs(probs_o - probs_t).max()))
        assert worst <= tolerance, (name, worst)
        clear = clear_pixels(probs_t)
        assert np.array_equal(classes_o[clear], classes_t[clear]), name
        agree += int((classes_o == classes_t).sum())
        total += classes_t.size
    share = agree / total
    assert share >= MIN_AGREEMENT
    return share, worst
