"""An image's external mask file (GDAL's ``tile.tif.msk``), kept with it when read as bytes.

GDAL writes a GeoTIFF's mask beside it as ``<file>.msk`` where it is not written inside the
file (``GDAL_TIFF_INTERNAL_MASK=NO``, some older tools and deliveries), and finds it there when
it opens the file by its path. An image fetched as bytes (every training tile, remote tiles in
``evaluate``) or downloaded to a scratch folder (remote tiles in ``predict``) would lose it,
and its masked pixels would read as imagery. Here the mask file is fetched too where there is
one, and opened beside the image's bytes, so a tile reads the same no-data everywhere.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import rasterio
from rasterio.io import MemoryFile

from landcover import storage

MASK_SUFFIX = ".msk"
"""GDAL's suffix of an external mask file (``tile.tif`` -> ``tile.tif.msk``)."""


def mask_file_of(image: str) -> str:
    """The path or URL where GDAL looks for an image's external mask.

    Args:
        image: The image's path or URL.

    Returns:
        ``image`` with :data:`MASK_SUFFIX` appended.
    """
    return str(image) + MASK_SUFFIX


def read_mask_file(image: str, cache_dir: str | Path | None = None) -> bytes | None:
    """The bytes of an image's external mask file, or ``None`` where it has none.

    Args:
        image: The image's path or URL.
        cache_dir: Local cache folder for remote files (as the image's own fetch uses).

    Returns:
        The mask file's content, or ``None`` when there is no such file.

    Raises:
        StorageError: If the mask file exists but reading it fails after bounded retries.
    """
    mask = mask_file_of(image)
    if not storage.is_remote(mask) and not storage.exists(mask):
        return None  # a local stat: no read that fails for the common case
    try:
        if cache_dir is not None and storage.is_remote(mask):
            return storage.cached_read(mask, cache_dir)
        return storage.read_bytes(mask)
    except storage.StorageNotFoundError:
        return None


def download_mask_file(image: str, local_image: str | Path) -> bool:
    """Downloads a remote image's external mask file beside its local copy, if it has one.

    Args:
        image: The remote image's URL.
        local_image: Where the image was downloaded to.

    Returns:
        Whether there was a mask file (now at ``local_image`` + :data:`MASK_SUFFIX`).

    Raises:
        StorageError: If the mask file exists but the download fails after bounded retries.
    """
    mask = mask_file_of(image)
    try:
        storage.download_file(mask, mask_file_of(str(local_image)))
    except storage.StorageNotFoundError:
        return False
    return True


@contextmanager
def open_bytes(data: bytes, mask: bytes | None = None) -> Iterator[rasterio.io.DatasetReader]:
    """Opens an image from its bytes, with its external mask file's bytes beside it.

    Args:
        data: The image file's content.
        mask: Its external mask file's content (:func:`read_mask_file`), or ``None``.

    Yields:
        The open dataset; GDAL finds the mask as it would beside the file on disk.

    Raises:
        RasterioError: If the bytes are not a readable raster.
    """
    with ExitStack() as stack:
        if mask is None:
            image = stack.enter_context(MemoryFile(data))
        else:
            folder = uuid.uuid4().hex  # the two files side by side in GDAL's memory
            image = stack.enter_context(MemoryFile(data, dirname=folder, filename="tile.tif"))
            stack.enter_context(MemoryFile(mask, dirname=folder, filename="tile.tif.msk"))
        with image.open() as ds:
            yield ds
