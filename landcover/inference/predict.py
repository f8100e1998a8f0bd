"""``landcover predict``: georeferenced land-cover maps of whole tiles in bounded memory.

A tile is read one row of windows at a time, predicted with blended sliding windows, and
written strip by strip; peak memory depends on the tile's width, not its area. Outputs per
tile: ``{stem}_class.tif`` (COG, colour table, class names), ``{stem}_prob.tif`` (one band per
class) and ``{stem}_preview.png``.
"""

from __future__ import annotations

import glob
import logging
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
from rasterio.windows import Window

from landcover import storage
from landcover.data.raster import open_raster
from landcover.errors import DataError
from landcover.inference.loader import InferenceModel, load_inference_model
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
    """

    out: str
    overlap: int | None = None
    batch_size: int | None = None
    window: int | None = None
    prob_dtype: str = "uint8"
    preview: bool = True
    log_every_s: float = 10.0


def expand_tiles(patterns: list[str]) -> list[str]:
    """Expands paths and globs into a sorted, de-duplicated list of tiles.

    Args:
        patterns: Paths or glob patterns.

    Returns:
        The tiles, in the order given (globs sorted).

    Raises:
        DataError: If a glob matches nothing.
    """
    tiles: list[str] = []
    for pattern in patterns:
        if glob.has_magic(pattern):
            matches = sorted(
                storage.glob(pattern) if storage.is_remote(pattern) else glob.glob(pattern)
            )
            if not matches:
                raise DataError(f"{pattern}: no files match")
            tiles.extend(matches)
        else:
            tiles.append(pattern)
    return list(dict.fromkeys(tiles))


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


def predict_tiles(
    tiles: list[str],
    checkpoint: str,
    options: PredictOptions,
    device: str = "auto",
    rank: int = 0,
    world_size: int = 1,
    local_rank: int = 0,
) -> list[dict[str, Any]]:
    """Predicts this worker's share of the tiles (``tiles[rank::world_size]``).

    Args:
        tiles: All tiles.
        checkpoint: The checkpoint.
        options: Output folder and settings.
        device: ``auto``, ``cpu`` or ``cuda``.
        rank: This worker's rank.
        world_size: Number of workers.
        local_rank: Selects the GPU.

    Returns:
        One summary per tile predicted here.
    """
    im = load_inference_model(checkpoint, device, local_rank)
    return [predict_tile(t, im, options) for t in tiles[rank::world_size]]


def predict_worker(tiles: list[str], checkpoint: str, options: PredictOptions, device: str) -> list:
    """Entry point of a predict worker process started by the launcher.

    Args:
        tiles: All tiles.
        checkpoint: The checkpoint.
        options: Output folder and settings.
        device: ``auto``, ``cpu`` or ``cuda``.

    Returns:
        This worker's tile summaries.
    """
    import os

    import torch

    from landcover.distributed import env_from_environ
    from landcover.logs import setup_logging

    env = env_from_environ()
    assert env is not None
    setup_logging(env, None)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // env.local_world_size))
    return predict_tiles(
        tiles, checkpoint, options, device, env.rank, env.world_size, env.local_rank
    )


def run_predict(
    patterns: list[str], checkpoint: str, options: PredictOptions, device: str, workers: int
) -> list[dict[str, Any]]:
    """Runs ``landcover predict``: checks every tile, then predicts them on 1..N workers.

    Args:
        patterns: Tile paths or globs.
        checkpoint: The checkpoint.
        options: Output folder and settings.
        device: ``auto``, ``cpu`` or ``cuda``.
        workers: Processes to spread the tiles over.

    Returns:
        One summary per tile.

    Raises:
        LandcoverError: On a missing or bad tile, a bad checkpoint, or a failed worker.
    """
    from landcover.distributed import DistEnv
    from landcover.launch import launch_workers
    from landcover.logs import setup_logging
    from landcover.training.checkpoint import load_checkpoint

    setup_logging(DistEnv(), None)
    tiles = expand_tiles(patterns)
    state = load_checkpoint(checkpoint)
    bands = len(state["config"]["data"]["bands"])
    for tile in tiles:
        if storage.is_remote(tile):  # checked when downloaded, not fetched twice
            if not storage.is_file(tile):
                raise DataError(f"{tile}: file not found")
            continue
        with open_raster(tile) as src:
            check_bands(src, tile, bands)
    workers = min(workers, len(tiles))
    if workers == 1:
        return predict_tiles(tiles, checkpoint, options, device)
    results = launch_workers(predict_worker, (tiles, checkpoint, options, device), nproc=workers)
    return [r for rank in sorted(results) for r in results[rank]]
