"""Preview PNGs: the imagery beside the coloured land-cover map, with a legend."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import rasterio
from rasterio.enums import Resampling

from landcover.classes import ClassMapping
from landcover.data.bandview import image_view
from landcover.data.raster import nodata_mask
from landcover.fileio import atomic_write_bytes
from landcover.inference.writers import CLASS_NODATA

MAX_PREVIEW_PX = 2000
"""Longest side of a preview PNG in pixels, whatever the tile's shape (a thin strip too)."""
DPI = 100
FIGURE_WIDTH_IN = 14.0
"""Width of a preview (two panels side by side) in inches, at :data:`DPI`."""


def _shape(height: int, width: int, max_side: int) -> tuple[int, int]:
    scale = min(1.0, max_side / max(height, width))
    return max(1, round(height * scale)), max(1, round(width * scale))


def figure_size(height: int, width: int) -> tuple[float, float]:
    """The preview figure's ``(width, height)`` in inches for a tile of ``height x width`` px.

    Two panels of the tile's aspect side by side plus a legend strip; a tall thin tile gets a
    figure no taller than :data:`MAX_PREVIEW_PX` (the panels keep the tile's aspect inside).

    Args:
        height: The tile's rows.
        width: The tile's columns.

    Returns:
        Inches; times :data:`DPI`, neither side exceeds :data:`MAX_PREVIEW_PX`.
    """
    tall = 7.5 * height / max(width, 1) + 1
    return FIGURE_WIDTH_IN, min(tall, MAX_PREVIEW_PX / DPI)


def stretch_rgb(rgb: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
    """Contrast-stretches an RGB image (2-98 percentiles per band) to 0..1 for display.

    Args:
        rgb: ``(3, H, W)`` array.
        valid: Optional ``(H, W)`` mask of pixels to compute the percentiles from.

    Returns:
        ``(H, W, 3)`` float array in 0..1.
    """
    out = np.zeros((*rgb.shape[1:], 3), dtype=np.float32)
    for i in range(3):
        band = rgb[i].astype(np.float32)
        sample = band[valid] if valid is not None and valid.any() else band
        lo, hi = np.percentile(sample, (2, 98)) if sample.size else (0.0, 1.0)
        out[..., i] = np.clip((band - lo) / max(hi - lo, 1e-6), 0, 1)
    return out


def colorize(classes: np.ndarray, mapping: ClassMapping) -> np.ndarray:
    """Turns a class map into an RGBA image (transparent no-data).

    Args:
        classes: ``(H, W)`` uint8 class indices (255 = no data).
        mapping: The class mapping (colours).

    Returns:
        ``(H, W, 4)`` float array in 0..1.
    """
    lut = np.zeros((256, 4), dtype=np.float32)
    for i, spec in enumerate(mapping.classes):
        lut[i] = (*[c / 255 for c in spec.rgb], 1.0)
    lut[CLASS_NODATA] = (0, 0, 0, 0)
    return lut[classes]


def write_preview(
    image_path: str | Path,
    class_path: str | Path,
    mapping: ClassMapping,
    out: Path,
    max_side: int = 1024,
    bands: int | None = None,
) -> None:
    """Writes a PNG of the imagery (true colour) beside the class map, with a legend.

    Large tiles are read decimated (overviews or on-the-fly averaging), so memory stays small,
    and the PNG is at most :data:`MAX_PREVIEW_PX` on its longest side (aspect kept).

    Args:
        image_path: The input imagery (bands 1-3 are R, G, B).
        class_path: The class map written by predict.
        mapping: The class mapping (names, colours).
        out: Destination PNG (written atomically).
        max_side: Longest side of each panel in pixels.
        bands: The bands the model read: one more, tagged alpha, is the image's mask
            (:func:`landcover.data.bandview.image_view`); ``None``: every band is data.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    with (
        rasterio.open(image_path) as file,
        image_view(file, bands) as src,
    ):
        h, w = _shape(src.height, src.width, max_side)
        rgb = src.read([1, 2, 3], out_shape=(3, h, w), resampling=Resampling.average)
        valid = ~nodata_mask(src, out_shape=(h, w))
    with rasterio.open(class_path) as cls:
        classes = cls.read(1, out_shape=(h, w), resampling=Resampling.nearest)
    fig, axes = plt.subplots(1, 2, figsize=figure_size(h, w))
    axes[0].imshow(stretch_rgb(rgb, valid))
    axes[0].set_title(f"{Path(image_path).name} (true colour)")
    axes[1].imshow(colorize(classes, mapping), interpolation="nearest")
    axes[1].set_title("predicted land cover")
    for ax in axes:
        ax.set_axis_off()
    handles = [Patch(color=np.array(c.rgb) / 255, label=c.name) for c in mapping.classes]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    plt.close(fig)
    atomic_write_bytes(out, buffer.getvalue())
