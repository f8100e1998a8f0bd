"""A real STAC API on loopback for the tests: ``rustac serve`` and its in-memory back end;
and the NAIP-like items, collection and area the tests serve and search."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pystac
from rasterio.warp import transform_geom


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rustac() -> str:
    """The ``rustac`` command of this interpreter's environment."""
    beside = Path(sys.executable).with_name("rustac")
    found = str(beside) if beside.exists() else shutil.which("rustac")
    assert found, "rustac is not installed (pip install rustac; it is in the dev extra)"
    return found


@contextmanager
def stac_api(
    folder: Path, collection: pystac.Collection, items: list[pystac.Item]
) -> Iterator[str]:
    """Serves ``items`` of ``collection`` as a STAC API on loopback; yields its URL."""
    collection_file = folder / "collection.json"
    items_file = folder / "items.json"
    collection_file.write_text(json.dumps(collection.to_dict(include_self_link=False)))
    items_file.write_text(json.dumps(pystac.ItemCollection(items).to_dict()))
    url = f"http://127.0.0.1:{_free_port()}"
    server = subprocess.Popen(
        [rustac(), "serve", "--addr", url.removeprefix("http://"), str(collection_file), str(items_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/collections", timeout=2):
                    break
            except OSError:
                assert server.poll() is None, server.stderr.read() if server.stderr else ""
                assert time.monotonic() < deadline, "rustac serve did not start"
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(10)


def naip_item(name: str, footprint: Any, crs: str, year: int, href: str) -> pystac.Item:
    """A NAIP-like item of collection ``naip``: its footprint (in ``crs``) and image asset."""
    geometry = transform_geom(crs, "EPSG:4326", footprint.__geo_interface__)
    lons = [x for x, _ in geometry["coordinates"][0]]
    lats = [y for _, y in geometry["coordinates"][0]]
    item = pystac.Item(
        name, geometry, [min(lons), min(lats), max(lons), max(lats)],
        datetime(year, 7, 1, tzinfo=timezone.utc), {}, collection="naip",
    )  # fmt: skip
    media = "image/tiff; application=geotiff; profile=cloud-optimized"
    item.add_asset("image", pystac.Asset(href, media_type=media, roles=["data"]))
    return item


def naip_collection(description: str) -> pystac.Collection:
    """The ``naip`` collection the items belong to (around the test's tiles, from 2018)."""
    extent = pystac.Extent(
        pystac.SpatialExtent([[-76.2, 38.7, -75.9, 38.9]]),
        pystac.TemporalExtent([[datetime(2018, 1, 1, tzinfo=timezone.utc), None]]),
    )
    return pystac.Collection("naip", description, extent)


def write_area(path: Path, area: Any, crs: str) -> Path:
    """Writes an area of interest as a GeoJSON feature that declares its CRS; returns ``path``."""
    feature = {
        "type": "Feature",
        "crs": {"type": "name", "properties": {"name": crs}},
        "properties": {},
        "geometry": area.__geo_interface__,
    }
    path.write_text(json.dumps(feature))
    return path
