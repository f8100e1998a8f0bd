"""``landcover data check``: every bad file listed by kind, good pairs counted, exit codes."""

from pathlib import Path

import numpy as np
import pytest
import rasterio
from rasterio.enums import Resampling
from rasterio.transform import Affine
from rasterio.warp import calculate_default_transform, reproject

from landcover.classes import resolve_mapping
from landcover.data.check import check_folder
from landcover.synthetic.synthetic import write_synthetic_dataset

from conftest import assert_one_line_error, run_cli

SIZE = 96


def _rewrite(path: Path, array: np.ndarray, **changes) -> None:
    with rasterio.open(path) as ds:
        profile = ds.profile
    profile.update(count=array.shape[0], **changes)
    path.unlink()
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(array)


def _read(path: Path) -> tuple[np.ndarray, dict]:
    with rasterio.open(path) as ds:
        return ds.read(), ds.profile


def _to_albers(path: Path) -> None:
    """Rewrites a label raster in EPSG:5070 (nearest neighbour)."""
    with rasterio.open(path) as ds:
        codes, profile = ds.read(), ds.profile
        transform, width, height = calculate_default_transform(
            ds.crs, "EPSG:5070", ds.width, ds.height, *ds.bounds
        )
        out = np.full((1, height, width), 15, dtype=np.uint8)
        reproject(
            codes,
            out,
            src_transform=ds.transform,
            src_crs=ds.crs,
            dst_transform=transform,
            dst_crs="EPSG:5070",
            src_nodata=15,
            dst_nodata=15,
            resampling=Resampling.nearest,
        )
    profile.update(crs="EPSG:5070", transform=transform, width=width, height=height)
    profile.pop("blockxsize"), profile.pop("blockysize"), profile.pop("tiled")
    path.unlink()
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(out)


def _shift(path: Path, dx: float) -> None:
    codes, profile = _read(path)
    t = profile["transform"]
    _rewrite(path, codes, transform=Affine(t.a, t.b, t.c + dx, t.d, t.e, t.f))


def _damage_middle(path: Path) -> None:
    """Overwrites the middle of the file (tile data) with random bytes; the header stays."""
    data = bytearray(path.read_bytes())
    n = len(data)
    noise = np.random.default_rng(0).integers(0, 256, n // 2 - n // 4, dtype=np.uint8)
    data[n // 4 : n // 2] = noise.tobytes()
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, set[str]]]:
    """A folder with three good pairs and one planted fault in each of the other files."""
    folder = tmp_path_factory.mktemp("faulty")
    write_synthetic_dataset(folder, tiles=12, size=SIZE, seed=5)
    f = {
        i: (folder / f"synth_{i:03d}_naip.tif", folder / f"synth_{i:03d}_lc.tif") for i in range(12)
    }
    # 0, 1, 2: good.
    image, _ = _read(f[3][0])
    _rewrite(f[3][0], image[:3], photometric="RGB")  # 3-band image
    _shift(f[4][1], 10.5)  # label on a shifted grid (alignable: a warning)
    _to_albers(f[5][1])  # label in another CRS (alignable: a warning)
    f[6][0].write_bytes(b"not a tiff" * 100)  # unreadable image
    _damage_middle(f[7][1])  # label whose blocks do not decode
    codes, _ = _read(f[8][1])
    codes[0, :5, :5] = 9
    _rewrite(f[8][1], codes)  # unknown label code
    f[9][1].unlink()  # image without its label
    _shift(f[10][1], 100_000.0)  # label far away from its image: cannot be aligned
    image, _ = _read(f[11][0])
    _rewrite(f[11][0], image.astype(np.uint16) * 3, dtype="uint16")  # 16-bit image
    orphan = folder / "orphan_lc.tif"
    orphan.write_bytes(f[0][1].read_bytes())  # label without its image
    expected = {
        str(f[3][0]): {"bands"},
        str(f[4][1]): {"grid"},
        str(f[5][1]): {"crs"},
        str(f[6][0]): {"corrupt"},
        str(f[7][1]): {"corrupt"},
        str(f[8][1]): {"codes"},
        str(f[9][0]): {"partner"},
        str(f[10][1]): {"grid"},
        str(f[11][0]): {"dtype"},
        str(orphan): {"partner"},
    }
    return folder, expected


