"""From an area and a catalogue to the tiles of a region job.

:func:`find_tiles` searches (:mod:`.catalogue`), keeps one item a place (:mod:`.places`) and
takes from each item the href of its image asset (``image``, the Planetary Computer's NAIP
asset, unless another is named; an item without it but with one GeoTIFF asset gives that
one). The hrefs are the items' own, never signed here: a signed URL carries a short-lived
token, which the job would print and write with the tile's name; the storage layer signs
each one as it reads it (:mod:`landcover.storage.signing`). An Azure blob's
``https://ACCOUNT.blob.core.windows.net/CONTAINER/PATH`` is handed on as
``abfs://CONTAINER@ACCOUNT.blob.core.windows.net/PATH``, the form the storage layer reads.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

import pystac

from landcover.aoi import AreaOfInterest
from landcover.errors import DataError
from landcover.redaction import redact
from landcover.search.catalogue import item_time, search_items
from landcover.search.places import one_per_place
from landcover.storage.urls import blob_url, parse
from landcover.wording import counted

log = logging.getLogger("landcover")

IMAGE_ASSET = "image"
_GEOTIFF = ("image/tiff", "image/geotiff")


@dataclass(frozen=True)
class SearchRequest:
    """What to search for.

    Attributes:
        source: A STAC API's URL, or a local catalogue, collection, ItemCollection or item.
        area: The area of interest.
        collection: The collection (``None``: every one; an API's search needs one in practice).
        dates: A date or range, e.g. ``2018`` or ``2018-01-01/2019-12-31`` (``None``: any).
        asset: The key of the image asset in each item.
    """

    source: str
    area: AreaOfInterest
    collection: str | None = None
    dates: str | None = None
    asset: str = IMAGE_ASSET


@dataclass(frozen=True)
class FoundTile:
    """A tile found in the catalogue.

    Attributes:
        href: The image asset's href (absolute; unsigned; an https blob in its abfs form).
        item_id: The STAC item's id.
        collection: Its collection.
        acquired: Its date, if it has one.
    """

    href: str
    item_id: str
    collection: str | None
    acquired: datetime | None


def image_href(item: pystac.Item, key: str) -> str:
    """The absolute href of an item's image asset.

    Args:
        item: The item.
        key: The asset's key.

    Returns:
        The href.

    Raises:
        DataError: If the item has no such asset and no single GeoTIFF asset.
        StorageError: An href the storage layer does not read (http(s) beyond Azure's blobs,
            a shared access signature in its query).
    """
    asset = item.assets.get(key)
    if asset is None:
        tiffs = [a for a in item.assets.values() if (a.media_type or "").split(";")[0] in _GEOTIFF]
        if key != IMAGE_ASSET or len(tiffs) != 1:
            keys = ", ".join(sorted(item.assets)) or "none"
            raise DataError(
                f"item {item.id} has no asset {key!r} (its assets: {keys}); see --asset"
            )
        asset = tiffs[0]
    href = blob_url(asset.get_absolute_href() or asset.href)  # https blob: abfs://C@HOST/P
    location = parse(href)
    return location.path if location.is_local else href  # file:///x.tif: the path /x.tif


def find_tiles(request: SearchRequest) -> list[FoundTile]:
    """The tiles of the area: one image a place, from the catalogue's items.

    Args:
        request: The catalogue, area, collection, dates and asset.

    Returns:
        One tile a place, in the search's order.

    Raises:
        DataError: A source that refuses or is not STAC, an unknown collection, a bad date, no
            item touching the area, or an item without the image asset.
    """
    items = search_items(request.source, request.area, request.collection, request.dates)
    where = redact(request.source)
    if not items:
        what = f"collection {request.collection}" if request.collection else "the catalogue"
        when = f" in {request.dates}" if request.dates else ""
        raise DataError(f"no item of {what} at {where}{when} touches the area of interest")
    places = one_per_place(items)
    older = f"; {len(places.older)} older flights of those places left out" if places.older else ""
    log.info(
        f"STAC: {len(items)} items at {where} touch the area, {counted(len(places.kept), 'place')}{older}"
    )
    return [
        FoundTile(image_href(item, request.asset), item.id, item.collection_id, item_time(item))
        for item in places.kept
    ]
