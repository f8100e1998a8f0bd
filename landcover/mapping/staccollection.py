"""``collection.json``: a job's maps as a static STAC Collection, the form STAC clients open.

``stac_items.json`` (:mod:`.stac`) holds every item in one file, as a search answers; its hrefs
are relative, and a GeoJSON ItemCollection has no link that says relative to what, so a client
that reads it (``pystac.ItemCollection.from_file``) cannot resolve them. The same items are
also written as a self-contained static catalogue beside the maps, the layout STAC Browser,
QGIS's STAC plugin and ``pystac.Collection.from_file`` read:

- ``collection.json``: a STAC Collection (id: the output folder's name) whose extent is the
  items' (their bboxes' union; their acquisition times, or the range an unknown time is
  bounded by), with an ``item`` link to each item file and a ``root`` link to itself;
- ``{tile}_item.json`` beside each tile's maps: its item (as in ``stac_items.json``), with
  ``root``, ``parent`` and ``collection`` links to ``./collection.json``, so its relative
  asset hrefs resolve against its own place.

Every href is relative, so the folder can be moved or uploaded whole (a self-contained
catalogue has no ``self`` links), and a plain path (``./a b_class.tif``), as pystac writes and
resolves them (``stac_items.json`` keeps its percent-encoded URIs). An item file of an earlier
job's tile is left as it is, and not linked.
"""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any
from urllib.parse import unquote

import pystac

from landcover import storage
from landcover.redaction import redact

COLLECTION = "collection.json"
ITEM_SUFFIX = "_item.json"
"""An item file's name: the tile's output stem and this."""

_JSON = str(pystac.MediaType.JSON)
_UP = [("root", COLLECTION), ("parent", COLLECTION), ("collection", COLLECTION)]
_WRITERS = 16
"""Item files written at once (a blob output folder: one request each)."""


def item_file(item: pystac.Item) -> str:
    """The name of an item's file: ``{tile}_item.json``."""
    return f"{item.id}{ITEM_SUFFIX}"


def _folder_name(out: str) -> str:
    """The output folder's name, redacted (``maps`` for ``.``: the local folder's own)."""
    shown = redact(out)
    name = storage.name(os.path.abspath(shown) if not storage.is_remote(shown) else shown)
    return name or "landcover-maps"


def _collection_id(out: str) -> str:
    """The output folder's name as an id: letters, digits, ``-``, ``_`` and ``.``.

    Redacted first: a query in the name, its ``?&=`` made ``-``, would no longer read as one.
    """
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", _folder_name(out)).strip("-.") or "landcover-maps"


def _plain(href: str) -> str:
    """A relative href as a plain path: pystac resolves these (a ``%20`` names no file)."""
    return unquote(href) if "://" not in href and not href.startswith("/") else href


def _times(item: pystac.Item) -> tuple[datetime | None, datetime | None]:
    """When an item's imagery was acquired, as an interval (an unknown time's bounds)."""
    if item.datetime is not None:
        return item.datetime, item.datetime
    common = item.common_metadata
    return common.start_datetime, common.end_datetime


def _extent(items: list[pystac.Item]) -> pystac.Extent:
    """The items' extent: the union of their bboxes, from the earliest to the latest time."""
    boxes = [item.bbox for item in items if item.bbox]
    spatial = [
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    ]
    times = [_times(item) for item in items]
    starts = [s for s, _ in times if s is not None]
    ends = [e for _, e in times if e is not None]
    interval = [min(starts) if starts else None, max(ends) if ends else None]
    return pystac.Extent(pystac.SpatialExtent([spatial]), pystac.TemporalExtent([interval]))


def _links(pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"rel": rel, "href": f"./{href}", "type": _JSON} for rel, href in pairs]


def write_collection(items: list[pystac.Item], out: str, description: str) -> list[str]:
    """Writes ``collection.json`` and each item's file into ``out`` (see the module).

    Args:
        items: The job's items (from :func:`~landcover.mapping.stac.tile_item`), hrefs
            relative to ``out``.
        out: The output folder (path or URL).
        description: What the collection holds, in words.

    Returns:
        The collection's file, then the items' (in the items' order).

    Raises:
        StorageError: If a file cannot be written.
    """
    collection = pystac.Collection(
        id=_collection_id(out),
        description=description,
        extent=_extent(items),
        license="other",
        title=f"Land-cover maps: {_folder_name(out)}",
    )
    document = collection.to_dict(include_self_link=False, transform_hrefs=False)
    document["links"] = _links([("root", COLLECTION)] + [("item", item_file(i)) for i in items])
    documents = {storage.join(out, COLLECTION): document}
    for item in items:
        body = item.to_dict(include_self_link=False, transform_hrefs=False)
        kept = [link for link in body["links"] if link["rel"] not in ("root", "parent", "self")]
        body["links"] = _links(_UP) + [{**link, "href": _plain(link["href"])} for link in kept]
        for asset in body["assets"].values():
            asset["href"] = _plain(asset["href"])
        body["collection"] = collection.id
        documents[storage.join(out, item_file(item))] = body

    def write(path: str) -> str:
        storage.write_text(path, json.dumps(documents[path], indent=1))
        return path

    collection_path, *item_paths = documents
    with ThreadPoolExecutor(max(1, min(_WRITERS, len(item_paths)))) as pool:
        list(pool.map(write, item_paths))
    write(collection_path)  # last: it never links an item file not yet written
    return [collection_path, *item_paths]
