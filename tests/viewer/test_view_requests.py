"""landcover view: requests the page never makes are answered, one line at most, never dropped.

A real predict job's folder is served as the CLI serves it (``python -m landcover view DIR
--port 0 --no-browser``) and asked over HTTP, as curl or a stale browser tab would ask it: map
tiles off the Web Mercator grid, numbers that are not whole, unknown layers, a point that is
not one; and a class map replaced, while the server runs, by one without a CRS, whose pixel
cannot be read. Each gets an HTTP reply, the console stays quiet (no traceback, no library
warnings) and the server goes on serving.
"""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import struct
import time
from pathlib import Path
from urllib.request import urlopen

import morecantile
import numpy as np
import pytest
import rasterio
from browser import Viewer, serve

from conftest import run_cli

BAD_TILES = [
    "/tiles/classes/-1/0/0.png",  # negative zoom: morecantile's OverflowError, once
    "/tiles/classes/99999/0/0.png",  # absurd zoom
    "/tiles/classes/25/0/0.png",  # below the grid's deepest zoom (24)
    "/tiles/classes/3/8/0.png",  # column 8 of 0..7
    "/tiles/classes/3/0/8.png",
    "/tiles/classes/3/99/0.png",
    "/tiles/truecolor/3/0/-5.png",
    "/tiles/classes/3/-1/0.png",
    "/tiles/classes/1e3/0/0.png",  # not whole numbers
    "/tiles/classes/1/0.5/0.png",
    "/tiles/classes/1/1_0/0.png",
    "/tiles/classes/1/0/0.jpg",
    "/tiles/classes/1/0/0",
    "/tiles/nope/1/0/0.png",  # no such layer
    "/tiles/classes/1/0/0/0.png",
]


