"""Map tiles of a job, rendered on demand: the class map and the imagery as web-map PNGs.

The browser asks for tiles of the Web Mercator grid (``z/x/y``, 256 px, as every web map
does); each is cut from the job's tiles that cover it with rio-tiler, which reprojects the
window from each tile's own CRS and reads the COGs' overviews at low zoom, so a job of
hundreds of tiles is rendered a view at a time, from the few tiles and overview levels that
view needs. The class maps are read through the job's VRT mosaics where those hold them
(:mod:`.mosaics`: one GDAL read for all the tiles of a CRS). Where tiles overlap, the later
one in the collection's order (by path) is on top (rio-tiler's first-wins mosaic, over the
tiles in reverse; the VRTs draw them so too).

Layers:

- ``classes``: the class map, in each class's colour; no-data transparent.
- ``truecolor``: the input images' bands 1, 2, 3 (red, green, blue).
- ``falsecolor``: bands 4, 1, 2 (near infrared, red, green): vegetation in red.

Inputs of 8 bits are shown as they are; others are stretched per rendered tile (2nd to 98th
percentile). Rendered tiles are kept in memory (the last :data:`CACHED_TILES`).
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

import morecantile
import numpy as np
import rasterio
from rasterio.errors import RasterioIOError
from rio_tiler.errors import EmptyMosaicError, NoOverviewWarning, TileOutsideBounds
from rio_tiler.io import Reader
from rio_tiler.models import ImageData
from rio_tiler.mosaic import mosaic_reader

from landcover.redaction import redact
from landcover.storage import filesystem
from landcover.storage.errors import StorageError
from landcover.storage.urls import is_azure
from landcover.viewer.job import ViewerJob

log = logging.getLogger("landcover")

TILE_SIZE = 256
CACHED_TILES = 1024
READ_THREADS = 4
"""Job tiles read at once for one map tile."""
_TMS = morecantile.tms.get("WebMercatorQuad")
MAX_ZOOM = _TMS.maxzoom
"""The deepest zoom of the Web Mercator grid (24, about 1 cm a pixel): none is drawn below."""


@dataclass(frozen=True)
class Layer:
    """A layer the viewer draws.

    Attributes:
        name: Its name in tile URLs.
        indexes: The bands read (1-based).
        of_image: Read from the input images (else from the class maps).
    """

    name: str
    indexes: tuple[int, ...]
    of_image: bool


LAYERS = {
    "classes": Layer("classes", (1,), of_image=False),
    "truecolor": Layer("truecolor", (1, 2, 3), of_image=True),
    "falsecolor": Layer("falsecolor", (4, 1, 2), of_image=True),
}


class _KnownReader(Reader):
    """rio-tiler's reader, which trusts that a tile meets the map tile asked for.

    :meth:`TileRenderer.covering` has compared their WGS 84 bboxes already; rio-tiler's own
    test (``tile_exists``: the tile's bounds densified and reprojected) took two thirds of
    a small tile's read.
    """

    def tile_exists(self, tile_x: int, tile_y: int, tile_z: int) -> bool:
        """Always: see the class."""
        return True


class _UnreadableError(Exception):
    """An input image on blob storage that cannot be read (said once, then left out)."""


_SAID: set[str] = set()


@contextmanager
def _reader(path: str) -> Iterator[_KnownReader]:
    """A reader of a local file, a plain URL, or a blob read through :mod:`landcover.storage`.

    A blob (``az://``, ``abfs://``: a job's inputs on blob storage) is opened with its file
    system as rasterio's opener: GDAL reads the byte ranges it needs through adlfs, with the
    environment's credentials or the job's signed tokens, and no token is ever in a path.

    Raises:
        _UnreadableError: A blob that cannot be reached (a warning line says why, once).
    """
    if not is_azure(path):
        with _KnownReader(path) as src:
            yield src
        return
    try:
        fs, inner = filesystem(path)
        dataset = rasterio.open(inner, opener=fs)
    except (StorageError, RasterioIOError, OSError) as exc:
        if path not in _SAID:
            _SAID.add(path)
            log.warning(redact(f"{path}: imagery not drawn ({exc})"))
        raise _UnreadableError(path) from None
    try:
        with _KnownReader(path, dataset=dataset) as src:
            yield src
    finally:
        dataset.close()


def _stretch(image: ImageData) -> ImageData:
    """An image of more than 8 bits stretched to 0-255 (2nd to 98th percentile of its data)."""
    if image.array.dtype == np.uint8:
        return image
    valid = image.array.compressed()
    if valid.size == 0:
        return image
    low, high = np.percentile(valid, [2, 98])
    return image.rescale(in_range=((float(low), float(max(high, low + 1))),))


class TileRenderer:
    """Renders a job's layers as PNG map tiles (see the module).

    Args:
        job: The job.
    """

    def __init__(self, job: ViewerJob) -> None:
        # a VRT has no overviews of its own: GDAL reads its sources' (rio-tiler warns)
        warnings.filterwarnings("ignore", category=NoOverviewWarning)
        self.job = job
        self.colormap = {c.value: (*c.rgb, 255) for c in job.classes}
        self.mosaic_of = {
            t.id: m.path
            for t in job.tiles
            for m in job.mosaics
            if os.path.realpath(t.class_map) in m.members
        }
        """Each tile's VRT, for those in one."""
        self.png: Callable[[str, int, int, int], bytes | None] = lru_cache(CACHED_TILES)(
            self.render
        )

    def covering(self, layer: Layer, z: int, x: int, y: int) -> list[str]:
        """The files a map tile is cut from, the topmost first (see the module).

        Args:
            layer: The layer: the class maps (through the job's VRTs where they hold them)
                or the input images (tiles without a readable one left out).
            z: Zoom.
            x: Column.
            y: Row.

        Returns:
            The files of the job's tiles whose bbox meets the map tile's.
        """
        west, south, east, north = _TMS.bounds(morecantile.Tile(x, y, z))
        paths: dict[str, None] = {}  # (ordered, once each)
        for t in reversed(self.job.tiles):
            meets = t.bbox[0] <= east and t.bbox[2] >= west
            if not (meets and t.bbox[1] <= north and t.bbox[3] >= south):
                continue
            if layer.of_image:
                if t.image:
                    paths[t.image] = None
            else:
                paths[self.mosaic_of.get(t.id, t.class_map)] = None
        return list(paths)

    def render(self, layer_name: str, z: int, x: int, y: int) -> bytes | None:
        """One map tile of a layer as a PNG (transparent where nothing is mapped).

        Args:
            layer_name: ``classes``, ``truecolor`` or ``falsecolor``.
            z: Zoom.
            x: Column.
            y: Row.

        Returns:
            The PNG, or ``None`` when no tile of the job meets it.

        Raises:
            KeyError: If the layer is not one of :data:`LAYERS`.
        """
        layer = LAYERS[layer_name]
        tiles = self.covering(layer, z, x, y)
        if not tiles:
            return None

        def read(path: str, *args: int) -> ImageData:
            with _reader(path) as src:
                if layer.of_image and src.dataset.count < max(layer.indexes):
                    raise TileOutsideBounds(f"{path}: {src.dataset.count} bands")
                return src.tile(
                    *args,
                    tilesize=TILE_SIZE,
                    indexes=layer.indexes,
                    resampling_method="nearest" if not layer.of_image else "bilinear",
                    reproject_method="nearest",
                )

        try:
            image, _ = mosaic_reader(
                tiles,
                read,
                x,
                y,
                z,
                threads=READ_THREADS,
                allowed_exceptions=(TileOutsideBounds, RasterioIOError, _UnreadableError),
            )
        except EmptyMosaicError:
            return None
        if layer.of_image:
            return _stretch(image).render(img_format="PNG")
        return image.render(img_format="PNG", colormap=self.colormap)
