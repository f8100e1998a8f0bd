"""The next tile decoded while this one is predicted.

Decoding a NAIP tile into memory takes about 1 s of one core (:mod:`~landcover.inference.
tileread`); done when the tile's turn comes, the device waits for it between tiles. A region
job knows its next tile (its worker claims it before predicting this one), so
:class:`TileDecoder` decodes it in a thread of its own, with GDAL's threads, while the device
works on this one, and hands the pixels to the tile's prediction when it starts
(``benchmarks/latency_bench.py``).

It is a hint: only a local file predicted on its own grid is decoded ahead, one tile at a
time, and whatever goes wrong is left for the tile's own prediction to meet and report. The
mapper acts on it with the model on a GPU only (``TileMapper(decode_ahead=...)``): on the CPU
the model's threads take every core and decoding ahead only competes with them.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import rasterio
from rasterio.errors import RasterioError

from landcover import storage
from landcover.data.raster import checked_image, open_raster
from landcover.errors import DataError
from landcover.inference.loader import InferenceModel
from landcover.inference.options import CHECKPOINT_EXPECTS, PredictOptions
from landcover.inference.resolution import Resolution, checked_grid
from landcover.inference.tileread import TileSource

GDAL_CACHE_MB = 256
"""GDAL's block cache while a tile is read and its maps written (its default is 5 % of the
machine's memory)."""


class TileDecoder:
    """Decodes one tile ahead, in a thread of its own.

    Args:
        im: The loaded model (its bands, patch size and normalisation).
        options: The predict options (``tile_memory``).
        resolution: The resolved ``--resolution`` (a tile read resampled is not decoded ahead).
    """

    def __init__(self, im: InferenceModel, options: PredictOptions, resolution: Resolution) -> None:
        self.im = im
        self.options = options
        self.resolution = resolution
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="landcover-decode")
        self._ahead: dict[str, Future] = {}

    def start(self, tile: str) -> None:
        """Starts decoding a tile (a remote one, or one already started, is left alone).

        An earlier tile not taken yet is dropped.

        Args:
            tile: The image: a path or URL.
        """
        if storage.is_remote(tile) or tile in self._ahead:
            return
        for stale in self._ahead.values():
            stale.cancel()
        self._ahead = {tile: self._thread.submit(self._decode, tile)}

    def take(self, tile: str) -> TileSource | None:
        """The tile's decoded pixels, waiting for them, if :meth:`start` was called for it.

        Args:
            tile: The local path the tile is predicted from.

        Returns:
            The decoded source for :meth:`TileSource.open`, or ``None``.
        """
        future = self._ahead.pop(tile, None)
        if future is None or future.cancelled():
            return None
        return future.result()

    def close(self) -> None:
        """Stops the thread (a tile being decoded is finished, the rest dropped)."""
        self._thread.shutdown(wait=True, cancel_futures=True)
        self._ahead.clear()

    def _decode(self, tile: str) -> TileSource | None:
        """The tile decoded as its prediction would decode it (in the decoder's thread)."""
        im = self.im
        try:
            with (
                rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_MB),
                open_raster(tile) as src,
                checked_image(src, tile, im.bands, CHECKPOINT_EXPECTS) as image,
            ):
                if checked_grid(src, tile, self.resolution, im.config.data.patch_size):
                    return None  # read resampled, as it is predicted
                per_tile = im.config.data.normalize == "per_tile"
                return TileSource.decode(image, tile, self.options.tile_memory, stats=per_tile)
        except (DataError, RasterioError, OSError):
            return None  # the tile's own prediction meets it again, and reports it
