"""Tests of the shifted synthetic world (``landcover data synth --profile shifted``).

One real CLI run writes a small world; the expectations are computed with numpy from the
written GeoTIFFs and CSVs.
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import rasterio
from rasterio.crs import CRS
from scipy.ndimage import find_objects
from scipy.ndimage import label as ndimage_label

from landcover.config import DataConfig
from landcover.data.pairs import discover_pairs, split_pairs
from landcover.synthetic.flights import Ground, flight_plan, shadow_mask
from landcover.synthetic.landscape import ROAD, TREE
from landcover.synthetic.shifted import write_shifted_world
from landcover.synthetic.synthetic import write_synthetic_dataset

from conftest import run_cli

TILES, SIZE, SEED = 6, 192, 3
CLASSES = (1, 2, 3, 4, 5, 6)
BUILDING = 5

# sha256 of the pixel arrays of write_synthetic_dataset(tiles=3, size=64, seed=5), computed with
# the generator as it was before the shifted world was added: the easy sample must not change.
EASY_SHA256 = "83c0dd2d719ec2fa99752b7f1458bc2382b0bbddba1d2fef6302b90a423ee0ca"


def _read(path: Path) -> np.ndarray:
    with rasterio.open(path) as src:
        return src.read()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("shifted") / "world"
    args = ["--profile", "shifted", "--tiles", str(TILES), "--size", str(SIZE)]
    result = run_cli("data", "synth", str(out), *args, "--seed", str(SEED))
    assert result.returncode == 0, result.stderr
    assert "6 train, 6 train_reflown, 2 val, 3 test tile pairs" in result.stdout
    return out


@pytest.fixture(scope="module")
def rows(world: Path) -> list[dict[str, str]]:
    with (world / "flights.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*.*")}


def test_layout_and_grids(world: Path, rows: list[dict[str, str]]) -> None:
    counts = {"train": TILES, "train_reflown": TILES, "val": 2, "test": 3}
    for split, n in counts.items():
        pairs = discover_pairs(str(world / split), "_naip.tif", "_lc.tif")
        assert len(pairs) == n
        for pair in pairs:
            with rasterio.open(pair.image) as img, rasterio.open(pair.label) as lab:
                assert img.crs == lab.crs == CRS.from_epsg(26918)
                assert img.transform == lab.transform and img.res == (1.0, 1.0)
                assert (img.width, img.height) == (lab.width, lab.height) == (SIZE, SIZE)
                assert img.count == 4 and img.dtypes == ("uint8",) * 4 and lab.count == 1
    assert sorted({r["split"] for r in rows}) == sorted(counts)
    assert len(rows) == sum(counts.values())


def test_flights_of_each_split_are_disjoint(rows: list[dict[str, str]]) -> None:
    flights = {
        s: {r["flight"] for r in rows if r["split"] == s} for s in {r["split"] for r in rows}
    }
    assert len(flights["train"]) == 3
    for other in ("val", "test", "train_reflown"):
        assert flights[other] and not flights[other] & flights["train"]
    assert not flights["train_reflown"] & (flights["val"] | flights["test"])


def test_reflown_labels_identical_imagery_shifted(world: Path) -> None:
    for label in sorted((world / "train").glob("*_lc.tif")):
        reflown = world / "train_reflown" / label.name
        assert reflown.read_bytes() == label.read_bytes()
        lab = _read(label)[0]
        name = label.name.replace("_lc.tif", "_naip.tif")
        a = _read(world / "train" / name).astype(np.float64)
        b = _read(world / "train_reflown" / name).astype(np.float64)
        trees = lab == TREE
        per_band = np.abs(a[:, trees] - b[:, trees]).mean(axis=1)
        assert per_band.max() >= 25.0, per_band


def _class_means(world: Path, rows: list[dict[str, str]], code: int) -> dict[str, np.ndarray]:
    """Per-flight mean R, G, B, NIR over the pixels of one label class."""
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    for r in rows:
        lab = _read(world / r["split"] / f"{r['tile']}_lc.tif")[0]
        img = _read(world / r["split"] / f"{r['tile']}_naip.tif").astype(np.float64)
        mask = lab == code
        sums[r["flight"]] = sums.get(r["flight"], 0) + img[:, mask].sum(axis=1)
        counts[r["flight"]] = counts.get(r["flight"], 0) + int(mask.sum())
    return {f: sums[f] / counts[f] for f in sums if counts[f]}


def test_flights_differ_and_autumn_lowers_vegetation_nir(
    world: Path, rows: list[dict[str, str]]
) -> None:
    trees = _class_means(world, rows, TREE)
    gaps = [np.abs(trees[a] - trees[b]).max() for a in trees for b in trees if a < b]
    assert max(gaps) >= 15.0
    seasons = {r["flight"]: r["season"] for r in rows}
    fields = _class_means(world, rows, 3)
    ratio = {
        f: (trees[f][3] + fields[f][3]) / (trees[f][0] + fields[f][0]) for f in trees if f in fields
    }
    autumn = [ratio[f] for f in ratio if seasons[f] == "autumn"]
    summer = [ratio[f] for f in ratio if seasons[f] == "summer"]
    assert autumn and summer
    assert max(autumn) < min(summer)


def test_rare_buildings_and_every_class_in_every_split(
    world: Path, rows: list[dict[str, str]]
) -> None:
    counts: dict[str, np.ndarray] = {}
    for r in rows:
        lab = _read(world / r["split"] / f"{r['tile']}_lc.tif")[0]
        counts[r["split"]] = counts.get(r["split"], 0) + np.bincount(lab.ravel(), minlength=16)
    for split in ("train", "val", "test"):
        assert all(counts[split][c] > 0 for c in CLASSES), (split, counts[split])
    train = counts["train"]
    share = train[BUILDING] / train[list(CLASSES)].sum()
    assert 0.0 < share <= 0.005


def test_buildings_are_small_and_roads_break_under_canopy(
    world: Path, rows: list[dict[str, str]]
) -> None:
    sides = []
    for r in rows:
        lab = _read(world / r["split"] / f"{r['tile']}_lc.tif")[0]
        for box in find_objects(ndimage_label(lab == BUILDING)[0]):
            sides += [box[0].stop - box[0].start, box[1].stop - box[1].start]
        if r["kind"] == "forest":  # one road crosses a forest tile; the canopy hides pieces
            assert ndimage_label(lab == ROAD)[1] >= 2, r["tile"]
    assert sides and min(sides) >= 7 and max(sides) <= 21


def test_class_mix_varies_by_tile(world: Path, rows: list[dict[str, str]]) -> None:
    shares = []
    for r in rows:
        lab = _read(world / r["split"] / f"{r['tile']}_lc.tif")[0]
        shares.append(np.bincount(lab.ravel(), minlength=16) / lab.size)
    assert max(s[TREE] for s in shares) > 0.6
    assert max(s[3] for s in shares) > 0.4
    assert min(s[TREE] for s in shares) < 0.3


def test_manifest_serves_data_manifest(world: Path) -> None:
    config = DataConfig(manifest=str(world / "manifest.csv"))
    train, val = split_pairs(config, str(world))
    assert [p.image for p in train] == sorted(str(p) for p in (world / "train").glob("*_naip.tif"))
    assert [Path(p.image).parent.name for p in val] == ["val", "val"]
    with (world / "manifest.csv").open(newline="") as handle:
        splits = [row["split"] for row in csv.DictReader(handle)]
    assert splits.count("test") == 3


def test_same_seed_same_bytes_in_process(world: Path, tmp_path: Path) -> None:
    write_shifted_world(tmp_path / "again", tiles=TILES, size=SIZE, seed=SEED)
    assert _files(tmp_path / "again") == _files(world)
    other = write_shifted_world(tmp_path / "other", tiles=1, size=128, seed=SEED + 1)
    assert other[0].image.read_bytes() != (world / "train" / other[0].image.name).read_bytes()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="size must be >= 128"):
        write_shifted_world("unused", tiles=2, size=64, seed=0)
    with pytest.raises(ValueError, match="tiles must be >= 1"):
        write_shifted_world("unused", tiles=0, size=128, seed=0)


def test_shadows_fall_away_from_the_sun() -> None:
    app = np.full((40, 40), 3, dtype=np.uint8)
    app[18:22, 18:22] = TREE
    zeros = np.zeros((40, 40), dtype=np.float32)
    ground = Ground(
        app=app,
        means=np.zeros((256, 4), np.float32),
        mult=zeros + 1,
        parcel=zeros.astype(np.int32),
        parcel_offsets=np.zeros((1, 4), np.float32),
        crown=zeros,
        tree_height=10.0,
        building_height=5.0,
    )
    flight = replace(flight_plan(0)["train"][0], sun_elevation=45.0)
    south = shadow_mask(ground, replace(flight, sun_azimuth=180.0))
    rows, cols = np.nonzero(south)
    assert rows.min() == 18 - 10 and rows.max() == 17  # north of the trees, h / tan(el) long
    assert set(cols.tolist()) == set(range(18, 22))
    west = shadow_mask(ground, replace(flight, sun_azimuth=270.0))
    rows, cols = np.nonzero(west)
    assert cols.min() == 22 and cols.max() == 22 + 9 and set(rows.tolist()) == set(range(18, 22))


def test_easy_profile_unchanged(tmp_path: Path) -> None:
    digest = hashlib.sha256()
    for image, label in write_synthetic_dataset(tmp_path, tiles=3, size=64, seed=5):
        digest.update(_read(image).tobytes())
        digest.update(_read(label).tobytes())
    assert digest.hexdigest() == EASY_SHA256
