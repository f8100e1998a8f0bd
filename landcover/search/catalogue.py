"""The items of a STAC catalogue that an area touches: a STAC API, or a local file.

A STAC API (``https://planetarycomputer.microsoft.com/api/stac/v1``) is searched with
pystac-client: its ``/search`` by the area's geometry, the collection and the dates, every
page. A local file (a catalogue or collection with its item links, an ItemCollection, or one
item) is read with pystac and filtered here the same way: the item's geometry intersects the
area (shapely), its collection is the one named, and its date (``datetime``, or its
``start_datetime``/``end_datetime`` range) meets the range. Dates are the STAC API's forms,
normalised by pystac-client for both: ``2018``, ``2018-06``, ``2018-01-01/2019-12-31``,
``../2019``.

A STAC API is reached over https; plain http only on a loopback address (a local server), as
the storage layer allows only a local emulator without TLS.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

import pystac
import shapely
from pystac.utils import str_to_datetime
from pystac_client import Client
from pystac_client.item_search import ItemSearch
from shapely.geometry import shape

from landcover.aoi import AreaOfInterest
from landcover.errors import DataError
from landcover.redaction import redact
from landcover.storage.credentials import is_tls_or_loopback

_Range = tuple[datetime | None, datetime | None]


def is_api(source: str) -> bool:
    """Whether ``source`` names a STAC API (an http(s) URL) rather than a local file."""
    return urlsplit(source).scheme in ("http", "https")


def date_range(text: str | None) -> str | None:
    """A date or range in the STAC API's normal form (``start/end``, ``..`` open).

    Args:
        text: ``2018``, ``2018-06``, ``2018-01-01/2019-12-31``, ``../2019`` or a timestamp.

    Returns:
        The normalised range, or ``None`` for none.

    Raises:
        DataError: If it is not a date or range.
    """
    if not text:
        return None
    try:
        normal = ItemSearch(url="https://stac.invalid/search", datetime=text).get_parameters()
    except Exception as exc:  # pystac-client raises a bare Exception for a bad date
        raise DataError(f"--datetime {text!r}: not a date or range ({exc})") from None
    return str(normal["datetime"])


def item_time(item: pystac.Item) -> datetime | None:
    """An item's date: its ``datetime``, else the end of its ``start/end_datetime`` range."""
    if item.datetime is not None:
        return item.datetime
    end = item.properties.get("end_datetime") or item.properties.get("start_datetime")
    return str_to_datetime(end) if end else None


def _bounds(normal: str | None) -> _Range:
    if normal is None:
        return None, None
    start, _, end = normal.partition("/")
    end = end or start
    return (
        None if start in ("", "..") else str_to_datetime(start),
        None if end in ("", "..") else str_to_datetime(end),
    )


def _within(item: pystac.Item, bounds: _Range) -> bool:
    start, end = bounds
    props = item.properties
    first = str_to_datetime(props["start_datetime"]) if props.get("start_datetime") else None
    last = str_to_datetime(props["end_datetime"]) if props.get("end_datetime") else None
    first, last = first or item.datetime, last or item.datetime
    if first is None or last is None:
        return start is None and end is None
    return (end is None or first <= end) and (start is None or last >= start)


def _file_items(path: str) -> list[pystac.Item]:
    """Every item of a local catalogue, collection, ItemCollection or item file."""
    try:
        read = pystac.read_file(path)
    except FileNotFoundError:
        raise DataError(f"--stac {path}: no such file") from None
    except pystac.STACTypeError:
        try:
            return list(pystac.ItemCollection.from_file(path))
        except Exception as exc:
            raise DataError(f"--stac {path}: not a STAC file ({exc})") from None
    except Exception as exc:  # pystac raises what JSON and its parsers raise
        raise DataError(f"--stac {path}: not a STAC file ({exc})") from None
    if isinstance(read, pystac.Item):
        return [read]
    if isinstance(read, pystac.Catalog):
        return list(read.get_items(recursive=True))
    raise DataError(f"--stac {path}: a {type(read).__name__}, not a catalogue or items")


def _from_file(
    path: str, area: AreaOfInterest, collection: str | None, normal: str | None
) -> list[pystac.Item]:
    items = _file_items(path)
    named = {item.collection_id for item in items}
    if collection is not None and collection not in named:
        known = ", ".join(sorted(str(c) for c in named)) or "none"
        raise DataError(f"--collection {collection}: not in {path} (its collections: {known})")
    region, bounds = area.shape, _bounds(normal)
    return [
        item
        for item in items
        if (collection is None or item.collection_id == collection)
        and item.geometry is not None
        and shapely.intersects(shape(item.geometry), region)
        and _within(item, bounds)
    ]


def _check_url(url: str) -> None:
    if not is_tls_or_loopback(url):
        raise DataError(f"--stac {redact(url)}: use https (plain http only on a loopback address)")


def _from_api(
    url: str, area: AreaOfInterest, collection: str | None, normal: str | None
) -> list[pystac.Item]:
    _check_url(url)
    shown = redact(url)
    try:
        client = Client.open(url, timeout=60)
        if collection is not None:
            names = [c.id for c in client.get_collections()]
            if collection not in names:
                known = ", ".join(sorted(names)[:20]) or "none"
                raise DataError(
                    f"--collection {collection}: no such collection at {shown} (it has: {known})"
                )
        search = client.search(
            collections=[collection] if collection else None,
            intersects=area.geometry,
            datetime=normal,
        )
        return list(search.items())
    except DataError:
        raise
    except Exception as exc:  # pystac-client's APIError, requests' errors, a page not STAC
        detail = redact(" ".join(str(exc).split()))[:200]
        raise DataError(
            f"--stac {shown}: the STAC API cannot be reached or refused ({detail})"
        ) from None


def search_items(
    source: str, area: AreaOfInterest, collection: str | None, dates: str | None
) -> list[pystac.Item]:
    """The items of a STAC API or local file that the area touches.

    Args:
        source: A STAC API's URL, or a local catalogue, collection, ItemCollection or item.
        area: The area of interest.
        collection: The collection to search (``None``: every one).
        dates: A date or range (:func:`date_range`'s forms), or ``None``.

    Returns:
        The items whose geometry intersects the area, in the collection and dates.

    Raises:
        DataError: A source that refuses or is not STAC, an unknown collection, a bad date.
    """
    normal = date_range(dates)
    if is_api(source):
        return _from_api(source, area, collection, normal)
    return _from_file(str(Path(source)), area, collection, normal)
