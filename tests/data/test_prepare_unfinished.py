"""A failed ``data prepare`` leaves no folder that ``train`` reads as data (issue 42, item 5).

The failure is a real one: a label raster whose right half holds a code outside the class
mapping, so the first (left) tile pair is complete when the second tile fails. Every command
is a real ``python -m landcover`` subprocess.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import rasterio
from rasterio.transform import Affine

from conftest import assert_one_line_error, run_cli

GRID = Affine(1.0, 0.0, 500_000.0, 0.0, -1.0, 4_000_000.0)
SUBPROCESS = {"LANDCOVER_TEST_SUBPROCESS": "1"}


def write_inputs(folder: Path, bad_code: bool) -> tuple[Path, Path]:
    """A 64 x 128 image and its label on the same grid; ``bad_code``: code 42 at x >= 64."""
    folder.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(0).integers(20, 230, size=(4, 64, 128), dtype=np.uint8)
    codes = np.random.default_rng(1).integers(1, 7, size=(64, 128)).astype(np.uint8)
    if bad_code:
        codes[10, 100] = 42
    common = {"driver": "GTiff", "height": 64, "width": 128, "dtype": "uint8", "crs": "EPSG:26918"}
    image, label = folder / "big.tif", folder / "big_lc.tif"
    with rasterio.open(image, "w", count=4, transform=GRID, nodata=0, **common) as ds:
        ds.write(pixels)
    with rasterio.open(label, "w", count=1, transform=GRID, nodata=15, **common) as ds:
        ds.write(codes[None])
    return image, label


def prepare(image: Path, label: Path, out: Path):
    return run_cli(
        "data", "prepare", "--images", str(image), "--labels", str(label), "--out", str(out),
        "--tile-size", "64", env=SUBPROCESS,
    )  # fmt: skip


def train(data: Path, config: Path, run: Path):
    return run_cli(
        "train", "--config", str(config), "--data", str(data), "--out", str(run), "--epochs", "1",
        env=SUBPROCESS,
    )  # fmt: skip


def test_a_failed_prepare_into_a_new_folder_leaves_nothing(tmp_path: Path) -> None:
    image, label = write_inputs(tmp_path / "in", bad_code=True)
    out = tmp_path / "tiles"
    result = prepare(image, label, out)
    assert_one_line_error(result, str(label), "42")
    assert not out.exists() or not list(out.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]  # no staging folder left either


def test_a_failed_prepare_into_a_folder_of_files_leaves_it_as_it_was(
    tmp_path: Path, tiny_config: Path
) -> None:
    """The new set is written inside, hidden, and moved in only when whole: a failure leaves
    the folder's files as they were (it once held the first pair, marked unfinished)."""
    image, label = write_inputs(tmp_path / "in", bad_code=True)
    out = tmp_path / "tiles"
    out.mkdir()
    (out / "README.txt").write_text("tiles of the big image\n")  # a folder that holds files
    failed = prepare(image, label, out)
    assert_one_line_error(failed, str(label), "42")
    assert sorted(p.name for p in out.iterdir()) == ["README.txt"]  # no pair, no scratch

    image, label = write_inputs(tmp_path / "in", bad_code=False)
    done = prepare(image, label, out)
    assert done.returncode == 0, done.stderr
    with (out / "manifest.csv").open() as f:
        assert [row["image"] for row in csv.DictReader(f)] == [
            "big_r000_c000_naip.tif",
            "big_r000_c001_naip.tif",
        ]
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []
    checked = run_cli("data", "check", str(out), env=SUBPROCESS)
    assert checked.returncode == 0, checked.stderr


def test_a_folder_whose_moves_were_interrupted_is_refused_until_a_rerun_replaces_it(
    tmp_path: Path, tiny_config: Path
) -> None:
    """A Ctrl-C while the finished set's files move in leaves the marker beside a mix of the
    two sets: train refuses the folder, and a rerun replaces every pair there."""
    image, label = write_inputs(tmp_path / "in", bad_code=False)
    out = tmp_path / "tiles"
    assert prepare(image, label, out).returncode == 0
    (out / "old_r000_c000_naip.tif").write_bytes((out / "big_r000_c000_naip.tif").read_bytes())
    (out / ".landcover-prepare-incomplete").write_text("moving\n")  # stopped mid-move
    refused = train(out, tiny_config, tmp_path / "run")
    assert_one_line_error(refused, str(out), "data prepare", "did not finish")
    done = prepare(image, label, out)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "big_r000_c000_lc.tif",
        "big_r000_c000_naip.tif",
        "big_r000_c001_lc.tif",
        "big_r000_c001_naip.tif",
        "manifest.csv",
    ]  # the other set's pair gone with the marker


