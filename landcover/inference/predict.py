"""``landcover predict``: georeferenced land-cover maps of whole tiles in bounded memory.

A tile is read one row of windows at a time, predicted with blended sliding windows, and
written strip by strip; peak memory depends on the tile's width, not its area. Outputs per
tile: ``{stem}_class.tif`` (COG, colour table, class names), ``{stem}_prob.tif`` (one band per
class; not with ``probs=False``) and ``{stem}_preview.png``.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
import torch
from rasterio.enums import Resampling
from rasterio.errors import RasterioError

from landcover import storage
from landcover.data.raster import open_raster
from landcover.data.resolution import on_grid
from landcover.errors import DataError
from landcover.inference.loader import InferenceModel, dataset_normalizer
from landcover.inference.pipeline import run_pipelined
from landcover.inference.preview import write_preview
from landcover.inference.records import ClassCounts, Grid
from landcover.inference.resolution import maps_onto_grid, resolve_resolution, working_grid
from landcover.inference.sliding import SlidingWindowPredictor, resolve_geometry
from landcover.inference.tileread import IN_MEMORY_BYTES, TileSource
from landcover.inference.tta import parse_tta
from landcover.inference.writers import (
    CLASS_NODATA,
    EncodedStrip,
    MapWriter,
    encode_probs,
    error_reason,
    scratch_folder,
)
from landcover.models import compile_check, compile_model
from landcover.parallel.devices import autocast

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
        tta: Test-time augmentation (see :func:`~landcover.inference.tta.parse_tta`).
        prob_compress: Probability map compression: ``zstd`` (fast) or ``deflate``.
        probs: Write the probability map (``--no-probs``: the class map alone, which saves
            the probabilities' encoding, compression and overviews; an earlier run's
            probability map of a predicted tile is removed, as it no longer fits).
        compile: Run the model compiled (``torch.compile``); the maps equal the eager ones
            within floating-point rounding.
        tags: Extra metadata tags written into the maps (a job's fingerprint).
        resolution: Pixel size the model sees: ``train`` (the checkpoint's), ``native`` or
            metres (see :mod:`landcover.inference.resolution`).
        tile_memory: Largest decoded tile, in bytes, held whole in memory (decoded once, in
            parallel); a larger one is read row by row (see
            :mod:`landcover.inference.tileread`).
    """

    out: str
    overlap: int | None = None
    batch_size: int | None = None
    window: int | None = None
    prob_dtype: str = "uint8"
    preview: bool = True
    log_every_s: float = 10.0
    tta: str = "none"
    prob_compress: str = "zstd"
    probs: bool = True
    compile: bool = False
    tags: dict[str, str] = field(default_factory=dict)
    resolution: str = "train"
    tile_memory: int = IN_MEMORY_BYTES


def check_bands(src: Any, path: str, bands: int) -> None:
    """Checks an image's band count and dtype against the model.

    A 4th band tagged 'alpha' (common for NAIP NIR) counts as a data band (see
    :func:`landcover.data.raster.nodata_mask`).

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

    The maps exist (published under their final names) when this returns. To overlap the
    publishing of one tile's maps with the next tile's prediction, use :class:`TileMapper`.

    Args:
        tile: The image: a path or URL.
        im: The loaded model.
        options: Output folder (path or URL) and settings.

    Returns:
        A summary: paths, size, seconds and megapixels per second.

    Raises:
        DataError: If the tile is missing, not a raster, has the wrong bands, or cannot be
            read or written.
        StorageError: If a download or upload fails after bounded retries.
    """
    with TileMapper(im, options) as mapper:
        return mapper.submit(tile).result()


