"""The viewer's web server: the page, its scripts, the job's description, tiles and pixels.

A standard-library ``ThreadingHTTPServer`` (one thread per request, so map tiles render in
parallel). Everything the page loads comes from here: the page and its scripts and styles
ship in the package (``landcover/viewer/static``, Leaflet vendored under ``vendor/``), so
the viewer works on a machine without internet.

Routes (GET):

- ``/``: the page; ``/static/PATH``: its scripts, styles and images;
- ``/api/job``: the job (:func:`job_document`);
- ``/api/aoi``: the area of interest, GeoJSON in WGS 84 (404 without one);
- ``/api/pixel?lon=X&lat=Y``: the class and probabilities there (:mod:`.pixel`), ``null``
  where the job has no class;
- ``/tiles/LAYER/Z/X/Y.png``: a map tile (:mod:`.render`), transparent where nothing is
  mapped; 404 for a tile off the Web Mercator grid (zoom 0 to :data:`.render.MAX_ZOOM`,
  column and row 0 to 2^zoom - 1) or of an unknown layer.

A request the server cannot answer is never a dropped connection nor a traceback on the
console: an error reading the job's files, or any other in a handler, is a 500 and one warning
line (:meth:`ViewerHandler.do_GET`); anything else that escapes a request (a client gone
meanwhile, say) is one line too (:meth:`ViewerServer.handle_error`).
"""

from __future__ import annotations

import errno
import json
import logging
import math
import mimetypes
import os
import re
import socket
import sys
from contextlib import suppress
from dataclasses import asdict
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import numpy as np
from rasterio.errors import RasterioError
from rio_tiler.utils import render

from landcover.errors import DataError, first_line
from landcover.redaction import redact
from landcover.viewer.job import ViewerJob
from landcover.viewer.pixel import pixel_at
from landcover.viewer.render import LAYERS, MAX_ZOOM, TILE_SIZE, TileRenderer

log = logging.getLogger("landcover")

STATIC = resources.files("landcover.viewer") / "static"
EMPTY_TILE = render(
    np.zeros((1, TILE_SIZE, TILE_SIZE), dtype=np.uint8),
    mask=np.zeros((TILE_SIZE, TILE_SIZE), dtype=np.uint8),
    img_format="PNG",
)
"""A transparent map tile: where the job maps nothing."""
_NUMBER = re.compile(r"[0-9]{1,9}")
"""A tile's zoom, column or row as a URL gives it (no sign, no ``_``, ASCII digits)."""


def tile_address(zxy: list[str]) -> tuple[int, int, int] | None:
    """A map tile's zoom, column and row, from a tile URL's last three parts.

    Args:
        zxy: ``Z``, ``X`` and ``Y.png``.

    Returns:
        ``(z, x, y)``, or ``None`` when they are not whole numbers or the tile is not on the
        Web Mercator grid (zoom 0 to :data:`~landcover.viewer.render.MAX_ZOOM`, column and row
        0 to 2^zoom - 1).
    """
    if len(zxy) != 3 or not zxy[2].endswith(".png"):
        return None
    texts = (zxy[0], zxy[1], zxy[2].removesuffix(".png"))
    if not all(_NUMBER.fullmatch(t) for t in texts):
        return None
    z, x, y = (int(t) for t in texts)
    if z > MAX_ZOOM or x >= 2**z or y >= 2**z:
        return None
    return z, x, y


_HOST_PATH = re.compile(r"(?:/[^/\s:'\"]+)+/([^/\s:'\"]+)")


def names_only(reason: str, folder: Path) -> str:
    """A failure's text with every absolute path cut to its file's name.

    Args:
        reason: The text (redacted).
        folder: The job's folder (cut first: its path may hold spaces).

    Returns:
        The text the browser gets: ``a_class.tif: No such file or directory``.
    """
    for root in {str(folder.resolve()), str(folder.absolute())}:
        reason = reason.replace(root + os.sep, "")
    return _HOST_PATH.sub(r"\1", reason)


def job_document(job: ViewerJob) -> dict[str, Any]:
    """What the page is told about the job (``/api/job``).

    Args:
        job: The job.

    Returns:
        ``name`` (the folder's), ``tiles`` (how many), ``bounds`` (west, south, east, north
        in WGS 84), ``classes`` (value, name, colour), ``table`` (``classes.csv``: columns
        and rows, or ``null``), ``aoi`` and ``imagery`` (whether there are some) and
        ``layers`` (the tile layers' names).
    """
    return {
        "name": job.folder.name,
        "tiles": len(job.tiles),
        "bounds": list(job.bounds),
        "classes": [asdict(c) for c in job.classes],
        "table": asdict(job.table) if job.table is not None else None,
        "aoi": job.aoi is not None,
        "imagery": job.has_imagery,
        "layers": list(LAYERS),
    }


