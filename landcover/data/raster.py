"""Reading image/label tile pairs from GeoTIFF into memory, with the checks users need.

Every problem with a file becomes a :class:`~landcover.errors.DataError` whose message names
the file and the problem: wrong band count or dtype, a label on another grid, an unreadable or
truncated file, or label codes outside the class mapping.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import rasterio
from rasterio.errors import RasterioError

from landcover.classes import IGNORE_INDEX, ClassMapping
from landcover.data.pairs import TilePair
from landcover.errors import DataError


@dataclass
class TileArrays:
    """A tile pair held in memory.

    Attributes:
        name: Tile name.
        image: ``(H, W, C)`` uint8 imagery.
        label: ``(H, W)`` uint8 class indices; :data:`IGNORE_INDEX` where there is no data.
    """

    name: str
    image: np.ndarray
    label: np.ndarray

    @property
    def nbytes(self) -> int:
        """Bytes held in memory."""
        return self.image.nbytes + self.label.nbytes


def _open_error(path: str, exc: Exception) -> DataError:
    reason = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
    return DataError(f"{path}: not a readable GeoTIFF ({reason})")


def open_raster(path: str) -> rasterio.io.DatasetReader:
    """Opens a raster, turning every failure into a one-line :class:`DataError`.

    Args:
        path: The file.

    Returns:
        The open dataset (the caller closes it).

    Raises:
        DataError: If the file is missing, unreadable, or not a raster.
    """
    try:
        open(path, "rb").close()
    except OSError:
        raise DataError(f"{path}: file not found or not readable") from None
    try:
        return rasterio.open(path)
    except RasterioError as exc:
        raise _open_error(path, exc) from None


def check_image(ds: rasterio.io.DatasetReader, path: str, bands: int) -> None:
    """Checks that an opened image has the expected band count and uint8 data.

    Args:
        ds: The open dataset.
        path: Its path, for the message.
        bands: Expected number of bands.

    Raises:
        DataError: If the band count or dtype is wrong.
    """
    if ds.count != bands:
        raise DataError(f"{path}: has {ds.count} bands, the model expects {bands}")
    if ds.dtypes[0] != "uint8":
        raise DataError(f"{path}: has dtype {ds.dtypes[0]}, expected uint8 imagery")


def check_grids(
    pair: TilePair, img: rasterio.io.DatasetReader, lab: rasterio.io.DatasetReader
) -> None:
    """Checks that a label raster lies on exactly the image's grid (CRS, transform, size).

    Args:
        pair: The pair, for the messages.
        img: The open image.
        lab: The open label raster.

    Raises:
        DataError: If the label has several bands or lies on another grid.
    """
    if lab.count != 1:
        raise DataError(f"{pair.label}: label raster has {lab.count} bands, expected 1")
    if img.crs != lab.crs:
        raise DataError(
            f"{pair.label}: label CRS {lab.crs} differs from the image's {img.crs} ({pair.image})"
        )
    if (img.width, img.height) != (lab.width, lab.height) or not img.transform.almost_equals(
        lab.transform, precision=1e-6
    ):
        raise DataError(
            f"{pair.label}: label grid ({lab.width}x{lab.height}, origin {lab.transform.c:.2f},"
            f"{lab.transform.f:.2f}) differs from the image grid ({img.width}x{img.height}, "
            f"origin {img.transform.c:.2f},{img.transform.f:.2f}) of {pair.image}"
        )


def _image_nodata_mask(ds: rasterio.io.DatasetReader, image: np.ndarray) -> np.ndarray | None:
    """Returns a boolean (H, W) mask of pixels where the image has no data, if it declares any."""
    if ds.nodata is None:
        return None
    return np.all(image == ds.nodata, axis=-1)


def read_pair(pair: TilePair, mapping: ClassMapping, bands: int) -> TileArrays:
    """Reads a tile pair into memory and encodes its labels as class indices.

    Args:
        pair: The tile pair.
        mapping: The class mapping; label codes outside it are an error.
        bands: Expected number of image bands.

    Returns:
        The tile in memory; pixels with image no-data or ignored label codes get
        :data:`IGNORE_INDEX`.

    Raises:
        DataError: If a file is missing, unreadable, truncated, has the wrong band count or
            dtype, lies on another grid, or holds unknown label codes.
    """
    img_ds = open_raster(pair.image)
    try:
        lab_ds = open_raster(pair.label)
    except DataError:
        img_ds.close()
        raise
    with img_ds, lab_ds:
        check_image(img_ds, pair.image, bands)
        check_grids(pair, img_ds, lab_ds)
        try:
            image = np.ascontiguousarray(np.moveaxis(img_ds.read(), 0, -1))
        except RasterioError as exc:
            raise DataError(f"{pair.image}: corrupt or truncated GeoTIFF ({exc})") from None
        try:
            codes = lab_ds.read(1)
        except RasterioError as exc:
            raise DataError(f"{pair.label}: corrupt or truncated GeoTIFF ({exc})") from None
        nodata = _image_nodata_mask(img_ds, image)
    unknown = mapping.unknown_codes(codes)
    if unknown:
        known = ", ".join(str(c) for c in sorted(mapping.known_codes))
        raise DataError(
            f"{pair.label}: label codes {unknown} are not in the class mapping "
            f"{mapping.name} (known codes: {known})"
        )
    label = mapping.encode(codes)
    if nodata is not None:
        label[nodata] = IGNORE_INDEX
    return TileArrays(pair.name, image, label)


def inspect_pair(pair: TilePair, bands: int) -> tuple[int, int]:
    """Checks a pair's headers without reading pixels: readable, band count, dtype, same grid.

    Args:
        pair: The tile pair.
        bands: Expected number of image bands.

    Returns:
        The tile's ``(height, width)``.

    Raises:
        DataError: If a file is missing or unreadable, or the headers disagree.
    """
    with open_raster(pair.image) as img, open_raster(pair.label) as lab:
        check_image(img, pair.image, bands)
        check_grids(pair, img, lab)
        return img.height, img.width
