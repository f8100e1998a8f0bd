"""``landcover predict``: georeferenced land-cover maps of whole tiles in bounded memory.

A tile is read one row of windows at a time, predicted with blended sliding windows, and
handed strip by strip to its map writers (:mod:`landcover.inference.sinks`); peak memory
depends on the tile's width, not its area. The ``cog`` writer's outputs per tile:
``{stem}_class.tif`` (COG, colour table, class names), ``{stem}_prob.tif`` (one band per
class; not with ``probs=False``) and ``{stem}_preview.png``.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
import torch
from rasterio.enums import Resampling
from rasterio.errors import RasterioError

from landcover import storage
from landcover.data.maskfile import download_mask_file
from landcover.data.nodatafill import zero_nodata
from landcover.data.raster import checked_image, open_raster
from landcover.data.resolution import describe_pixel_size, on_grid
from landcover.errors import DataError, error_reason
from landcover.inference.ahead import GDAL_CACHE_MB, TileDecoder
from landcover.inference.encode import EncodedStrip, encode_strip
from landcover.inference.georef import no_crs_note
from landcover.inference.loader import InferenceModel, dataset_normalizer
from landcover.inference.mapwriters import TileSinks, map_writers
from landcover.inference.options import CHECKPOINT_EXPECTS, PredictOptions
from landcover.inference.pipeline import run_pipelined
from landcover.inference.publish import TileMaps, publish_tile
from landcover.inference.resolution import maps_onto_grid, resolve_resolution, working_grid
from landcover.inference.results import Grid, TileResult
from landcover.inference.sinks import MapTarget
from landcover.inference.sliding import SlidingWindowPredictor, resolve_geometry
from landcover.inference.tileread import TileSource
from landcover.inference.tta import parse_tta
from landcover.inference.writers import MapWriter
from landcover.inference.writing import scratch_folder
from landcover.models import compile_check, compile_model
from landcover.parallel.devices import autocast
from landcover.progress import RowProgress

log = logging.getLogger("landcover")


def predict_tile(tile: str, im: InferenceModel, options: PredictOptions) -> TileResult:
    """Predicts one tile and writes its maps; the tile and the output folder may be blob URLs.

    The maps exist (published under their final names) when this returns. To overlap the
    publishing of one tile's maps with the next tile's prediction, use :class:`TileMapper`.

    Args:
        tile: The image: a path or URL.
        im: The loaded model.
        options: Output folder (path or URL) and settings.

    Returns:
        The tile's maps (paths or URLs), grid, class counts and speed.

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
    through the map writers (``options.writers``), the COGs into uncompressed scratch files.
    The slow rest of a tile's work (COG compression and
    overviews, the preview, an upload) goes to a publisher thread and overlaps the next
    tile's prediction; at most one tile waits there, so scratch space stays at two tiles.
    A tile's maps exist once its future is done; :meth:`close` (or leaving the ``with``
    block) waits for every tile.

    Between tiles the device does not wait for the host: the writer thread is the mapper's
    own, so a tile's last strips are written while the next tile's first windows are
    predicted, and :meth:`prefetch` decodes the next tile in a thread of its own while this
    one is predicted (``benchmarks/latency_bench.py``).

    A remote tile is downloaded to a local scratch file first (windowed reads need a file);
    maps for a remote folder are made in a local scratch folder and each uploaded whole (one
    block-blob commit, so a reader never sees a partial map).

    Args:
        im: The loaded model.
        options: Output folder (path or URL) and settings.
        decode_ahead: Act on :meth:`prefetch` hints. Default: with the model on a GPU only; on
            the CPU the model's threads take every core and a tile decoded ahead only competes
            with them (1.1 s more CPU a tile and 0.5 s slower on 2 cores,
            ``benchmarks/ceiling_bench.py``'s sustained run, 2026-11-28).
    """

    def __init__(
        self, im: InferenceModel, options: PredictOptions, decode_ahead: bool | None = None
    ) -> None:
        self.im = im
        self.options = options
        self.decode_ahead = im.device.type != "cpu" if decode_ahead is None else decode_ahead
        self.writers = map_writers(options.writers)
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
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="landcover-write")
        self._decoder = TileDecoder(im, options, self.resolution)
        self.on_rows: Callable[[float, int], None] | None = None
        """Called as a tile's rows are predicted: the share done and the pixels so far."""

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
        self._writer.shutdown(wait=True)
        self._decoder.close()

    def prefetch(self, tile: str) -> None:
        """Decodes a tile in the background, for a later :meth:`submit` of it to take.

        A hint (:class:`~landcover.inference.ahead.TileDecoder`): only a local file predicted
        on its own grid is decoded ahead, and what goes wrong is left for :meth:`submit`.

        Args:
            tile: The image: a path or URL.
        """
        if self.decode_ahead:
            self._decoder.start(tile)

    def submit(self, tile: str) -> Future:
        """Predicts a tile now and publishes its maps in the background.

        Args:
            tile: The image: a path or URL.

        Returns:
            A future of the tile's :class:`~landcover.inference.results.TileResult`; its
            ``result()`` raises what publishing raised.

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
                    download_mask_file(tile, local_tile)
            scratch = work.enter_context(scratch_folder(local_out))
            maps = self._predict_pixels(tile, local_tile, scratch, local_out)
        except BaseException:
            work.close()
            raise
        future = self._publisher.submit(
            publish_tile, maps, work, start, self.im.mapping.num_classes, str(self.options.out)
        )
        self._pending.append(future)
        return future

    def _predict_pixels(self, tile: str, local_tile: str, scratch: Path, out: Path) -> TileMaps:
        """Predicts a local tile file into scratch maps on the tile's grid.

        A tile predicted at another pixel size (``--resolution``) is read resampled, predicted
        into maps on that working grid, and the maps are brought back onto the tile's grid.
        """
        im, options = self.im, self.options
        stem = storage.name(tile).rsplit(".", 1)[0]
        with (
            rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_MB),
            open_raster(local_tile) as src,
            checked_image(src, tile, im.bands, CHECKPOINT_EXPECTS) as image,
        ):
            height, width = src.height, src.width
            grid = Grid.of(src)
            work = working_grid(src, tile, self.resolution, im.config.data.patch_size)
            log.info(
                "%s: %d x %d px, %s, %s%s",
                tile,
                width,
                height,
                describe_pixel_size(src),
                src.crs or no_crs_note(src),
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
            target = MapTarget(
                src, im.mapping, self.stored_dtype, tags, scratch, out, stem, label, local_tile,
                im.bands, options,
            )  # fmt: skip
            writer = TileSinks.open(self.writers, target)
            writes: list[Future] = []
            try:
                if work is None:
                    decoded = self._decoder.take(local_tile)
                    writes = self._predict_into(tile, image, writer, decoded)
                else:
                    self._predict_resampled(tile, src, image, work, scratch, writer, label)
            except BaseException:
                with suppress(DataError):  # the first error is the one to report
                    writer.close()
                raise
        return TileMaps(tile, writer, grid, writes)

    def _predict_resampled(
        self,
        tile: str,
        src: Any,
        image: Any,
        work: Any,
        scratch: Path,
        writer: TileSinks,
        label: str,
    ) -> None:
        """Predicts a tile on a working grid, then writes its maps onto the tile's grid.

        ``src`` is the tile's file, ``image`` the bands the model reads (its view).
        """
        folder = scratch / "working-grid"
        folder.mkdir()
        with on_grid(image, work, Resampling.bilinear) as vrt:
            inner = MapWriter(vrt, self.im.mapping, folder, self.stored_dtype, label=label)
            try:
                for write in self._predict_into(tile, vrt, inner):
                    write.result()
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

    def _predict_into(
        self, tile: str, src: Any, writer: Any, decoded: TileSource | None = None
    ) -> list[Future]:
        """Predicts a dataset on its own grid into a map writer (read, predict, write at once).

        Returns the writes still under way (in the mapper's writer thread), to wait for
        before the maps are closed.
        """
        im, options, predictor = self.im, self.options, self.predictor
        cuda = im.device.type == "cuda"
        height, width, bands = src.height, src.width, src.count
        # decoded once, on every core, when it fits in memory (or ahead, by prefetch)
        source = TileSource.open(src, tile, options.tile_memory, decoded)
        predictor.prepare = dataset_normalizer(im, src, tile, source.stats)
        plan = predictor.plan(height, width)
        blender = predictor.blender(plan)
        progress = RowProgress(tile, height, width, options.log_every_s)

        def read(i: int) -> tuple[torch.Tensor, np.ndarray]:
            a, b = plan.rows(i)
            row, keep = plan.strip(i)
            rows = np.zeros((plan.window, plan.padded_width, bands), dtype=np.uint8)
            source.read_rows(a, b, rows)
            valid = source.valid(a, b - a, rows[: b - a, :width])
            zero_nodata(rows[: b - a, :width], None if valid.all() else ~valid)
            valid = valid[row - a : row - a + keep]
            pixels = torch.from_numpy(rows)
            return (pixels.pin_memory() if cuda else pixels), valid

        def compute(i: int, item: tuple[torch.Tensor, np.ndarray]) -> EncodedStrip | None:
            pixels, valid = item
            probs = blender.add(pixels.to(im.device, non_blocking=True))
            if probs is None:
                return None
            row, keep = plan.strip(i)
            progress.update(row + keep)
            if self.on_rows is not None:  # the job's progress line (every worker's tiles)
                self.on_rows((row + keep) / height, (row + keep) * width)
            return encode_strip(probs, self.stored_dtype, row, valid)

        with predictor.evaluating():
            return run_pipelined(len(plan), read, compute, writer.write, writer=self._writer)
