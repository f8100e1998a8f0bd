"""VRT mosaics of a job's maps: every class map (and every probability map) as one layer.

A GDAL VRT is a small XML file that lists the per-tile COGs and where each lies in one large
virtual raster; QGIS, GDAL and rasterio open it as one layer and read only the tiles a view
needs. The XML is written here (GDAL's Python bindings are not a dependency).

- ``mosaic_class.vrt``: the class maps, with their colour table, class names and no-data
  value 255; no-data pixels of a tile do not hide a neighbour's classes where tiles overlap.
- ``mosaic_prob.vrt``: the probability maps (one band per class), with a mask band built from
  the tiles' masks, and (uint8) the band scale 1/255 of the tiles' maps.

One VRT holds one CRS: tiles in several CRSs (NAIP tiles are in the UTM zone of each tile) get
one pair of VRTs per CRS, named after it (``mosaic_class_epsg26917.vrt``,
``mosaic_class_epsg26918.vrt``). Tiles of different pixel sizes share a VRT at the finest pixel
size; the VRT resamples the others (nearest neighbour for classes, bilinear for
probabilities). Tiles whose grid is not north-up (rotated, or flipped south-up) cannot be
placed and are left out, with a warning; their own maps are written as any other.
Where tiles overlap, the later tile in the job's order (by path) is drawn on top.

The mosaics are of the ``cog`` writer's maps alone: a VRT's sources must be GeoTIFFs (rasters
GDAL reads by window); another map writer's files (``--map-writer``) are in the STAC items.
"""

from __future__ import annotations

import logging
import math
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass

from landcover import storage
from landcover.classes import ClassMapping
from landcover.inference.results import Grid
from landcover.inference.writers import CLASS_NODATA, PROB_SCALE, class_colormap
from landcover.mapping.records import TileRecord

log = logging.getLogger("landcover")

_GDAL_TYPES = {"uint8": "Byte", "float32": "Float32"}


@dataclass(frozen=True)
class MosaicGrid:
    """The grid of a VRT covering some tiles.

    Attributes:
        left: West edge.
        top: North edge.
        res_x: Pixel width (the finest of the tiles).
        res_y: Pixel height (positive).
        width: Columns.
        height: Rows.
    """

    left: float
    top: float
    res_x: float
    res_y: float
    width: int
    height: int

    @classmethod
    def covering(cls, grids: list[Grid]) -> MosaicGrid:
        """The finest-pixel grid covering every tile.

        Args:
            grids: North-up tile grids in one CRS.

        Returns:
            The mosaic's grid.
        """
        res_x = min(g.transform[0] for g in grids)
        res_y = min(-g.transform[4] for g in grids)
        bounds = [g.bounds for g in grids]
        left, top = min(b[0] for b in bounds), max(b[3] for b in bounds)
        right, bottom = max(b[2] for b in bounds), min(b[1] for b in bounds)
        # a tile edge within a thousandth of a pixel of a whole pixel is on it
        width = math.ceil((right - left) / res_x - 1e-3)
        height = math.ceil((top - bottom) / res_y - 1e-3)
        return cls(left, top, res_x, res_y, width, height)

    def placement(self, grid: Grid) -> tuple[float, float, float, float]:
        """Where a tile lies in the mosaic: ``(x_off, y_off, x_size, y_size)`` in pixels."""
        left, _, right, top = grid.bounds
        bottom = grid.bounds[1]
        return (
            (left - self.left) / self.res_x,
            (self.top - top) / self.res_y,
            (right - left) / self.res_x,
            (top - bottom) / self.res_y,
        )


def _number(value: float) -> str:
    rounded = round(value)
    return str(rounded) if abs(value - rounded) < 1e-6 else repr(value)