@pytest.fixture(scope="module")
def job(quick_checkpoint: Path, tiny_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real region job of two tiny tiles."""
    out = tmp_path_factory.mktemp("job")
    tiles = [str(tiny_data / f"synth_00{i}_naip.tif") for i in (0, 1)]
    result = run_cli("predict", *tiles, "-k", str(quick_checkpoint), "--out", str(out))
    assert result.returncode == 0, result.stderr
    return out


def get(viewer: Viewer, path: str) -> tuple[int | str, str]:
    """The HTTP status and body of a GET, or why no reply came (and no body)."""
    connection = http.client.HTTPConnection(viewer.netloc, timeout=30)
    try:
        connection.request("GET", path)
        reply = connection.getresponse()
        return reply.status, reply.read().decode(errors="replace")
    except (http.client.HTTPException, OSError) as exc:
        return f"no reply ({type(exc).__name__})", ""
    finally:
        connection.close()


def status(viewer: Viewer, path: str) -> int | str:
    """The HTTP status of a GET, or why no reply came."""
    return get(viewer, path)[0]


def copied_job(job: Path, folder: Path) -> tuple[str, str]:
    """The job copied to ``folder`` (no VRTs: the tiles' own files are read); its second
    tile's id and a pixel query at that tile's centre."""
    shutil.copytree(job, folder, ignore=shutil.ignore_patterns("*.vrt"))
    item = json.loads((folder / "stac_items.json").read_text())["features"][1]
    west, south, east, north = item["bbox"]
    return item["id"], f"/api/pixel?lon={(west + east) / 2}&lat={(south + north) / 2}"


def tile_of(job: Path, zoom: int) -> str:
    """The path of a class-map tile on the job's first tile."""
    item = json.loads((job / "stac_items.json").read_text())["features"][0]
    west, south, east, north = item["bbox"]
    tile = morecantile.tms.get("WebMercatorQuad").tile((west + east) / 2, (south + north) / 2, zoom)
    return f"/tiles/classes/{tile.z}/{tile.x}/{tile.y}.png"


def test_tiles_off_the_grid_are_404_and_the_console_stays_quiet(job: Path) -> None:
    viewer = Viewer(job)
    try:
        answers = {path: status(viewer, path) for path in BAD_TILES}
        good = tile_of(job, 18)
        with urlopen(viewer.url.rstrip("/") + good, timeout=30) as reply:
            assert reply.status == 200 and reply.read(8) == b"\x89PNG\r\n\x1a\n"
    finally:
        console = viewer.stop()
    assert answers == dict.fromkeys(BAD_TILES, 404)
    assert others(console) == [], console  # no traceback, no morecantile warning: nothing


def test_a_point_that_is_not_one_is_400(job: Path) -> None:
    for viewer in serve(job):
        for query in ("lon=nan&lat=38.8", "lon=-76.7&lat=inf", "lon=x&lat=1", "lat=38.8"):
            assert status(viewer, f"/api/pixel?{query}") == 400, query
        assert status(viewer, "/api/pixel?lon=-76.7&lat=38.8") == 200


def test_a_handler_that_fails_is_a_500_and_one_line_and_the_server_goes_on(
    job: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "job"
    tile, point = copied_job(job, folder)
    viewer = Viewer(folder)
    try:
        assert status(viewer, point) == 200
        class_map = folder / f"{tile}_class.tif"
        with rasterio.open(class_map) as ds:  # the same pixels, no CRS: rasterio's CRSError
            profile = {
                k: ds.profile[k]
                for k in ("count", "width", "height", "dtype", "nodata", "transform")
            }
            classes = ds.read()
        with rasterio.open(class_map, "w", driver="GTiff", **profile) as ds:
            ds.write(classes)
        answers = [status(viewer, point) for _ in range(2)]
        assert status(viewer, "/api/job") == 200
    finally:
        console = viewer.stop()
    assert answers == [500, 500]
    lines = others(console)
    assert len(lines) == 2 and all("/api/pixel" in line and "CRS" in line for line in lines), (
        console
    )


def test_a_client_gone_mid_request_leaves_the_console_quiet(job: Path) -> None:
    # a browser cancels the tiles it no longer needs: here, a reset before the headers end
    viewer = Viewer(job)
    try:
        client = socket.create_connection(("127.0.0.1", int(viewer.netloc.rsplit(":", 1)[1])))
        client.sendall(b"GET /api/job HTTP/1.1\r\nHost: x\r\n")
        time.sleep(0.3)  # the server reads the headers
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # linger 0: a reset
        time.sleep(0.3)
        assert status(viewer, "/api/job") == 200
    finally:
        console = viewer.stop()
    assert others(console) == [], console


def others(console: str) -> list[str]:
    """The console's lines but the server's own two (serving ..., stopped)."""
    return [s for s in console.splitlines() if not s.startswith("serving ") and s != "stopped"]


def test_a_failure_s_reply_is_redacted_as_its_console_line(job: Path, tmp_path: Path) -> None:
    """A 500's body quotes the failure: a signature in it (a token-signed blob's URL, here a
    folder named like one) is redacted there as on the console, and in the job's description."""
    secret = "VIEWSIGSECRET0123"
    folder = tmp_path / f"job-sig={secret}"
    tile, point = copied_job(job, folder)
    viewer = Viewer(folder)
    try:
        described = get(viewer, "/api/job")  # the page's title: the folder's name
        (folder / f"{tile}_class.tif").unlink()  # read on demand: a missing file's error
        code, body = get(viewer, point)
    finally:
        console = viewer.stop()
    assert described[0] == 200 and json.loads(described[1])["name"] == "job-sig=***"
    assert code == 500
    assert "sig=***" in body and secret not in body, body
    assert secret not in console


def test_where_tiles_overlap_the_click_answers_for_the_tile_the_mosaic_draws_on_top(
    quick_checkpoint: Path, tmp_path: Path
) -> None:
    """Two flights of one place: the class layer (the VRT, tiles by path, the later on top)
    and the click answered from different tiles, as the click took the job's order (largest
    first): a user clicked a water pixel and read another class, over the other year."""
    from landcover.synthetic.synthetic import synthesize_scene

    from conftest import write_naip_tile

    tiles = []
    for name, size, seed in (("a_naip.tif", 96, 1), ("b_naip.tif", 128, 2)):
        image, _ = synthesize_scene(size, size, np.random.default_rng(seed))
        tiles.append(
            write_naip_tile(tmp_path / name, np.maximum(image, 1), "EPSG:26918", 1.0, (4e5, 43e5))
        )
    out = tmp_path / "maps"
    result = run_cli("predict", *map(str, tiles), "-k", str(quick_checkpoint), "--out", str(out))
    assert result.returncode == 0, result.stderr
    items = json.loads((out / "stac_items.json").read_text())["features"]
    assert [i["id"] for i in items] == ["a_naip", "b_naip"]  # the mosaic's order: by path
    with rasterio.open(out / "a_naip_class.tif") as a, rasterio.open(out / "b_naip_class.tif") as b:
        differ = np.argwhere(a.read(1) != b.read(1)[: a.height, : a.width])
        assert len(differ), "the two flights map alike: no pixel to tell them apart"
        row, col = (int(v) for v in differ[len(differ) // 2])
        x, y = a.xy(row, col)
        top = int(b.read(1)[row, col])  # b is the later by path: on top
    with rasterio.open(out / "mosaic_class.vrt") as vrt:
        assert next(vrt.sample([(x, y)]))[0] == top
    from rasterio.warp import transform as reproject_points

    (lon,), (lat,) = reproject_points("EPSG:26918", "EPSG:4326", [x], [y])
    viewer = Viewer(out)
    try:
        code, body = get(viewer, f"/api/pixel?lon={lon}&lat={lat}")
    finally:
        viewer.stop()
    assert code == 200, body
    answer = json.loads(body)
    assert (answer["tile"], answer["value"]) == ("b_naip", top)
