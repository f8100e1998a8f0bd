"""Reading image/label tile pairs from GeoTIFF into memory, with the checks users need.

Every problem with a file becomes a :class:`~landcover.errors.DataError` whose message names
the file and the problem: wrong band count or dtype, a label that cannot be brought onto the
image's grid, an unreadable or truncated file, or label codes outside the class mapping. Labels
on another grid or CRS than the imagery are reprojected onto it (nearest neighbour).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import numpy as np
import rasterio
from rasterio.enums import Resampling
from rasterio.errors import NodataShadowWarning, NotGeoreferencedWarning, RasterioError
from rasterio.windows import Window

from landcover.classes import IGNORE_INDEX, ClassMapping
from landcover.data.align import check_alignable, label_on_image_grid
from landcover.data.bandview import band_count_problem, has_dataset_mask, image_view
from landcover.data.maskfile import open_bytes, read_mask_file
from landcover.data.nodatafill import zero_nodata
from landcover.data.pairs import TilePair
from landcover.data.resolution import on_grid, pixel_size_m, resampled_grid
from landcover.errors import DataError, first_line
from landcover.gdalnoise import silence_gdal

# NAIP files often tag the NIR band 'alpha'; landcover reads it as data and takes no-data from
# the nodata value and a per-dataset mask (see nodata_mask), which is what rasterio warns about.
warnings.filterwarnings("ignore", category=NodataShadowWarning)
# a tile without a geotransform is mapped on its pixel grid, and predict says so in its own
# line; rasterio would warn on every open of it and of its maps
warnings.filterwarnings("ignore", category=NotGeoreferencedWarning)


@dataclass
class TileArrays:
    """A tile pair held in memory.

    Attributes:
        name: Tile name.
        image: ``(H, W, C)`` uint8 imagery.
        label: ``(H, W)`` uint8 class indices; :data:`IGNORE_INDEX` where there is no data.
        nodata: ``(H, W)`` bool, True where the image has no data (see :func:`nodata_mask`);
            ``None`` when every pixel has data.
        pixel_size_m: Pixel size in metres of the arrays (after any resampling on load), or
            ``None`` when the tile's CRS gives no metres.
    """

    name: str
    image: np.ndarray
    label: np.ndarray
    nodata: np.ndarray | None = None
    pixel_size_m: float | None = None

    @property
    def nbytes(self) -> int:
        """Bytes held in memory."""
        extra = 0 if self.nodata is None else self.nodata.nbytes
        return self.image.nbytes + self.label.nbytes + extra


def _open_error(path: str, exc: Exception) -> DataError:
    reason = first_line(exc)
    return DataError(f"{path}: not a readable GeoTIFF ({reason})")


@contextmanager
def open_raster(
    path: str, data: bytes | None = None, mask: bytes | None = None, image: bool = True
) -> Iterator[rasterio.io.DatasetReader]:
    """Opens a raster from a path, a URL or bytes; every failure is a one-line DataError.

    Remote URLs (``az://``, ``abfs://``, ``memory://``) are read into memory first (through
    :mod:`landcover.storage`), with their external mask file where there is one
    (:mod:`landcover.data.maskfile`), and opened as in-memory files.

    Args:
        path: The file or URL (named in messages).
        data: The file's bytes, if already fetched.
        mask: The bytes of its external mask file (``path.msk``), if fetched with ``data``.
        image: Whether a remote file may have a mask file to read with it (``False`` for a
            label: no request that finds nothing).

    Yields:
        The open dataset (closed on exit).

    Raises:
        DataError: If the file is missing, unreadable, or not a raster.
    """
    from landcover import storage

    silence_gdal()  # reads in threads outside rasterio's Env print no raw GDAL lines
    with ExitStack() as stack:
        try:
            if data is None and storage.is_remote(path):
                data = storage.read_bytes(path)
                mask = read_mask_file(path) if image else None
            if data is not None:
                ds = stack.enter_context(open_bytes(data, mask))
            else:
                try:
                    open(path, "rb").close()
                except OSError:
                    raise DataError(f"{path}: file not found or not readable") from None
                ds = stack.enter_context(rasterio.open(path))
        except RasterioError as exc:
            raise _open_error(path, exc) from None
        yield ds


def check_image(
    ds: rasterio.io.DatasetReader, path: str, bands: int, expects: str = "the model expects"
) -> None:
    """Checks that an opened image has the expected band count and uint8 data.

    The expected bands and one more tagged alpha (the image's mask:
    :func:`landcover.data.bandview.image_view`) pass.

    Args:
        ds: The open dataset.
        path: Its path, for the message.
        bands: Expected number of bands.
        expects: Who expects them, for the message.

    Raises:
        DataError: If the band count or dtype is wrong.
    """
    problem = band_count_problem(ds, bands, expects)
    if problem is not None:
        raise DataError(f"{path}: {problem}")
    if ds.dtypes[0] != "uint8":
        raise DataError(f"{path}: has dtype {ds.dtypes[0]}, expected uint8 imagery")


@contextmanager
def checked_image(
    ds: rasterio.io.DatasetReader, path: str, bands: int, expects: str = "the model expects"
) -> Iterator[rasterio.io.DatasetReader]:
    """Checks an opened image (:func:`check_image`), then shows it as the model reads it.

    Args:
        ds: The open dataset.
        path: Its path, for the message.
        bands: Expected number of bands.
        expects: Who expects them, for the message.

    Yields:
        ``ds``, or a view of its first ``bands`` bands whose mask is its extra alpha band
        (:func:`landcover.data.bandview.image_view`).

    Raises:
        DataError: If the band count or dtype is wrong.
    """
    check_image(ds, path, bands, expects)
    with image_view(ds, bands) as view:
        yield view


def _declared_nodata(ds: rasterio.io.DatasetReader) -> list[float] | None:
    """The nodata value of every band, or None unless every band declares one."""
    values = list(ds.nodatavals)
    if not values or any(v is None for v in values):
        return None
    return [float(v) for v in values]


def has_nodata(ds: rasterio.io.DatasetReader) -> bool:
    """Whether an image can have no-data pixels at all under :func:`nodata_mask`'s policy.

    Args:
        ds: The open image.

    Returns:
        True when the file declares a nodata value or has a per-dataset mask.
    """
    return _declared_nodata(ds) is not None or has_dataset_mask(ds)


def nodata_mask(
    ds: rasterio.io.DatasetReader,
    window: Window | None = None,
    pixels: np.ndarray | None = None,
    out_shape: tuple[int, int] | None = None,
) -> np.ndarray:
    """Where an image has no data: the one no-data policy of every command.

    A pixel is no-data when the file declares a nodata value and every band equals it, or when
    the file's per-dataset mask (an internal GeoTIFF mask or a ``.msk`` sidecar) marks it
    invalid. A band tagged alpha is data, not a mask (NAIP's NIR is often tagged alpha), so
    pixels with NIR = 0 keep their data; one band beyond the model's, tagged alpha, is the
    per-dataset mask of the image's view (:func:`landcover.data.bandview.image_view`), which
    every command reads.

    Args:
        ds: The open image.
        window: The part of the image (all of it when None).
        pixels: ``(H, W, C)`` channels-last values of every band in ``window`` if already read
            (at ``out_shape`` if that is given); read here when needed and not given.
        out_shape: ``(H, W)`` to read decimated (nearest neighbour), e.g. for a preview.

    Returns:
        ``(H, W)`` bool, True where there is no data.

    Raises:
        RasterioError: If the pixels or the mask cannot be read.
    """
    if out_shape is not None:
        shape = tuple(out_shape)
    elif window is not None:
        shape = (int(window.height), int(window.width))
    else:
        shape = (ds.height, ds.width)
    mask = np.zeros(shape, dtype=bool)
    values = _declared_nodata(ds)
    if values is not None:
        if pixels is None:
            read = ds.read(
                window=window,
                out_shape=None if out_shape is None else (ds.count, *shape),
                resampling=Resampling.nearest,
            )
            pixels = np.moveaxis(read, 0, -1)
        mask[:] = True
        for band, value in enumerate(values):
            mask &= pixels[..., band] == value
    if has_dataset_mask(ds):
        masks = ds.read_masks(1, window=window, out_shape=out_shape, resampling=Resampling.nearest)
        mask |= masks == 0
    return mask


def read_pair(
    pair: TilePair,
    mapping: ClassMapping,
    bands: int,
    image_bytes: bytes | None = None,
    label_bytes: bytes | None = None,
    resolution: float | None = None,
    image_mask_bytes: bytes | None = None,
) -> TileArrays:
    """Reads a tile pair into memory and encodes its labels as class indices.

    With ``resolution``, the tile is resampled on load to pixels of that many metres over the
    same ground (:mod:`landcover.data.resolution`): imagery bilinear, labels nearest from the
    label file's own grid.

    Args:
        pair: The tile pair.
        mapping: The class mapping; label codes outside it are an error.
        bands: Expected number of image bands.
        image_bytes: The image file's bytes, if already fetched.
        label_bytes: The label file's bytes, if already fetched.
        resolution: Pixel size in metres to resample to; ``None`` keeps the image's grid.
        image_mask_bytes: The bytes of the image's external mask file (``.msk``), fetched
            with ``image_bytes`` (:func:`~landcover.data.maskfile.read_mask_file`).

    Returns:
        The tile in memory; pixels with image no-data (:func:`nodata_mask`) or ignored label
        codes get :data:`IGNORE_INDEX`, and image no-data reads 0 (:func:`zero_nodata`).

    Raises:
        DataError: If a file is missing, unreadable, truncated, has the wrong band count or
            dtype, holds unknown label codes, or the label cannot be brought onto the image's
            grid (labels on another grid or CRS are reprojected, nearest neighbour).
    """
    with (
        open_raster(pair.image, image_bytes, image_mask_bytes) as img_file,
        open_raster(pair.label, label_bytes) as lab_ds,
        checked_image(img_file, pair.image, bands) as img_ds,
    ):
        check_alignable(lab_ds, img_ds, label_name=pair.label, image_name=pair.image)
        grid = resampled_grid(img_ds, resolution)
        if resolution is not None and pixel_size_m(img_ds) is None:
            raise DataError(
                f"{pair.image}: data.resolution needs pixel sizes in metres, but the image's "
                f"CRS ({img_ds.crs}) gives none"
            )
        with on_grid(img_ds, grid, Resampling.bilinear) as img:
            try:
                image = np.ascontiguousarray(np.moveaxis(img.read(), 0, -1))
                nodata = nodata_mask(img, pixels=image) if has_nodata(img) else None
            except RasterioError as exc:
                raise DataError(f"{pair.image}: corrupt or truncated GeoTIFF ({exc})") from None
            codes = label_on_image_grid(lab_ds, img, label_name=pair.label, image_name=pair.image)
            size = pixel_size_m(img)
    check_codes(codes, mapping, pair.label)
    label = mapping.encode(codes)
    if nodata is not None and nodata.any():
        label[nodata] = IGNORE_INDEX
        zero_nodata(image, nodata)
    else:
        nodata = None
    return TileArrays(pair.name, image, label, nodata, size)


def check_codes(codes: np.ndarray, mapping: ClassMapping, path: str) -> None:
    """Checks that every label code is mapped or ignored by the class mapping.

    Args:
        codes: Label codes.
        mapping: The class mapping.
        path: The label file, for the message.

    Raises:
        DataError: If some codes are unknown to the mapping.
    """
    unknown = mapping.unknown_codes(codes)
    if unknown:
        raise DataError(f"{path}: {mapping.unknown_codes_message(unknown)}")


def inspect_pair(pair: TilePair, bands: int) -> tuple[int, int]:
    """Checks a pair's headers without reading pixels: readable, band count, dtype, same grid.

    Args:
        pair: The tile pair.
        bands: Expected number of image bands.

    Returns:
        The tile's ``(height, width)``.

    Raises:
        DataError: If a file is missing or unreadable, has the wrong bands, or the label
            cannot be brought onto the image's grid.
    """
    with open_raster(pair.image) as img, open_raster(pair.label, image=False) as lab:
        check_image(img, pair.image, bands)
        check_alignable(lab, img, label_name=pair.label, image_name=pair.image)
        return img.height, img.width
