"""Measured band statistics and class frequencies: ``landcover data stats`` and ``auto``.

Every expected value is computed here, independently, by reading whole files with rasterio and
numpy (float64 mean/std, ``np.bincount`` of the mapped labels).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import rasterio
import torch
import yaml
from rasterio.enums import Resampling
from rasterio.transform import from_origin
from rasterio.warp import reproject

from landcover.classes import resolve_mapping
from landcover.config import ModelConfig, load_config
from landcover.models import build_model
from landcover.synthetic.synthetic import synthesize_scene, write_pair, write_synthetic_dataset
from landcover.training.autostats import resolve_auto

from conftest import REPO, assert_one_line_error, relabel_in_albers, run_cli, train_args

MAPPING = resolve_mapping("chesapeake7")
NAMES = MAPPING.names
OLD_GUESS = ([0.40, 0.42, 0.36, 0.50], [0.18, 0.16, 0.15, 0.22])


def _classes_of(codes: np.ndarray, mapping=MAPPING) -> np.ndarray:
    """Class index of each label code (255 for ignored), from the mapping's code lists."""
    out = np.full(codes.shape, 255, dtype=np.int64)
    for index, spec in enumerate(mapping.classes):
        out[np.isin(codes, spec.codes)] = index
    return out


def _label_on_grid(label: Path, image: Path) -> np.ndarray:
    """The whole label raster on the image's grid (read directly, or reprojected nearest)."""
    with rasterio.open(label) as lab, rasterio.open(image) as img:
        if lab.crs == img.crs and lab.transform == img.transform and lab.shape == img.shape:
            return lab.read(1)
        out = np.full(img.shape, 15, dtype=np.uint8)
        reproject(
            rasterio.band(lab, 1),
            out,
            dst_transform=img.transform,
            dst_crs=img.crs,
            dst_nodata=15,
            resampling=Resampling.nearest,
        )
        return out


@dataclass
class Expected:
    """Statistics computed here from whole-file reads."""

    mean: list[float]
    std: list[float]
    counts: np.ndarray
    valid: int

    @property
    def frequencies(self) -> np.ndarray:
        return self.counts / self.counts.sum()


def expected_stats(pairs: list[tuple[Path, Path]], mapping=MAPPING) -> Expected:
    """Mean, std (0..1) of valid image pixels and class pixel counts, from whole-file reads."""
    values: list[list[np.ndarray]] = [[] for _ in range(4)]
    counts = np.zeros(mapping.num_classes, dtype=np.int64)
    for image, label in pairs:
        with rasterio.open(image) as ds:
            pixels, nodata = ds.read(), ds.nodata
        valid = np.ones(pixels.shape[1:], bool)
        if nodata is not None:
            valid = ~np.all(pixels == nodata, axis=0)
        for band in range(4):
            values[band].append(pixels[band][valid].astype(np.float64))
        classes = _classes_of(_label_on_grid(label, image), mapping)
        labelled = classes[valid & (classes != 255)]
        counts += np.bincount(labelled, minlength=mapping.num_classes)
    mean = [float(np.concatenate(v).mean() / 255) for v in values]
    std = [float(np.concatenate(v).std() / 255) for v in values]
    return Expected(mean, std, counts, sum(len(v) for v in values[0]))


def _pairs(folder: Path, names: list[str] | None = None) -> list[tuple[Path, Path]]:
    images = sorted(folder.glob("*_naip.tif"))
    pairs = [(p, p.with_name(p.name.replace("_naip.tif", "_lc.tif"))) for p in images]
    if names is not None:
        pairs = [p for p in pairs if p[0].name[: -len("_naip.tif")] in names]
    return pairs


def _assert_stats_file(path: Path, pairs: list[tuple[Path, Path]]) -> dict:
    expected = expected_stats(pairs)
    text = path.read_text()
    assert re.match(r"# measured by landcover data stats \S+ on \d{4}-\d\d-\d\d: ", text)
    assert f": {len(pairs)} tiles, {expected.valid} valid pixels" in text.splitlines()[0]
    data = yaml.safe_load(text)["data"]
    np.testing.assert_allclose(data["mean"], expected.mean, rtol=0, atol=1e-9)
    np.testing.assert_allclose(data["std"], expected.std, rtol=0, atol=1e-9)
    assert list(data["class_frequencies"]) == NAMES
    np.testing.assert_allclose(
        list(data["class_frequencies"].values()), expected.frequencies, rtol=0, atol=1e-12
    )
    return data