class TileMapper:
    """Predicts tiles one after another and publishes their maps in the background.

    :meth:`submit` predicts a tile in the calling thread (the device's thread), reading ahead
    and writing behind in two more threads (:func:`~landcover.inference.pipeline.run_pipelined`),
    into uncompressed scratch files. The slow rest of a tile's work (COG compression and
    overviews, the preview, an upload) goes to a publisher thread and overlaps the next
    tile's prediction; at most one tile waits there, so scratch space stays at two tiles.
    A tile's maps exist once its future is done; :meth:`close` (or leaving the ``with``
    block) waits for every tile.

    A remote tile is downloaded to a local scratch file first (windowed reads need a file);
    maps for a remote folder are made in a local scratch folder and each uploaded whole (one
    block-blob commit, so a reader never sees a partial map).

    Args:
        im: The loaded model.
        options: Output folder (path or URL) and settings.
    """

    def __init__(self, im: InferenceModel, options: PredictOptions) -> None:
        self.im = im
        self.options = options
        window, overlap, batch = resolve_geometry(
            im.config.data.patch_size, options.window, options.overlap, options.batch_size
        )
        self.tta = parse_tta(options.tta)
        self.resolution = resolve_resolution(options.resolution, im.pixel_size_m, im.checkpoint)
        model = im.model
        if options.compile:
            model = compile_model(im.model, "predict")
            example = torch.zeros(batch, window, window, im.bands, dtype=torch.uint8)
            with autocast(im.device, im.autocast_dtype):
                compile_check(model, im.prepare(example.to(im.device)), "--compile")
        self.predictor = SlidingWindowPredictor(
            model, window, overlap, batch, im.prepare, im.device, im.autocast_dtype, self.tta
        )
        self._publisher = ThreadPoolExecutor(1, thread_name_prefix="landcover-publish")
        self._pending: list[Future] = []

    @property
    def stored_dtype(self) -> str | None:
        """The probability map's data type, or ``None`` when none is written."""
        return self.options.prob_dtype if self.options.probs else None

    def __enter__(self) -> TileMapper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Waits until every submitted tile's maps are published (or have failed)."""
        self._publisher.shutdown(wait=True)

    def submit(self, tile: str) -> Future:
        """Predicts a tile now and publishes its maps in the background.

        Args:
            tile: The image: a path or URL.

        Returns:
            A future of the tile's summary (see :func:`predict_tile`); its ``result()`` raises
            what publishing raised.

        Raises:
            DataError: If the tile is missing, not a raster, has the wrong bands, or cannot be
                read, or its maps cannot be written.
            StorageError: If a download fails after bounded retries.
        """
        # at most one tile waits to be published while this one is predicted
        self._pending = [f for f in self._pending if not f.done()]
        wait(self._pending[:-1])
        start = time.perf_counter()
        out = str(self.options.out)
        work = ExitStack()  # this tile's scratch files, removed once its maps are published
        try:
            local_tile, local_out = tile, Path(out)
            if storage.is_remote(tile) or storage.is_remote(out):
                temp = Path(work.enter_context(tempfile.TemporaryDirectory(prefix="lc-predict-")))
                if storage.is_remote(out):
                    local_out = temp / "out"
                if storage.is_remote(tile):
                    if not storage.is_file(tile):
                        raise DataError(f"{tile}: file not found")
                    local_tile = str(temp / "input" / storage.name(tile))
                    storage.download_file(tile, local_tile)
            scratch = work.enter_context(scratch_folder(local_out))
            maps = self._predict_pixels(tile, local_tile, scratch, local_out)
        except BaseException:
            work.close()
            raise
        future = self._publisher.submit(self._publish, maps, work, start)
        self._pending.append(future)
        return future

    def _predict_pixels(self, tile: str, local_tile: str, scratch: Path, out: Path) -> _TileMaps:
        """Predicts a local tile file into scratch maps on the tile's grid.

        A tile predicted at another pixel size (``--resolution``) is read resampled, predicted
        into maps on that working grid, and the maps are brought back onto the tile's grid.
        """
        im, options = self.im, self.options
        stem = storage.name(tile).rsplit(".", 1)[0]
        with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_MB), open_raster(local_tile) as src:
            check_bands(src, tile, im.bands)
            height, width = src.height, src.width
            grid = Grid.of(src)
            work = working_grid(src, tile, self.resolution, im.config.data.patch_size)
            log.info(
                "%s: %d x %d px, %.2f m pixels, %s%s",
                tile,
                width,
                height,
                abs(src.transform.a),
                src.crs,
                ""
                if work is None
                else f", predicted at {work[1]} x {work[2]} px ({self.resolution.describe()})",
            )
            tags = {
                "CHECKPOINT": Path(im.checkpoint).name,
                "EPOCH": str(im.epoch),
                "SOURCE_IMAGE": str(tile),
                **options.tags,
            }
            if self.tta != ("identity",):
                tags["TTA"] = ",".join(self.tta)
            if work is not None:
                tags["PREDICTED_PIXEL_SIZE_M"] = f"{self.resolution.metres:g}"
            label = str(out / stem)
            writer = MapWriter(src, im.mapping, scratch, self.stored_dtype, tags, label=label)
            try:
                if work is None:
                    self._predict_into(tile, src, writer)
                else:
                    self._predict_resampled(tile, src, work, scratch, writer, label)
            except BaseException:
                with suppress(DataError):  # the first error is the one to report
                    writer.close()
                raise
        return _TileMaps(tile, local_tile, stem, out, writer, width, height, grid)

    def _predict_resampled(
        self, tile: str, src: Any, work: Any, scratch: Path, writer: MapWriter, label: str
    ) -> None:
        """Predicts a tile on a working grid, then writes its maps onto the tile's grid."""
        folder = scratch / "working-grid"
        folder.mkdir()
        with on_grid(src, work, Resampling.bilinear) as vrt:
            inner = MapWriter(vrt, self.im.mapping, folder, self.stored_dtype, label=label)
            try:
                self._predict_into(tile, vrt, inner)
            except BaseException:
                with suppress(DataError):  # the first error is the one to report
                    inner.close()
                raise
            inner.close()
        try:
            maps_onto_grid(inner.class_path, inner.prob_path, src, writer.write)
        except RasterioError as exc:
            raise DataError(
                f"{tile}: bringing the maps back onto its grid failed ({error_reason(exc)})"
            ) from None
        shutil.rmtree(folder, ignore_errors=True)

    def _predict_into(self, tile: str, src: Any, writer: MapWriter) -> None:
        """Predicts a dataset on its own grid into a map writer (read, predict, write at once)."""
        im, options, predictor = self.im, self.options, self.predictor
        cuda = im.device.type == "cuda"
        height, width, bands = src.height, src.width, src.count
        # decoded once, on every core, when it fits in memory
        source = TileSource.open(src, tile, options.tile_memory)
        predictor.prepare = dataset_normalizer(im, src, tile, source.stats)
        plan = predictor.plan(height, width)
        blender = predictor.blender(plan)
        progress = _Progress(tile, height, width, options.log_every_s)

        def read(i: int) -> tuple[torch.Tensor, np.ndarray]:
            a, b = plan.rows(i)
            row, keep = plan.strip(i)
            rows = np.zeros((plan.window, plan.padded_width, bands), dtype=np.uint8)
            source.read_rows(a, b, rows)
            valid = source.valid(row, keep, rows[row - a : row - a + keep, :width])
            pixels = torch.from_numpy(rows)
            return (pixels.pin_memory() if cuda else pixels), valid

        def compute(i: int, item: tuple[torch.Tensor, np.ndarray]) -> EncodedStrip | None:
            pixels, valid = item
            probs = blender.add(pixels.to(im.device, non_blocking=True))
            if probs is None:
                return None
            classes, stored = encode_probs(probs, self.stored_dtype, overwrite=True)
            row, keep = plan.strip(i)
            progress.update(row + keep)
            return EncodedStrip(row, classes, stored, valid)

        with predictor.evaluating():
            run_pipelined(len(plan), read, compute, writer.write)

    def _publish(self, maps: _TileMaps, work: ExitStack, start: float) -> dict[str, Any]:
        """Turns a tile's scratch maps into COGs (and a preview), uploads them if remote."""
        with work:
            class_dst = maps.out / f"{maps.stem}_class.tif"
            prob_dst = maps.out / f"{maps.stem}_prob.tif" if self.options.probs else None
            maps.writer.publish(class_dst, prob_dst, self.options.prob_compress)
            preview = maps.out / f"{maps.stem}_preview.png"
            if self.options.preview:
                write_preview(maps.local_tile, class_dst, self.im.mapping, preview)
            summary: dict[str, Any] = {
                "tile": maps.tile,
                "class": str(class_dst),
                "prob": None if prob_dst is None else str(prob_dst),
                "preview": str(preview) if self.options.preview else None,
                "width": maps.width,
                "height": maps.height,
                "grid": maps.grid,
                "counts": ClassCounts(
                    [int(n) for n in maps.writer.histogram[: self.im.mapping.num_classes]],
                    int(maps.writer.histogram[CLASS_NODATA]),
                ),
            }
            out = str(self.options.out)
            if prob_dst is None:  # an earlier run's probabilities no longer fit the class map
                storage.remove(storage.join(out, f"{maps.stem}_prob.tif"))
            if storage.is_remote(out):
                for key in ("class", "prob", "preview"):
                    if summary[key] is not None:
                        url = storage.join(out, Path(summary[key]).name)
                        storage.upload_file(summary[key], url)
                        summary[key] = url
        seconds = time.perf_counter() - start
        mpx = maps.width * maps.height / 1e6
        log.info(
            "%s -> %s (%.1f Mpx in %.1f s, %.2f Mpx/s)",
            maps.tile,
            summary["class"],
            mpx,
            seconds,
            mpx / seconds,
        )
        return {**summary, "seconds": seconds, "mpx_per_s": mpx / seconds}


@dataclass
class _TileMaps:
    """A tile's maps in scratch files, waiting to be published."""

    tile: str
    local_tile: str
    stem: str
    out: Path
    writer: MapWriter
    width: int
    height: int
    grid: Grid


class _Progress:
    """Logs a tile's progress every ``every_s`` seconds."""

    def __init__(self, tile: str, height: int, width: int, every_s: float) -> None:
        self.name = Path(tile).name
        self.height, self.width, self.every_s = height, width, every_s
        self.start = self.last = time.perf_counter()

    def update(self, rows_done: int) -> None:
        now = time.perf_counter()
        if now - self.last < self.every_s:
            return
        self.last = now
        done = rows_done / self.height
        log.info(
            "%s: %3.0f%% %.2f Mpx/s ETA %.0f s",
            self.name,
            100 * done,
            rows_done * self.width / 1e6 / (now - self.start),
            (now - self.start) * (1 - done) / max(done, 1e-9),
        )
