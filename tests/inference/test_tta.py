"""Test-time augmentation: exact inverse transforms, averaging, and the --tta flags."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import rasterio
import torch

from landcover.errors import ConfigError
from landcover.inference.sliding import SlidingWindowPredictor
from landcover.inference.tta import parse_tta
from landcover.synthetic.synthetic import synthesize_scene, write_pair

from conftest import assert_one_line_error, run_cli

# D4 on (H, W, ...) arrays, written with numpy for the test: (forward, inverse) pairs
NUMPY_D4 = {
    "identity": (lambda a: a, lambda a: a),
    "rot90": (lambda a: np.rot90(a, 1), lambda a: np.rot90(a, -1)),
    "rot180": (lambda a: np.rot90(a, 2), lambda a: np.rot90(a, -2)),
    "rot270": (lambda a: np.rot90(a, 3), lambda a: np.rot90(a, -3)),
    "hflip": (lambda a: a[:, ::-1], lambda a: a[:, ::-1]),
    "vflip": (lambda a: a[::-1], lambda a: a[::-1]),
    "transpose": (lambda a: a.swapaxes(0, 1), lambda a: a.swapaxes(0, 1)),
    "antitranspose": (
        lambda a: np.rot90(a, 2).swapaxes(0, 1),
        lambda a: np.rot90(a, 2).swapaxes(0, 1),
    ),
}


def _prepare(batch: torch.Tensor) -> torch.Tensor:
    return batch.permute(0, 3, 1, 2).float() / 255


class _PixelModel(torch.nn.Module):
    """A 1x1 convolution: its output at a pixel depends only on that pixel."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class _PositionModel(_PixelModel):
    """A 1x1 convolution plus ramps over rows and columns: it knows where it is in a window,
    so a rotated or flipped window gives a different prediction."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        height, width = x.shape[2:]
        rows = (3 * torch.linspace(0, 1, height) ** 2).view(height, 1).expand(height, width)
        cols = (2 * torch.linspace(0, 1, width).sqrt()).view(1, width).expand(height, width)
        return self.conv(x) + torch.stack([rows, cols, torch.zeros_like(rows)])


def _predictor(model: torch.nn.Module, tta: str) -> SlidingWindowPredictor:
    return SlidingWindowPredictor(
        model, 64, 16, 3, _prepare, torch.device("cpu"), tta=parse_tta(tta)
    )


def test_presets_and_lists() -> None:
    assert parse_tta("none") == parse_tta("1") == ("identity",)
    assert parse_tta("8") == parse_tta("D4") == tuple(NUMPY_D4)
    assert parse_tta("4") == ("identity", "rot90", "rot180", "rot270")
    assert parse_tta("flips") == ("identity", "hflip", "vflip", "rot180")
    assert parse_tta("2") == ("identity", "hflip")
    assert parse_tta("identity, transpose,identity") == ("identity", "transpose")
    with pytest.raises(ConfigError, match="--tta rot45"):
        parse_tta("rot45")


@pytest.mark.parametrize("tta", ["d4", "rotations", "flips"])
def test_pointwise_model_gives_the_same_probabilities(tta: str) -> None:
    """Every transform maps each pixel's prediction back onto that pixel."""
    torch.manual_seed(0)
    model = _PixelModel().eval()
    image = np.random.default_rng(0).integers(0, 255, size=(150, 130, 4), dtype=np.uint8)
    plain = _predictor(model, "none").predict_array(image)
    augmented = _predictor(model, tta).predict_array(image)
    torch.testing.assert_close(augmented, plain, rtol=0, atol=1e-6)


@pytest.mark.parametrize("tta", ["d4", "rotations", "flips"])
def test_position_aware_model_averages_different_predictions(tta: str) -> None:
    """One window: the result is the mean of the transformed windows' predictions, mapped back
    by numpy; they differ from one another, so the average is not any one of them."""
    torch.manual_seed(1)
    model = _PositionModel().eval()
    image = np.random.default_rng(1).integers(0, 255, size=(64, 64, 4), dtype=np.uint8)
    predictions = []
    with torch.no_grad():
        for name in parse_tta(tta):
            forward, inverse = NUMPY_D4[name]
            window = torch.from_numpy(np.ascontiguousarray(forward(image)))[None]
            probs = torch.softmax(model(_prepare(window)), dim=1)[0].numpy()
            predictions.append(np.moveaxis(inverse(np.moveaxis(probs, 0, -1)), -1, 0))
    for a, b in itertools.combinations(predictions, 2):
        assert np.abs(a - b).max() > 1e-2
    augmented = _predictor(model, tta).predict_array(image).numpy()
    np.testing.assert_allclose(augmented, np.mean(predictions, axis=0), rtol=0, atol=1e-6)


def _write_like(tile: Path, path: Path, data: np.ndarray) -> Path:
    with rasterio.open(tile) as ds:
        profile = ds.profile
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(data)
    return path


def test_cli_tta_averages_the_flipped_tiles_prediction(checkpoint: Path, tmp_path: Path) -> None:
    """A tile one window wide: --tta 2 (identity + horizontal flip) gives the mean of the
    tile's plain prediction and the flipped-back plain prediction of the flipped tile."""
    image, label = synthesize_scene(300, 128, np.random.default_rng(4))
    tile = write_pair(tmp_path, "narrow", image, label, (400000.0, 4300000.0))[0]
    with rasterio.open(tile) as ds:
        flipped = _write_like(tile, tmp_path / "flipped.tif", ds.read()[:, :, ::-1])
    common = ["--checkpoint", str(checkpoint), "--prob-dtype", "float32", "--no-preview"]
    common += ["--window", "128", "--overlap", "16"]
    maps = {}
    for name, path, tta in (
        ("plain", tile, "none"),
        ("flipped", flipped, "none"),
        ("tta", tile, "2"),
    ):
        out = tmp_path / name
        result = run_cli("predict", str(path), *common, "--out", str(out), "--tta", tta)
        assert result.returncode == 0, result.stderr
        with rasterio.open(out / f"{path.stem}_prob.tif") as ds:
            maps[name] = ds.read()
            tags = ds.tags()
    assert tags["TTA"] == "identity,hflip"
    expected = (maps["plain"] + maps["flipped"][:, :, ::-1]) / 2
    np.testing.assert_allclose(maps["tta"], expected, rtol=0, atol=1e-5)
    assert np.abs(maps["tta"] - maps["plain"]).max() > 1e-2  # the flip changed something


def test_cli_rejects_an_unknown_transform(checkpoint: Path, tmp_path: Path) -> None:
    result = run_cli(
        "predict", "x.tif", "--checkpoint", str(checkpoint), "--out", str(tmp_path), "--tta", "9"
    )
    assert_one_line_error(result, "--tta 9", "rotations")


def test_cli_evaluate_with_tta(checkpoint: Path, tiny_data: Path, tmp_path: Path) -> None:
    metrics = {}
    for tta in ("none", "rotations"):
        out = tmp_path / tta
        result = run_cli(
            "evaluate", "--checkpoint", str(checkpoint), "--data", str(tiny_data), "--out",
            str(out), "--tta", tta,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        metrics[tta] = json.loads((out / "metrics.json").read_text())
    assert metrics["none"]["tta"] == ["identity"]
    assert metrics["rotations"]["tta"] == ["identity", "rot90", "rot180", "rot270"]
    assert metrics["rotations"]["pixels"] == metrics["none"]["pixels"]
    assert metrics["rotations"]["iou"] != metrics["none"]["iou"]  # the average changed pixels
