"""``stac_items.json``: a STAC ItemCollection describing every output of a predict job.

One STAC Item per tile with maps (pystac), whose geometry and bbox are the tile's footprint in
WGS 84, with

- the projection extension: the tile's CRS code (or WKT2), grid shape, transform and native
  bbox;
- assets ``class`` (the class map), ``probabilities`` (not with ``--no-probs``), ``preview``
  and ``stats``, and one per file of each other map writer (``--map-writer``; the key, title,
  media type and role it gives, :class:`~landcover.inference.results.MapFile`), with relative
  hrefs (the collection sits beside the maps), and a
  ``derived_from`` link to the input image: relative to the collection's folder for a local
  input and a local output folder, else the input's URL (``file://`` for a local input of a
  remote output folder). Hrefs are URIs: a space or other reserved character in a name is
  percent-encoded (``./m%201_class.tif``), as RFC 3986 requires of relative references too;
- the raster extension on the map assets: data type, no-data, pixel size, and for uint8
  probabilities the 1/255 scale;
- the classification extension on the class map: each class's value, name and colour, and 255
  as no-data.

Properties ``landcover:*`` record the checkpoint, the model's sha256 and the fingerprint of
model and options. ``datetime`` is when the imagery was acquired (:mod:`.acquired`: the date
of the STAC item a search found the tile in (``--stac``), else a NAIP file name's date, else
the file's date tags; ``landcover:datetime_source`` says which); when
that is unknown, ``datetime`` is null and ``start_datetime`` / ``end_datetime`` bound it, as
the STAC specification allows: from 1900 (unknown) to the job's time (the imagery existed
before it was mapped). ``created`` is when the job wrote the collection.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

import pystac
from pystac.extensions.classification import Classification, ClassificationExtension
from pystac.extensions.projection import ProjectionExtension
from pystac.extensions.raster import DataType, RasterBand, RasterExtension, Sampling
from rasterio.warp import transform as transform_points

from landcover import storage
from landcover.classes import ClassMapping
from landcover.inference.cogsink import COG_TYPE
from landcover.inference.writers import CLASS_NODATA
from landcover.mapping.records import TileRecord
from landcover.mapping.staccollection import write_collection
from landcover.mapping.tiles import output_stem
from landcover.wording import counted

UNKNOWN_START = datetime(1900, 1, 1, tzinfo=timezone.utc)
"""``start_datetime`` of an item whose acquisition time is unknown."""
_EDGE_POINTS = 21


def footprint(record: TileRecord) -> tuple[dict[str, Any], list[float]]:
    """A tile's footprint in WGS 84: a polygon (edges densified) and its bbox.

    Args:
        record: A tile with a grid and a CRS.

    Returns:
        ``(GeoJSON polygon, [west, south, east, north])``.
    """
    assert record.grid is not None
    grid = record.grid
    cols = [grid.width * i / (_EDGE_POINTS - 1) for i in range(_EDGE_POINTS)]
    rows = [grid.height * i / (_EDGE_POINTS - 1) for i in range(_EDGE_POINTS)]
    ring = (
        [(c, 0.0) for c in cols]
        + [(float(grid.width), r) for r in rows[1:]]
        + [(c, float(grid.height)) for c in reversed(cols[:-1])]
        + [(0.0, r) for r in reversed(rows[:-1])]
    )
    affine = grid.affine
    xs, ys = zip(*(affine * point for point in ring), strict=True)
    lons, lats = transform_points(grid.rasterio_crs, "EPSG:4326", list(xs), list(ys))
    coordinates = [[round(x, 9), round(y, 9)] for x, y in zip(lons, lats, strict=True)]
    polygon = {"type": "Polygon", "coordinates": [coordinates]}
    bbox = [min(lons), min(lats), max(lons), max(lats)]
    return polygon, bbox


def _relative(url: str) -> str:
    """The href of an output beside the collection: ``./`` and its name, percent-encoded."""
    return "./" + quote(storage.name(url))


def source_href(tile: str, out: str) -> str:
    """The href of a tile's input image, as a link of an item in the output folder.

    Args:
        tile: The input (path or URL, a relative path relative to the working directory).
        out: The output folder (path or URL), where the collection is.

    Returns:
        A relative reference from ``out`` when both are local (whatever the working
        directory), else the input's URL (``file://`` for a local input); percent-encoded.
    """
    if storage.is_remote(tile):
        location = tile.split("://", 1)
        return f"{location[0]}://{quote(location[1], safe='/:@')}"
    path = os.path.abspath(storage.parse(tile).path)
    if storage.is_remote(out):
        return "file://" + quote(path)
    folder = os.path.abspath(storage.parse(out).path)
    return quote(os.path.relpath(path, folder).replace(os.sep, "/"))


def _times(record: TileRecord, made: datetime) -> tuple[dict[str, Any], dict[str, Any]]:
    """An item's times: ``pystac.Item``'s time arguments and properties (see the module)."""
    created = {"created": made.isoformat().replace("+00:00", "Z")}
    if record.acquired is not None:
        source = {"landcover:datetime_source": record.acquired.source}
        return {"datetime": record.acquired.datetime}, {**created, **source}
    return {"datetime": None, "start_datetime": UNKNOWN_START, "end_datetime": made}, created


def tile_item(
    record: TileRecord,
    mapping: ClassMapping,
    prob_dtype: str,
    properties: dict[str, Any],
    made: datetime,
    out: str = ".",
) -> pystac.Item:
    """The STAC Item of one tile with maps.

    Args:
        record: The tile (done or skipped, with a grid in a CRS).
        mapping: The classes.
        prob_dtype: ``uint8`` or ``float32``.
        properties: Extra ``landcover:*`` properties.
        made: When the job wrote the collection.
        out: The output folder (path or URL) where the collection is.

    Returns:
        The item.
    """
    assert record.grid is not None and record.outputs is not None
    grid, outputs = record.grid, record.outputs
    geometry, bbox = footprint(record)
    times, time_properties = _times(record, made)
    item = pystac.Item(
        id=output_stem(record.tile),
        geometry=geometry,
        bbox=bbox,
        **times,
        properties={**time_properties, **properties},
    )
    crs = grid.rasterio_crs
    assert crs is not None
    epsg = crs.to_epsg()
    projection = ProjectionExtension.ext(item, add_if_missing=True)
    projection.apply(
        code=f"EPSG:{epsg}" if epsg else None,
        wkt2=None if epsg else crs.to_wkt(version="WKT2_2019"),
        bbox=list(grid.bounds),
        shape=[grid.height, grid.width],
        transform=list(grid.transform),
    )
    resolution = abs(grid.transform[0])
    class_asset = pystac.Asset(
        _relative(outputs.class_map),
        title="Land-cover classes",
        description=f"Class index per pixel ({', '.join(mapping.names)}); 255: no data",
        media_type=COG_TYPE,
        roles=["data"],
    )
    item.add_asset("class", class_asset)
    for key, href, title, media_type, role in (
        ("preview", outputs.preview, "Imagery beside the map", pystac.MediaType.PNG, "overview"),
        ("stats", outputs.stats, "Pixels per class", pystac.MediaType.JSON, "metadata"),
    ):
        if href is not None:
            asset = pystac.Asset(_relative(href), title=title, media_type=media_type, roles=[role])
            item.add_asset(key, asset)
    for file in outputs.files:  # the other map writers' (the cog writer's are above and below)
        if file.key is not None and file.key not in ("class", "probabilities", "preview"):
            title, media_type = file.title or None, file.media_type or None
            asset = pystac.Asset(
                _relative(file.path), title, media_type=media_type, roles=[file.role]
            )
            item.add_asset(file.key, asset)
    RasterExtension.ext(class_asset, add_if_missing=True).apply(
        [
            RasterBand.create(
                nodata=CLASS_NODATA,
                data_type=DataType.UINT8,
                spatial_resolution=resolution,
                sampling=Sampling.AREA,
            )
        ]
    )
    if outputs.prob_map is not None:  # not with --no-probs
        prob_asset = pystac.Asset(
            _relative(outputs.prob_map),
            title="Class probabilities",
            description="One band per class, in order: " + ", ".join(mapping.names),
            media_type=COG_TYPE,
            roles=["data"],
        )
        item.add_asset("probabilities", prob_asset)
        scale = 1 / 255 if prob_dtype == "uint8" else None
        RasterExtension.ext(prob_asset, add_if_missing=True).apply(
            [
                RasterBand.create(
                    data_type=DataType(prob_dtype),
                    spatial_resolution=resolution,
                    sampling=Sampling.AREA,
                    scale=scale,
                )
                for _ in mapping.names
            ]
        )
    classes = [
        Classification.create(
            value=i, name=spec.name, description=spec.name, color_hint=spec.color[1:].upper()
        )
        for i, spec in enumerate(mapping.classes)
    ]
    classes.append(
        Classification.create(
            value=CLASS_NODATA, name="no_data", description="no data", nodata=True
        )
    )
    ClassificationExtension.ext(class_asset, add_if_missing=True).apply(classes=classes)
    derived_from = source_href(record.tile, out)
    item.add_link(pystac.Link("derived_from", derived_from, media_type=pystac.MediaType.GEOTIFF))
    return item


def write_item_collection(
    records: list[TileRecord],
    out: str,
    mapping: ClassMapping,
    prob_dtype: str,
    properties: dict[str, Any],
) -> list[str]:
    """Writes ``stac_items.json`` and a static STAC Collection of every tile with maps.

    ``stac_items.json`` is a STAC ItemCollection; :mod:`.staccollection` writes the same items
    as ``collection.json`` and an item file beside each tile's maps.

    The items are in the order of the tiles' paths, as the VRT mosaics draw them: where tiles
    overlap, the later one is on top, and ``landcover view`` follows the collection's order.

    Args:
        records: The job's records (tiles without maps, or without a CRS, are left out).
        out: The output folder (path or URL).
        mapping: The classes.
        prob_dtype: ``uint8`` or ``float32``.
        properties: ``landcover:*`` properties of every item.

    Returns:
        ``stac_items.json`` and ``collection.json`` (the item files beside the maps are not
        listed), or nothing when no tile has maps.
    """
    made = datetime.now(timezone.utc).replace(microsecond=0)
    items = [  # in the VRT mosaics' order: the later one on top where tiles overlap (the viewer)
        tile_item(r, mapping, prob_dtype, properties, made, out)
        for r in sorted(records, key=lambda r: r.tile)
        if r.has_maps and r.grid is not None and r.grid.crs
    ]
    if not items:
        return []
    collection = pystac.ItemCollection(items, clone_items=False)
    path = storage.join(out, "stac_items.json")
    document = collection.to_dict(transform_hrefs=False)
    storage.write_text(path, json.dumps(document, indent=1))
    description = (
        f"Land-cover maps of {counted(len(items), 'NAIP tile')} by landcover predict "
        f"({', '.join(mapping.names)}), with per-class probabilities and previews"
    )
    catalogue = write_collection(items, out, description)
    return [path, catalogue[0]]
