"""The class map's GDAL sidecar (``{stem}_class.tif.aux.xml``): category names and alpha.

A GeoTIFF cannot hold two things GIS users read from a class map:

- **category names**: GDAL's GTiff driver keeps them only in its PAM sidecar (with GDAL 3.10,
  ``GDALSetRasterCategoryNames`` on a GeoTIFF writes ``.aux.xml``; the ``GDAL_METADATA`` tag
  carries offsets, scales, units and descriptions, not categories);
- **alpha in the colour table**: a TIFF palette is RGB, so every entry reads opaque (GDAL
  makes the no-data entry alone transparent), and the values past the classes read opaque
  black.

The sidecar written beside every class map holds both: the class names as GDAL categories
(``gdalinfo`` shows ``Categories:``, QGIS labels the palette with them) and the colour table
with alpha, each class opaque and every other value (no-data 255 and the unused values)
transparent, as in ``mosaic_class.vrt``. GDAL, QGIS and rasterio read the map's sidecar
whenever they open the map; readers that ignore sidecars still get the embedded colours and
the ``CLASS_NAMES`` / ``CLASS_{i}`` tags.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from landcover.classes import ClassMapping
from landcover.fileio import atomic_write_bytes

AUX_SUFFIX = ".aux.xml"
"""GDAL's PAM sidecar suffix: ``{map}.aux.xml``."""


def class_aux_xml(mapping: ClassMapping, colours: dict[int, tuple[int, int, int, int]]) -> str:
    """The PAM XML of a class map: its category names and its colour table with alpha.

    Args:
        mapping: The classes (value ``i`` is ``mapping.names[i]``).
        colours: The colour table, ``{value: (r, g, b, a)}``; values not in it are
            transparent.

    Returns:
        The ``PAMDataset`` document.
    """
    root = ET.Element("PAMDataset")
    band = ET.SubElement(root, "PAMRasterBand", band="1")
    categories = ET.SubElement(band, "CategoryNames")
    for name in mapping.names:
        ET.SubElement(categories, "Category").text = name
    ET.SubElement(band, "ColorInterp").text = "Palette"
    table = ET.SubElement(band, "ColorTable")
    for value in range(256):
        r, g, b, a = colours.get(value, (0, 0, 0, 0))
        ET.SubElement(table, "Entry", c1=str(r), c2=str(g), c3=str(b), c4=str(a))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"


def write_class_aux(
    class_map: Path, mapping: ClassMapping, colours: dict[int, tuple[int, int, int, int]]
) -> Path:
    """Writes a class map's sidecar atomically (a reader never sees half of it).

    Args:
        class_map: The class map.
        mapping: The classes.
        colours: Its colour table with alpha.

    Returns:
        The sidecar, ``{class_map}.aux.xml``.

    Raises:
        OutputError: If the folder is read-only, not writable or full.
        OSError: If it cannot be written otherwise.
    """
    path = class_map.with_name(class_map.name + AUX_SUFFIX)
    atomic_write_bytes(path, class_aux_xml(mapping, colours).encode())
    return path