def test_report_lists_every_fault_by_file_and_kind(faulty: tuple[Path, dict]) -> None:
    folder, expected = faulty
    report = check_folder(folder, resolve_mapping("chesapeake7"))
    found: dict[str, set[str]] = {}
    for problem in report.problems:
        found.setdefault(problem.path, set()).add(problem.kind)
        assert "\n" not in problem.message
    assert found == expected
    warnings = {p.path for p in report.warnings}
    assert warnings == {str(folder / "synth_004_lc.tif"), str(folder / "synth_005_lc.tif")}
    assert "reproject" in next(p for p in report.warnings if "005" in p.path).message
    assert not report.ok
    assert set(report.bad_files) == set(expected) - warnings
    assert report.pairs == 11

    tiles = {t.name: t for t in report.tiles}
    for good in ("synth_000", "synth_001", "synth_002"):
        assert report.kinds_of(folder / f"{good}_naip.tif") == set()
        assert report.kinds_of(folder / f"{good}_lc.tif") == set()
        with rasterio.open(folder / f"{good}_lc.tif") as ds:
            codes = ds.read(1)
        np.testing.assert_array_equal(tiles[good].counts, np.bincount(codes.ravel(), minlength=256))
        assert not tiles[good].aligned
    # Alignable labels are counted on the image grid.
    assert tiles["synth_005"].aligned and tiles["synth_005"].pixels == SIZE * SIZE
    assert tiles["synth_005"].counts.sum() == SIZE * SIZE
    shares = report.fractions(report.total_counts())
    assert abs(sum(shares.per_class) + shares.nodata + shares.unknown - 1.0) < 1e-9
    # the 25 pixels of code 9 in synth_008's label are unknown codes, not no-data
    with rasterio.open(folder / "synth_008_lc.tif") as ds:
        codes = ds.read(1)
    assert (codes == 9).sum() == 25
    eight = report.fractions(tiles["synth_008"].counts)
    assert eight.unknown == pytest.approx(25 / codes.size, abs=1e-12)
    ignored = np.isin(codes, [0, 15]).sum()  # chesapeake7's ignored codes: no-data
    assert eight.nodata == pytest.approx(ignored / codes.size, abs=1e-12)
    assert report.fractions(tiles["synth_000"].counts).unknown == 0
    assert "synth_006" not in tiles and "synth_010" not in tiles


def test_cli_exits_non_zero_and_names_every_bad_file(faulty: tuple[Path, dict]) -> None:
    folder, expected = faulty
    result = run_cli("data", "check", str(folder))
    assert_one_line_error(result, str(folder), "bad file")
    assert result.returncode != 0
    lines = result.stdout.splitlines()
    for path, kinds in expected.items():
        listed = [
            line
            for line in lines
            if path in line and line.lstrip().startswith(("error", "warning"))
        ]
        assert listed, f"{path} not listed:\n{result.stdout}"
        assert any(kind in line for kind in kinds for line in listed)
    assert "synth_000" in result.stdout  # the table
    assert "unknown" in result.stdout  # its column of codes of no class (synth_008's)
    assert "total" in result.stdout


def test_clean_folder_passes(tmp_path: Path) -> None:
    write_synthetic_dataset(tmp_path, tiles=3, size=64, seed=1)
    report = check_folder(tmp_path, resolve_mapping("cvpr4"))
    assert report.ok and not report.problems and len(report.tiles) == 3
    result = run_cli("data", "check", str(tmp_path), "--classes", "cvpr4")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all 3 pairs are fine" in result.stdout
    assert "forest %" in result.stdout and "0.01 Mpx" in result.stdout
    assert "unknown" not in result.stdout  # no column of codes of no class when none are


def test_missing_folder_is_one_line_error(tmp_path: Path) -> None:
    result = run_cli("data", "check", str(tmp_path / "nope"))
    assert_one_line_error(result, "nope", "data folder not found")
