"""landcover view: a real predict job's folder served on loopback, its page in headless Chromium.

The server runs as the CLI runs it (``python -m landcover view DIR --port 0 --no-browser``);
the page is driven by Playwright in Debian's Chromium (scripts/install-chromium.sh). What the
page shows is checked against the job's files read with rasterio: the legend against the class
map's colour table and the probability map's band names, the screenshot's colours against the
class map and the input image at pixel centres, a click against the class and probability maps.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import urlopen

import numpy as np
import pytest
import rasterio
from browser import Page, Viewer, chromium, on_map, serve
from rasterio.warp import transform

from conftest import assert_one_line_error, run_cli, start_cli

ZOOM = 20  # a 1 m pixel is about 8 screen pixels at 39 degrees north


@pytest.fixture(scope="module")
def job(checkpoint: Path, tiny_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real region job: predict on two tiny tiles, and an area of interest in UTM."""
    out = tmp_path_factory.mktemp("job")
    tiles = [str(tiny_data / f"synth_00{i}_naip.tif") for i in (0, 1)]
    result = run_cli("predict", *tiles, "-k", str(checkpoint), "--out", str(out))
    assert result.returncode == 0, result.stderr
    (out / "aoi.geojson").write_text(json.dumps(area_in_utm(Path(tiles[0]))))
    return out


def area_in_utm(tile: Path) -> dict:
    """A 70 x 70 m square inside a tile, as GeoJSON in its UTM zone."""
    with rasterio.open(tile) as ds:
        left, top = ds.transform.c, ds.transform.f
    ring = [
        (left + 20, top - 30),
        (left + 90, top - 30),
        (left + 90, top - 100),
        (left + 20, top - 100),
    ]
    return {
        "type": "FeatureCollection",
        "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::26918"}},
        "features": [
            {
                "type": "Feature",
                "properties": {},
                "geometry": {"type": "Polygon", "coordinates": [[*map(list, ring), list(ring[0])]]},
            }
        ],
    }


@pytest.fixture(scope="module")
def viewer(job: Path) -> Iterator[Viewer]:
    yield from serve(job)


