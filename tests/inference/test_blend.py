"""The blender's softmax block by block: the same numbers as a whole window's softmax."""

from __future__ import annotations

import pytest
import torch

from landcover.inference.blend import add_weighted_softmax, blend_weights, put


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


def test_what_holds_no_sum_yet_is_written_over_not_added_to() -> None:
    """The blender leaves its buffers unzeroed: a window writes where nothing was added."""
    size, top, cols = 96, 24, 40  # rows from the window row above, columns from the left
    gen = torch.Generator().manual_seed(3)
    logits = (torch.randn((1, 6, size, size), generator=gen) * 4).contiguous(
        memory_format=torch.channels_last
    )[0]
    weights = blend_weights(size, 16)
    sums = torch.rand((6, size, size), generator=gen)
    holds = torch.zeros((size, size), dtype=torch.bool)
    holds[:top] = True
    holds[:, :cols] = True
    expected = torch.where(holds, sums, 0.0) + torch.softmax(logits.float(), dim=0) * weights
    acc = torch.where(holds, sums, float("nan"))  # stale values: must not reach the result
    add_weighted_softmax(acc, logits, weights, 64, (top, cols))
    assert torch.equal(acc, expected)
    norm = torch.where(holds, sums[0], float("nan"))
    put(norm, weights, top, cols)
    assert torch.equal(norm, torch.where(holds, sums[0], 0.0) + weights)
