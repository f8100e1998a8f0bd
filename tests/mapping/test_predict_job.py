"""landcover predict as a job over many tiles: workers, resume, failures and the job's outputs."""

from __future__ import annotations

import csv
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pystac
import pytest
import rasterio
from affine import Affine
from azurite import apply_env, free_port
from netns import two_hosts
from pystac.validation import JsonSchemaSTACValidator, set_validator
from rasterio.windows import from_bounds
from rio_cogeo.cogeo import cog_validate

from landcover import storage
from landcover.classes import resolve_mapping
from landcover.config import RunConfig
from landcover.errors import DataError
from landcover.inference.options import PredictOptions
from landcover.inference.results import Grid
from landcover.mapping.job import run_predict_job
from landcover.mapping.spec import JobOptions, JobOutcome
from landcover.mapping.tiles import measure_tiles, resolve_tiles
from landcover.synthetic.synthetic import synthesize_scene

from conftest import REPO, assert_one_line_error, run_cli, start_cli, wait_for_log, write_naip_tile

NAMES = resolve_mapping("chesapeake7").names
US_SURVEY_FOOT = 1200 / 3937  # metres, by definition

# (name, crs, pixel size, height, width, upper-left corner): 12 tiles of different sizes in
# five CRSs; one CRS mixes 1 m and 0.5 m pixels, one is in feet, one geographic (degrees).
REGION = [
    ("a1", "EPSG:26918", 1.0, 176, 160, (400000, 4300000)),
    ("a2", "EPSG:26918", 1.0, 96, 144, (400200, 4300000)),
    ("a3", "EPSG:26918", 1.0, 128, 128, (400344, 4300000)),  # shares an edge with a2
    ("a4", "EPSG:26918", 1.0, 80, 112, (400000, 4299700)),
    ("a5", "EPSG:26918", 1.0, 160, 96, (400200, 4299700)),
    ("a6", "EPSG:26918", 1.0, 112, 176, (400400, 4299700)),
    ("a7", "EPSG:26918", 1.0, 64, 96, (400700, 4299900)),
    ("b1", "EPSG:26917", 1.0, 144, 96, (700000, 4300000)),
    ("f1", "EPSG:2248", 3.0, 96, 80, (1300000, 500000)),  # Maryland, US survey feet
    ("c1", "EPSG:32618", 1.0, 96, 96, (401000, 4300000)),
    ("c2", "EPSG:32618", 0.5, 128, 112, (401200, 4300000)),
    ("d1", "EPSG:4326", 1e-5, 80, 96, (-76.5, 38.8)),
]


def write_image(path: Path, height: int, width: int, crs: str, pixel: float, corner, seed: int):
    image, _ = synthesize_scene(height, width, np.random.default_rng(seed))
    options = {"compress": "deflate", "tiled": True, "blockxsize": 64, "blockysize": 64}
    return write_naip_tile(path, image, crs, pixel, corner, **options)


