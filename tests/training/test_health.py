"""The unlearned-class check and the narrow-decoder warning."""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import rasterio

from landcover.config import ModelConfig
from landcover.metrics import metrics_from_confusion
from landcover.models import final_stage_warning
from landcover.training.health import unlearned_classes, unlearned_message

from conftest import run_cli, train_args

NAMES = ["water", "trees", "field", "road"]
WATER, FIELD = 1, 3  # Chesapeake label codes


def test_classes_present_but_almost_never_predicted_are_unlearned() -> None:
    # rows true, columns predicted: water 1000 px of which 40 right (recall 4 %; IoU 40/1000,
    # as nothing else is predicted water), trees all right, field 60 of 1000 right (6 %),
    # road absent from the validation tiles
    confusion = np.array(
        [
            [40, 900, 60, 0],
            [0, 500, 0, 0],
            [0, 940, 60, 0],
            [0, 0, 0, 0],
        ]
    )
    metrics = metrics_from_confusion(confusion, NAMES)
    assert unlearned_classes(metrics) == ["water"]
    assert unlearned_classes(metrics, min_recall=0.07) == ["water", "field"]
    message = unlearned_message(metrics, ["water"], epoch=3)
    assert "after epoch 3" in message and "water (recall 4.0%, IoU 0.040)" in message


def test_final_stage_narrower_than_two_units_per_class_is_named() -> None:
    narrow = ModelConfig(encoder="resnet18", decoder_channels=[128, 64, 32, 16, 8])
    wide = ModelConfig(encoder="resnet18", decoder_channels=[128, 64, 32, 16, 16])
    assert "ends with 8 channels for 6 classes" in (final_stage_warning(narrow, 6) or "")
    assert final_stage_warning(wide, 6) is None
    assert final_stage_warning(narrow, 4) is None


def _without_water_in_training(tiny_data: Path, out: Path) -> Path:
    """The tiny dataset with water relabelled as field in the six training tiles only."""
    shutil.copytree(tiny_data, out)
    labels = sorted(out.glob("*_lc.tif"))
    assert len(labels) == 8
    for path in labels[:6]:  # the last two (by name) are the validation tiles
        with rasterio.open(path, "r+") as ds:
            codes = ds.read(1)
            ds.write(np.where(codes == WATER, FIELD, codes).astype(codes.dtype), 1)
    for path in labels[6:]:
        with rasterio.open(path) as ds:
            assert (ds.read(1) == WATER).sum() > 0  # validation has water to miss
    return out


def test_a_class_never_learned_is_named_after_each_validation(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    data = _without_water_in_training(tiny_data, tmp_path / "data")
    run = tmp_path / "run"
    extra = ["--epochs", "4", "--workers", "1", "--set", "optim.warmup_epochs=1"]
    result = run_cli(*train_args(tiny_config, data, run, *extra))
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert records[0]["unlearned"] is None  # epoch 1: still warming up
    # after the warm-up every validation is checked; a class never taught may still get stray
    # pixels from its untrained output for an epoch or two, but not at the end
    assert all(isinstance(r["unlearned"], list) for r in records[1:])
    assert "water" in records[-1]["unlearned"]
    assert records[-1]["val_iou"]["water"] < 0.05
    # one warning line after each validation that found unlearned classes, naming them
    warnings = [ln for ln in result.stderr.splitlines() if "does not predict" in ln]
    named = [r for r in records[1:] if r["unlearned"]]
    assert [int(re.search(r"after epoch (\d+)", ln)[1]) for ln in warnings] == [
        r["epoch"] for r in named
    ]
    for line, record in zip(warnings, named, strict=True):
        shown = re.findall(r"(\w+) \(recall ([\d.]+)%", line)
        assert [name for name, _ in shown] == record["unlearned"]
        assert all(float(recall) < 5.0 for _, recall in shown)
    # the tiny config's last decoder stage (8 channels for 6 classes) is named once
    assert result.stderr.count("model.decoder_channels ends with 8 channels for 6 classes") == 1


def test_resume_does_not_load_initial_weights(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    """Resuming never needs the initial weights: the checkpoint's replace them (offline too)."""
    run = tmp_path / "run"
    first = run_cli(*train_args(tiny_config, tiny_data, run, "--epochs", "1", "--workers", "1"))
    assert first.returncode == 0, first.stderr
    extra = ["--epochs", "2", "--workers", "1", "--set", "model.weights=imagenet"]
    fresh = run_cli(*train_args(tiny_config, tiny_data, tmp_path / "fresh", *extra))
    assert fresh.returncode != 0  # ImageNet weights cannot be had offline...
    resumed = run_cli(*train_args(tiny_config, tiny_data, run, *extra))
    assert resumed.returncode == 0, resumed.stderr  # ...and a resumed run does not ask for them
    assert "model.weights 'imagenet' not loaded: resuming" in resumed.stderr
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 2
