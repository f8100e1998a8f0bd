"""Tests of the synthetic NAIP / Chesapeake GeoTIFF generator (real files read back)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rasterio
from rasterio.crs import CRS

from landcover.synthetic.synthetic import (
    CHESAPEAKE_NODATA,
    synthesize_scene,
    write_pair,
    write_synthetic_dataset,
)

from conftest import assert_one_line_error, run_cli

CLASSES = {1, 2, 3, 4, 5, 6}


def _read(path: Path) -> np.ndarray:
    with rasterio.open(path) as src:
        return src.read()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Path, Path]]:
    return write_synthetic_dataset(tmp_path_factory.mktemp("synth"), tiles=3, size=256, seed=0)


def test_pairs_share_grid(dataset: list[tuple[Path, Path]]) -> None:
    assert [p.name for p in dataset[0]] == ["synth_000_naip.tif", "synth_000_lc.tif"]
    transforms = set()
    for image_path, label_path in dataset:
        with rasterio.open(image_path) as img, rasterio.open(label_path) as lab:
            assert img.crs == lab.crs == CRS.from_epsg(26918)
            assert img.transform == lab.transform
            assert (img.width, img.height) == (lab.width, lab.height) == (256, 256)
            assert img.res == lab.res == (1.0, 1.0)
            assert img.count == 4 and img.dtypes == ("uint8",) * 4
            assert lab.count == 1 and lab.dtypes == ("uint8",)
            assert img.nodata == 0 and lab.nodata == CHESAPEAKE_NODATA
            assert img.descriptions == ("red", "green", "blue", "nir")
            assert img.profile["compress"] == "deflate" and img.block_shapes[0] == (256, 256)
            transforms.add(img.transform)
    assert len(transforms) == len(dataset)  # tiles at different origins


def test_labels_hold_classes_and_nodata(dataset: list[tuple[Path, Path]]) -> None:
    seen: set[int] = set()
    for _, label_path in dataset:
        codes = set(np.unique(_read(label_path)).tolist())
        assert codes <= CLASSES | {CHESAPEAKE_NODATA}
        assert len(codes & CLASSES) >= 5
        seen |= codes
    assert len(seen & CLASSES) >= 5
    assert CHESAPEAKE_NODATA in seen


def test_same_seed_identical_bytes_different_seed_differs(tmp_path: Path) -> None:
    a = write_synthetic_dataset(tmp_path / "a", tiles=2, size=64, seed=7)
    b = write_synthetic_dataset(tmp_path / "b", tiles=2, size=64, seed=7)
    c = write_synthetic_dataset(tmp_path / "c", tiles=2, size=64, seed=8)
    for pa, pb, pc in zip(a, b, c, strict=True):
        for fa, fb, fc in zip(pa, pb, pc, strict=True):
            assert fa.read_bytes() == fb.read_bytes()
            assert fa.read_bytes() != fc.read_bytes()
    # Tile i does not depend on how many tiles are written.
    d = write_synthetic_dataset(tmp_path / "d", tiles=1, size=64, seed=7)
    assert d[0][0].read_bytes() == a[0][0].read_bytes()
    assert d[0][1].read_bytes() == a[0][1].read_bytes()
    assert not [p for p in (tmp_path / "a").iterdir() if p.suffix != ".tif"]  # no temp files


def test_spectral_sanity(dataset: list[tuple[Path, Path]]) -> None:
    image = np.concatenate([_read(p).reshape(4, -1) for p, _ in dataset], axis=1)
    label = np.concatenate([_read(p).ravel() for _, p in dataset])
    nir = image[3].astype(np.float64)

    def mean_nir(code: int) -> float:
        assert (label == code).any()
        return float(nir[label == code].mean())

    assert mean_nir(1) < 0.5 * mean_nir(2)  # water dark in NIR, trees bright
    assert mean_nir(3) > mean_nir(6)  # fields brighter than roads in NIR
    green = image[1].astype(np.float64)
    assert green[label == 2].std() > green[label == 3].std()  # crowns textured, fields smooth


def test_image_nodata_matches_label(tmp_path: Path) -> None:
    # Find a tile with an image no-data corner/strip (about a third of tiles have one).
    for seed in range(50):
        image, label = synthesize_scene(96, 96, np.random.default_rng([seed, 0]))
        if (image == 0).any():
            break
    else:
        pytest.fail("no tile with image no-data in 50 seeds")
    image_path, label_path = write_pair(tmp_path, "t", image, label, (400_000.0, 4_300_000.0))
    image, label = _read(image_path), _read(label_path)[0]
    zero_all = (image == 0).all(axis=0)
    assert zero_all.any()
    assert np.array_equal((image == 0).any(axis=0), zero_all)  # 0 only in all bands at once
    assert (label[zero_all] == CHESAPEAKE_NODATA).all()
    assert (label == CHESAPEAKE_NODATA).sum() >= zero_all.sum()


def test_size_64(tmp_path: Path) -> None:
    pairs = write_synthetic_dataset(tmp_path, tiles=2, size=64, seed=1, prefix="tiny")
    assert [p.name for p in pairs[1]] == ["tiny_001_naip.tif", "tiny_001_lc.tif"]
    for image_path, label_path in pairs:
        image, label = _read(image_path), _read(label_path)
        assert image.shape == (4, 64, 64) and label.shape == (1, 64, 64)
        assert set(np.unique(label).tolist()) <= CLASSES | {CHESAPEAKE_NODATA}


def test_scene_arrays_and_bad_input(tmp_path: Path) -> None:
    image, label = synthesize_scene(80, 112, np.random.default_rng(3))
    assert image.shape == (4, 80, 112) and image.dtype == np.uint8
    assert label.shape == (80, 112) and label.dtype == np.uint8
    with pytest.raises(ValueError):
        synthesize_scene(8, 64, np.random.default_rng(0))
    with pytest.raises(ValueError):
        write_pair(tmp_path, "bad", image[:3], label, (0.0, 0.0))
    with pytest.raises(ValueError):
        write_pair(tmp_path, "bad", image, label[:-1], (0.0, 0.0))


def _sizes(folder: Path) -> dict[str, int]:
    sizes = {}
    for path in sorted(folder.glob("*_naip.tif")):
        with rasterio.open(path) as ds:
            sizes[path.name] = ds.width
    return sizes


def test_synth_into_a_folder_of_its_tiles_is_refused_and_overwrite_replaces_them(
    tmp_path: Path,
) -> None:
    """A second ``data synth`` into the same folder would leave a mix (new small tiles beside
    old large ones, silently); it is refused, and ``--overwrite`` writes the new set alone."""
    out = tmp_path / "d"
    first = run_cli("data", "synth", str(out), "--tiles", "3", "--size", "64")
    assert first.returncode == 0, first.stderr
    second = ("data", "synth", str(out), "--tiles", "2", "--size", "32", "--seed", "5")
    assert_one_line_error(run_cli(*second), str(out), "6 synth_* tile files", "--overwrite")
    assert _sizes(out) == {f"synth_00{i}_naip.tif": 64 for i in range(3)}  # untouched
    # another prefix is another set, one that starts with this prefix too: it may share the
    # folder, and --overwrite leaves it
    for prefix in ("b", "synth_b"):
        other = run_cli(
            "data", "synth", str(out), "--tiles", "1", "--size", "32", "--prefix", prefix
        )
        assert other.returncode == 0, other.stderr
    replaced = run_cli(*second, "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    assert _sizes(out) == {
        "b_000_naip.tif": 32,
        "synth_b_000_naip.tif": 32,
        "synth_000_naip.tif": 32,
        "synth_001_naip.tif": 32,
    }
    assert len(list(out.glob("*_lc.tif"))) == 4


def test_a_second_shifted_world_in_a_folder_is_refused_and_overwrite_replaces_it(
    tmp_path: Path,
) -> None:
    """One shifted world a folder: its manifest lists one; another prefix would replace it."""
    out = tmp_path / "w"
    args = ("data", "synth", str(out), "--profile", "shifted", "--tiles", "1", "--size", "128")
    assert run_cli(*args).returncode == 0
    first = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.tif"))
    again = run_cli(*args, "--prefix", "other")
    assert_one_line_error(again, str(out), "files of a shifted world", "--overwrite")
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.tif")) == first
    replaced = run_cli(*args, "--prefix", "other", "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    now = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.tif"))
    assert now == sorted(t.replace("synth_", "other_") for t in first)
    assert "synth_" not in (out / "manifest.csv").read_text()


def test_an_overwrite_stopped_while_it_draws_keeps_the_earlier_set(tmp_path: Path) -> None:
    """--overwrite removed the earlier tiles before drawing the new ones: a Ctrl-C (or a full
    disk) in between left neither set. The new set is drawn beside, then moved in whole."""
    from conftest import interrupt_when, start_cli

    out = tmp_path / "d"
    assert run_cli("data", "synth", str(out), "--tiles", "2", "--size", "64").returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    proc = start_cli("data", "synth", str(out), "--tiles", "40", "--size", "512", "--overwrite")
    drawing = lambda: bool(list(out.glob(".landcover-tmp-synth-*/*_lc.tif")))  # noqa: E731
    _, stderr = interrupt_when(proc, drawing)  # one tile of the new set drawn
    assert proc.returncode == 130, stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # whole, no scratch left


def test_an_overwrite_stopped_while_it_moves_marks_the_folder_until_a_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C between two of the new set's renames leaves a mix of the two sets: the folder
    is marked, every reader refuses it, and the same command again completes it."""
    import landcover.fileio
    from landcover.data.pairs import discover_pairs
    from landcover.errors import DataError
    from landcover.synthetic.replacing import replacing

    out = tmp_path / "d"
    assert run_cli("data", "synth", str(out), "--tiles", "2", "--size", "64").returncode == 0
    earlier = sorted(out.glob("synth_*"))
    renames = []
    real = landcover.fileio.os.replace

    def stop_at_the_second(source: object, target: object) -> None:
        if len(renames) == 1:
            raise KeyboardInterrupt
        renames.append(target)
        real(source, target)

    monkeypatch.setattr(landcover.fileio.os, "replace", stop_at_the_second)
    with pytest.raises(KeyboardInterrupt), replacing(out, earlier) as scratch:
        for path in earlier:
            (scratch / path.name).write_bytes(b"new")
    monkeypatch.undo()
    assert len(renames) == 1 and (out / ".landcover-prepare-incomplete").is_file()
    with pytest.raises(DataError, match="did not finish writing this folder"):
        discover_pairs(str(out), "_naip.tif", "_lc.tif")
    again = run_cli("data", "synth", str(out), "--tiles", "2", "--size", "64", "--overwrite")
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in earlier)
    assert len(discover_pairs(str(out), "_naip.tif", "_lc.tif")) == 2