def test_a_prepare_into_a_new_folder_writes_it_whole(tmp_path: Path) -> None:
    image, label = write_inputs(tmp_path / "in", bad_code=False)
    out = tmp_path / "deep" / "tiles"
    result = prepare(image, label, out)
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "big_r000_c000_lc.tif",
        "big_r000_c000_naip.tif",
        "big_r000_c001_lc.tif",
        "big_r000_c001_naip.tif",
        "manifest.csv",
    ]
    assert sorted(p.name for p in out.parent.iterdir()) == ["tiles"]
    with rasterio.open(out / "big_r000_c001_lc.tif") as ds, rasterio.open(label) as src:
        np.testing.assert_array_equal(ds.read(1), src.read(1)[:, 64:])
    assert (out.stat().st_mode & 0o777) == (out.parent.stat().st_mode & 0o777)  # umask's


def test_a_second_prepare_into_a_prepared_folder_is_refused_and_overwrite_replaces_it(
    tmp_path: Path,
) -> None:
    """A rerun at another tile size wrote its pairs among the earlier ones (4 names rewritten,
    the rest left): train read both sets. Refused now; --overwrite replaces the set once the
    new one is whole, and a failed --overwrite keeps the earlier set."""
    image, label = write_inputs(tmp_path / "in", bad_code=False)
    out = tmp_path / "tiles"
    assert prepare(image, label, out).returncode == 0
    (out / "README.txt").write_text("tiles of the big image\n")  # the user's: always kept
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    again = [*("data", "prepare", "--images", str(image), "--labels", str(label)),
             *("--out", str(out), "--tile-size", "32")]  # fmt: skip
    refused = run_cli(*again, env=SUBPROCESS)
    assert_one_line_error(refused, str(out), "earlier prepare's 2 tile pair(s)", "--overwrite")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before

    bad_image, bad_label = write_inputs(tmp_path / "bad", bad_code=True)
    failed = run_cli(
        "data", "prepare", "--images", str(bad_image), "--labels", str(bad_label),
        "--out", str(out), "--tile-size", "32", "--overwrite", env=SUBPROCESS,
    )  # fmt: skip
    assert_one_line_error(failed, str(bad_label), "42")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the earlier set, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "in", "tiles"]  # no staging

    replaced = run_cli(*again, "--overwrite", env=SUBPROCESS)
    assert replaced.returncode == 0, replaced.stderr
    expected = [f"big_r{r:03d}_c{c:03d}_naip.tif" for r in range(2) for c in range(4)]
    with (out / "manifest.csv").open() as f:
        assert [row["image"] for row in csv.DictReader(f)] == expected
    names = sorted(p.name for p in out.iterdir())
    pairs = sorted(n for e in expected for n in (e, e.replace("_naip", "_lc")))
    assert names == sorted([*pairs, "manifest.csv", "README.txt"])  # no 64 px pair left
    with rasterio.open(out / "big_r001_c003_lc.tif") as ds, rasterio.open(label) as src:
        np.testing.assert_array_equal(ds.read(1), src.read(1)[32:, 96:])
    assert run_cli("data", "check", str(out), env=SUBPROCESS).returncode == 0


def test_pair_files_no_manifest_lists_are_refused_and_never_removed(tmp_path: Path) -> None:
    """Scenes named *_naip.tif in --out (here the inputs themselves): an --overwrite removed
    every pair file the new set did not replace, the user's inputs among them."""
    image, label = write_inputs(tmp_path / "in", bad_code=False)
    scene = tmp_path / "scenes" / "big_naip.tif"
    scene.parent.mkdir()
    scene.write_bytes(image.read_bytes())
    before = {p.name: p.read_bytes() for p in scene.parent.iterdir()}
    for extra in ([], ["--overwrite"]):
        result = run_cli(
            "data", "prepare", "--images", str(scene), "--labels", str(label),
            "--out", str(scene.parent), "--tile-size", "64", *extra, env=SUBPROCESS,
        )  # fmt: skip
        assert_one_line_error(result, "1 *_naip.tif / *_lc.tif file(s) that no manifest.csv")
        assert {p.name: p.read_bytes() for p in scene.parent.iterdir()} == before
