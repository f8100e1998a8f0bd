"""The fused CE + Dice loss equals nn.CrossEntropyLoss + smp's DiceLoss, value and gradient."""

from __future__ import annotations

import pytest
import torch
from segmentation_models_pytorch.losses import DiceLoss
from torch import nn

from landcover.classes import IGNORE_INDEX
from landcover.config.optim import LossConfig
from landcover.training.fusedloss import CeDiceLoss
from landcover.training.losses import SegmentationLoss

CLASSES = 6
WEIGHTS = [1.0, 0.5, 0.4, 2.0, 3.0, 1.5]


def _batch(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random logits; targets with no-data pixels and class 4 absent from the batch."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, CLASSES, 17, 13, generator=gen) * 3
    target = torch.randint(0, CLASSES, (3, 17, 13), generator=gen)
    target[target == 4] = 0
    target[torch.rand(3, 17, 13, generator=gen) < 0.2] = IGNORE_INDEX
    return logits, target


def _reference(
    logits: torch.Tensor, target: torch.Tensor, ce: float, dice: float, weights: list[float] | None
) -> torch.Tensor:
    """smp's DiceLoss and torch's CrossEntropyLoss, as the loss was built before fusing."""
    cross = nn.CrossEntropyLoss(
        weight=None if weights is None else torch.tensor(weights), ignore_index=IGNORE_INDEX
    )
    dice_loss = DiceLoss("multiclass", from_logits=True, ignore_index=IGNORE_INDEX)
    total = torch.zeros(())
    if ce > 0:
        total = total + ce * cross(logits, target)
    if dice > 0:
        total = total + dice * dice_loss(logits, target)
    return total


def _value_and_grad(loss_fn, logits: torch.Tensor, target: torch.Tensor):  # type: ignore[no-untyped-def]
    x = logits.clone().requires_grad_(True)
    value = loss_fn(x, target)
    value.backward()
    return value.detach(), x.grad


@pytest.mark.parametrize(
    ("ce", "dice", "weights"),
    [(1.0, 1.0, WEIGHTS), (0.7, 1.3, None), (1.0, 0.0, WEIGHTS), (0.0, 2.0, None)],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_fused_equals_smp_and_torch(ce: float, dice: float, weights, seed: int) -> None:  # type: ignore[no-untyped-def]
    logits, target = _batch(seed)
    want, want_grad = _value_and_grad(
        lambda x, t: _reference(x, t, ce, dice, weights), logits, target
    )
    got, got_grad = _value_and_grad(CeDiceLoss(CLASSES, ce, dice, weights), logits, target)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_grad, want_grad, rtol=1e-4, atol=1e-7)
    # the trainer's SegmentationLoss takes the fused pass for these terms
    config = LossConfig(ce_weight=ce, dice_weight=dice, class_weights=weights)
    criterion = SegmentationLoss(config, CLASSES)
    assert criterion.fused is not None
    got, got_grad = _value_and_grad(criterion, logits, target)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_grad, want_grad, rtol=1e-4, atol=1e-7)


def test_fused_takes_bf16_logits_as_float() -> None:
    """bf16 logits (autocast's) are taken as float32; their gradient comes back in bf16."""
    logits, target = _batch(2)
    half = logits.bfloat16()
    want, want_grad = _value_and_grad(
        lambda x, t: _reference(x.float(), t, 1.0, 1.0, WEIGHTS), half, target
    )
    got, got_grad = _value_and_grad(CeDiceLoss(CLASSES, 1.0, 1.0, WEIGHTS), half, target)
    torch.testing.assert_close(got, want)
    assert got_grad.dtype == torch.bfloat16
    torch.testing.assert_close(got_grad, want_grad)


def test_ignored_pixels_get_no_gradient() -> None:
    """Only labelled pixels pull on the logits; a batch of one class leaves the others' Dice 0."""
    logits, target = _batch(3)
    target[:, :, :6] = IGNORE_INDEX
    target[:, :, 6:][target[:, :, 6:] != IGNORE_INDEX] = 2
    want, want_grad = _value_and_grad(lambda x, t: _reference(x, t, 1.0, 1.0, None), logits, target)
    got, got_grad = _value_and_grad(CeDiceLoss(CLASSES, 1.0, 1.0), logits, target)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_grad, want_grad, rtol=1e-4, atol=1e-7)
    assert got_grad[:, :, :, :6].abs().max() == 0


def test_other_terms_are_not_fused() -> None:
    config = LossConfig(ce_weight=1.0, dice_weight=1.0, focal_weight=0.5)
    assert SegmentationLoss(config, CLASSES).fused is None
    with pytest.raises(ValueError, match="positive"):
        CeDiceLoss(CLASSES, 0.0, 0.0)


def test_fused_runs_on_meta() -> None:
    """No value read back (a GPU never waits): the loss and its gradient on the meta device."""
    logits = torch.empty(2, CLASSES, 8, 8, device="meta", requires_grad=True)
    target = torch.empty(2, 8, 8, dtype=torch.long, device="meta")
    loss = CeDiceLoss(CLASSES, 1.0, 1.0, WEIGHTS).to("meta")(logits, target)
    loss.backward()
    assert loss.shape == () and logits.grad is not None


def test_weights_at_float32s_limit_give_a_nan_loss_and_a_finite_gradient() -> None:
    """As torch's weighted mean: the summed weights overflow, the value is nan; the gradient's
    factors (each weight over that sum) are 0, so the weights a step makes stay finite."""
    logits, target = _batch(4)
    extreme = [3e38] * CLASSES
    want = _reference(logits, target, 1.0, 0.0, extreme)
    got, grad = _value_and_grad(CeDiceLoss(CLASSES, 1.0, 1.0, extreme), logits, target)
    assert torch.isnan(want) and torch.isnan(got)
    assert torch.isfinite(grad).all()
