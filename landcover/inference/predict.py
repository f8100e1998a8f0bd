"""``landcover predict``: georeferenced land-cover maps of whole tiles in bounded memory.

A tile is read one row of windows at a time, predicted with blended sliding windows, and
written strip by strip; peak memory depends on the tile's width, not its area. Outputs per
tile: ``{stem}_class.tif`` (COG, colour table, class names), ``{stem}_prob.tif`` (one band per
class) and ``{stem}_preview.png``.
"""

from __future__ import annotations

import logging
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
from rasterio.windows import Window

from landcover import storage
from landcover.data.raster import open_raster
from landcover.errors import DataError
from landcover.inference.loader import InferenceModel
from landcover.inference.preview import write_preview
from landcover.inference.sliding import SlidingWindowPredictor, resolve_geometry
from landcover.inference.writers import MapWriter, scratch_folder

log = logging.getLogger("landcover")


@dataclass
class PredictOptions:
    """How to predict.

    Attributes:
        out: Output folder: a path or a blob URL.
        window: Window size in pixels (default: four training patches, at most 1024).
        overlap: Window overlap in pixels (default: a quarter of the patch size).
        batch_size: Windows per forward pass (default: 16 x 256 x 256 pixels' worth).
        prob_dtype: ``uint8`` (x 255) or ``float32`` probabilities.
        preview: Write the preview PNG.
        log_every_s: Seconds between progress lines.
        tags: Extra metadata tags written into both maps (a job's fingerprint).
    """

    out: str
    overlap: int | None = None
    batch_size: int | None = None
    window: int | None = None
    prob_dtype: str = "uint8"
    preview: bool = True
    log_every_s: float = 10.0
    tags: dict[str, str] = field(default_factory=dict)


def check_bands(src: Any, path: str, bands: int) -> None:
    """Checks an image's band count and dtype against the model.

    A 4th band tagged 'alpha' (common for NAIP NIR) counts as a data band.

    Args:
        src: The open dataset.
        path: Its path, for the message.
        bands: Bands the model expects.

    Raises:
        DataError: If the band count or dtype does not match.
    """
    if src.count != bands:
        raise DataError(f"{path}: has {src.count} bands, the checkpoint expects {bands}")
    if src.dtypes[0] != "uint8":
        raise DataError(f"{path}: has dtype {src.dtypes[0]}, expected uint8 imagery")


GDAL_CACHE_MB = 256
"""GDAL's block cache while writing maps (its default is 5 % of the machine's memory)."""


def predict_tile(tile: str, im: InferenceModel, options: PredictOptions) -> dict[str, Any]:
    """Predicts one tile and writes its maps; the tile and the output folder may be blob URLs.

    A remote tile is downloaded to a local scratch file first (windowed reads need a file);
    maps for a remote folder are made in a local scratch folder and each uploaded whole (one
    block-blob commit, so a reader never sees a partial map).

    Args:
        tile: The image: a path or URL.
        im: The loaded model.
        options: Output folder (path or URL) and settings.

    Returns:
        A summary: paths, size, seconds and megapixels per second.

    Raises:
        DataError: If the tile is missing, not a raster, or has the wrong bands.
        StorageError: If a download or upload fails after bounded retries.
    """
    out = str(options.out)
    if not storage.is_remote(tile) and not storage.is_remote(out):
        return _predict_local(tile, tile, im, options, Path(out))
    with tempfile.TemporaryDirectory(prefix="landcover-predict-") as work:
        local_tile = tile
        if storage.is_remote(tile):
            if not storage.is_file(tile):
                raise DataError(f"{tile}: file not found")
            local_tile = str(Path(work, "input", storage.name(tile)))
            storage.download_file(tile, local_tile)
        local_out = Path(work, "out") if storage.is_remote(out) else Path(out)
        summary = _predict_local(tile, local_tile, im, options, local_out)
        if storage.is_remote(out):
            for key in ("class", "prob", "preview"):
                if summary[key] is not None:
                    url = storage.join(out, Path(summary[key]).name)
                    storage.upload_file(summary[key], url)
                    summary[key] = url
        return summary


def _predict_local(
    tile: str, local_tile: str, im: InferenceModel, options: PredictOptions, out: Path
) -> dict[str, Any]:
    """Predicts a local tile file into a local folder (``tile`` names it in tags and logs)."""
    start = time.perf_counter()
    cfg = im.config
    window, overlap, batch = resolve_geometry(
        cfg.data.patch_size, options.window, options.overlap, options.batch_size
    )
    stem = storage.name(tile).rsplit(".", 1)[0]
    class_dst, prob_dst = out / f"{stem}_class.tif", out / f"{stem}_prob.tif"
    predictor = SlidingWindowPredictor(
        im.model, window, overlap, batch, im.prepare, im.device, im.autocast_dtype
    )
    with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_MB), open_raster(local_tile) as src:
        check_bands(src, tile, im.bands)
        height, width = src.height, src.width
        log.info(
            "%s: %d x %d px, %.2f m pixels, %s", tile, width, height, abs(src.transform.a), src.crs
        )

        def read_rows(a: int, b: int) -> np.ndarray:
            window = Window(0, a, width, b - a)
            return np.ascontiguousarray(np.moveaxis(src.read(window=window), 0, -1))

        with scratch_folder(out) as scratch:
            writer = MapWriter(
                src,
                im.mapping,
                scratch,
                options.prob_dtype,
                tags={
                    "CHECKPOINT": Path(im.checkpoint).name,
                    "EPOCH": str(im.epoch),
                    "SOURCE_IMAGE": str(tile),
                    **options.tags,
                },
            )
            try:
                last = time.perf_counter()
                for row, probs in predictor.iter_strips(read_rows, height, width):
                    h = probs.shape[1]
                    valid = src.dataset_mask(window=Window(0, row, width, h)) > 0
                    writer.write(row, probs.numpy(), valid)
                    now = time.perf_counter()
                    if now - last >= options.log_every_s:
                        last = now
                        done = (row + h) / height
                        rate = (row + h) * width / 1e6 / (now - start)
                        log.info(
                            "%s: %3.0f%% %.2f Mpx/s ETA %.0f s",
                            Path(tile).name,
                            100 * done,
                            rate,
                            (now - start) * (1 - done) / max(done, 1e-9),
                        )
                writer.publish(class_dst, prob_dst)
            finally:
                writer.close()
    preview = out / f"{stem}_preview.png"
    if options.preview:
        write_preview(local_tile, class_dst, im.mapping, preview)
    seconds = time.perf_counter() - start
    mpx = height * width / 1e6
    log.info(
        "%s -> %s (%.1f Mpx in %.1f s, %.2f Mpx/s)", tile, class_dst, mpx, seconds, mpx / seconds
    )
    return {
        "tile": tile,
        "class": str(class_dst),
        "prob": str(prob_dst),
        "preview": str(preview) if options.preview else None,
        "width": width,
        "height": height,
        "seconds": seconds,
        "mpx_per_s": mpx / seconds,
    }