@pytest.fixture(scope="module")
def viewer_without_vrts(job: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Viewer]:
    """The job's folder without its VRT mosaics: the class maps read tile by tile."""
    folder = tmp_path_factory.mktemp("job-without-vrts")  # beside the job: the same links
    shutil.copytree(job, folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.vrt"))
    yield from serve(folder)


@pytest.fixture(scope="module")
def browser() -> Iterator:
    yield from chromium()


@pytest.fixture
def page(browser, viewer: Viewer) -> Iterator[Page]:
    opened = Page(browser, viewer)
    yield opened
    opened.close()


def centres_inside(class_map: Path, count: int) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Pixels of uniform 3x3 neighbourhoods (classes well inside their regions), spread out."""
    with rasterio.open(class_map) as ds:
        classes = ds.read(1)
    inner = classes[1:-1, 1:-1]
    uniform = np.ones_like(inner, dtype=bool)
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            shifted = classes[
                1 + dr : classes.shape[0] - 1 + dr, 1 + dc : classes.shape[1] - 1 + dc
            ]
            uniform &= shifted == inner
    uniform &= inner != 255
    rows, cols = np.nonzero(uniform)
    picked: list[tuple[int, int]] = []
    for value in np.unique(inner[uniform]):  # every class with a region, then more pixels
        i = np.nonzero(inner[rows, cols] == value)[0]
        picked.append((int(rows[i[len(i) // 2]]) + 1, int(cols[i[len(i) // 2]]) + 1))
    rng = np.random.default_rng(0)
    for i in rng.choice(len(rows), size=min(count, len(rows)), replace=False):
        picked.append((int(rows[i]) + 1, int(cols[i]) + 1))
    return picked, classes


def lonlat_of(path: Path, pixels: list[tuple[int, int]]) -> tuple[list[float], list[float]]:
    """Longitude and latitude of pixel centres (rasterio)."""
    with rasterio.open(path) as ds:
        xs, ys = zip(*(ds.xy(r, c) for r, c in pixels), strict=True)
        return transform(ds.crs, "EPSG:4326", list(xs), list(ys))


def test_the_page_loads_everything_from_loopback_alone(page: Page, viewer: Viewer) -> None:
    # the imagery is readable: the page opens with the true colour under the class map
    assert page.page.input_value("#imagery") == "truecolor"
    assert page.page.evaluate("landcoverView.map.hasLayer(landcoverView.layers.truecolor)")
    page.settle()
    assert any(urlparse(u).path.startswith("/tiles/truecolor/") for u in page.requests)
    page.page.select_option("#imagery", "falsecolor")
    page.settle()
    page.page.select_option("#imagery", "truecolor")
    page.settle()
    page.page.mouse.click(300, 300)
    page.page.wait_for_function("landcoverView.clicks === 1")
    assert page.refused == []
    assert {urlparse(u).netloc for u in page.requests} == {viewer.netloc}
    paths = {urlparse(u).path for u in page.requests}
    assert "/static/vendor/leaflet/leaflet.js" in paths
    assert any(p.startswith("/tiles/classes/") for p in paths)
    assert any(p.startswith("/tiles/falsecolor/") for p in paths)
    assert page.errors == []


def test_the_legend_lists_every_class_with_its_colour(page: Page, job: Path) -> None:
    class_map = next(job.glob("*_class.tif"))
    with rasterio.open(class_map) as ds:
        colours = ds.colormap(1)
    with rasterio.open(str(class_map).replace("_class.tif", "_prob.tif")) as ds:
        names = list(ds.descriptions)
    shown = page.page.eval_on_selector_all(
        "#legend li",
        "items => items.map(i => [Number(i.dataset.value), i.querySelector('.name').textContent,"
        " getComputedStyle(i.querySelector('.swatch')).backgroundColor])",
    )
    expected = [
        [v, name, "rgb({}, {}, {})".format(*colours[v][:3])] for v, name in enumerate(names)
    ]
    assert shown == expected


def test_the_area_table_is_classes_csv(page: Page, job: Path) -> None:
    with (job / "classes.csv").open(newline="") as f:
        rows = list(csv.reader(f))
    shown = page.page.eval_on_selector_all(
        "#areas tr", "rows => rows.map(r => [...r.children].map(c => c.textContent))"
    )
    assert shown == rows


@pytest.mark.parametrize("served", ["viewer", "viewer_without_vrts"])
def test_the_screenshot_shows_each_class_in_its_colour_and_the_imagery(
    served: str, browser, job: Path, tiny_data: Path, request: pytest.FixtureRequest
) -> None:
    page = Page(browser, request.getfixturevalue(served))
    try:
        check_screenshot(page, job, tiny_data)
    finally:
        page.close()


def check_screenshot(page: Page, job: Path, tiny_data: Path) -> None:
    class_map = job / "synth_000_naip_class.tif"
    image = tiny_data / "synth_000_naip.tif"
    pixels, classes = centres_inside(class_map, 40)
    with rasterio.open(class_map) as ds:
        colours = ds.colormap(1)
    with rasterio.open(image) as ds:
        bands = ds.read()
    lons, lats = lonlat_of(class_map, pixels)
    page.go_to(float(np.mean(lons)), float(np.mean(lats)), ZOOM)
    page.page.locator("#opacity").fill("1")
    page.settle()
    shot = page.screenshot()
    points = page.screen(lons, lats)
    seen = set()
    for (row, col), (x, y) in zip(pixels, points, strict=True):
        if not on_map(x, y):
            continue
        value = int(classes[row, col])
        assert tuple(shot[y, x]) == colours[value][:3], (row, col, value)
        seen.add(value)
    assert len(seen) >= 2, "the view shows classes of at least two regions"

    # the imagery under it: the class map hidden, true then false colour; nearest
    # neighbour, so each screen point shows one of its pixel's 3x3 neighbourhood
    page.page.locator("#opacity").fill("0")
    page.settle()
    for option, order in (("truecolor", [0, 1, 2]), ("falsecolor", [3, 0, 1])):
        page.page.select_option("#imagery", option)
        page.settle()
        shot = page.screenshot()
        checked = 0
        for (row, col), (x, y) in zip(pixels, points, strict=True):
            if not on_map(x, y):
                continue
            near = bands[order][:, row - 1 : row + 2, col - 1 : col + 2].reshape(3, -1).T
            assert np.abs(near.astype(int) - shot[y, x]).max(axis=1).min() <= 2, (option, row, col)
            checked += 1
        assert checked >= 10

    # the class map over the imagery: opaque, it hides it
    page.page.locator("#opacity").fill("1")
    page.settle()
    shot = page.screenshot()
    for (row, col), (x, y) in zip(pixels, points, strict=True):
        if on_map(x, y):
            assert tuple(shot[y, x]) == colours[int(classes[row, col])][:3], ("over", row, col)


def test_a_click_reports_the_pixels_class_and_probabilities(page: Page, job: Path) -> None:
    class_map = job / "synth_001_naip_class.tif"
    prob_map = job / "synth_001_naip_prob.tif"
    pixels, classes = centres_inside(class_map, 0)
    row, col = pixels[-1]
    lons, lats = lonlat_of(class_map, [(row, col)])
    page.go_to(lons[0], lats[0], ZOOM)
    ((x, y),) = page.screen(lons, lats)
    page.page.mouse.click(x, y)
    page.page.wait_for_function("landcoverView.clicks === 1")
    with rasterio.open(prob_map) as ds:
        probabilities = ds.read()[:, row, col] * np.array(ds.scales)
        names = list(ds.descriptions)
    value = int(classes[row, col])
    assert page.page.get_attribute("#pixel", "data-value") == str(value)
    assert page.page.text_content("#pixel .name") == names[value]
    assert f"row {row}, column {col}" in page.page.text_content("#pixel .where")
    shown = page.page.eval_on_selector_all(
        "#pixel tr",
        "rows => rows.map(r => [Number(r.dataset.value), Number(r.dataset.probability),"
        " r.children[0].textContent, r.children[1].textContent])",
    )
    assert [s[0] for s in shown] == list(range(len(names)))
    assert [s[2] for s in shown] == names
    assert np.allclose([s[1] for s in shown], probabilities, atol=1e-9)
    assert [s[3] for s in shown] == [f"{100 * p:.1f} %" for p in probabilities]
    assert int(np.argmax(probabilities)) == value  # the class map is the probabilities' argmax


def test_the_area_of_interest_is_drawn_where_it_lies(page: Page, job: Path) -> None:
    aoi = json.loads((job / "aoi.geojson").read_text())
    ring = aoi["features"][0]["geometry"]["coordinates"][0]
    lons, lats = transform("EPSG:26918", "EPSG:4326", [p[0] for p in ring], [p[1] for p in ring])
    page.go_to(float(np.mean(lons)), float(np.mean(lats)), ZOOM - 1)
    points = page.screen(lons, lats)
    box = page.page.locator("path[stroke='#ff00ff']").bounding_box()
    assert box is not None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    # the outline's bounding box, its 2 px stroke apart
    assert abs(box["x"] + 1 - min(xs)) <= 2 and abs(box["x"] + box["width"] - 1 - max(xs)) <= 2
    assert abs(box["y"] + 1 - min(ys)) <= 2 and abs(box["y"] + box["height"] - 1 - max(ys)) <= 2


def test_bad_folder_and_port_in_use_are_one_line_errors(
    viewer: Viewer, job: Path, tmp_path: Path
) -> None:
    not_a_job = run_cli("view", str(tmp_path), "--no-browser", timeout=60)
    assert_one_line_error(not_a_job, "not a region job's output folder", "stac_items.json")
    missing = run_cli("view", str(tmp_path / "missing"), "--no-browser", timeout=60)
    assert_one_line_error(missing, "no such folder")
    port = str(urlparse(viewer.url).port)  # the running viewer's
    taken = run_cli("view", str(job), "--port", port, "--no-browser", timeout=60)
    assert_one_line_error(taken, f"cannot serve on 127.0.0.1:{port}", "--port 0")


def test_another_host_is_served_with_a_warning(job: Path) -> None:
    # no display (as over SSH): no browser is started, not even a text one in the terminal
    env = {"DISPLAY": "", "WAYLAND_DISPLAY": ""}
    proc = start_cli("view", str(job), "--host", "0.0.0.0", "--port", "0", env=env)
    try:
        line = proc.stdout.readline()
        assert "no display here" in proc.stdout.readline()
        port = int(line.split(" at ")[1].split()[0].rsplit(":", 1)[1].rstrip("/"))
        with urlopen(f"http://127.0.0.1:{port}/api/job", timeout=30) as reply:
            assert json.load(reply)["tiles"] == 2
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    warnings = [w for w in err.splitlines() if w.startswith("warning: ")]
    assert len(warnings) == 1 and "0.0.0.0" in warnings[0] and f"port {port}" in warnings[0]
    assert "can see the map" in warnings[0]


@pytest.fixture(scope="module")
def aoi_job(checkpoint: Path, tiny_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A region job of one tile with ``--aoi``: classes.csv has the area's hectares."""
    out = tmp_path_factory.mktemp("aoi-job")
    tile = tiny_data / "synth_000_naip.tif"
    area = out.parent / f"{out.name}.geojson"
    area.write_text(json.dumps(area_in_utm(tile)))
    result = run_cli(
        "predict", str(tile), "-k", str(checkpoint), "--out", str(out), "--aoi", str(area)
    )
    assert result.returncode == 0, result.stderr
    return out


def test_the_hectares_table_gives_each_class_over_the_tiles_and_inside_the_area(
    browser, aoi_job: Path
) -> None:
    with (aoi_job / "classes.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    for served in serve(aoi_job):
        page = Page(browser, served)
        try:
            shown = page.page.eval_on_selector_all(
                "#hectares tr", "rows => rows.map(r => [...r.children].map(c => c.textContent))"
            )
        finally:
            page.close()
    assert shown[0] == ["class", "ha", "%", "in area, ha"]
    assert [line[0] for line in shown[1:]] == [*(row["class"] for row in rows), "all"]
    for line, row in zip(shown[1:], rows, strict=False):
        # hectares from the pixel counts (1 m pixels), the share in %, the area's hectares
        assert float(line[1]) == pytest.approx(int(row["pixels"]) / 1e4, abs=0.005)
        assert line[2] == f"{100 * float(row['fraction']):.1f}"
        assert float(line[3]) == pytest.approx(float(row["aoi_hectares"]), abs=0.005)
    inside = sum(float(row["aoi_hectares"]) for row in rows)
    assert inside == pytest.approx(70 * 70 / 1e4)  # the 70 m square, every pixel mapped
    assert float(shown[-1][3]) == pytest.approx(inside, abs=0.005)
    assert float(shown[-1][2]) == pytest.approx(100, abs=0.1)


def test_without_readable_imagery_the_page_opens_on_the_class_map_alone(
    browser, job: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("job-without-imagery")  # beside the job: the same links
    shutil.copytree(job, folder, dirs_exist_ok=True)
    items = json.loads((folder / "stac_items.json").read_text())
    for item in items["features"]:  # no link to the input images
        item["links"] = [link for link in item["links"] if link["rel"] != "derived_from"]
    (folder / "stac_items.json").write_text(json.dumps(items))
    for served in serve(folder):
        page = Page(browser, served)
        try:
            assert page.page.is_disabled("#imagery")
            assert page.page.input_value("#imagery") == ""
            layers = (
                "Object.values(landcoverView.layers).filter(l => landcoverView.map.hasLayer(l))"
            )
            assert page.page.evaluate(f"{layers}.length") == 1  # the class map alone
            page.settle()
            assert not any("/tiles/truecolor/" in u for u in page.requests)
        finally:
            page.close()


def test_an_unreadable_map_is_said_in_the_page_without_host_paths(
    browser, job: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "job with a cut map"
    shutil.copytree(job, folder)
    prob_map = folder / "synth_001_naip_prob.tif"
    prob_map.write_bytes(prob_map.read_bytes()[: prob_map.stat().st_size // 2])  # cut short
    class_map = folder / "synth_001_naip_class.tif"
    pixels, _ = centres_inside(class_map, 0)
    lons, lats = lonlat_of(class_map, pixels[-1:])
    for viewer in serve(folder):
        with urlopen(f"{viewer.url}api/aoi") as reply:  # the outline, not where it was read
            assert str(tmp_path) not in reply.read().decode()
        page = Page(browser, viewer)
        try:
            page.go_to(lons[0], lats[0], ZOOM)
            ((x, y),) = page.screen(lons, lats)
            page.page.mouse.click(x, y)
            page.page.wait_for_function("landcoverView.clicks === 1")
            said = page.page.text_content("#pixel .error")
        finally:
            page.close()
    assert said.startswith("cannot read this pixel: synth_001_naip_prob.tif: ")
    assert "cut short" in said and str(tmp_path) not in said
