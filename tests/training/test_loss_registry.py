"""Loss terms behind one registry: a toy term registered here trains through the real CLI.

The test to copy for a new loss (docs/guide/extending.md, "A loss"): register the class,
check its value against an independent computation, train with it by ``--set``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from landcover.classes import IGNORE_INDEX
from landcover.config import LossConfig, load_config
from landcover.errors import ConfigError
from landcover.training.losses import (
    SegmentationLoss,
    loss_names,
    loss_specs,
    register_loss,
    unregister_loss,
)

from conftest import assert_one_line_error, run_cli, train_args

TOY = "toy_smooth_ce"
SMOOTHING = 0.1
BUILT_IN = ["ce", "dice", "focal", "lovasz", "tversky"]


class _SmoothCrossEntropy(nn.Module):
    """Cross-entropy with label smoothing; keeps every value it computes (for the test)."""

    calls: ClassVar[list[tuple[float, np.ndarray, np.ndarray]]] = []

    def __init__(self, config: LossConfig, num_classes: int, class_weights: object) -> None:
        super().__init__()

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        loss = F.cross_entropy(logits, target, ignore_index=IGNORE_INDEX, label_smoothing=SMOOTHING)
        if torch.is_grad_enabled():  # not the loss's check of its terms at construction
            kept = (logits.detach().float().numpy(), target.numpy())
            self.calls.append((float(loss.detach()), *kept))
        return loss


def _smooth_ce_numpy(logits: np.ndarray, target: np.ndarray) -> float:
    """``(1 - e) * NLL + e * mean_k(-log p_k)`` over the labelled pixels, in float64."""
    z = logits.astype(np.float64)
    logp = z - z.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    labelled = target != IGNORE_INDEX
    k = logits.shape[1]
    picked = np.take_along_axis(logp, np.where(labelled, target, 0)[:, None], 1)[:, 0]
    per_pixel = -(1 - SMOOTHING) * picked - SMOOTHING * logp.sum(1) / k
    return float(per_pixel[labelled].mean())


@pytest.fixture
def toy() -> type[_SmoothCrossEntropy]:
    """The toy term, registered for the test only."""
    _SmoothCrossEntropy.calls = []
    register_loss(TOY, "cross-entropy with label smoothing (a test's toy)")(_SmoothCrossEntropy)
    yield _SmoothCrossEntropy
    unregister_loss(TOY)


def test_the_built_in_terms_are_registered_and_the_shipped_configs_use_them() -> None:
    assert loss_names()[: len(BUILT_IN)] == BUILT_IN
    assert {s.name for s in loss_specs() if s.class_weights} == {"ce", "focal"}
    for name in ("default.yaml", "cpu.yaml"):
        terms = load_config(Path(__file__).parents[2] / "configs" / name).optim.loss.terms
        assert set(terms) <= set(loss_names())


def test_the_older_weight_keys_set_the_same_terms() -> None:
    old = LossConfig(ce_weight=0.5, dice_weight=1.0, focal_weight=0.0)
    assert old == LossConfig(terms={"ce": 0.5, "dice": 1.0, "focal": 0.0})
    assert LossConfig(terms={"dice": 1.0}).terms == {"ce": 1.0, "dice": 1.0}  # over {ce: 1}
    with pytest.raises(ValueError, match="positive weight"):
        LossConfig(terms={"ce": 0.0})


def test_each_built_in_term_ignores_no_data_pixels() -> None:
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 4, 9, 7, generator=gen)
    target = torch.randint(0, 4, (2, 9, 7), generator=gen)
    noisy = logits.clone()
    nodata = target.clone()
    nodata[:, :3] = IGNORE_INDEX
    noisy[:, :, :3] = torch.randn(2, 4, 3, 7, generator=gen) * 5
    for name in BUILT_IN:
        loss = SegmentationLoss(LossConfig(terms={"ce": 0.0, name: 1.0}), 4)
        assert torch.allclose(loss(logits, nodata), loss(noisy, nodata)), name


def test_a_registered_term_computes_what_it_says(toy: type[_SmoothCrossEntropy]) -> None:
    gen = torch.Generator().manual_seed(5)
    logits = torch.randn(2, 5, 8, 6, generator=gen) * 2
    target = torch.randint(0, 5, (2, 8, 6), generator=gen)
    target[0, :2] = IGNORE_INDEX
    loss = SegmentationLoss(LossConfig(terms={"ce": 0.5, TOY: 2.0}), 5)
    assert loss.fused is None  # no fused form covers the toy: the terms' sum
    ce = F.cross_entropy(logits, target, ignore_index=IGNORE_INDEX)
    expected = 0.5 * float(ce) + 2.0 * _smooth_ce_numpy(logits.numpy(), target.numpy())
    assert float(loss(logits, target)) == pytest.approx(expected, rel=1e-5)


def test_a_built_in_term_registered_again_is_computed_by_the_new_class() -> None:
    gen = torch.Generator().manual_seed(6)
    logits = torch.randn(2, 5, 8, 6, generator=gen) * 2
    target = torch.randint(0, 5, (2, 8, 6), generator=gen)
    terms = {"ce": 1.0, "dice": 1.0}  # the shipped configs' pair, which a fused form covers
    dice = SegmentationLoss(LossConfig(terms={"ce": 0.0, "dice": 1.0}), 5)
    built_in = next(spec for spec in loss_specs() if spec.name == "ce")
    assert SegmentationLoss(LossConfig(terms=terms), 5).fused is not None
    _SmoothCrossEntropy.calls = []
    register_loss("ce", "cross-entropy, a plugin's own", class_weights=True)(_SmoothCrossEntropy)
    try:
        loss = SegmentationLoss(LossConfig(terms=terms), 5)
        with torch.enable_grad():
            value = float(loss(logits, target))
    finally:
        register_loss("ce", built_in.summary, class_weights=True)(built_in.cls)
    assert loss.fused is None and len(_SmoothCrossEntropy.calls) == 1
    expected = _smooth_ce_numpy(logits.numpy(), target.numpy()) + float(dice(logits, target))
    assert value == pytest.approx(expected, rel=1e-5)
    assert SegmentationLoss(LossConfig(terms=terms), 5).fused is not None  # restored


def test_training_uses_a_term_registered_by_name(
    toy: type[_SmoothCrossEntropy], tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    result = run_cli(
        *train_args(tiny_config, tiny_data, run, "--epochs", "1", "--workers", "1"),
        *("--samples-per-epoch", "8", "--set", "optim.loss.terms.ce=0"),
        *("--set", f"optim.loss.terms.{TOY}=1"),
    )
    assert result.returncode == 0, result.stderr
    steps = 8 // 4  # samples per epoch / batch size (tiny config)
    assert len(toy.calls) == steps
    for value, logits, target in toy.calls:
        assert value == pytest.approx(_smooth_ce_numpy(logits, target), rel=1e-4)
    record = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    mean = np.mean([value for value, *_ in toy.calls])
    assert record["train_loss"] == pytest.approx(mean, rel=1e-5)
    saved = load_config(run / "config.yaml").optim.loss.terms
    assert saved == {"ce": 0.0, TOY: 1.0}


def test_an_unknown_term_is_one_line_naming_the_registered_ones(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    result = run_cli(
        *train_args(tiny_config, tiny_data, run, "--workers", "1"),
        *("--set", "optim.loss.terms.dise=1"),
    )
    line = assert_one_line_error(result, "optim.loss.terms: unknown loss 'dise'")
    assert line.endswith("registered: " + ", ".join(loss_names()))
    assert not run.exists()  # refused before anything is written


class _PerPixel(nn.Module):
    """A term that forgets to reduce: (B, H, W) instead of a scalar."""

    def __init__(self, config: LossConfig, num_classes: int, class_weights: object) -> None:
        super().__init__()

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, target, reduction="none")


class _WideContext(nn.Module):
    """A valid term that needs more than a few pixels (an 11 px pooling)."""

    def __init__(self, config: LossConfig, num_classes: int, class_weights: object) -> None:
        super().__init__()

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(logits.softmax(1), 11, stride=1).mean()


class _Raises(nn.Module):
    """A term that fails on any batch."""

    def __init__(self, config: LossConfig, num_classes: int, class_weights: object) -> None:
        super().__init__()

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("needs a mask band")


class _TwoArguments(nn.Module):
    """A term whose __init__ takes another signature."""

    def __init__(self, config: LossConfig, num_classes: int) -> None:
        super().__init__()


def test_a_plugin_term_that_breaks_the_contract_is_one_line(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="lower-case letters, digits and _"):
        register_loss("Bad Name", "a name --set cannot take")(_PerPixel)
    register_loss("per_pixel", "forgets to reduce")(_PerPixel)
    register_loss("two_arguments", "another signature")(_TwoArguments)
    register_loss("wide_context", "an 11 px pooling")(_WideContext)
    register_loss("raises", "fails")(_Raises)
    try:
        SegmentationLoss(LossConfig(terms={"ce": 1.0, "wide_context": 0.1}), 4)  # valid
        with pytest.raises(
            ConfigError,
            match=r"terms.raises: the term fails on a 64 px probe batch: RuntimeError: needs a mask band",
        ):
            SegmentationLoss(LossConfig(terms={"ce": 1.0, "raises": 1.0}), 4)
        with pytest.raises(
            ConfigError, match=r"optim.loss.terms.two_arguments: _TwoArguments cannot be made"
        ):
            SegmentationLoss(LossConfig(terms={"ce": 1.0, "two_arguments": 1.0}), 4)
        with pytest.raises(
            ConfigError, match=r"terms.per_pixel: the term gave \(1, 64, 64\), not a scalar"
        ):
            SegmentationLoss(LossConfig(terms={"ce": 1.0, "per_pixel": 1.0}), 4)
        run = tmp_path / "run"
        result = run_cli(
            *train_args(tiny_config, tiny_data, run, "--epochs", "1", "--workers", "1"),
            *("--set", "optim.loss.terms.per_pixel=1"),
        )
        assert_one_line_error(result, "optim.loss.terms.per_pixel", "not a scalar")
        assert not list(run.rglob("*.pt"))
    finally:
        for name in ("per_pixel", "two_arguments", "wide_context", "raises"):
            unregister_loss(name)
