"""Which bands of an image are data, and which one is its mask: VRT views that say so.

Two ways files mark bands ``alpha``, and landcover reads them differently:

- **Inside the model's bands**, alpha is data. NAIP files often tag their 4th band (NIR)
  alpha, and rasterio tags a 4-band uint8 GeoTIFF's 4th band alpha by default; read as a mask,
  every pixel with NIR = 0 (deep water) would be no-data. :func:`alpha_as_data` shows such a
  file with the band tagged undefined, for GDAL's warper, which would take it for the mask.
- **One band beyond them**, alpha is the mask. ``gdalwarp -dstalpha``, QGIS and ArcGIS
  exports add an alpha band to a 4-band NAIP mosaic (5 bands): 0 where the image has no data.
  :func:`image_view` shows such a file as the model's bands with that band as its per-dataset
  mask, which the one no-data policy (:func:`landcover.data.raster.nodata_mask`) then reads
  like an internal mask. GDAL itself only takes the last band for a mask in 2- and 4-band
  files.

Both views are VRTs over the open file (a path, or the ``/vsimem/`` file of a remote one): what
they read are the file's pixels, unchanged.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import rasterio
from rasterio.dtypes import _gdal_typename
from rasterio.enums import ColorInterp, MaskFlags

from landcover.wording import counted


def has_dataset_mask(ds: Any) -> bool:
    """Whether an image has a per-dataset mask (internal or ``.msk``), an alpha band not counted.

    Args:
        ds: The open image.

    Returns:
        True when GDAL reports a per-dataset mask that is not an alpha band (a resampled
        read keeps it: :func:`landcover.data.resolution.on_grid`).
    """
    flags = ds.mask_flag_enums[0] if ds.count else []
    return MaskFlags.per_dataset in flags and MaskFlags.alpha not in flags


def extra_alpha(ds: Any, bands: int) -> int | None:
    """The band that is the image's mask: one band beyond ``bands``, tagged alpha.

    Only beyond 4 or more bands: a 4-band file read by a 3-band model is most often NAIP's
    R, G, B, NIR with NIR tagged alpha (rasterio's default), whose NIR = 0 pixels are data,
    so it stays a band-count error rather than a guess.

    Args:
        ds: The open image.
        bands: The bands the model reads.

    Returns:
        Its 1-based index, or ``None`` when the image has no such band.
    """
    if bands >= 4 and ds.count == bands + 1 and ds.colorinterp[-1] == ColorInterp.alpha:
        return ds.count
    return None


def band_count_problem(ds: Any, bands: int, expects: str = "the model expects") -> str | None:
    """What is wrong with an image's band count, if anything.

    Args:
        ds: The open image.
        bands: The bands the model reads.
        expects: Who expects them, for the message (``the checkpoint expects``).

    Returns:
        ``has 5 bands, the model expects 4`` (with a hint when one extra band is not tagged
        alpha), or ``None`` when the image has ``bands`` bands, or those and an alpha band
        (:func:`extra_alpha`).
    """
    if ds.count == bands or extra_alpha(ds, bands) is not None:
        return None
    problem = f"has {counted(ds.count, 'band')}, {expects} {bands}"
    if ds.count == bands + 1 and bands >= 4:
        problem += f" (an extra band is read as the mask only when tagged alpha: band {ds.count}"
        problem += f" is tagged {ds.colorinterp[-1].name})"
    return problem


def _band_vrt(ds: Any, indexes: list[int], masks: tuple[str, ...]) -> str:
    """The XML of a VRT of some bands of ``ds`` (none tagged alpha), masked by ``masks``.

    Args:
        ds: The open dataset.
        indexes: Its bands to show, in order.
        masks: GDAL's source bands of the per-dataset mask (``"5"``, ``"mask,1"`` for the
            file's own per-dataset mask); with two, a pixel is valid where both are (their
            minimum, a GDAL pixel function); none: no mask.

    Returns:
        The VRT's XML, for :func:`rasterio.open`.
    """
    root = ET.Element("VRTDataset", rasterXSize=str(ds.width), rasterYSize=str(ds.height))
    if ds.crs is not None:
        ET.SubElement(root, "SRS").text = ds.crs.to_wkt()
    ET.SubElement(root, "GeoTransform").text = ", ".join(repr(v) for v in ds.transform.to_gdal())

    def source(parent: ET.Element, band: str) -> None:
        simple = ET.SubElement(parent, "SimpleSource")
        ET.SubElement(simple, "SourceFilename", relativeToVRT="0").text = ds.name
        ET.SubElement(simple, "SourceBand").text = band

    block_y, block_x = ds.block_shapes[0]  # the file's blocks: reads aligned to them stay so
    for position, index in enumerate(indexes, start=1):
        dtype, nodata = ds.dtypes[index - 1], ds.nodatavals[index - 1]
        interp, text = ds.colorinterp[index - 1], ds.descriptions[index - 1]
        band = ET.SubElement(
            root,
            "VRTRasterBand",
            dataType=_gdal_typename(dtype),
            band=str(position),
            blockXSize=str(block_x),
            blockYSize=str(block_y),
        )
        if text:
            ET.SubElement(band, "Description").text = text
        if nodata is not None:
            ET.SubElement(band, "NoDataValue").text = repr(float(nodata))
        ET.SubElement(band, "ColorInterp").text = (  # a band tagged alpha shows as data
            "Undefined" if interp == ColorInterp.alpha else interp.name.capitalize()
        )
        source(band, str(index))
    if masks:
        mask = ET.SubElement(ET.SubElement(root, "MaskBand"), "VRTRasterBand", dataType="Byte")
        if len(masks) > 1:
            mask.set("subClass", "VRTDerivedRasterBand")
            ET.SubElement(mask, "PixelFunctionType").text = "min"
        for band in masks:
            source(mask, band)
    return ET.tostring(root, encoding="unicode")


@contextmanager
def alpha_as_data(ds: Any) -> Iterator[Any]:
    """The dataset with no band tagged alpha: a VRT over it, the alpha band tagged undefined.

    rasterio's :class:`~rasterio.vrt.WarpedVRT` hands GDAL's warper the band tagged alpha as
    the source's mask, and there is no option to stop it. NAIP files often tag their NIR band
    alpha (and rasterio tags a 4-band uint8 GeoTIFF's fourth band alpha by default), so every
    pixel with NIR = 0 (deep water) came out of a resampled read as no-data: all bands 0 (or
    the nodata value). The VRT keeps each band's nodata value and the file's own per-dataset
    mask, if it has one; what it reads is the file's pixels, unchanged.

    Args:
        ds: The open dataset.

    Yields:
        ``ds`` itself when no band is tagged alpha, else the VRT.
    """
    if ColorInterp.alpha not in ds.colorinterp:
        yield ds
        return
    mask = ("mask,1",) if has_dataset_mask(ds) else ()  # an internal mask
    with rasterio.open(_band_vrt(ds, list(ds.indexes), mask)) as vrt:
        yield vrt


@contextmanager
def image_view(ds: Any, bands: int | None) -> Iterator[Any]:
    """The image as the model reads it: its first ``bands`` bands, an extra alpha band its mask.

    Args:
        ds: The open image (its band count checked: :func:`band_count_problem`).
        bands: The bands the model reads; ``None``: every band is data.

    Yields:
        ``ds`` itself when it has no extra alpha band (:func:`extra_alpha`), else a VRT of its
        first ``bands`` bands (any of them tagged alpha shown as data) whose per-dataset mask
        is the alpha band: 0 is no data (and, where the file also has an internal mask,
        where that mask says so). The file's own nodata values, band descriptions and block
        size stay.
    """
    alpha = None if bands is None else extra_alpha(ds, bands)
    if alpha is None:
        yield ds
        return
    masks = (str(alpha), "mask,1") if has_dataset_mask(ds) else (str(alpha),)
    with rasterio.open(_band_vrt(ds, list(range(1, bands + 1)), masks)) as vrt:
        yield vrt