def _sources(
    band: ET.Element,
    records: list[TileRecord],
    mosaic: MosaicGrid,
    kind: str,
    source_band: str,
    data_type: str,
    resampling: str,
    extra: tuple[str, str],
) -> None:
    """One ``ComplexSource`` per tile: its map's band placed on the mosaic's grid.

    Args:
        band: The VRT band to fill.
        records: The tiles, in drawing order.
        mosaic: The mosaic's grid.
        kind: ``class`` or ``prob``: which map.
        source_band: The band of the map (``1``, ``mask,1``...).
        data_type: The map's GDAL data type.
        resampling: How the VRT resamples a tile of another pixel size.
        extra: One more element of each source (``NODATA``, ``UseMaskBand``) and its text.
    """
    for record in records:
        assert record.outputs is not None and record.grid is not None
        grid = record.grid
        path = record.outputs.class_map if kind == "class" else record.outputs.prob_map
        assert path is not None
        source = ET.SubElement(band, "ComplexSource", resampling=resampling)
        ET.SubElement(source, "SourceFilename", relativeToVRT="1").text = storage.name(path)
        ET.SubElement(source, "SourceBand").text = source_band
        ET.SubElement(
            source,
            "SourceProperties",
            RasterXSize=str(grid.width),
            RasterYSize=str(grid.height),
            DataType=data_type,
            BlockXSize="256",
            BlockYSize="256",
        )
        ET.SubElement(
            source, "SrcRect", xOff="0", yOff="0", xSize=str(grid.width), ySize=str(grid.height)
        )
        x, y, w, h = (_number(v) for v in mosaic.placement(grid))
        ET.SubElement(source, "DstRect", xOff=x, yOff=y, xSize=w, ySize=h)
        ET.SubElement(source, extra[0]).text = extra[1]


def _dataset(records: list[TileRecord], crs_wkt: str) -> tuple[ET.Element, MosaicGrid]:
    """An empty ``VRTDataset`` covering the tiles, and its grid."""
    mosaic = MosaicGrid.covering([r.grid for r in records if r.grid is not None])
    root = ET.Element("VRTDataset", rasterXSize=str(mosaic.width), rasterYSize=str(mosaic.height))
    ET.SubElement(root, "SRS").text = crs_wkt
    transform = (mosaic.left, mosaic.res_x, 0.0, mosaic.top, 0.0, -mosaic.res_y)
    ET.SubElement(root, "GeoTransform").text = ", ".join(repr(v) for v in transform)
    return root, mosaic


def class_vrt(records: list[TileRecord], crs_wkt: str, mapping: ClassMapping) -> ET.Element:
    """The VRT of some tiles' class maps (one CRS).

    Args:
        records: Tiles with maps, north-up grids, in one CRS, in drawing order.
        crs_wkt: Their CRS.
        mapping: The classes (names, colours).

    Returns:
        The ``VRTDataset`` element.
    """
    root, mosaic = _dataset(records, crs_wkt)
    band = ET.SubElement(root, "VRTRasterBand", dataType="Byte", band="1")
    ET.SubElement(band, "Description").text = "class"
    ET.SubElement(band, "NoDataValue").text = str(CLASS_NODATA)
    ET.SubElement(band, "ColorInterp").text = "Palette"
    table = ET.SubElement(band, "ColorTable")
    colours = class_colormap(mapping)
    for value in range(256):
        r, g, b, a = colours.get(value, (0, 0, 0, 0))
        ET.SubElement(table, "Entry", c1=str(r), c2=str(g), c3=str(b), c4=str(a))
    categories = ET.SubElement(band, "CategoryNames")
    for name in mapping.names:
        ET.SubElement(categories, "Category").text = name
    nodata = ("NODATA", str(CLASS_NODATA))  # a tile's no-data does not hide its neighbour
    _sources(band, records, mosaic, "class", "1", "Byte", "nearest", nodata)
    return root