class ViewerServer(ThreadingHTTPServer):
    """The viewer's server: a ``ThreadingHTTPServer`` that knows the job.

    Args:
        address: Host and port (port 0: a free one).
        job: The job.
    """

    daemon_threads = True

    def __init__(self, address: tuple[str, int], job: ViewerJob) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.job = job
        self.renderer = TileRenderer(job)
        super().__init__(address, ViewerHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """What escapes a request's handling is one line, not socketserver's traceback.

        A client that went away meanwhile is said at debug level only.

        Args:
            request: The request's socket (socketserver's argument).
            client_address: The client's ``(host, port)``.
        """
        exc = sys.exc_info()[1]
        if exc is None or isinstance(exc, ConnectionError):
            log.debug("view: %s: %s", client_address, exc)
            return
        log.warning(
            "view: a request from %s failed: %s", client_address[0], first_line(exc, typed=True)
        )

    @property
    def url(self) -> str:
        """The page's address (this machine's name when it listens on every interface)."""
        host, port = self.server_address[:2]
        if host in ("0.0.0.0", "::"):
            host = socket.gethostname()
        elif ":" in str(host):
            host = f"[{host}]"
        return f"http://{host}:{port}/"


class ViewerHandler(BaseHTTPRequestHandler):
    """Answers the viewer's requests (see the module)."""

    server: ViewerServer

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are logged at debug level (the terminal stays quiet)."""
        log.debug("view: " + format, *args)

    def send(self, body: bytes, content_type: str, status: int = 200, cache: bool = False) -> None:
        """Sends a whole response.

        Args:
            body: The bytes.
            content_type: Its media type.
            status: The HTTP status.
            cache: Whether the browser may keep it (tiles and static files).
        """
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "max-age=3600" if cache else "no-store")
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, document: Any, status: int = 200) -> None:
        """Sends a JSON document, redacted (the job folder's name may hold a query)."""
        self.send(redact(json.dumps(document)).encode(), "application/json", status)

    def not_found(self) -> None:
        """404, in a word."""
        self.send(b"not found", "text/plain", HTTPStatus.NOT_FOUND)

    def do_GET(self) -> None:
        """Routes a GET (see the module): any error in a handler is a 500 and one line."""
        try:
            self.route()
        except ConnectionError as exc:  # the client went away: no one to answer
            log.debug("view: %s: %s", self.path, exc)
        except (RasterioError, OSError, DataError) as exc:  # a file, named
            self.failed(first_line(exc))
        except Exception as exc:  # a bug, or a file the job did not write so: one line
            self.failed(first_line(exc, typed=True))

    def failed(self, reason: str) -> None:
        """Logs a request that failed in one line and answers it 500 (if the client is there).

        Args:
            reason: The failure in one line (logged as it is). The browser gets it as
                ``{"error": ...}``, redacted (a blob read with a token may name its signed
                URL) and with the files named by their names alone (:func:`names_only`).
        """
        log.warning("view: %s: %s", self.path, reason)
        with suppress(OSError):
            shown = names_only(redact(reason), self.server.job.folder)
            self.send_json({"error": shown}, HTTPStatus.INTERNAL_SERVER_ERROR)

    def route(self) -> None:
        """Answers a GET by its path (see the module)."""
        url = urlparse(self.path)
        parts = [p for p in url.path.split("/") if p]
        if not parts:
            self.static(["index.html"])
        elif parts[0] == "static":
            self.static(parts[1:])
        elif parts == ["api", "job"]:
            self.send_json(job_document(self.server.job))
        elif parts == ["api", "aoi"] and self.server.job.aoi is not None:
            self.send_json(self.server.job.aoi)
        elif parts == ["api", "pixel"]:
            self.pixel(parse_qs(url.query))
        elif parts[0] == "tiles" and len(parts) == 5 and parts[1] in LAYERS:
            self.tile(parts[1], parts[2:])
        else:
            self.not_found()

    def static(self, parts: list[str]) -> None:
        """A file of the page (only under ``static/``: no ``..``)."""
        if any(p in ("..", ".") or "\\" in p for p in parts):
            self.not_found()
            return
        resource = STATIC.joinpath(*parts)
        if not resource.is_file():
            self.not_found()
            return
        kind = mimetypes.guess_type(parts[-1])[0] or "application/octet-stream"
        self.send(resource.read_bytes(), kind, cache=True)

    def pixel(self, query: dict[str, list[str]]) -> None:
        """The class and probabilities at ``lon``, ``lat``."""
        try:
            lon, lat = float(query["lon"][0]), float(query["lat"][0])
        except (KeyError, ValueError):
            lon = lat = math.nan
        if not (math.isfinite(lon) and math.isfinite(lat)):
            self.send(b"lon and lat, in degrees", "text/plain", HTTPStatus.BAD_REQUEST)
            return
        report = pixel_at(self.server.job, lon, lat)
        self.send_json(asdict(report) if report is not None else None)

    def tile(self, layer: str, zxy: list[str]) -> None:
        """A map tile: ``Z``, ``X``, ``Y.png`` (404 off the grid: :func:`tile_address`)."""
        address = tile_address(zxy)
        if address is None:
            self.not_found()
            return
        z, x, y = address
        png = self.server.renderer.png(layer, z, x, y)
        self.send(png if png is not None else EMPTY_TILE, "image/png", cache=True)


def make_server(job: ViewerJob, host: str, port: int) -> ViewerServer:
    """A server of the job, listening.

    Args:
        job: The job.
        host: The address to listen on.
        port: The port (0: a free one).

    Returns:
        The server (not yet serving: ``serve_forever``).

    Raises:
        DataError: If the address cannot be listened on (the port is in use, the host is not
            this machine's).
    """
    try:
        return ViewerServer((host, port), job)
    except OSError as exc:
        reason = exc.strerror or first_line(exc)
        hint = " (--port 0 picks a free one)" if exc.errno == errno.EADDRINUSE else ""
        raise DataError(f"cannot serve on {host}:{port}: {reason}{hint}") from None
