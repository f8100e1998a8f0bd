"""Batches copied to the device on a stream of their own arrive whole and in order."""

from __future__ import annotations

from collections.abc import Generator

import pytest
import torch

from landcover.feed.devicecopy import copied_ahead


def _batches(
    n: int, closed: list[bool], pin: bool, side: int = 32
) -> Generator[tuple[torch.Tensor, ...], None, None]:
    """Batches of distinct values (uint8 imagery, int64 tile indices); notes its closing."""
    try:
        for k in range(n):
            images = torch.full((4, side, side, 4), k + 1, dtype=torch.uint8)
            tiles = torch.arange(4, dtype=torch.int64) + 10 * k
            yield tuple(t.pin_memory() if pin else t for t in (images, tiles))
    finally:
        closed.append(True)


def test_on_the_cpu_the_batches_pass_as_they_are_and_closing_closes_the_source() -> None:
    closed: list[bool] = []
    source = _batches(5, closed, pin=False)
    batches = copied_ahead(source, torch.device("cpu"))
    first = next(batches)
    assert first[0].device.type == "cpu" and int(first[0][0, 0, 0, 0]) == 1
    assert int(next(batches)[1][0]) == 10
    batches.close()
    assert closed == [True]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_each_batch_is_whole_when_the_training_stream_uses_it() -> None:
    """Batches of 256 MB (milliseconds over PCIe each), used on the training stream the moment
    they are taken: a use that did not wait for the copy stream would read them half copied."""
    device = torch.device("cuda")
    closed: list[bool] = []
    side = 4096
    batches = copied_ahead(_batches(4, closed, pin=True, side=side), device)
    sums = []
    for _ in range(4):
        images, tiles = next(batches)
        assert images.device.type == "cuda" and tiles.device.type == "cuda"
        sums.append(images.sum(dtype=torch.int64) + tiles.sum())
    got = [int(s) for s in sums]
    want = [(k + 1) * 4 * side * side * 4 + 4 * 10 * k + 6 for k in range(4)]
    assert got == want
    batches.close()
    assert closed == [True]
