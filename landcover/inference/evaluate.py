"""``landcover evaluate``: metrics of a checkpoint on labelled tiles, whole tiles, same blending.

Writes ``metrics.json`` (per-class IoU, precision, recall, F1, support; pixel accuracy, mean
IoU), ``confusion.csv`` and ``confusion.png`` (row-normalised) into the output folder.
No-data (ignored label codes and image no-data) is excluded.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
import torch
from rasterio.enums import Resampling
from rasterio.errors import RasterioError
from rasterio.windows import Window

from landcover import storage
from landcover.classes import IGNORE_INDEX, ClassMapping
from landcover.data.align import check_alignable, label_on_image_grid, read_error
from landcover.data.nodatafill import zero_nodata
from landcover.data.pairs import TilePair
from landcover.data.raster import checked_image, has_nodata, nodata_mask, open_raster
from landcover.data.resolution import on_grid
from landcover.diskerrors import check_output_folder
from landcover.errors import DataError
from landcover.inference.confusion import confusion_csv, confusion_png
from landcover.inference.encode import first_argmax
from landcover.inference.evalfolder import check_evaluation_folder
from landcover.inference.loader import InferenceModel, dataset_normalizer
from landcover.inference.metricstable import metric_text, print_metrics_table
from landcover.inference.options import CHECKPOINT_EXPECTS
from landcover.inference.resolution import (
    BACK_ROWS,
    Resolution,
    resolve_resolution,
    working_grid,
)
from landcover.inference.sliding import SlidingWindowPredictor, resolve_geometry
from landcover.inference.writers import CLASS_NODATA
from landcover.metrics import confusion_matrix, metrics_from_confusion
from landcover.redaction import redact

log = logging.getLogger("landcover")


def tile_confusion(
    pair: TilePair,
    im: InferenceModel,
    predictor: SlidingWindowPredictor,
    resolution: Resolution | None = None,
) -> np.ndarray:
    """Predicts a labelled tile strip by strip and counts its confusion matrix.

    The class map is scored as ``landcover predict`` writes it: on the image's grid (predicted
    at ``resolution`` and brought back by nearest neighbour), against the labels brought onto
    the image's grid by nearest neighbour.

    Args:
        pair: The image and label.
        im: The loaded model.
        predictor: The sliding-window predictor.
        resolution: The pixel size the model sees (``None``: the image's own).

    Returns:
        The ``(K, K)`` confusion matrix (rows true, columns predicted).

    Raises:
        DataError: If the files are unreadable, mismatched, or hold unknown label codes.
    """
    mapping = im.mapping
    k = mapping.num_classes
    total = torch.zeros((k, k), dtype=torch.int64)
    image_valid = 0
    with (
        open_raster(pair.image) as img_file,
        open_raster(pair.label, image=False) as lab,
        checked_image(img_file, pair.image, im.bands, CHECKPOINT_EXPECTS) as img,
    ):
        check_alignable(lab, img, label_name=pair.label, image_name=pair.image)
        work = (
            working_grid(img, pair.image, resolution, im.config.data.patch_size)
            if resolution is not None
            else None
        )
        if work is None:
            strips = _class_strips(img, predictor, im, pair.image)
        else:
            log.info(
                "%s: %d x %d px predicted at %d x %d px (%s)",
                pair.image,
                img.width,
                img.height,
                work[1],
                work[2],
                resolution.describe(),
            )
            strips = _resampled_class_strips(img, work, predictor, im, pair.image)
        for row, classes in strips:
            window = Window(0, row, img.width, classes.shape[0])
            codes = label_on_image_grid(
                lab, img, window, label_name=pair.label, image_name=pair.image
            )
            unknown = mapping.unknown_codes(codes)
            if unknown:
                raise DataError(f"{pair.label}: {mapping.unknown_codes_message(unknown)}")
            target = mapping.encode(codes)
            invalid = classes == CLASS_NODATA
            if has_nodata(img):
                try:
                    invalid |= nodata_mask(img, window)
                except RasterioError as exc:
                    raise DataError(
                        f"{pair.image}: corrupt or truncated GeoTIFF ({read_error(exc)})"
                    ) from None
            target[invalid] = IGNORE_INDEX
            image_valid += int(invalid.size - invalid.sum())
            total += confusion_matrix(torch.from_numpy(classes), torch.from_numpy(target), k)
    _warn_if_empty(pair, image_valid, int(total.sum()))
    return total.numpy()


def _warn_if_empty(pair: TilePair, image_valid: int, scored: int) -> None:
    """Warns, naming the file, when a pair adds no pixel to the metrics."""
    if image_valid == 0:
        log.warning(
            "%s: every image pixel is no-data: the tile adds nothing to the metrics", pair.image
        )
    elif scored == 0:
        log.warning(
            "%s: no labelled pixel where the image has data (all no-data): the tile adds "
            "nothing to the metrics",
            pair.label,
        )


def _rows_reader(ds: Any, name: str) -> Any:
    """Reads rows ``[a, b)`` of a dataset as ``(h, W, C)`` uint8 (a failed read: DataError).

    Its no-data pixels read 0 (:func:`~landcover.data.nodatafill.zero_nodata`), as in ``predict``.
    """
    masked = has_nodata(ds)

    def read_rows(a: int, b: int) -> np.ndarray:
        window = Window(0, a, ds.width, b - a)
        try:
            rows = np.ascontiguousarray(np.moveaxis(ds.read(window=window), 0, -1))
            if masked:
                zero_nodata(rows, nodata_mask(ds, window, pixels=rows))
            return rows
        except RasterioError as exc:
            raise DataError(
                f"{name}: corrupt or truncated GeoTIFF, rows {a}-{b} ({read_error(exc)})"
            ) from None

    return read_rows


def _class_strips(
    ds: Any, predictor: SlidingWindowPredictor, im: InferenceModel, name: str
) -> Iterator[tuple[int, np.ndarray]]:
    """Yields ``(row, classes)`` strips of a dataset predicted on its own grid."""
    predictor.prepare = dataset_normalizer(im, ds, name)
    for row, probs in predictor.iter_strips(_rows_reader(ds, name), ds.height, ds.width):
        yield row, first_argmax(probs).numpy()


def _resampled_class_strips(
    img: Any, work: Any, predictor: SlidingWindowPredictor, im: InferenceModel, name: str
) -> Iterator[tuple[int, np.ndarray]]:
    """Yields ``(row, classes)`` strips on the image's grid of a class map predicted on ``work``.

    The map is written to a scratch GeoTIFF on the working grid, then read back onto the
    image's grid by nearest neighbour, strip by strip.
    """
    with tempfile.TemporaryDirectory(prefix="lc-evaluate-") as folder:
        path = Path(folder) / "class.tif"
        with on_grid(img, work, Resampling.bilinear) as vrt:
            profile = {
                "driver": "GTiff",
                "width": vrt.width,
                "height": vrt.height,
                "crs": vrt.crs,
                "transform": vrt.transform,
                "count": 1,
                "dtype": "uint8",
                "nodata": CLASS_NODATA,
                "tiled": True,
                "blockxsize": 256,
                "blockysize": 256,
            }
            with rasterio.open(path, "w", **profile) as dst:
                for row, classes in _class_strips(vrt, predictor, im, name):
                    window = Window(0, row, vrt.width, classes.shape[0])
                    if has_nodata(vrt):
                        classes[nodata_mask(vrt, window)] = CLASS_NODATA
                    dst.write(classes, 1, window=window)
        with rasterio.open(path) as cls:
            back = (img.transform, img.width, img.height)
            with on_grid(cls, back, Resampling.nearest) as cls_back:
                for row in range(0, img.height, BACK_ROWS):
                    window = Window(0, row, img.width, min(BACK_ROWS, img.height - row))
                    yield row, cls_back.read(1, window=window)


def evaluate_pairs(
    pairs: list[TilePair],
    im: InferenceModel,
    out: str,
    overlap: int | None,
    batch_size: int | None,
    window: int | None = None,
    tta: tuple[str, ...] = ("identity",),
    resolution: str = "train",
) -> dict[str, Any]:
    """Evaluates a model on labelled tiles and writes the metrics files.

    Args:
        pairs: The labelled tiles.
        im: The loaded model.
        out: Output folder: a path or a blob URL.
        overlap: Window overlap (default: a quarter of the patch size).
        batch_size: Windows per forward pass (default: from a pixel budget).
        window: Window size (default: four training patches, at most 1024 px).
        tta: Test-time augmentation transforms (see :mod:`landcover.inference.tta`).
        resolution: Pixel size the model sees: ``train``, ``native`` or metres (see
            :mod:`landcover.inference.resolution`).

    Returns:
        The metrics written to ``metrics.json``.

    Raises:
        DataError: If no tile has a pixel to score (nothing is written).
        ConfigError: If the window or overlap does not fit (before the folder is made).
    """
    resolved = resolve_resolution(resolution, im.pixel_size_m, im.checkpoint)
    window, overlap, batch_size = resolve_geometry(
        im.config.data.patch_size, window, overlap, batch_size
    )
    existed = storage.is_remote(out) or Path(out).exists()
    check_output_folder(out)  # after every check: a refused evaluation leaves no folder
    predictor = SlidingWindowPredictor(
        im.model,
        window,
        overlap,
        batch_size,
        im.prepare,
        im.device,
        im.autocast_dtype,
        tta,
    )
    mapping: ClassMapping = im.mapping
    k = mapping.num_classes
    total = np.zeros((k, k), dtype=np.int64)
    per_tile = []
    start = time.perf_counter()
    for pair in pairs:
        cm = tile_confusion(pair, im, predictor, resolved)
        total += cm
        tile_metrics = metrics_from_confusion(cm, mapping.names)
        per_tile.append(
            {"tile": pair.name, "miou": tile_metrics["miou"], "accuracy": tile_metrics["accuracy"]}
        )
        log.info("%s: mIoU %s", pair.name, metric_text(tile_metrics["miou"]))
    if not total.any():
        if not existed:  # the preflight made it, and nothing is written
            with contextlib.suppress(OSError):
                Path(out).rmdir()
        raise DataError(
            f"{out}: no pixel to score in the {len(pairs)} tile(s): no labelled pixel where "
            "the images have data (see the warnings above); metrics need labelled pixels"
        )
    metrics = metrics_from_confusion(total, mapping.names)
    metrics.update(
        {
            "classes": mapping.names,
            "checkpoint": im.checkpoint,
            "epoch": im.epoch,
            "tiles": per_tile,
            "tta": list(tta),
            "resolution": resolved.fingerprint,
            "pixels": int(total.sum()),
            "seconds": time.perf_counter() - start,
        }
    )
    # one set: a full disk leaves the last run's three files, not a mix of two runs
    storage.write_set(
        out,
        {
            "metrics.json": redact(json.dumps(metrics, indent=2)).encode(),
            "confusion.csv": redact(confusion_csv(total, mapping.names)).encode(),
            "confusion.png": confusion_png(total, mapping.names),
        },
    )
    return metrics


def run_evaluate(
    checkpoint: str,
    data: str,
    out: str,
    overlap: int | None,
    batch_size: int | None,
    device: str,
    window: int | None = None,
    tta: tuple[str, ...] = ("identity",),
    resolution: str = "train",
    overwrite: bool = False,
    split: str | None = None,
) -> dict[str, Any]:
    """Runs ``landcover evaluate`` and prints the table.

    Args:
        checkpoint: The checkpoint.
        data: A folder of pairs (the checkpoint's suffixes) or a manifest CSV.
        out: Output folder.
        overlap: Window overlap (default: a quarter of the patch size).
        batch_size: Windows per forward pass (default: from a pixel budget).
        device: ``auto``, ``cpu`` or ``cuda``.
        window: Window size (default: four training patches, at most 1024 px).
        tta: Test-time augmentation transforms (see :mod:`landcover.inference.tta`).
        resolution: Pixel size the model sees: ``train``, ``native`` or metres.
        overwrite: Replace the metrics of another model or of other tiles in ``out``.
        split: A manifest's rows to score (:func:`~landcover.inference.evalpairs.evaluation_pairs`).

    Returns:
        The metrics.
    """
    from landcover.inference.evalpairs import evaluation_pairs
    from landcover.inference.runner import load_model
    from landcover.logs import setup_logging
    from landcover.parallel.env import DistEnv

    setup_logging(DistEnv(), None)
    im = load_model(checkpoint, device)  # a checkpoint, or an exported .onnx model
    pairs = evaluation_pairs(data, im.config.data.image_suffix, im.config.data.label_suffix, split)
    check_evaluation_folder(out, im.checkpoint, [pair.name for pair in pairs], overwrite)
    metrics = evaluate_pairs(pairs, im, out, overlap, batch_size, window, tta, resolution)
    print_metrics_table(metrics)
    log.info("wrote metrics.json, confusion.csv and confusion.png to %s", out)
    return metrics