@pytest.fixture(scope="module")
def region(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("region")
    for seed, (name, crs, pixel, height, width, corner) in enumerate(REGION):
        write_image(folder / f"{name}_naip.tif", height, width, crs, pixel, corner, seed)
    return folder


def predict(*args: str, env: dict | None = None, timeout: float = 600):
    return run_cli("predict", *args, timeout=timeout, env=env)


def predict_here(
    inputs: Path | str, checkpoint: Path, out: Path, overwrite: bool = False, **options
) -> JobOutcome:
    """``landcover predict INPUTS --checkpoint C --out O`` with one worker, in this process
    (the job's own entry point, as the CLI calls it; options as in :class:`PredictOptions`)."""
    return run_predict_job(
        [str(inputs)],
        str(checkpoint),
        PredictOptions(str(out), **options),
        JobOptions(overwrite=overwrite),
        "cpu",
        RunConfig(),
    )


@pytest.fixture(scope="module")
def runs(region: Path, checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The region predicted by one worker and, into another folder, by two."""
    base = tmp_path_factory.mktemp("runs")
    results = {}
    for workers in (1, 2):
        out = base / f"w{workers}"
        result = predict(
            str(region), "--checkpoint", str(checkpoint), "--out", str(out),
            "--workers", str(workers),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        results[workers] = (out, result)
    return results


def summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def tiles_by_status(out: Path) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for tile in summary(out)["tiles"]:
        found.setdefault(tile["status"], set()).add(Path(tile["tile"]).name)
    return found


def read(path: Path) -> np.ndarray:
    with rasterio.open(path) as ds:
        return ds.read()


# --- workers and dealing -----------------------------------------------------------------


@pytest.mark.slow
def test_two_workers_give_the_same_maps_as_one(runs: dict, region: Path) -> None:
    # one worker runs torch on 2 threads, each of two on 1: on CPUs where oneDNN's convolutions
    # split their sums by the thread count (AVX-512, 2026-11-28: logits 7e-6 apart), a stored
    # probability may round to the next uint8 step, and a class may flip only where two
    # classes tie within that step
    one, two = runs[1][0], runs[2][0]
    for name, *_ in REGION:
        prob_a, prob_b = (
            read(out / f"{name}_naip_prob.tif").astype(np.int16) for out in (one, two)
        )
        assert np.abs(prob_a - prob_b).max() <= 1, name
        class_a, class_b = (read(out / f"{name}_naip_class.tif")[0] for out in (one, two))
        rows, cols = np.nonzero(class_a != class_b)
        for r, c in zip(rows, cols, strict=True):
            a, b = class_a[r, c], class_b[r, c]
            assert abs(int(prob_a[a, r, c]) - int(prob_a[b, r, c])) <= 1, (name, r, c)
    tiles = summary(two)["tiles"]
    names = sorted(Path(t["tile"]).name for t in tiles)
    assert names == sorted(f"{n}_naip.tif" for n, *_ in REGION)  # each tile once
    assert {t["status"] for t in tiles} == {"done"}
    assert {t["rank"] for t in tiles} == {0, 1}  # both workers took tiles
    assert summary(two)["job"]["workers"] == 2


@pytest.mark.slow
def test_tiles_are_ordered_largest_first(runs: dict, region: Path) -> None:
    order = sorted(REGION, key=lambda t: (-t[3] * t[4], str(region / f"{t[0]}_naip.tif")))
    tiles = sorted(summary(runs[2][0])["tiles"], key=lambda t: t["index"])
    assert [Path(t["tile"]).name for t in tiles] == [f"{t[0]}_naip.tif" for t in order]


@pytest.mark.slow
def test_maps_are_cogs_on_the_input_grid_with_the_fingerprint(runs: dict, region: Path) -> None:
    out = runs[1][0]
    fingerprint = summary(out)["job"]["fingerprint"]
    for name, *_ in REGION:
        with rasterio.open(region / f"{name}_naip.tif") as src:
            grid = (src.crs, src.transform, src.width, src.height)
        for kind in ("class", "prob"):
            path = out / f"{name}_naip_{kind}.tif"
            valid, errors, _ = cog_validate(str(path))
            assert valid, errors
            with rasterio.open(path) as ds:
                assert (ds.crs, ds.transform, ds.width, ds.height) == grid
                assert ds.tags()["LANDCOVER_FINGERPRINT"] == fingerprint
    progress = [ln for ln in runs[2][1].stderr.splitlines() if "tiles 12/12" in ln]
    assert progress and "Mpx/s" in progress[-1]


# --- the job's outputs ----------------------------------------------------------------------


@pytest.mark.slow
def test_hectares_are_pixel_counts_times_pixel_area(runs: dict) -> None:
    out = runs[2][0]
    document = summary(out)
    totals = np.zeros(len(NAMES))
    rows = {
        Path(r["tile"]).name: r
        for r in csv.DictReader((out / "summary.csv").read_text().splitlines())
    }
    for tile in document["tiles"]:
        name = Path(tile["tile"]).name
        with rasterio.open(out / name.replace(".tif", "_class.tif")) as ds:
            classes, transform, crs = ds.read(1), ds.transform, ds.crs
        counts = np.bincount(classes[classes != 255].ravel(), minlength=len(NAMES))
        assert tile["counts"]["pixels"] == counts.tolist()
        assert tile["counts"]["nodata"] == int((classes == 255).sum())
        valid = counts.sum()
        np.testing.assert_allclose(tile["class_fractions"], counts / valid)
        if crs.is_geographic:  # degrees have no fixed area: left out
            assert tile["class_hectares"] is None
            assert rows[name]["water_ha"] == ""
            continue
        metres = US_SURVEY_FOOT if crs.to_epsg() == 2248 else 1.0  # EPSG:2248 is in feet
        expected = counts * abs(transform.a * transform.e) * metres**2 / 10_000
        np.testing.assert_allclose(tile["class_hectares"], expected)
        np.testing.assert_allclose(
            [float(rows[name][f"{c}_ha"]) for c in NAMES], expected, atol=1e-4
        )
        totals += expected
    np.testing.assert_allclose([c["hectares"] for c in document["classes"]], totals)
    by_class = {
        r["class"]: float(r["hectares"])
        for r in csv.DictReader((out / "classes.csv").read_text().splitlines())
    }
    np.testing.assert_allclose([by_class[c] for c in NAMES], totals, atol=1e-4)
    assert "d1_naip.tif: hectares are left out" in runs[2][1].stderr


def _vrt_windows(vrt: rasterio.io.DatasetReader, tile: rasterio.io.DatasetReader):
    window = from_bounds(*tile.bounds, transform=vrt.transform)
    return window.round_offsets().round_lengths()


@pytest.mark.slow
def test_vrt_pixels_equal_the_tile_maps(runs: dict) -> None:
    out = runs[2][0]
    groups = {
        "epsg26918": ["a1", "a2", "a3", "a4", "a5", "a6", "a7"],
        "epsg26917": ["b1"],
        "epsg2248": ["f1"],
        "epsg32618": ["c1", "c2"],
        "epsg4326": ["d1"],
    }
    assert sorted(p.name for p in out.glob("*.vrt")) == sorted(
        f"mosaic_{k}_{g}.vrt" for g in groups for k in ("class", "prob")
    )
    for group, names in groups.items():
        with (
            rasterio.open(out / f"mosaic_class_{group}.vrt") as cls,
            rasterio.open(out / f"mosaic_prob_{group}.vrt") as prob,
        ):
            assert cls.count == 1 and prob.count == len(NAMES)
            assert cls.nodata == 255 and cls.colormap(1)[0][:3] == (0, 0, 255)
            assert list(prob.descriptions) == NAMES
            for name in names:
                with (
                    rasterio.open(out / f"{name}_naip_class.tif") as tile_cls,
                    rasterio.open(out / f"{name}_naip_prob.tif") as tile_prob,
                ):
                    window = _vrt_windows(cls, tile_cls)
                    classes = tile_cls.read(1)
                    factor = round(tile_cls.transform.a / cls.transform.a)
                    if factor == 1:
                        np.testing.assert_array_equal(cls.read(1, window=window), classes)
                        np.testing.assert_array_equal(prob.read(window=window), tile_prob.read())
                        np.testing.assert_array_equal(
                            prob.read_masks(1, window=window), tile_prob.read_masks(1)
                        )
                    else:  # the 1 m tile in the 0.5 m mosaic: nearest neighbour, 2 x 2 each
                        assert factor == 2
                        upsampled = np.repeat(np.repeat(classes, 2, axis=0), 2, axis=1)
                        np.testing.assert_array_equal(cls.read(1, window=window), upsampled)


STAC_PROJECTION = "https://stac-extensions.github.io/projection/v2.0.0/schema.json"
STAC_RASTER = "https://stac-extensions.github.io/raster/v1.1.0/schema.json"
STAC_CLASSIFICATION = "https://stac-extensions.github.io/classification/v2.0.0/schema.json"


def _extension_schema(uri: str, properties: dict | None, assets: dict | None) -> dict:
    """A JSON schema for the fields of one extension that our items rely on."""
    schema: dict = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": uri,
        "type": "object",
        "required": ["stac_extensions", "properties", "assets"],
        "properties": {"stac_extensions": {"type": "array", "contains": {"const": uri}}},
    }
    if properties:
        schema["properties"]["properties"] = properties
    if assets:
        schema["properties"]["assets"] = assets
    return schema


# written from the extensions' specifications (README of each extension's repository)
PROJECTION_SCHEMA = _extension_schema(
    STAC_PROJECTION,
    {
        "type": "object",
        "required": ["proj:code", "proj:shape", "proj:transform", "proj:bbox"],
        "properties": {
            "proj:code": {"type": ["string", "null"], "pattern": "^[A-Z]+:[0-9]+$"},
            "proj:shape": {
                "type": "array",
                "minItems": 2,
                "maxItems": 2,
                "items": {"type": "integer"},
            },
            "proj:transform": {
                "type": "array",
                "oneOf": [{"minItems": 6, "maxItems": 6}, {"minItems": 9, "maxItems": 9}],
                "items": {"type": "number"},
            },
            "proj:bbox": {
                "type": "array",
                "oneOf": [{"minItems": 4, "maxItems": 4}, {"minItems": 6, "maxItems": 6}],
                "items": {"type": "number"},
            },
        },
    },
    None,
)
RASTER_BAND = {
    "type": "object",
    "minProperties": 1,
    "properties": {
        "data_type": {
            "enum": [
                "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "float16", "float32", "float64", "cint16", "cint32", "cfloat32", "cfloat64",
                "other",
            ]
        },
        "nodata": {"oneOf": [{"type": "number"}, {"enum": ["nan", "inf", "-inf"]}]},
        "sampling": {"enum": ["area", "point"]},
        "spatial_resolution": {"type": "number"},
        "scale": {"type": "number"},
    },
}  # fmt: skip
RASTER_SCHEMA = _extension_schema(
    STAC_RASTER,
    None,
    {
        "type": "object",
        "required": ["class", "probabilities"],
        "additionalProperties": {
            "type": "object",
            "properties": {"raster:bands": {"type": "array", "minItems": 1, "items": RASTER_BAND}},
        },
        "properties": {
            "class": {"required": ["raster:bands"]},
            "probabilities": {"required": ["raster:bands"]},
        },
    },
)
CLASS_OBJECT = {
    "type": "object",
    "required": ["value", "name"],
    "properties": {
        "value": {"type": "integer"},
        "name": {"type": "string", "pattern": "^[0-9A-Za-z-_]+$"},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "color_hint": {"type": "string", "pattern": "^([0-9A-Fa-f]{6})$"},
        "nodata": {"type": "boolean"},
    },
}
CLASSIFICATION_SCHEMA = _extension_schema(
    STAC_CLASSIFICATION,
    None,
    {
        "type": "object",
        "required": ["class"],
        "properties": {
            "class": {
                "type": "object",
                "required": ["classification:classes"],
                "properties": {
                    "classification:classes": {
                        "type": "array", "minItems": 1, "uniqueItems": True, "items": CLASS_OBJECT
                    }
                },
            }
        },
    },
)  # fmt: skip


@pytest.mark.slow
@contextmanager
def offline_validation() -> Iterator[None]:
    """pystac's validation with the extensions' schemas from the test folder (no network)."""
    validator = JsonSchemaSTACValidator()  # STAC core and GeoJSON schemas: bundled by pystac
    validator.schema_cache.update(
        {
            STAC_PROJECTION: PROJECTION_SCHEMA,
            STAC_RASTER: RASTER_SCHEMA,
            STAC_CLASSIFICATION: CLASSIFICATION_SCHEMA,
        }
    )
    set_validator(validator)
    try:
        yield
    finally:
        set_validator(JsonSchemaSTACValidator())


def test_the_maps_are_a_static_stac_collection_that_pystac_opens_and_resolves(
    runs: dict, region: Path, tmp_path: Path
) -> None:
    """stac_items.json's relative hrefs have nothing to resolve against in a client; the
    collection and its item files do, also once the folder is moved (self-contained)."""
    out = runs[1][0]
    with offline_validation():
        collection = pystac.Collection.from_file(str(out / "collection.json"))
        assert collection.id == out.name and collection.validate()
        items = list(collection.get_items())
        assert [i.id for i in items] == sorted(f"{n}_naip" for n, *_ in REGION)
        for item in items:
            assert item.validate() and item.collection_id == collection.id
            for asset in item.assets.values():  # resolved by pystac, not joined here
                assert Path(asset.get_absolute_href()).is_file(), asset.href
            source = item.get_single_link("derived_from").get_absolute_href()
            assert Path(source) == region / f"{item.id}.tif"
            west, south, east, north = item.bbox
            (box,) = collection.extent.spatial.bboxes
            assert box[0] <= west and box[1] <= south and east <= box[2] and north <= box[3]
    moved = Path(shutil.copytree(out, tmp_path / "elsewhere" / "maps"))
    again = pystac.Collection.from_file(str(moved / "collection.json"))
    for item in again.get_items():
        href = item.assets["class"].get_absolute_href()
        assert Path(href) == moved / f"{item.id}_class.tif" and Path(href).is_file()


def test_stac_items_validate_offline(runs: dict) -> None:
    out = runs[2][0]
    with offline_validation():
        collection = pystac.ItemCollection.from_file(str(out / "stac_items.json"))
        assert sorted(item.id for item in collection) == sorted(f"{n}_naip" for n, *_ in REGION)
        for item in collection:
            assert item.validate()  # core + the three extensions, no network
            assert set(item.stac_extensions) == {STAC_PROJECTION, STAC_RASTER, STAC_CLASSIFICATION}
            with rasterio.open(out / f"{item.id}_class.tif") as ds:
                assert item.properties["proj:shape"] == [ds.height, ds.width]
                assert item.properties["proj:transform"] == list(ds.transform)[:6]
                assert item.properties["proj:code"] == f"EPSG:{ds.crs.to_epsg()}"
            for asset in item.assets.values():
                assert (out / asset.href).is_file(), asset.href
            classes = item.assets["class"].extra_fields["classification:classes"]
            assert [c["name"] for c in classes[:-1]] == NAMES
            assert classes[-1] == {
                "value": 255,
                "name": "no_data",
                "description": "no data",
                "nodata": True,
            }
            lon, lat = item.geometry["coordinates"][0][0]
            assert -80 < lon < -70 and 35 < lat < 45  # a footprint in WGS 84 degrees


def test_no_probs_writes_the_class_maps_alone(
    runs: dict, region: Path, checkpoint: Path, tmp_path: Path
) -> None:
    """``--no-probs`` (in process): the same class maps as a full run (tiles predicted on their
    own grid and on a working grid alike), no probability map, VRT or STAC asset, and a rerun
    that keeps the class maps as complete; a later run that wants probabilities predicts
    again, and one without them removes the probabilities that no longer fit."""
    out = tmp_path / "classes"
    outcome = predict_here(region, checkpoint, out, probs=False)
    assert (outcome.done, outcome.failed) == (len(REGION), 0)
    full = runs[1][0]
    for name, *_ in REGION:
        np.testing.assert_array_equal(
            read(out / f"{name}_naip_class.tif"), read(full / f"{name}_naip_class.tif"), name
        )
        assert cog_validate(str(out / f"{name}_naip_class.tif"))[0], name
    assert not list(out.glob("*_prob.tif")) and not list(out.glob("mosaic_prob*.vrt"))
    assert list(out.glob("mosaic_class*.vrt"))
    items = json.loads((out / "stac_items.json").read_text())["features"]
    assert len(items) == len(REGION)
    assert all(set(item["assets"]) == {"class", "preview", "stats"} for item in items)

    predict_here(region, checkpoint, out, probs=False)
    assert tiles_by_status(out) == {"skipped": {f"{n}_naip.tif" for n, *_ in REGION}}
    one = region / "a1_naip.tif"
    predict_here(one, checkpoint, out)
    assert tiles_by_status(out) == {"done": {"a1_naip.tif"}}
    np.testing.assert_array_equal(read(out / "a1_naip_prob.tif"), read(full / "a1_naip_prob.tif"))
    assert (out / "mosaic_prob.vrt").is_file()
    # predicted again without probabilities: the earlier ones no longer fit, and go
    predict_here(one, checkpoint, out, overwrite=True, probs=False)
    assert not (out / "a1_naip_prob.tif").exists() and not (out / "mosaic_prob.vrt").exists()
    assert summary(out)["job"]["probabilities"] is False


# --- resuming ----------------------------------------------------------------------------------


def test_rerun_predicts_only_incomplete_tiles(
    runs: dict, region: Path, checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A job run again (in process) predicts only the tiles whose outputs are incomplete or
    were made with options that change pixels; ``--overwrite`` predicts them all again."""
    out = tmp_path / "maps"
    shutil.copytree(runs[1][0], out)
    (out / "a2_naip_prob.tif").unlink()
    (out / "a3_naip_preview.png").unlink()
    cut = out / "a4_naip_class.tif"  # a copy that stopped half way
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    capsys.readouterr()
    outcome = predict_here(region, checkpoint, out)
    statuses = tiles_by_status(out)
    assert statuses["done"] == {"a2_naip.tif", "a3_naip.tif", "a4_naip.tif"}
    assert len(statuses["skipped"]) == len(REGION) - 3
    assert (outcome.done, outcome.skipped) == (3, len(REGION) - 3)
    err = capsys.readouterr().err
    assert "a4_naip.tif: predicting it again (class map: " in err
    assert "this job does not list" not in err  # the same tiles: nothing else in the folder
    assert cog_validate(str(cut))[0]

    # maps made with other options that change pixels are not complete for this job
    one = region / "b1_naip.tif"
    capsys.readouterr()
    predict_here(one, checkpoint, out, overlap=8)
    assert tiles_by_status(out) == {"done": {"b1_naip.tif"}}
    # the other tiles' maps stay, and drop out of the job's files: said once
    warned = [ln for ln in capsys.readouterr().err.splitlines() if "this job does not list" in ln]
    others = sorted(f"{name}_naip" for name, *_ in REGION if name != "b1")
    assert len(warned) == 1, warned
    assert f"holds the maps of {len(others)} other tiles" in warned[0]
    assert f"(such as {others[0]})" in warned[0]
    assert all((out / f"{stem}_class.tif").is_file() for stem in others)
    predict_here(one, checkpoint, out, overlap=8)
    assert tiles_by_status(out) == {"skipped": {"b1_naip.tif"}}
    # --overwrite predicts complete tiles again
    predict_here(one, checkpoint, out, overwrite=True, overlap=8)
    assert tiles_by_status(out) == {"done": {"b1_naip.tif"}}


@pytest.mark.slow
def test_killed_job_resumes_with_the_remaining_tiles(
    region: Path, checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "maps"
    args = [str(region), "--checkpoint", str(checkpoint), "--out", str(out), "--workers", "2"]
    proc = start_cli("predict", *args, "--no-preview")
    deadline = time.time() + 400
    while len(list(out.glob("*_stats.json"))) < 4:
        assert proc.poll() is None, proc.communicate()[1]
        assert time.time() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 20
    while time.time() < deadline:  # no worker outlives the job
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        pytest.fail("workers of the killed job are still running")
    for path in [*out.glob("*_class.tif"), *out.glob("*_prob.tif")]:
        assert cog_validate(str(path))[0], path  # every map present is whole
    complete = {
        f"{n}_naip.tif"
        for n, *_ in REGION
        if (out / f"{n}_naip_class.tif").is_file() and (out / f"{n}_naip_prob.tif").is_file()
    }
    assert 0 < len(complete) < len(REGION)

    result = predict(*args, "--no-preview")
    assert result.returncode == 0, result.stderr
    statuses = tiles_by_status(out)
    assert statuses["skipped"] == complete
    assert statuses["done"] == {f"{n}_naip.tif" for n, *_ in REGION} - complete
    assert not [p for p in out.rglob(".*")], "temporary files left"
    for n, *_ in REGION:
        for kind in ("class", "prob"):
            assert cog_validate(str(out / f"{n}_naip_{kind}.tif"))[0]


@pytest.mark.slow
def test_a_killed_worker_is_restarted_and_skips_the_done_tiles(
    region: Path, checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "maps"
    proc = start_cli(
        "predict", str(region), "--checkpoint", str(checkpoint), "--out", str(out),
        "--workers", "2", "--max-restarts", "1", "--no-preview",
    )  # fmt: skip
    pid = int(wait_for_log(out / "logs" / "rank1.log", r"rank 1/2: pid (\d+)", proc).group(1))
    wait_for_log(out / "logs" / "rank1.log", r" -> .*_class\.tif", proc, poll=0.05)
    done_before = {p.name.replace("_stats.json", ".tif") for p in out.glob("*_stats.json")}
    os.kill(pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert f"worker local rank 1 (pid {pid}) was killed by signal SIGKILL" in err
    statuses = tiles_by_status(out)
    assert set().union(*statuses.values()) == {f"{n}_naip.tif" for n, *_ in REGION}
    assert done_before <= statuses["skipped"]  # the restarted group did not redo them
    assert set(statuses) <= {"done", "skipped"}
    assert "restarting the worker group (restart 1 of 1)" in err


# --- failures ----------------------------------------------------------------------------------


@pytest.fixture
def with_corrupt_tile(region: Path, tmp_path: Path) -> Path:
    """Three good tiles and, largest of all, a tile whose data stop half way."""
    tiles = tmp_path / "tiles"
    tiles.mkdir()
    for name in ("a2", "a7", "b1"):
        shutil.copy(region / f"{name}_naip.tif", tiles)
    bad = write_image(tiles / "bad_naip.tif", 256, 256, "EPSG:26918", 1.0, (402000, 4300000), 99)
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    return tiles


def _failure_lines(stderr: str, name: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "failed: " in ln and name in ln]


@pytest.mark.slow
def test_a_corrupt_tile_fails_alone(with_corrupt_tile: Path, checkpoint: Path, tmp_path: Path):
    out = tmp_path / "maps"
    result = predict(
        str(with_corrupt_tile), "--checkpoint", str(checkpoint), "--out", str(out),
        "--workers", "2", "--no-preview",
    )  # fmt: skip
    assert_one_line_error(result, "1 of 4 tiles failed", "bad_naip.tif", "summary.csv")
    assert len(_failure_lines(result.stderr, "bad_naip.tif")) == 1
    share = max(1, len(os.sched_getaffinity(0)) // 2)  # 2 workers split torch's cores
    for rank in (0, 1):
        log = (out / "logs" / f"rank{rank}.log").read_text()
        assert f"{share} torch threads, GDAL threads ALL_CPUS" in log  # GDAL: every core
    rows = {
        Path(r["tile"]).name: r
        for r in csv.DictReader((out / "summary.csv").read_text().splitlines())
    }
    assert rows["bad_naip.tif"]["status"] == "failed"
    # cut off half way: GDAL opens it and fails at the first block that is not there
    error = rows["bad_naip.tif"]["error"]
    assert re.search(r"bad_naip\.tif: (not a readable GeoTIFF|cannot read rows)", error), error
    for name in ("a2", "a7", "b1"):
        assert rows[f"{name}_naip.tif"]["status"] == "done"
        assert cog_validate(str(out / f"{name}_naip_class.tif"))[0]
    assert not (out / "bad_naip_class.tif").exists()
    assert not [p for p in out.rglob(".*")]


@pytest.mark.slow
def test_fail_fast_stops_at_the_first_failure(
    with_corrupt_tile: Path, checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "maps"
    result = predict(
        str(with_corrupt_tile), "--checkpoint", str(checkpoint), "--out", str(out),
        "--fail-fast", "--no-preview",
    )  # fmt: skip
    assert_one_line_error(result, "--fail-fast", "3 of 4 tiles not run", "bad_naip.tif")
    assert tiles_by_status(out) == {
        "failed": {"bad_naip.tif"},  # the largest tile: claimed first
        "not_run": {"a2_naip.tif", "a7_naip.tif", "b1_naip.tif"},
    }
    assert not list(out.glob("*_class.tif"))


@pytest.mark.slow
def test_list_file_with_missing_and_wrong_band_tiles(
    region: Path, checkpoint: Path, tmp_path: Path
) -> None:
    with rasterio.open(region / "a7_naip.tif") as ds:
        rgb, profile = ds.read([1, 2, 3]), ds.profile
    profile.update(count=3)
    with rasterio.open(tmp_path / "rgb.tif", "w", **profile) as ds:
        ds.write(rgb)
    bad = write_image(tmp_path / "bad.tif", 256, 256, "EPSG:26918", 1.0, (402000, 4300000), 9)
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])  # fails while predicted
    listing = tmp_path / "tiles.txt"
    listing.write_text(
        f"# tiles of the job\n{region / 'a7_naip.tif'}\nrgb.tif\n\nnone.tif\n"
        f"{region / 'f1_naip.tif'}\nbad.tif\n"
    )
    out = tmp_path / "maps"
    result = predict(f"@{listing}", "--checkpoint", str(checkpoint), "--out", str(out))
    line = assert_one_line_error(result, "3 of 5 tiles failed")
    assert len(_failure_lines(result.stderr, "has 3 bands, the checkpoint expects 4")) == 1
    assert len(_failure_lines(result.stderr, "none.tif")) == 1
    assert len(_failure_lines(result.stderr, "bad.tif")) == 1
    # the error's "first:" is the first failure the log showed (the refused tiles come
    # before the job starts), not the one the largest-first order puts first
    logged = re.search(r"tile \d+ of 5 failed: (.*)", result.stderr)
    assert logged and f"(first: {logged.group(1)})" in line, (line, result.stderr)
    # the progress line counts the two refused before the job started, as the summary does
    assert "tiles 5/5 (2 predicted, 0 skipped, 3 failed)" in result.stderr
    assert tiles_by_status(out) == {
        "done": {"a7_naip.tif", "f1_naip.tif"},
        "failed": {"rgb.tif", "none.tif", "bad.tif"},
    }


def test_a_bad_worker_count_is_one_line(tmp_path: Path) -> None:
    result = predict(
        str(tmp_path), "--checkpoint", str(tmp_path / "x.pt"), "--out", str(tmp_path / "o"),
        "--workers", "four",
    )  # fmt: skip
    assert_one_line_error(result, "--workers four: a number of processes (1 or more) or auto")
    assert not (tmp_path / "o").exists()


def test_several_nodes_need_a_rendezvous_endpoint(tmp_path: Path) -> None:
    result = predict(str(tmp_path), "--checkpoint", str(tmp_path / "x.pt"), "--nnodes", "2")
    assert_one_line_error(result, "--rdzv-endpoint")


# --- inputs ------------------------------------------------------------------------------------


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_a_folder_names_the_images_it_leaves_out_and_a_bracketed_name_is_a_file(
    tmp_path: Path,
) -> None:
    """A folder of *_naip.tif tiles maps only those (not their labels), and names the other
    GeoTIFFs it leaves out; a file whose name looks like a glob is that file, and a folder
    named like a file is a folder."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    names = ("a_naip.tif", "a_lc.tif", "m_4709963_se_14_1_20180716.tif", "good.tif", "b[1].tif")
    for name in names:
        write_image(folder / name, 16, 16, "EPSG:26918", 1.0, (400000, 4300000), 0)
    (folder / "other").mkdir()  # a label of the same stem, but not beside its image
    write_image(folder / "other" / "a_lc.tif", 16, 16, "EPSG:26918", 1.0, (400000, 4300000), 0)
    records = _Records()
    logger = logging.getLogger("landcover")
    logger.addHandler(records)
    try:
        assert resolve_tiles([str(folder)]) == [str(folder / "a_naip.tif")]
    finally:
        logger.removeHandler(records)
    assert len(records.lines) == 1, records.lines
    line = records.lines[0]
    assert "4 GeoTIFF(s) left out" in line and "a_lc.tif" not in line.replace("other/a_lc.tif", "")
    for name in ("m_4709963_se_14_1_20180716.tif", "good.tif", "b[1].tif"):
        assert name in line
    # an existing file named like a glob is that file, beside a real glob
    bracket = str(folder / "b[1].tif")
    assert resolve_tiles([bracket, str(folder / "g*.tif")]) == [bracket, str(folder / "good.tif")]
    with pytest.raises(DataError, match="no files match"):
        resolve_tiles([str(folder / "c[1].tif")])  # no such file: a glob that matches nothing
    # a folder named like an image, a manifest or a glob is a folder ("file not found" before)
    for odd in ("x.tif", "tiles.csv", "d[1]"):
        (tmp_path / odd).mkdir()
        shutil.copy(folder / "a_naip.tif", tmp_path / odd / "t_naip.tif")
        assert resolve_tiles([str(tmp_path / odd)]) == [str(tmp_path / odd / "t_naip.tif")]


def test_the_bounds_of_a_rotated_grid_hold_its_four_corners(tmp_path: Path) -> None:
    """The STAC item's proj:bbox of a rotated or sheared tile (Grid.bounds) envelops all four
    corners, not only the first and the last."""
    for name, turn in (("rotated", Affine.rotation(20)), ("sheared", Affine.shear(15, 10))):
        transform = Affine(1.0, 0, 350000, 0, -1.0, 4300000) * turn
        with rasterio.open(
            tmp_path / f"{name}.tif",
            "w",
            driver="GTiff",
            width=160,
            height=120,
            count=1,
            dtype="uint8",
            crs="EPSG:26918",
            transform=transform,
        ) as ds:
            grid = Grid.of(ds)
        corners = [transform * (col, row) for col in (0, 160) for row in (0, 120)]
        xs, ys = [x for x, _ in corners], [y for _, y in corners]
        assert grid.bounds == pytest.approx((min(xs), min(ys), max(xs), max(ys)))


def test_inputs_from_folders_globs_lists_and_manifests(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    for name, size in (("a_naip", 40), ("b_naip", 48), ("sub/c_naip", 32), ("b_lc", 48)):
        write_image(data / f"{name}.tif", size, size, "EPSG:26918", 1.0, (400000, 4300000), 0)
    for ours in ("a_naip_class.tif", "a_naip_prob.tif", ".a_naip_class.tif.x1.tmp"):
        shutil.copy(data / "a_naip.tif", data / ours)
    a, b, c = str(data / "a_naip.tif"), str(data / "b_naip.tif"), str(data / "sub" / "c_naip.tif")
    # a folder: its images (the checkpoint's suffix) and below, not labels nor our maps
    assert resolve_tiles([str(data)]) == [a, b, c]
    other = tmp_path / "other"
    other.mkdir()
    for name in ("x.tif", "y.TIFF", "y_class.tif", "notes.txt"):
        shutil.copy(data / "a_naip.tif", other / name)
    # no file name with the suffix: every GeoTIFF but our maps
    assert resolve_tiles([str(other)]) == [str(other / "x.tif"), str(other / "y.TIFF")]
    # a glob: what it matches, but not our maps nor the images' partners (b_lc.tif)
    assert resolve_tiles([str(data / "*.tif")]) == [a, b]
    assert resolve_tiles([str(data / "*_lc.tif")]) == [str(data / "b_lc.tif")]
    # list files (relative to their folder, comments and blank lines skipped) and manifests
    listing = tmp_path / "tiles.txt"
    listing.write_text(f"# region\ndata/sub/c_naip.tif\n\n{a}\n")
    assert resolve_tiles([f"@{listing}"]) == resolve_tiles([str(listing)]) == [c, a]
    manifest = tmp_path / "manifest.csv"
    manifest.write_text("image,label\ndata/b_naip.tif,data/b_lc.tif\n")
    assert resolve_tiles([str(manifest), a, b, str(data / "sub" / ".." / "b_naip.tif")]) == [b, a]
    with pytest.raises(DataError, match=r"would both write a_naip_class\.tif"):
        shutil.copy(data / "a_naip.tif", other / "a_naip.tif")
        resolve_tiles([a, str(other / "x.tif"), str(other / "a_naip.tif")])
    with pytest.raises(DataError, match="list file not found"):
        resolve_tiles([f"@{tmp_path / 'none.txt'}"])
    for text, message in (
        ("path\nx.tif\n", "manifest needs the column image$"),
        ("image,label\n,x_lc.tif\n", "line 2 has an empty image$"),
        ("image\n", "manifest lists no tiles$"),
    ):
        (tmp_path / "bad.csv").write_text(text)
        with pytest.raises(DataError, match=message):
            resolve_tiles([str(tmp_path / "bad.csv")])
    with pytest.raises(DataError, match="no files match"):
        resolve_tiles([str(tmp_path / "*.jp2")])
    # measured: largest first; those that cannot be predicted last, with their error
    with rasterio.open(b) as ds:
        profile = ds.profile | {"count": 3}
        rgb = ds.read([1, 2, 3])
    with rasterio.open(tmp_path / "rgb.tif", "w", **profile) as ds:
        ds.write(rgb)
    entries = measure_tiles([a, c, str(tmp_path / "rgb.tif"), b, str(tmp_path / "no.tif")], 4)
    assert [(Path(e.path).name, e.cost) for e in entries[:3]] == [
        ("b_naip.tif", 48 * 48), ("a_naip.tif", 40 * 40), ("c_naip.tif", 32 * 32)
    ]  # fmt: skip
    errors = {Path(e.path).name: e.error for e in entries[3:]}
    assert "rgb.tif: has 3 bands, the checkpoint expects 4" in errors["rgb.tif"]
    assert "no.tif: file not found" in errors["no.tif"]


@pytest.mark.slow
def test_tiles_and_maps_on_blob_storage(
    azurite, region: Path, checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = azurite.env("connection_string")
    container = azurite.create_container()
    tiles = tmp_path / "tiles"
    tiles.mkdir()
    names = ("a7", "b1", "c1")
    for name in names:
        shutil.copy(region / f"{name}_naip.tif", tiles)
    assert run_cli("data", "upload", str(tiles), f"az://{container}/tiles", env=env).returncode == 0
    maps = f"az://{container}/maps"
    args = [f"az://{container}/tiles", "--checkpoint", str(checkpoint), "--out", maps]
    first = predict(*args, env=env)
    assert first.returncode == 0, first.stderr
    local = tmp_path / "maps"
    assert run_cli("data", "download", maps, str(local), env=env).returncode == 0
    assert tiles_by_status(local) == {"done": {f"{n}_naip.tif" for n in names}}
    for name in names:
        for kind in ("class", "prob"):
            assert cog_validate(str(local / f"{name}_naip_{kind}.tif"))[0]
        with (
            rasterio.open(local / f"{name}_naip_class.tif") as out,
            rasterio.open(region / f"{name}_naip.tif") as src,
        ):
            assert (out.crs, out.transform, out.shape) == (src.crs, src.transform, src.shape)
        assert (local / f"{name}_naip_preview.png").is_file()
    assert (local / "stac_items.json").is_file() and list(local.glob("mosaic_class*.vrt"))
    # the rerun checks the maps on blob storage (headers and one block) and skips them all
    second = predict(*args, env=env)
    assert second.returncode == 0, second.stderr
    copy = tmp_path / "second"
    assert run_cli("data", "download", maps, str(copy), env=env).returncode == 0
    assert tiles_by_status(copy) == {"skipped": {f"{n}_naip.tif" for n in names}}

    apply_env(monkeypatch, env)
    storage.write_bytes(f"az://{container}/jobs/list.txt", b"../tiles/a7_naip.tif\n")
    listed = resolve_tiles([f"@az://{container}/jobs/list.txt"])
    assert [storage.name(t) for t in listed] == ["a7_naip.tif"]
    assert storage.is_file(listed[0])
    globbed = resolve_tiles([f"az://{container}/tiles/*_naip.tif"])
    assert [storage.name(t) for t in globbed] == [f"{n}_naip.tif" for n in names]
    sizes = {storage.name(e.path): e.cost for e in measure_tiles(globbed, 4)}
    assert sizes == {f"{n}_naip.tif": (tiles / f"{n}_naip.tif").stat().st_size for n in names}


# --- several nodes -----------------------------------------------------------------------------


@pytest.mark.slow
def test_two_nodes_predict_one_job(region: Path, checkpoint: Path, tmp_path: Path) -> None:
    """Two agents as two nodes, in two network namespaces where the machine allows it (plain
    loopback otherwise), share one job's tiles: each tile is predicted once."""
    out = tmp_path / "maps"
    port = free_port()
    with two_hosts() as hosts:
        if hosts is None:
            warnings.warn("no network namespaces here: the two nodes share loopback", stacklevel=1)
        args = [
            "predict", str(region), "--checkpoint", str(checkpoint), "--out", str(out),
            "--no-preview", "--workers", "2", "--nnodes", "2", "--workers-per-node", "1",
            "--rdzv-endpoint", f"{hosts[0].address if hosts else '127.0.0.1'}:{port}",
        ]  # fmt: skip
        nodes = []
        for rank in (0, 1):
            extra, prefix, env = ["--node-rank", str(rank)], None, None
            if hosts:
                host = hosts[rank]
                extra += ["--local-addr", host.address]
                prefix = host.command()
                env = {"GLOO_SOCKET_IFNAME": host.interface}
            nodes.append(start_cli(*args, *extra, prefix=prefix, env=env))
        outputs = [p.communicate(timeout=500) for p in nodes]
    for proc, (_, err) in zip(nodes, outputs, strict=True):
        assert proc.returncode == 0, err
    assert all("starting 1 workers on this node of 2" in err for _, err in outputs)
    tiles = summary(out)["tiles"]
    assert sorted(Path(t["tile"]).name for t in tiles) == sorted(
        f"{n}_naip.tif" for n, *_ in REGION
    )
    assert {t["status"] for t in tiles} == {"done"}
    predicted = {}
    for rank in (0, 1):
        log = (out / "logs" / f"rank{rank}.log").read_text()
        predicted[rank] = {
            Path(line.split(" -> ")[0].split()[-1]).name
            for line in log.splitlines()
            if " -> " in line
        }
        assert predicted[rank] == {Path(t["tile"]).name for t in tiles if t["rank"] == rank}
    assert predicted[0] and predicted[1] and not predicted[0] & predicted[1]


@pytest.mark.slow
def test_each_process_of_an_external_torchrun_is_one_worker(
    region: Path, checkpoint: Path, tmp_path: Path
) -> None:
    out = tmp_path / "maps"
    result = subprocess.run(
        [
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
            "-m", "landcover", "predict", str(region / "a*_naip.tif"), "--checkpoint",
            str(checkpoint), "--out", str(out), "--no-preview",
        ],
        capture_output=True, text=True, timeout=600, cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "starting" not in result.stderr  # no launcher of its own
    tiles = summary(out)["tiles"]
    assert sorted(Path(t["tile"]).name for t in tiles) == [f"a{i}_naip.tif" for i in range(1, 8)]
    assert {t["status"] for t in tiles} == {"done"} and {t["rank"] for t in tiles} == {0, 1}


def test_tiles_not_north_up_are_mapped_but_left_out_of_the_mosaic(
    checkpoint: Path, tmp_path: Path
) -> None:
    """A rotated tile and a south-up one (rows running north, ``e > 0``) get their maps; a VRT
    cannot place them, so the mosaic holds the north-up tile alone, and a warning names each
    (a south-up tile was called "rotated")."""
    tiles = tmp_path / "tiles"
    tiles.mkdir()
    image, _ = synthesize_scene(64, 64, np.random.default_rng(0))
    grids = {
        "north_naip.tif": Affine(1.0, 0, 400000, 0, -1.0, 4300000),
        "rotated_naip.tif": Affine(1.0, 0, 400100, 0, -1.0, 4300000) * Affine.rotation(20),
        "south_naip.tif": Affine(1.0, 0, 400200, 0, 1.0, 4299936),
    }
    for name, transform in grids.items():
        profile = {"driver": "GTiff", "width": 64, "height": 64, "count": 4, "dtype": "uint8"}
        with rasterio.open(
            tiles / name, "w", **profile, crs="EPSG:26918", transform=transform
        ) as dst:
            dst.write(image)
    out = tmp_path / "maps"
    outcome = predict_here(tiles, checkpoint, out, preview=False)
    assert not outcome.failed
    for name, transform in grids.items():  # every tile is mapped, on its own grid
        with rasterio.open(out / name.replace(".tif", "_class.tif")) as cls:
            assert cls.transform == transform
    log_lines = (out / "logs" / "rank0.log").read_text().splitlines()
    warned = [line.split(" WARNING ", 1)[1] for line in log_lines if "of the mosaic" in line]
    assert sorted(Path(w.split(": ")[0]).name for w in warned) == [
        "rotated_naip.tif",
        "south_naip.tif",
    ]
    assert all("not north-up" in w for w in warned), warned
    (vrt,) = out.glob("mosaic_class*.vrt")
    with rasterio.open(vrt) as mosaic:
        assert mosaic.bounds == (400000, 4300000 - 64, 400064, 4300000)


def test_the_job_line_moves_while_a_tile_is_predicted(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Each worker counts its tile's rows as they are predicted: the job's line shows a
    share, a rate and an ETA before the first tile is finished."""
    tile = write_image(tmp_path / "big_naip.tif", 1280, 1280, "EPSG:26918", 1.0, (4e5, 43e5), 9)
    capsys.readouterr()
    predict_here(tile, checkpoint, tmp_path / "maps", log_every_s=0.05, probs=False)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "tiles 0/1 (" in ln]
    found = [re.search(r"(\d+\.\d+) Mpx/s, (\d+) % ETA", ln) for ln in lines]
    moving = [(float(m.group(1)), int(m.group(2))) for m in found if m]
    assert moving and all(rate > 0 for rate, _ in moving), lines  # mid-tile: pixels, share
    shares = [share for _, share in moving]
    assert shares == sorted(shares) and 0 < shares[-1] <= 100, shares
    # what the worker counts: the mapper's rows as each strip is done, not once at the end
    from landcover.inference.loader import load_inference_model
    from landcover.inference.predict import TileMapper

    calls: list[tuple[float, int]] = []
    im = load_inference_model(str(checkpoint), "cpu")
    with TileMapper(im, PredictOptions(str(tmp_path / "again"), window=256, probs=False)) as m:
        m.on_rows = lambda share, pixels: calls.append((share, pixels))
        m.submit(str(tile)).result()
    inside = [share for share, _ in calls if 0 < share < 1]
    assert len(inside) >= 2 and calls[-1] == (1.0, 1280 * 1280), calls
    assert calls == sorted(calls), calls


def test_the_stac_collection_resolves_odd_names_and_keeps_no_query(
    checkpoint: Path, tmp_path: Path
) -> None:
    """A tile name with a space and brackets, an output folder with a query: pystac resolves
    the plain relative hrefs, and the collection's id was the query made '-'s (unredacted)."""
    secret = "COLLECTIONSECRET1"
    tile = write_image(tmp_path / "a b[1]_naip.tif", 96, 96, "EPSG:26918", 1.0, (4e5, 43e5), 4)
    out = tmp_path / f"maps?sv=1&sig={secret}"
    result = predict(str(tile), "--checkpoint", str(checkpoint), "--out", str(out))
    assert result.returncode == 0, result.stderr
    written = [p for p in out.iterdir() if p.suffix == ".json"]
    assert not [p.name for p in written if secret in p.read_text()]
    assert json.loads((out / "collection.json").read_text())["id"] == "maps-sv-sig"
    # pystac reads a '?' in a local path as a URL's query: the folder, moved, without it
    out = Path(shutil.copytree(out, tmp_path / "maps"))
    collection = pystac.Collection.from_file(str(out / "collection.json"))
    (item,) = collection.get_items()
    assert item.id == "a b[1]_naip"
    for asset in item.assets.values():
        assert Path(asset.get_absolute_href()).is_file(), asset.href
    derived = item.get_single_link("derived_from").get_absolute_href()
    assert Path(derived) == tile  # relative: the copy sits beside the first folder
