"""landcover view on a job of 100 tiles: how soon its page is interactive (measured, logged).

The job's folder is made as a predict job makes it, without predicting 100 tiles: tiny COGs
(class and probability maps) and inputs written here, and the job's own writers
(:func:`~landcover.mapping.summary.write_summary`,
:func:`~landcover.mapping.mosaic.write_mosaics`,
:func:`~landcover.mapping.stac.write_item_collection`) describing them. The times are
printed among the run's measured figures (tests/conftest.py), not asserted: the issue asks
for an interactive page in under 3 s on a user's machine, and a loaded CI machine is not one.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import rasterio
from affine import Affine
from browser import Page, Viewer, chromium, serve

from landcover.classes import resolve_mapping
from landcover.inference.results import ClassCounts, Grid
from landcover.mapping.mosaic import write_mosaics
from landcover.mapping.records import TileOutputs, TileRecord
from landcover.mapping.stac import write_item_collection
from landcover.mapping.summary import write_summary

from conftest import assert_one_line_error, run_cli, write_naip_tile

SIDE = 10  # tiles per row and column
PIXELS = 64  # per tile side, 1 m each
CRS = "EPSG:26918"
MAPPING = resolve_mapping("chesapeake7")


def write_cog(path: Path, bands: np.ndarray, transform: Affine, **profile: object) -> None:
    with rasterio.open(
        path,
        "w",
        driver="COG",
        count=bands.shape[0],
        height=bands.shape[1],
        width=bands.shape[2],
        dtype=bands.dtype,
        crs=CRS,
        transform=transform,
        **profile,
    ) as ds:
        ds.write(bands)


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A job folder of 10 x 10 tiles of 64 px, as a predict job writes one."""
    out = tmp_path_factory.mktemp("many")
    inputs = tmp_path_factory.mktemp("many-inputs")
    rng = np.random.default_rng(3)
    k = MAPPING.num_classes
    records = []
    for i in range(SIDE * SIDE):
        corner = (350000.0 + PIXELS * (i % SIDE), 4300000.0 - PIXELS * (i // SIDE))
        transform = Affine(1, 0, corner[0], 0, -1, corner[1])
        stem = f"t{i:03d}"
        image = rng.integers(1, 256, (4, PIXELS, PIXELS), dtype=np.uint8)
        tile = write_naip_tile(inputs / f"{stem}.tif", image, CRS, 1.0, corner)
        classes = np.kron(rng.integers(0, k, (4, 4)), np.ones((16, 16), int)).astype(np.uint8)
        write_cog(out / f"{stem}_class.tif", classes[None], transform, nodata=255)
        probs = np.stack([(classes == c) * 255 for c in range(k)]).astype(np.uint8)
        write_cog(out / f"{stem}_prob.tif", probs, transform)
        with rasterio.open(out / f"{stem}_class.tif") as ds:
            grid = Grid.of(ds)
        counts = ClassCounts(np.bincount(classes.ravel(), minlength=k).tolist())
        outputs = TileOutputs(
            str(out / f"{stem}_class.tif"),
            str(out / f"{stem}_prob.tif"),
            None,
            str(out / f"{stem}_stats.json"),
        )
        records.append(TileRecord(str(tile), i, "done", 0, 0.1, None, grid, counts, 1.0, outputs))
    write_summary(records, MAPPING, str(out), {"test": "100 tiles"})
    write_mosaics(records, str(out), MAPPING, "uint8")
    write_item_collection(records, str(out), MAPPING, "uint8", {})
    return out


@pytest.fixture(scope="module")
def viewer(many: Path) -> Iterator[Viewer]:
    yield from serve(many)


@pytest.fixture(scope="module")
def browser() -> Iterator:
    yield from chromium()


def test_a_100_tile_jobs_page_becomes_interactive(browser, viewer: Viewer, record_property) -> None:
    started = time.perf_counter()
    page = Page(browser, viewer)  # returns once the page says it is ready
    ready_s = time.perf_counter() - started
    page.settle()
    tiles_s = time.perf_counter() - started
    timings = page.page.evaluate("[landcoverView.interactiveMs, landcoverView.tilesMs]")
    shown = page.page.evaluate("landcoverView.job.tiles")
    legend = page.page.eval_on_selector_all("#legend li", "items => items.length")
    page.close()
    assert shown == SIDE * SIDE and legend == MAPPING.num_classes
    assert page.refused == [] and page.errors == []
    figure = (
        f"landcover view, a {SIDE * SIDE}-tile job: interactive {timings[0] / 1000:.2f} s "
        f"after navigation ({ready_s:.2f} s from goto), the class map's first view drawn "
        f"{timings[1] / 1000:.2f} s ({tiles_s:.2f} s from goto); load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(figure)
    record_property("figure", figure)


def test_a_broken_job_folder_is_a_one_line_error(many: Path, tmp_path: Path) -> None:
    folder = tmp_path / "job"
    shutil.copytree(many, folder)
    (folder / "aoi.geojson").write_text(
        json.dumps({"type": "Polygon", "coordinates": [], "crs": {"properties": {"name": "X:1"}}})
    )
    result = run_cli("view", str(folder), "--no-browser", timeout=60)
    assert_one_line_error(result, "aoi.geojson", "CRS")
    (folder / "aoi.geojson").unlink()
    (folder / "mosaic_class.vrt").write_text("<VRTDataset")  # cut short
    result = run_cli("view", str(folder), "--no-browser", timeout=60)
    assert_one_line_error(result, "mosaic_class.vrt", "not a VRT")
    (folder / "t042_class.tif").unlink()
    result = run_cli("view", str(folder), "--no-browser", timeout=60)
    assert_one_line_error(result, "t042_class.tif", "class map missing")
    (folder / "stac_items.json").write_text('{"type": "FeatureCollection"')  # cut short
    result = run_cli("view", str(folder), "--no-browser", timeout=60)
    assert_one_line_error(result, "stac_items.json", "not a STAC ItemCollection")
