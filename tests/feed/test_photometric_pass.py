"""The photometric pass in one chunk (a GPU's path) equals the CPU's patch-by-patch pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import landcover.feed.photometric as photometric_module
from landcover.feed.noiseblur import BLUR_KERNEL, blur_hwc_, gaussian_kernels_1d
from landcover.feed.photometric import PhotometricDraw, PhotometricRanges
from landcover.feed.photopass import blur_chunk_, lookup_base, lookup_rows
from landcover.feed.photoranges import gaussian_kernels_np
from landcover.training.step import accumulation_step


@pytest.mark.parametrize("shape", [(5, 23, 19, 4), (2, 8, 8, 3)])
def test_blur_chunk_equals_the_separable_blur(shape: tuple[int, int, int, int]) -> None:
    gen = torch.Generator().manual_seed(sum(shape))
    patches = torch.rand(shape, generator=gen)
    sigma = torch.rand(shape[0], generator=gen) * 0.8 + 0.4
    sigma[0] = 1e-3  # a patch not blurred: a unit-impulse kernel
    kernels = gaussian_kernels_1d(sigma)
    n, h, w, c = shape
    expected = patches.clone()
    blur_hwc_(expected, kernels, torch.empty(n * (h + 4) * (2 * w + 4) * c))
    got = patches.clone()
    blur_chunk_(got, kernels)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got[0], patches[0], rtol=0, atol=1e-7)
    assert not torch.allclose(got[1], patches[1], atol=1e-3)  # the others are blurred


def test_host_kernels_equal_the_torch_kernels() -> None:
    sigma = np.array([0.0, 0.4, 0.9, 1.2], dtype=np.float32)
    want = gaussian_kernels_1d(torch.from_numpy(sigma).clamp(min=1e-3))
    torch.testing.assert_close(torch.from_numpy(gaussian_kernels_np(sigma)), want)
    assert gaussian_kernels_np(sigma)[0].tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]


def test_the_draw_packs_its_kernels_for_unpack() -> None:
    gen = torch.Generator().manual_seed(4)
    shape = (6, 4, 16, 16)
    draw = PhotometricDraw.draw(shape, 1.0, gen, PhotometricRanges(blur_p=0.5), torch.device("cpu"))
    assert draw.packed.numel() == 6 * (2 * 4 + 3 + BLUR_KERNEL)
    want = gaussian_kernels_1d(draw.blur_sigma.clamp(min=1e-3))
    torch.testing.assert_close(draw.kernels, want)
    every = PhotometricDraw.unpack(draw.packed.clone(), shape)
    torch.testing.assert_close(every.kernels, draw.kernels)
    torch.testing.assert_close(every.blur_sigma, draw.blur_sigma)


def test_one_chunk_equals_patch_by_patch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blur, noise and standardisation: the GPU's one-chunk pass is the CPU's."""
    gen = torch.Generator().manual_seed(9)
    images = torch.randint(0, 256, (10, 20, 24, 4), generator=gen, dtype=torch.uint8)
    shape = (10, 4, 20, 24)
    draw = PhotometricDraw.draw(shape, 0.7, gen, PhotometricRanges(blur_p=0.5), torch.device("cpu"))
    blurred = draw.blurred.tolist()
    assert 0 < sum(blurred) < sum(draw.chosen.tolist()) < 10
    scale, shift = torch.rand((10, 4), generator=gen) + 1, torch.rand((10, 4), generator=gen)
    for s, t in ((scale, shift), (scale[:1], shift[:1]), (None, shift), (scale, None)):
        monkeypatch.setattr(photometric_module, "CPU_CHUNK", 1)
        want = draw.apply_uint8(images, True, s, t)
        monkeypatch.setattr(photometric_module, "CPU_CHUNK", 1 << 30)
        torch.testing.assert_close(draw.apply_uint8(images, True, s, t), want)


def test_lookup_constants_are_made_once() -> None:
    cpu = torch.device("cpu")
    assert lookup_rows(cpu, 3, 4, 5) is lookup_rows(cpu, 3, 4, 5)
    assert lookup_base(cpu) is lookup_base(cpu)
    rows = lookup_rows(cpu, 3, 4, 5)
    assert rows.shape == (3, 1, 20) and rows[2, 0, 5].item() == 2 * 4 * 256 + 1 * 256


class _Recorded(nn.Module):
    """Mean squared error that keeps each loss it returns."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[torch.Tensor] = []

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        loss = ((logits - target) ** 2).mean()
        self.seen.append(loss)
        return loss


def test_one_micro_batch_returns_its_loss_as_it_is() -> None:
    """k == 1: the loss itself, detached (no zeros, no division, no sum: no extra kernels)."""
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = _Recorded()
    batch = (torch.randn(4, 3), torch.randn(4, 2))
    total = accumulation_step(model, criterion, optimizer, [batch])
    assert total.data_ptr() == criterion.seen[0].data_ptr() and not total.requires_grad
    # k > 1: the mean of the micro-batches' losses, as before
    criterion.seen.clear()
    total = accumulation_step(model, criterion, optimizer, [batch, batch, batch])
    want = sum(loss.detach() for loss in criterion.seen) / 3
    torch.testing.assert_close(total, want)