def prob_vrt(
    records: list[TileRecord], crs_wkt: str, mapping: ClassMapping, prob_dtype: str
) -> ET.Element:
    """The VRT of some tiles' probability maps (one CRS), with a mask band.

    Args:
        records: Tiles with maps, north-up grids, in one CRS, in drawing order.
        crs_wkt: Their CRS.
        mapping: The classes (band names).
        prob_dtype: ``uint8`` or ``float32``.

    Returns:
        The ``VRTDataset`` element.
    """
    root, mosaic = _dataset(records, crs_wkt)
    data_type = _GDAL_TYPES[prob_dtype]
    for index, name in enumerate(mapping.names, start=1):
        band = ET.SubElement(root, "VRTRasterBand", dataType=data_type, band=str(index))
        ET.SubElement(band, "Description").text = name
        if prob_dtype == "uint8":  # probability = value / 255, as in the tiles' own maps
            ET.SubElement(band, "Offset").text = "0"
            ET.SubElement(band, "Scale").text = repr(PROB_SCALE)
        masked = ("UseMaskBand", "true")  # a tile's masked pixels do not hide its neighbour
        _sources(band, records, mosaic, "prob", str(index), data_type, "bilinear", masked)
    mask = ET.SubElement(ET.SubElement(root, "MaskBand"), "VRTRasterBand", dataType="Byte")
    _sources(mask, records, mosaic, "prob", "mask,1", "Byte", "nearest", ("NODATA", "0"))
    return root


def _crs_label(crs_wkt: str, taken: set[str]) -> str:
    from rasterio.crs import CRS

    epsg = CRS.from_wkt(crs_wkt).to_epsg() if crs_wkt else None
    label = f"epsg{epsg}" if epsg else "crs"
    base, n = label, 2
    while label in taken:
        label, n = f"{base}_{n}", n + 1
    return label


def write_mosaics(
    records: list[TileRecord], out: str, mapping: ClassMapping, prob_dtype: str
) -> list[str]:
    """Writes the class and probability VRTs of every tile with maps, one pair per CRS.

    The probability VRT is left out when the tiles have no probability maps (``--no-probs``),
    and an earlier run's is removed.

    Args:
        records: The job's records (tiles without maps are ignored).
        out: The output folder (path or URL), where the maps are.
        mapping: The classes.
        prob_dtype: ``uint8`` or ``float32``.

    Returns:
        The VRTs written.
    """
    by_crs: dict[str, list[TileRecord]] = defaultdict(list)
    for record in sorted(records, key=lambda r: r.tile):
        if not record.has_maps or record.grid is None:
            continue
        if not record.grid.crs:
            log.warning("%s: has no CRS, so it is left out of the mosaic", record.tile)
            continue
        if not record.grid.north_up:
            log.warning(
                "%s: its grid is not north-up (rotated or flipped), so it is left out of the mosaic",
                record.tile,
            )
            continue
        key = record.grid.rasterio_crs.to_string()  # type: ignore[union-attr]
        by_crs[key].append(record)
    if len(by_crs) > 1:
        log.info(
            "the tiles are in %d CRSs (%s): one mosaic per CRS",
            len(by_crs),
            ", ".join(sorted(by_crs)),
        )
    written: list[str] = []
    taken: set[str] = set()
    for group in by_crs.values():
        wkt = group[0].grid.crs  # type: ignore[union-attr]
        suffix = ""
        if len(by_crs) > 1:
            label = _crs_label(wkt, taken)
            taken.add(label)
            suffix = f"_{label}"
        trees = [("class", class_vrt(group, wkt, mapping))]
        if all(r.outputs is not None and r.outputs.prob_map for r in group):
            trees.append(("prob", prob_vrt(group, wkt, mapping, prob_dtype)))
        else:  # an earlier run's probability mosaic no longer fits the class maps
            storage.remove(storage.join(out, f"mosaic_prob{suffix}.vrt"))
        for kind, tree in trees:
            ET.indent(tree)
            path = storage.join(out, f"mosaic_{kind}{suffix}.vrt")
            storage.write_text(path, ET.tostring(tree, encoding="unicode") + "\n")
            written.append(path)
    return written
