"""The blender's softmax block by block: the same numbers as a whole window's softmax."""

from __future__ import annotations

import pytest
import torch

from landcover.inference.blend import add_weighted_softmax, blend_weights


@pytest.mark.parametrize(
    ("size", "rows", "dtype"),
    [
        (96, 64, torch.float32),
        (100, 7, torch.float32),  # 700 values a block: not aligned, one block of the window
        (64, 64, torch.float32),
        (96, 40, torch.bfloat16),
    ],
)
def test_a_blocked_softmax_adds_what_the_whole_window_adds(
    size: int, rows: int, dtype: torch.dtype
) -> None:
    gen = torch.Generator().manual_seed(size + rows)
    logits = (torch.randn((1, 6, size, size), generator=gen) * 4).to(dtype)
    logits = logits.contiguous(memory_format=torch.channels_last)  # as a U-Net's on the CPU
    weights = blend_weights(size, 16)
    start = torch.rand((6, size, size + 10), generator=gen)  # sums of earlier windows
    expected = start.clone()
    expected[:, :, 5 : 5 + size] += torch.softmax(logits.float(), dim=1)[0] * weights
    acc = start.clone()
    add_weighted_softmax(acc[:, :, 5 : 5 + size], logits[0], weights, rows)
    assert torch.equal(acc, expected)
    assert torch.equal(acc[:, :, :5], start[:, :, :5])  # nothing outside the window moves
