"""Bad input: one clear line naming the file and the problem, a non-zero exit, no traceback."""

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import rasterio
from rasterio.control import GroundControlPoint
from rasterio.crs import CRS
from rasterio.transform import Affine

from conftest import assert_one_line_error, relabel_in_albers, run_cli


@pytest.fixture
def data(tiny_data: Path, tmp_path: Path) -> Path:
    """A private copy of four tiny pairs that a test may damage."""
    folder = tmp_path / "data"
    folder.mkdir()
    for path in sorted(tiny_data.glob("synth_00[0-3]_*.tif")):
        shutil.copy(path, folder / path.name)
    return folder


def _rewrite(path: Path, array: np.ndarray, **changes) -> None:
    with rasterio.open(path) as ds:
        profile = ds.profile
    profile.update(count=array.shape[0], **changes)
    path.unlink()
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(array)


def _train(data: Path, tiny_config: Path, tmp_path: Path, workers: int = 1):
    return run_cli(
        "train",
        "--config",
        str(tiny_config),
        "--data",
        str(data),
        "--out",
        str(tmp_path / "run"),
        "--epochs",
        "1",
        "--workers",
        str(workers),
    )


def test_folder_without_pairs(tmp_path: Path, tiny_config: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = _train(empty, tiny_config, tmp_path)
    assert_one_line_error(result, str(empty), "no tile pairs found")


def test_missing_folder(tmp_path: Path, tiny_config: Path) -> None:
    result = _train(tmp_path / "nope", tiny_config, tmp_path)
    assert_one_line_error(result, "nope", "data folder not found")


def test_a_file_given_as_the_data_folder(data: Path, tiny_config: Path, tmp_path: Path) -> None:
    """A tile given to --data exists: the message says it is a file, not that it is missing."""
    tile = next(data.glob("*_naip.tif"))
    result = _train(tile, tiny_config, tmp_path)
    error = assert_one_line_error(result, str(tile), "a file, not a folder of")
    assert "not found" not in error and "manifest" not in error
    manifest = tmp_path / "pairs.csv"
    manifest.write_text("image,label\n")
    result = _train(manifest, tiny_config, tmp_path)
    assert_one_line_error(result, "a file, not a folder", "--set data.manifest=FILE")


def test_missing_partner(data: Path, tiny_config: Path, tmp_path: Path) -> None:
    (data / "synth_001_lc.tif").unlink()
    result = _train(data, tiny_config, tmp_path)
    assert_one_line_error(result, "synth_001_naip.tif", "no label file")


def test_three_band_image(data: Path, tiny_config: Path, tmp_path: Path) -> None:
    image = data / "synth_002_naip.tif"
    with rasterio.open(image) as ds:
        rgb = ds.read([1, 2, 3])
    _rewrite(image, rgb, photometric="RGB")
    result = _train(data, tiny_config, tmp_path)
    assert_one_line_error(result, "synth_002_naip.tif", "has 3 bands, the model expects 4")


def test_label_that_does_not_overlap_the_image(
    data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    label = data / "synth_001_lc.tif"
    with rasterio.open(label) as ds:
        codes, transform = ds.read(), ds.transform
    _rewrite(label, codes, transform=transform @ Affine.translation(100_000, 0))
    result = _train(data, tiny_config, tmp_path)
    assert_one_line_error(result, "synth_001_lc.tif", "does not overlap the image")


def test_label_without_crs(data: Path, tiny_config: Path, tmp_path: Path) -> None:
    label = data / "synth_001_lc.tif"
    with rasterio.open(label) as ds:
        codes, transform = ds.read(), ds.transform
    _rewrite(label, codes, crs=None, transform=transform @ Affine.translation(3, 0))
    result = _train(data, tiny_config, tmp_path)
    assert_one_line_error(result, "synth_001_lc.tif", "no CRS")


def test_label_in_another_crs_is_reprojected(data: Path, tiny_config: Path, tmp_path: Path) -> None:
    """Labels in Albers (like the Bay-wide files) are brought onto the image grid, nearest."""
    relabel_in_albers(data / "synth_001_lc.tif")
    result = _train(data, tiny_config, tmp_path)
    assert result.returncode == 0, result.stderr


def test_file_that_is_not_a_geotiff(data: Path, tiny_config: Path, tmp_path: Path) -> None:
    (data / "synth_003_naip.tif").write_bytes(b"this is not a tiff" * 100)
    result = _train(data, tiny_config, tmp_path)
    assert_one_line_error(result, "synth_003_naip.tif", "not a readable GeoTIFF")


@pytest.mark.parametrize("workers", [1, 2])
def test_truncated_geotiff(data: Path, tiny_config: Path, tmp_path: Path, workers: int) -> None:
    image = data / "synth_000_naip.tif"
    raw = image.read_bytes()
    image.write_bytes(raw[: len(raw) // 2])
    result = _train(data, tiny_config, tmp_path, workers)
    assert_one_line_error(result, "synth_000_naip.tif")
    assert not (tmp_path / "run" / "checkpoints" / "last.pt").exists()


@pytest.mark.parametrize("workers", [1, 2])
def test_label_codes_outside_the_mapping(
    data: Path, tiny_config: Path, tmp_path: Path, workers: int
) -> None:
    # synth_001 is held by rank 1 when there are two workers: the message crosses processes
    label = data / "synth_001_lc.tif"
    with rasterio.open(label) as ds:
        codes = ds.read()
    codes[0, :5, :5] = 9
    _rewrite(label, codes)
    result = _train(data, tiny_config, tmp_path, workers)
    assert_one_line_error(result, "synth_001_lc.tif", "label codes [9]", "chesapeake7")


def test_bad_config_value(data: Path, tiny_config: Path, tmp_path: Path) -> None:
    result = run_cli(
        "train", "--config", str(tiny_config), "--data", str(data), "--set", "optim.lr=0"
    )
    assert_one_line_error(result, "optim.lr", "greater than 0")


def test_a_compile_mode_without_compile(data: Path, tiny_config: Path) -> None:
    result = run_cli(
        "train", "--config", str(tiny_config), "--data", str(data),
        "--set", "run.compile_mode=reduce-overhead",
    )  # fmt: skip
    assert_one_line_error(result, "run.compile_mode reduce-overhead", "run.compile: true")


def test_missing_config_file(tmp_path: Path) -> None:
    result = run_cli("train", "--config", str(tmp_path / "none.yaml"))
    assert_one_line_error(result, "none.yaml", "config file not found")


@pytest.mark.parametrize("kind", ["not UTF-8", "a symbolic link loop"])
def test_unreadable_config_file(kind: str, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    if kind == "not UTF-8":
        config.write_bytes(b"\xff\xfe\x00data: {}")
    else:
        config.symlink_to(config)
    plan = ["cluster", "plan", "--workers", "2", "--config", str(config)]
    for args in (["train", "--config", str(config)], plan):
        assert_one_line_error(run_cli(*args), "config.yaml")


@pytest.mark.parametrize(
    ("value", "message"),
    [("inf", "finite number"), ("nan", "finite number"), ("1e300", "less than or equal to 100")],
)
def test_learning_rate_must_be_finite_and_sane(
    value: str, message: str, data: Path, tiny_config: Path
) -> None:
    result = run_cli(
        "train", "--config", str(tiny_config), "--data", str(data), "--set", f"optim.lr={value}"
    )
    assert_one_line_error(result, "optim.lr", message)


def test_a_diverged_epoch_stops_the_run_and_keeps_the_last_finite_checkpoint(
    data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    """Plain SGD with the Dice term weighted at float32's limit steps the weights to inf: the
    run stops with one line, writes no checkpoint of that epoch, and keeps the one before."""

    def train(epochs: int, *extra: str):
        return run_cli(
            "train", "--config", str(tiny_config), "--data", str(data),
            "--out", str(tmp_path / "run"), "--epochs", str(epochs), "--workers", "1",
            "--set", "optim.optimizer=sgd", *extra,
        )  # fmt: skip

    assert train(1).returncode == 0
    checkpoints = tmp_path / "run" / "checkpoints"
    before = (checkpoints / "last.pt").read_bytes()
    result = train(2, "--set", "optim.loss.dice_weight=1e38")
    assert_one_line_error(result, "epoch 2", "weights are no longer finite")
    assert (checkpoints / "last.pt").read_bytes() == before
    assert not (checkpoints / "epoch-0002.pt").exists()


def test_resuming_with_another_optimizer(data: Path, tiny_config: Path, tmp_path: Path) -> None:
    """AdamW's saved state does not fit SGD (it failed at the first step, a KeyError)."""
    assert _train(data, tiny_config, tmp_path).returncode == 0
    result = run_cli(
        "train", "--config", str(tiny_config), "--data", str(data),
        "--out", str(tmp_path / "run"), "--epochs", "2", "--workers", "1",
        "--set", "optim.optimizer=sgd",
    )  # fmt: skip
    assert_one_line_error(result, "trained with optim.optimizer adamw, resumed with sgd")


def test_a_loss_that_is_not_finite_with_finite_weights_trains_on(
    data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    """Class weights at float32's limit make the reported loss nan, but the weights stay
    finite (the weighted mean's gradient is): no divergence, the epoch is checkpointed."""
    extreme = "[" + ",".join(["3e38"] * 6) + "]"
    result = run_cli(
        "train", "--config", str(tiny_config), "--data", str(data),
        "--out", str(tmp_path / "run"), "--epochs", "1", "--workers", "1",
        "--set", f"optim.loss.class_weights={extreme}",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "loss nan" in result.stderr
    assert (tmp_path / "run" / "checkpoints" / "epoch-0001.pt").exists()


def test_resuming_with_another_class_mapping(data: Path, tiny_config: Path, tmp_path: Path) -> None:
    assert _train(data, tiny_config, tmp_path).returncode == 0
    result = run_cli(
        "train", "--config", str(tiny_config), "--data", str(data),
        "--out", str(tmp_path / "run"), "--epochs", "2", "--workers", "1", "--classes", "cvpr4",
    )  # fmt: skip
    assert_one_line_error(result, "trained with data.classes chesapeake7", "resumed with cvpr4")


def test_list_file_and_manifests_that_are_not_text_or_miss_a_column(
    data: Path, quick_checkpoint: Path, tmp_path: Path
) -> None:
    binary = tmp_path / "tiles.txt"
    binary.write_bytes(b"\xff\xfe" + b"synth_000_naip.tif\n")
    result = run_cli("predict", f"@{binary}", "-k", str(quick_checkpoint), "--out", str(tmp_path))
    assert_one_line_error(result, "tiles.txt", "not UTF-8")
    manifest = data / "pairs.csv"
    manifest.write_bytes(b"\xff\xfeimage,label\n")
    assert_one_line_error(run_cli("data", "check", str(manifest)), "pairs.csv", "not UTF-8")
    manifest.write_text("image,label\nsynth_000_naip.tif,synth_000_lc.tif\nsynth_001_naip.tif\n")
    for args in (
        ["data", "check", str(manifest)],
        ["evaluate", "-k", str(quick_checkpoint), "--data", str(manifest), "--out", str(tmp_path)],
    ):
        assert_one_line_error(run_cli(*args), "pairs.csv", "line 3")


def test_output_folder_under_a_file(data: Path, quick_checkpoint: Path, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("a file, not a folder")
    out = str(tmp_path / "afile" / "sub")
    for args in (
        ["predict", str(data / "synth_000_naip.tif"), "-k", str(quick_checkpoint), "--out", out],
        ["evaluate", "-k", str(quick_checkpoint), "--data", str(data), "--out", out],
        ["data", "synth", "--tiles", "1", "--size", "32", out],
    ):
        assert_one_line_error(run_cli(*args), "afile/sub", "a folder on its path is a file")


def test_evaluate_on_an_image_whose_pixels_are_cut_off(
    data: Path, quick_checkpoint: Path, tmp_path: Path
) -> None:
    """The header and the first blocks read, a later block does not: one line, no metrics."""
    image = data / "synth_002_naip.tif"
    with rasterio.open(image) as ds:
        profile = {**ds.profile, "tiled": True, "blockxsize": 16, "blockysize": 16}
        pixels = ds.read()
    with rasterio.open(image, "w", **profile) as ds:
        ds.write(pixels)
    raw = image.read_bytes()
    image.write_bytes(raw[: len(raw) * 2 // 3])
    out = tmp_path / "eval"
    result = run_cli(
        "evaluate", "-k", str(quick_checkpoint), "--data", str(data), "--out", str(out)
    )
    assert_one_line_error(result, "synth_002_naip.tif", "corrupt or truncated")
    assert not (out / "metrics.json").exists()


def test_window_and_patch_beyond_any_memory(
    data: Path, quick_checkpoint: Path, tiny_config: Path, tmp_path: Path
) -> None:
    """A window or patch of 100,000 px would allocate tens of GB before the first pixel."""
    tile = str(data / "synth_000_naip.tif")
    for command in ("predict", "evaluate"):
        args = [tile] if command == "predict" else ["--data", str(data)]
        result = run_cli(
            command, *args, "-k", str(quick_checkpoint), "--out", str(tmp_path / command),
            "--window", "100000",
        )  # fmt: skip
        assert_one_line_error(result, "--window 100000", "at most 8192")
    result = run_cli(
        "train", "--config", str(tiny_config), "--data", str(data),
        "--set", "data.patch_size=100000",
    )  # fmt: skip
    assert_one_line_error(result, "data.patch_size", "less than or equal to 4096")


def test_a_tile_without_georeferencing_is_mapped_without_library_warnings(
    data: Path, quick_checkpoint: Path, tmp_path: Path
) -> None:
    """No geotransform and no CRS: mapped on its pixel grid, said in landcover's own line,
    with none of rasterio's two-line warnings (its file and source line) on stderr."""
    tile = tmp_path / "plain_naip.tif"
    with rasterio.open(data / "synth_000_naip.tif") as src:
        pixels = src.read()
    with rasterio.open(
        tile, "w", driver="GTiff", width=pixels.shape[2], height=pixels.shape[1],
        count=pixels.shape[0], dtype="uint8",
    ) as dst:  # fmt: skip
        dst.write(pixels)
    out = tmp_path / "maps"
    # a process of its own, as the command runs (pytest resets warning filters between tests,
    # and landcover sets its filter when it is imported)
    env = dict(os.environ)
    result = run_cli("predict", str(tile), "-k", str(quick_checkpoint), "--out", str(out), env=env)
    assert result.returncode == 0, result.stderr
    assert "no CRS (the maps keep its pixel grid)" in result.stderr
    assert "Warning" not in result.stderr and "site-packages" not in result.stderr
    assert (out / "plain_naip_class.tif").exists()


def test_a_tile_georeferenced_by_gcps_alone_keeps_them_in_its_maps(
    data: Path, quick_checkpoint: Path, tmp_path: Path
) -> None:
    """GCPs and no geotransform (a scan, an unrectified image): the class and probability
    maps carry the tile's GCPs and their CRS, so GIS software places them as the input."""
    tile = tmp_path / "scan_naip.tif"
    with rasterio.open(data / "synth_000_naip.tif") as src:
        pixels = src.read()
    h, w = pixels.shape[1:]
    gcps = [
        GroundControlPoint(row, col, 400000.0 + 1.1 * col, 4300000.0 - 0.9 * row, id=f"p{i}")
        for i, (row, col) in enumerate(((0, 0), (0, w), (h, 0), (h, w)))
    ]
    with rasterio.open(
        tile, "w", driver="GTiff", width=w, height=h, count=pixels.shape[0], dtype="uint8",
    ) as dst:  # fmt: skip
        dst.write(pixels)
        dst.gcps = (gcps, CRS.from_epsg(26918))
    out = tmp_path / "maps"
    result = run_cli("predict", str(tile), "-k", str(quick_checkpoint), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "no CRS but 4 GCPs in EPSG:26918 (the maps keep them)" in result.stderr
    for name in ("scan_naip_class.tif", "scan_naip_prob.tif"):
        with rasterio.open(out / name) as ds:
            points, crs = ds.gcps
        assert crs == CRS.from_epsg(26918), name
        assert [(p.row, p.col, p.x, p.y) for p in points] == [
            (p.row, p.col, p.x, p.y) for p in gcps
        ], name


@pytest.mark.parametrize("georeferencing", ["transform", "gcps"])
def test_a_large_tile_without_a_crs_keeps_its_georeferencing_and_gets_overviews(
    data: Path, quick_checkpoint: Path, tmp_path: Path, georeferencing: str
) -> None:
    """Larger than a block, its maps get overviews (through a VRT of the levels), which took
    the tile's CRS as given: a tile with a geotransform and no CRS failed (AttributeError),
    and one with GCPs would have lost them."""
    with rasterio.open(data / "synth_000_naip.tif") as src:
        pixels = np.tile(src.read(), (1, 3, 3))  # over 256 px a side: overviews
    h, w = pixels.shape[1:]
    assert max(h, w) > 256
    tile = tmp_path / "big_naip.tif"
    profile = dict(driver="GTiff", width=w, height=h, count=pixels.shape[0], dtype="uint8")
    transform = Affine(5.0, 0.0, 500000.0, 0.0, -5.0, 4700000.0)
    gcps = [
        GroundControlPoint(row, col, 400000.0 + 1.1 * col, 4300000.0 - 0.9 * row, id=f"p{i}")
        for i, (row, col) in enumerate(((0, 0), (0, w), (h, 0), (h, w)))
    ]
    with rasterio.open(tile, "w", **profile) as dst:
        dst.write(pixels)
        if georeferencing == "transform":
            dst.transform = transform
        else:
            dst.gcps = (gcps, CRS.from_epsg(26918))
    out = tmp_path / "maps"
    result = run_cli("predict", str(tile), "-k", str(quick_checkpoint), "--out", str(out))
    assert result.returncode == 0, result.stderr
    for name in ("big_naip_class.tif", "big_naip_prob.tif"):
        with rasterio.open(out / name) as ds:
            assert ds.overviews(1), name
            if georeferencing == "transform":
                assert (ds.crs, ds.transform) == (None, transform), name
            else:
                points, crs = ds.gcps
                assert crs == CRS.from_epsg(26918), name
                assert [(p.row, p.col, p.x, p.y) for p in points] == [
                    (p.row, p.col, p.x, p.y) for p in gcps
                ], name


def test_a_library_warning_is_one_log_line(capfd: pytest.CaptureFixture) -> None:
    import logging
    import warnings

    from landcover.logs import setup_logging
    from landcover.parallel.env import DistEnv

    shown = warnings.showwarning
    try:
        setup_logging(DistEnv(), None)
        warnings.warn("first line of it\nsecond line", DeprecationWarning, stacklevel=1)
        lines = capfd.readouterr().err.splitlines()
    finally:
        warnings.showwarning = shown
        logging.getLogger("landcover").handlers.clear()
    assert lines == ["warning: first line of it (DeprecationWarning)"]


def test_a_looping_link_in_a_folder_fails_that_tile_alone(
    data: Path, quick_checkpoint: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "tiles"
    folder.mkdir()
    shutil.copy(data / "synth_000_naip.tif", folder)
    (folder / "loop_naip.tif").symlink_to(folder / "loop_naip.tif")
    out = tmp_path / "maps"
    result = run_cli("predict", str(folder), "-k", str(quick_checkpoint), "--out", str(out))
    assert_one_line_error(result, "1 of 2 tiles failed", "loop_naip.tif")
    assert (out / "synth_000_naip_class.tif").exists()