@pytest.fixture(scope="module")
def mixed_data(tmp_path_factory: pytest.TempPathFactory, tiny_data: Path) -> Path:
    """The tiny data, plus a pair whose label lies in another CRS (Albers) and resolution."""
    folder = tmp_path_factory.mktemp("mixed")
    for path in tiny_data.glob("*.tif"):
        shutil.copy(path, folder / path.name)
    image, codes = synthesize_scene(260, 300, np.random.default_rng(11))
    image[:, :30, :50] = 0  # an image no-data corner
    _, label = write_pair(folder, "albers", image, codes, (420_000.0, 4_310_000.0))
    relabel_in_albers(label, resolution=1.3)
    return folder


def test_stats_cli_equals_numpy(mixed_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "stats.yaml"
    result = run_cli("data", "stats", str(mixed_data), "--out", str(out))
    assert result.returncode == 0, result.stderr
    pairs = _pairs(mixed_data)
    assert len(pairs) == 9
    data = _assert_stats_file(out, pairs)
    # the table shows the same numbers, and where they went
    for value in data["mean"] + data["std"]:
        assert f"{value:.4f}" in result.stdout
    for name in NAMES:
        assert name in result.stdout
    assert f"wrote {out}" in " ".join(result.stdout.split())  # rich wraps a long path
    # the default output name is the folder's, in the current folder
    default = run_cli("data", "stats", str(mixed_data))
    assert default.returncode == 0, default.stderr
    written = REPO / f"{mixed_data.name}_stats.yaml"
    try:
        assert yaml.safe_load(written.read_text()) == yaml.safe_load(out.read_text())
    finally:
        written.unlink(missing_ok=True)


def test_stats_of_a_manifest_and_another_preset(tiny_data: Path, tmp_path: Path) -> None:
    pairs = _pairs(tiny_data)[:3]
    manifest = tmp_path / "tiles.csv"
    lines = ["image,label,split"] + [f"{i},{lab},train" for i, lab in pairs]
    manifest.write_text("\n".join(lines) + "\n")
    out = tmp_path / "cvpr4.yaml"
    result = run_cli("data", "stats", str(manifest), "--classes", "cvpr4", "--out", str(out))
    assert result.returncode == 0, result.stderr
    cvpr4 = resolve_mapping("cvpr4")
    expected = expected_stats(pairs, cvpr4)
    data = yaml.safe_load(out.read_text())["data"]
    np.testing.assert_allclose(data["mean"], expected.mean, rtol=0, atol=1e-9)
    assert list(data["class_frequencies"]) == cvpr4.names
    np.testing.assert_allclose(
        list(data["class_frequencies"].values()), expected.frequencies, rtol=0, atol=1e-12
    )


def test_stats_bad_input_is_one_line(tiny_data: Path, tmp_path: Path) -> None:
    missing = run_cli("data", "stats", str(tmp_path / "nothing"), "--out", str(tmp_path / "x"))
    assert_one_line_error(missing, "data folder not found")
    three = run_cli("data", "stats", str(tiny_data), "--bands", "3", "--out", str(tmp_path / "y"))
    assert_one_line_error(three, "has 4 bands, the model expects 3")
    image, label = synthesize_scene(64, 64, np.random.default_rng(2))
    label[5:9, 5:9] = 42
    write_pair(tmp_path / "odd", "odd", image, label, (400_000.0, 4_300_000.0))
    wrong_codes = run_cli("data", "stats", str(tmp_path / "odd"), "--out", str(tmp_path / "z"))
    assert_one_line_error(wrong_codes, "odd_lc.tif: label codes [42] are not in the class mapping")
    assert not any(tmp_path.glob("[xyz]*"))  # nothing half-written


@pytest.mark.slow
def test_stats_on_blob_storage(azurite, tiny_data: Path, tmp_path: Path) -> None:
    env = azurite.env("connection_string")
    container = azurite.create_container()
    assert (
        run_cli("data", "upload", str(tiny_data), f"az://{container}/data", env=env).returncode == 0
    )
    result = run_cli(
        "data", "stats", f"az://{container}/data", "--out", f"az://{container}/stats.yaml", env=env
    )
    assert result.returncode == 0, result.stderr
    blob = azurite.service_client().get_blob_client(container, "stats.yaml")
    local = tmp_path / "stats.yaml"
    local.write_bytes(blob.download_blob().readall())
    _assert_stats_file(local, _pairs(tiny_data))
    assert f"az://{container}/data" in local.read_text().splitlines()[0]


_MEMORY_PROBE = textwrap.dedent(
    """
    import json, sys
    import rasterio
    from landcover.classes import resolve_mapping
    from landcover.data.pairs import discover_pairs
    from landcover.data.measure import measure_pairs

    def status(key):  # bytes
        for line in open("/proc/self/status"):
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024

    def start():  # resets the peak (VmHWM) to the current RSS, returns the current RSS
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return status("VmRSS")

    mapping = resolve_mapping("chesapeake7")
    measure_pairs(discover_pairs(sys.argv[1], "_naip.tif", "_lc.tif"), mapping, 4)  # warm up
    base = start()
    result = measure_pairs(discover_pairs(sys.argv[2], "_naip.tif", "_lc.tif"), mapping, 4)
    growth = status("VmHWM") - base
    base = start()
    with rasterio.open(sys.argv[2] + "/big_naip.tif") as ds:  # calibration: a whole read
        whole = ds.read()
    print(json.dumps({
        "growth": growth, "whole_growth": status("VmHWM") - base, "whole_bytes": whole.nbytes,
        "mean": result.stats.mean(), "std": result.stats.std(),
        "counts": result.stats.class_counts.tolist(),
    }))
    """
)


@pytest.mark.slow
def test_stats_memory_stays_bounded(tiny_data: Path, tmp_path: Path) -> None:
    height, width = 3001, 2999  # not a multiple of any window, so edge windows are exercised
    rows, cols = np.mgrid[0:height, 0:width]
    image = np.stack([((cols * 3 + rows * b + 40 * b) % 251 + 1) for b in range(4)])
    image = image.astype(np.uint8)
    image[:, :300, :300] = 0  # no-data corner
    codes = np.array([1, 2, 3, 4, 5, 6, 15], dtype=np.uint8)[(cols // 97 + rows // 89) % 7]
    folder = tmp_path / "big"
    folder.mkdir()
    profile = {
        "driver": "GTiff",
        "width": width,
        "height": height,
        "dtype": "uint8",
        "crs": "EPSG:26918",
        "transform": from_origin(400_000, 4_300_000, 1, 1),
        "compress": "deflate",  # striped (GDAL's default layout): read in bands of strips
    }
    with rasterio.open(folder / "big_naip.tif", "w", count=4, nodata=0, **profile) as ds:
        ds.write(image)
    with rasterio.open(folder / "big_lc.tif", "w", count=1, nodata=15, **profile) as ds:
        ds.write(codes[None])
    decoded = image.nbytes + codes.nbytes
    # (the peak RSS of getrusage survives exec, so a child of this big process would inherit
    # it: the probe resets and reads the kernel's VmHWM instead. Large allocations are mmapped,
    # so freed memory leaves the RSS and cannot hide a later one.)
    probe = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE, str(tiny_data), str(folder)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env={**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"},
    )
    assert probe.returncode == 0, probe.stderr
    report = yaml.safe_load(probe.stdout)
    # the probe notices a whole read (the calibration grows by at least the array) ...
    assert report["whole_growth"] >= report["whole_bytes"]
    # ... and measuring the tile grew the peak by far less than the tile's decoded size
    assert report["growth"] < decoded / 4, (report["growth"], decoded)
    expected = expected_stats([(folder / "big_naip.tif", folder / "big_lc.tif")])
    np.testing.assert_allclose(report["mean"], expected.mean, rtol=0, atol=1e-9)
    np.testing.assert_allclose(report["std"], expected.std, rtol=0, atol=1e-9)
    assert report["counts"] == expected.counts.tolist()


def _median_frequency(frequencies: np.ndarray) -> list[float]:
    present = frequencies[frequencies > 0]
    weights = np.where(frequencies > 0, np.median(present) / np.maximum(frequencies, 1e-300), 1.0)
    return np.clip(weights, 0.1, 10.0).tolist()


def test_class_weights_auto_from_given_frequencies() -> None:
    counts = np.array([500, 30000, 42000, 0, 12, 9000], dtype=np.float64)  # barren absent
    frequencies = dict(zip(NAMES, (counts / counts.sum()).tolist(), strict=True))
    config = load_config(
        None,
        None,
        [
            "data.mean=[0.3,0.4,0.3,0.5]",
            "data.std=[0.1,0.1,0.1,0.2]",
            f"data.class_frequencies={frequencies}",
            "optim.loss.class_weights=auto",
        ],
    )

    def measure():
        raise AssertionError("nothing is left to measure")

    before = config.to_dict()
    resolved, lines = resolve_auto(config, measure)
    assert config.to_dict() == before  # the loaded config is not changed
    expected = _median_frequency(counts / counts.sum())
    np.testing.assert_allclose(resolved.class_weights, expected, rtol=1e-12)
    effective = resolved.apply(config)
    assert effective.optim.loss.class_weights == list(resolved.class_weights)
    assert effective.data.mean == [0.3, 0.4, 0.3, 0.5] and config.optim.loss.class_weights == "auto"
    weights = dict(zip(NAMES, resolved.class_weights, strict=True))
    assert weights["barren"] == 1.0  # absent from the data
    assert weights["impervious"] == 10.0  # 12 pixels: clipped at the top of the range
    assert 0.1 < weights["low_vegetation"] < 1.0
    assert any("median-frequency" in line for line in lines)


def _stats_line(log: Path) -> str:
    match = re.search(r"band statistics measured on .*", log.read_text())
    assert match, log.read_text()
    return match.group(0)


def _train_tiles(run: Path, workers: int) -> list[str]:
    names: set[str] = set()
    for rank in range(workers):
        text = (run / "logs" / f"rank{rank}.log").read_text()
        match = re.search(r"holds \d+ of \d+ training tiles \[([^\]]*)\]", text)
        assert match, text
        names.update(match.group(1).split(", "))
    return sorted(names)


@pytest.mark.slow
def test_training_measures_stats_and_predict_uses_them(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    run = tmp_path / "run"
    args = train_args(tiny_config, data, run, "--workers", "2")
    args += ["--set", "optim.loss.class_weights=auto"]
    first = run_cli(*args, "--epochs", "1")
    assert first.returncode == 0, first.stderr

    # the numbers are those of the training tiles (the split the ranks logged), computed here
    train = _train_tiles(run, 2)
    assert train == [f"synth_{i:03d}" for i in range(6)]
    expected = expected_stats(_pairs(data, train))
    mean, std, frequencies = expected.mean, expected.std, expected.frequencies
    saved = yaml.safe_load((run / "config.yaml").read_text())
    state = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    for config in (saved, state["config"]):
        np.testing.assert_allclose(config["data"]["mean"], mean, rtol=0, atol=1e-9)
        np.testing.assert_allclose(config["data"]["std"], std, rtol=0, atol=1e-9)
        assert list(config["data"]["class_frequencies"]) == NAMES
        np.testing.assert_allclose(
            list(config["data"]["class_frequencies"].values()), frequencies, atol=1e-12
        )
        np.testing.assert_allclose(
            config["optim"]["loss"]["class_weights"], _median_frequency(frequencies), rtol=1e-9
        )
    # both ranks measured, and logged, the very same values
    lines = [_stats_line(run / "logs" / f"rank{r}.log") for r in (0, 1)]
    assert lines[0] == lines[1]
    assert "measured on 6 training tiles" in lines[0]
    assert f"{mean[0]:.6f}" in lines[0]

    # predict normalises with the stored numbers: same probabilities as the model fed here
    maps = tmp_path / "maps"
    tile = data / "synth_007_naip.tif"
    result = run_cli(
        "predict", str(tile), "--checkpoint", str(run / "checkpoints" / "last.pt"),
        "--out", str(maps), "--prob-dtype", "float32", "--no-preview",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    with rasterio.open(maps / "synth_007_naip_prob.tif") as ds:
        predicted = ds.read()
    with rasterio.open(maps / "synth_007_naip_class.tif") as ds:
        valid = ds.read(1) != 255

    model_config = ModelConfig(**state["config"]["model"])
    model = build_model(model_config, 4, len(NAMES))
    model.load_state_dict(state["model"])
    model.eval()
    with rasterio.open(tile) as ds:
        pixels = torch.from_numpy(ds.read().astype(np.float32))[None]

    def probabilities(mean: list[float], std: list[float]) -> np.ndarray:
        m, s = torch.tensor(mean).view(1, -1, 1, 1), torch.tensor(std).view(1, -1, 1, 1)
        with torch.no_grad():
            return torch.softmax(model((pixels / 255 - m) / s), dim=1)[0].numpy()

    ours = probabilities(mean, std)
    np.testing.assert_allclose(predicted[:, valid], ours[:, valid], atol=2e-4)
    guessed = probabilities(*OLD_GUESS)
    assert np.abs(predicted[:, valid] - guessed[:, valid]).max() > 1e-2  # the numbers matter

    # a resumed run takes the numbers from its checkpoint, even if the tiles changed since
    image, label = synthesize_scene(128, 128, np.random.default_rng(99))
    write_pair(data, "synth_000", image // 2, label, (400_000.0, 4_300_000.0))
    assert expected_stats(_pairs(data, train)).mean[0] != pytest.approx(mean[0], abs=1e-3)
    second = run_cli(*args, "--epochs", "2")
    assert second.returncode == 0, second.stderr
    assert "band statistics from checkpoint" in (run / "logs" / "rank1.log").read_text()
    resumed = yaml.safe_load((run / "config.yaml").read_text())
    assert resumed["data"]["mean"] == saved["data"]["mean"]
    assert resumed["data"]["std"] == saved["data"]["std"]
    assert resumed["optim"]["loss"]["class_weights"] == saved["optim"]["loss"]["class_weights"]
    assert torch.load(run / "checkpoints" / "last.pt", weights_only=True)["epoch"] == 2


@pytest.mark.slow
def test_more_workers_than_tiles_count_each_tile_once(tiny_config: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_synthetic_dataset(data, tiles=3, size=96, seed=5)  # 2 training tiles, 1 validation
    run = tmp_path / "run"
    extra = ("--workers", "3", "--epochs", "1", "--samples-per-epoch", "12")
    result = run_cli(*train_args(tiny_config, data, run, *extra))
    assert result.returncode == 0, result.stderr
    # ranks 0, 1, 2 hold tiles 0, 1, 0: tile 0 must not weigh twice
    expected = expected_stats(_pairs(data)[:2])
    saved = yaml.safe_load((run / "config.yaml").read_text())
    np.testing.assert_allclose(saved["data"]["mean"], expected.mean, rtol=0, atol=1e-9)
    np.testing.assert_allclose(saved["data"]["std"], expected.std, rtol=0, atol=1e-9)
    lines = {_stats_line(run / "logs" / f"rank{r}.log") for r in range(3)}
    assert len(lines) == 1
    assert "measured on 2 training tiles" in lines.pop()


def test_checkpoint_without_stats_is_refused(tmp_path: Path) -> None:
    from landcover.checkpoint import Checkpoint

    config = load_config(None, {"model.encoder": "resnet18"})
    assert config.data.mean == "auto"
    model = build_model(config.model, 4, len(NAMES))
    path = tmp_path / "auto.pt"
    path.write_bytes(Checkpoint(model.state_dict(), config.to_dict()).serialize())
    image, label = synthesize_scene(64, 64, np.random.default_rng(1))
    tile, _ = write_pair(tmp_path, "t", image, label, (400_000.0, 4_300_000.0))
    result = run_cli("predict", str(tile), "--checkpoint", str(path), "--out", str(tmp_path / "o"))
    assert_one_line_error(result, "holds no band statistics")


@pytest.mark.slow
def test_training_with_an_included_stats_file(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    stats = tmp_path / "stats" / "tiny_stats.yaml"
    assert run_cli("data", "stats", str(tiny_data), "--out", str(stats)).returncode == 0
    config = tmp_path / "run.yaml"
    tree = yaml.safe_load(tiny_config.read_text())
    tree["include"] = "stats/tiny_stats.yaml"
    tree["optim"]["loss"] = {"class_weights": "auto"}
    config.write_text(yaml.safe_dump(tree))
    run = tmp_path / "run"
    extra = ("--workers", "1", "--epochs", "1", "--samples-per-epoch", "8")
    result = run_cli(*train_args(config, tiny_data, run, *extra))
    assert result.returncode == 0, result.stderr
    given = yaml.safe_load(stats.read_text())["data"]
    saved = torch.load(run / "checkpoints" / "last.pt", weights_only=True)["config"]
    # the included numbers are used as given (all 8 tiles measured, not the 6 training tiles)
    assert saved["data"]["mean"] == given["mean"]
    assert saved["data"]["std"] == given["std"]
    assert saved["data"]["class_frequencies"] == given["class_frequencies"]
    frequencies = expected_stats(_pairs(tiny_data)).frequencies
    np.testing.assert_allclose(
        saved["optim"]["loss"]["class_weights"], _median_frequency(frequencies), rtol=1e-9
    )
    log = (run / "logs" / "rank0.log").read_text()
    assert "band statistics as configured" in log
    assert "measured on" not in log
