"""An epoch's batches drawn in a thread or in worker processes: the same batches, in order.

The processes hand their batches over through :class:`SharedSlots`, tested here too.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from landcover.config import DataConfig
from landcover.data.raster import TileArrays
from landcover.feed.loader import EpochBatches, epoch_loader, resolve_loader_workers
from landcover.feed.sampler import PatchSampler
from landcover.feed.sharedslots import SharedSlots, SlotsClosedError, shared_memory_shortfall

BATCH = 6
COUNT = 7


def _sampler() -> PatchSampler:
    rng = np.random.default_rng(3)
    tiles = [
        TileArrays(
            f"t{i}",
            rng.integers(0, 256, (80, 72, 4)).astype(np.uint8),
            rng.integers(0, 5, (80, 72)).astype(np.uint8),
        )
        for i in range(3)
    ]
    return PatchSampler(tiles, 32, 5, class_balance=0.5, augment=True)


def _drawn_directly(sampler: PatchSampler, on_device: bool, seed: int, epoch: int) -> list:
    """Batch k drawn in this process from a generator seeded with (seed, rank 0, epoch, k)."""
    draw = sampler.batch_for_device if on_device else sampler.batch_with_tiles
    return [draw(BATCH, np.random.default_rng([seed, 0, epoch, k])) for k in range(COUNT)]


@pytest.mark.parametrize("on_device", [False, True], ids=["d4-on-host", "d4-on-device"])
@pytest.mark.parametrize("workers", [0, 1, 2])
def test_thread_and_processes_give_the_same_batches_in_order(on_device: bool, workers: int) -> None:
    sampler = _sampler()
    draw = sampler.batch_for_device if on_device else sampler.batch_with_tiles
    got = list(epoch_loader(EpochBatches(draw, BATCH, COUNT, 5, 0, 2), workers, False))
    want = _drawn_directly(sampler, on_device, 5, 2)
    assert len(got) == COUNT
    for k, (batch, expected) in enumerate(zip(got, want, strict=True)):
        assert isinstance(batch, tuple)
        assert len(batch) == len(expected) == (4 if on_device else 3)
        for a, b in zip(batch, expected, strict=True):
            assert a.dtype == b.dtype and torch.equal(a, b), k
    # different batches, epochs and seeds draw differently
    assert not torch.equal(got[0][0], got[1][0])
    other = list(epoch_loader(EpochBatches(draw, BATCH, 2, 5, 0, 3), workers, False))
    assert not torch.equal(other[0][0], got[0][0])


@pytest.mark.parametrize("workers", [0, 2])
def test_a_feed_of_several_epochs_gives_each_epochs_batches_in_turn(workers: int) -> None:
    # a run's feed spans its epochs: epoch 2's batches, then epoch 3's, then epoch 4's, each
    # batch drawn from its own (seed, rank, epoch, k) as a one-epoch feed draws it
    sampler = _sampler()
    spanning = EpochBatches(sampler.batch_with_tiles, BATCH, COUNT, 5, 0, 2, epochs=3)
    got = list(epoch_loader(spanning, workers, False))
    want = [b for e in (2, 3, 4) for b in _drawn_directly(sampler, False, 5, e)]
    assert len(got) == len(want) == 3 * COUNT
    for k, (batch, expected) in enumerate(zip(got, want, strict=True)):
        for a, b in zip(batch, expected, strict=True):
            assert torch.equal(a, b), k
    with pytest.raises(IndexError):
        spanning[3 * COUNT]


def _pid_batch(size: int, rng: np.random.Generator) -> tuple[torch.Tensor, ...]:
    return (torch.tensor([os.getpid()]), torch.tensor(rng.integers(0, 1000, size)))


def test_worker_processes_draw_outside_the_training_process() -> None:
    batches = EpochBatches(_pid_batch, 3, 8, 0, 0, 0)
    pids = {int(b[0]) for b in epoch_loader(batches, 2, False)}
    assert os.getpid() not in pids
    assert len(pids) == 2  # each worker drew some of the batches
    thread_pids = {int(b[0]) for b in epoch_loader(batches, 0, False)}
    assert thread_pids == {os.getpid()}


def _failing(size: int, rng: np.random.Generator) -> tuple[torch.Tensor, ...]:
    raise ValueError(f"tile t7 holds no labelled pixels ({size} patches, {rng.integers(9)})")


@pytest.mark.parametrize("workers", [0, 2])
def test_a_draw_error_reaches_the_consumer(workers: int) -> None:
    with pytest.raises(ValueError, match="tile t7 holds no labelled pixels"):
        list(epoch_loader(EpochBatches(_failing, 3, 4, 0, 0, 0), workers, False))


def test_leaving_early_stops_the_worker_processes() -> None:
    before = set(multiprocessing.active_children())
    batches = epoch_loader(EpochBatches(_pid_batch, 2, 10_000, 0, 0, 0), 2, False)
    for i, _ in enumerate(batches):
        if i == 3:
            break
    started = set(multiprocessing.active_children()) - before
    assert len(started) == 2
    batches.close()  # as the trainer drops its iterator at the end of an epoch
    for process in started:
        process.join(timeout=10)
    assert not any(p.is_alive() for p in started)


def test_a_thread_feed_closed_before_its_first_batch_leaves_no_thread() -> None:
    # a run that fails as it starts closes its feed before taking a batch
    def feed_threads() -> int:
        return sum(t.name == "landcover-prefetch" for t in threading.enumerate())

    before = feed_threads()
    batches = epoch_loader(EpochBatches(_pid_batch, 2, 10_000, 0, 0, 0), 0, False)
    batches.close()
    assert feed_threads() == before
    # and one closed after its first batch stops its thread
    batches = epoch_loader(EpochBatches(_pid_batch, 2, 10_000, 0, 0, 0), 0, False)
    next(batches)
    assert feed_threads() == before + 1
    batches.close()
    assert feed_threads() == before


def test_an_epoch_has_exactly_its_batches() -> None:
    batches = EpochBatches(_pid_batch, 2, 3, 0, 0, 0)
    with pytest.raises(IndexError):
        batches[3]
    assert len(list(epoch_loader(batches, 2, False))) == 3


def test_auto_draws_in_processes_on_a_gpu_only() -> None:
    assert resolve_loader_workers("auto", torch.device("cuda")) == 2  # measured: 1.39x
    assert resolve_loader_workers("auto", torch.device("cpu")) == 0
    assert resolve_loader_workers(3, torch.device("cpu")) == 3
    assert DataConfig(loader_workers=1).loader_workers == 1
    with pytest.raises(ValueError, match="0 or more processes"):
        DataConfig(loader_workers=-1)


def test_a_slot_is_not_overwritten_before_its_batch_is_taken() -> None:
    slots = SharedSlots((torch.zeros(4, dtype=torch.int64),), count=2)
    slots.write(0, (torch.full((4,), 10),))
    slots.write(1, (torch.full((4,), 11),))
    # batch 2 goes into batch 0's slot: its writer waits until batch 0 was taken
    writer = threading.Thread(target=slots.write, args=(2, (torch.full((4,), 12),)))
    writer.start()
    writer.join(timeout=0.3)
    assert writer.is_alive()
    assert torch.equal(slots.take(0)[0], torch.full((4,), 10))
    writer.join(timeout=10)
    assert not writer.is_alive()
    assert torch.equal(slots.take(1)[0], torch.full((4,), 11))
    assert torch.equal(slots.take(2)[0], torch.full((4,), 12))


def test_a_batch_taken_is_the_readers_own() -> None:
    slots = SharedSlots((torch.zeros(3),), count=1)
    slots.write(0, (torch.ones(3),))
    first = slots.take(0)[0]
    slots.write(1, (torch.full((3,), 2.0),))  # the same slot
    assert torch.equal(first, torch.ones(3))


def test_a_waiting_writer_gives_up_when_the_reader_leaves() -> None:
    slots = SharedSlots((torch.zeros(2),), count=1)
    slots.write(0, (torch.ones(2),))
    failures = []

    def write_next() -> None:
        try:
            slots.write(1, (torch.ones(2),))
        except SlotsClosedError as exc:
            failures.append(str(exc))

    writer = threading.Thread(target=write_next)
    writer.start()
    slots.close()
    writer.join(timeout=10)
    assert failures == ["batch 1: the reader left"]


def test_a_batch_of_another_shape_is_refused() -> None:
    slots = SharedSlots((torch.zeros(2, 3, dtype=torch.uint8),), count=2)
    with pytest.raises(ValueError, match=r"batch 0 has shapes \[\(2, 4\)\]"):
        slots.write(0, (torch.zeros(2, 4, dtype=torch.uint8),))


def test_shared_memory_without_room_is_said_in_one_line(tmp_path: Path) -> None:
    assert shared_memory_shortfall(1 << 20, str(tmp_path)) is None
    reason = shared_memory_shortfall(1 << 60, str(tmp_path))
    assert reason is not None and "\n" not in reason
    assert "--shm-size" in reason and "data.loader_workers: 0" in reason
    assert shared_memory_shortfall(1 << 60, str(tmp_path / "absent")) is None


def _vast_batch(size: int, rng: np.random.Generator) -> tuple[torch.Tensor, ...]:
    """A batch that would take 16 TiB of slots (one byte of memory, expanded)."""
    return (torch.full((1,), int(rng.integers(0, 100)), dtype=torch.uint8).expand(size << 40),)


def test_too_little_shared_memory_draws_in_the_thread(caplog: pytest.LogCaptureFixture) -> None:
    batches = EpochBatches(_vast_batch, 16, 3, 0, 0, 0)
    with caplog.at_level(logging.WARNING, logger="landcover.feed.loader"):
        got = list(epoch_loader(batches, 2, False))
    assert [int(b[0][0]) for b in got] == [
        int(np.random.default_rng([0, 0, 0, k]).integers(0, 100)) for k in range(3)
    ]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and warnings[0].startswith("drawing the batches in a thread: ")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_feed_processes_hand_over_pinned_batches_for_a_gpu() -> None:
    sampler = _sampler()
    batches = EpochBatches(sampler.batch_with_tiles, BATCH, COUNT, 5, 0, 2)
    got = list(epoch_loader(batches, 2, pin_memory=True))
    for batch, expected in zip(got, _drawn_directly(sampler, False, 5, 2), strict=True):
        assert all(t.is_pinned() for t in batch)
        for a, b in zip(batch, expected, strict=True):
            assert torch.equal(a, b)
