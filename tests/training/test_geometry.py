"""The batch geometry (global batch, steps per epoch, peak learning rate) and optim.lr_scaling."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from landcover.config import Config, OptimConfig, config_from_dict, load_config
from landcover.errors import ConfigError
from landcover.training.geometry import BatchGeometry

LR, REF, BATCH, SAMPLES = 0.001, 16, 16, 65536

# (optim.optimizer, optim.lr_scaling as written, the rule it must resolve to)
RULES = [
    ("adamw", None, "sqrt"),
    ("adam", None, "sqrt"),
    ("sgd", None, "linear"),
    ("adamw", "auto", "sqrt"),
    ("sgd", "auto", "linear"),
    ("adamw", "none", "none"),
    ("sgd", "none", "none"),
    ("adamw", "linear", "linear"),
    ("sgd", "sqrt", "sqrt"),
]


def expected_peak(rule: str, global_batch: int) -> float:
    """The peak rate written out from the rules' definitions."""
    if rule == "linear":
        return LR * global_batch / REF
    if rule == "sqrt":
        return LR * math.sqrt(global_batch / REF)
    return LR


@pytest.mark.parametrize("workers", [1, 8, 148])
@pytest.mark.parametrize("accumulate", [1, 2])
@pytest.mark.parametrize(("optimizer", "written", "rule"), RULES)
def test_geometry_numbers(
    workers: int, accumulate: int, optimizer: str, written: str | None, rule: str
) -> None:
    settings = {
        "optimizer": optimizer,
        "lr": LR,
        "ref_batch": REF,
        "batch_size": BATCH,
        "samples_per_epoch": SAMPLES,
        "accumulate": accumulate,
    }
    if written is not None:
        settings["lr_scaling"] = written
    optim = OptimConfig(**settings)
    assert optim.lr_scaling == rule
    geometry = BatchGeometry.from_optim(optim, workers)
    global_batch = workers * BATCH * accumulate
    assert geometry.global_batch == global_batch
    assert geometry.steps_per_epoch == -(-SAMPLES // global_batch)
    assert geometry.epoch_samples == geometry.steps_per_epoch * global_batch >= SAMPLES
    assert geometry.peak_lr == pytest.approx(expected_peak(rule, global_batch), rel=1e-12)


def test_numbers_of_the_issue() -> None:
    """148 workers x 16 with AdamW: 0.001 x sqrt(2368/16), not the linear rule's 0.148."""
    geometry = BatchGeometry.from_optim(OptimConfig(), 148)
    assert geometry.peak_lr == pytest.approx(0.001 * math.sqrt(148 * 16 / 16))
    assert geometry.describe_lr() == "peak lr 1.22e-02 (AdamW, sqrt rule: 0.001 x sqrt(2368/16))"
    sgd = BatchGeometry.from_optim(OptimConfig(optimizer="sgd", lr=0.1, accumulate=2), 8)
    assert sgd.describe_lr() == f"peak lr {0.1 * 256 / 16:.2e} (SGD, linear rule: 0.1 x 256/16)"
    assert sgd.describe_batch() == "8 workers x batch 16 x accumulate 2 = global batch 256"
    flat = BatchGeometry.from_optim(OptimConfig(lr_scaling="none"), 8)
    assert flat.describe_lr() == "peak lr 1.00e-03 (AdamW, no scaling)"
    with pytest.raises(ValueError, match="at least 1"):
        BatchGeometry.from_optim(OptimConfig(), 0)


def test_saved_config_holds_the_resolved_rule() -> None:
    assert Config().to_dict()["optim"]["lr_scaling"] == "sqrt"
    tree = load_config(None, sets=["optim.optimizer=sgd"]).to_dict()
    assert tree["optim"]["lr_scaling"] == "linear"
    assert "scale_lr" not in tree["optim"]
    # the saved (resolved) config validates to the same rule
    assert config_from_dict(tree).optim.lr_scaling == "linear"


@pytest.mark.parametrize(
    ("optimizer", "scale_lr", "rule"),
    [("adamw", True, "sqrt"), ("sgd", True, "linear"), ("adamw", False, "none")],
)
def test_old_scale_lr_key_still_validates(optimizer: str, scale_lr: bool, rule: str) -> None:
    old = Config().to_dict()  # a config as older versions stored it: scale_lr, no lr_scaling
    del old["optim"]["lr_scaling"]
    old["optim"].update(optimizer=optimizer, scale_lr=scale_lr)
    config = config_from_dict(old)
    assert config.optim.lr_scaling == rule
    assert "scale_lr" not in config.to_dict()["optim"]


def test_scale_lr_contradicting_lr_scaling_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "both.yaml"
    path.write_text(yaml.safe_dump({"optim": {"scale_lr": False, "lr_scaling": "sqrt"}}))
    with pytest.raises(ConfigError, match="contradicts lr_scaling: sqrt") as err:
        load_config(path)
    assert str(path) in str(err.value)
    path.write_text(yaml.safe_dump({"optim": {"scale_lr": "yes"}}))
    with pytest.raises(ConfigError, match="scale_lr"):
        load_config(path)
    path.write_text(yaml.safe_dump({"optim": {"lr_scaling": "cubic"}}))
    with pytest.raises(ConfigError, match=r"optim\.lr_scaling"):
        load_config(path)
    # agreeing settings are fine
    path.write_text(yaml.safe_dump({"optim": {"scale_lr": True, "lr_scaling": "linear"}}))
    assert load_config(path).optim.lr_scaling == "linear"
