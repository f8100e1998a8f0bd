"""A run's training batches, epoch after epoch, drawn in a thread or in worker processes.

Batch ``k`` of an epoch is drawn from its own random generator, seeded from
``(seed, rank, epoch, k)`` (:func:`batch_rng`), so it is the same batch whoever draws it: the
:class:`~landcover.feed.prefetch.Prefetcher`'s thread (``data.loader_workers: 0``) or any of
``N`` worker processes of a :class:`torch.utils.data.DataLoader`. The worker processes are
forked, so they share the tiles in memory with the training process without copying them, and
they draw outside its GIL: a thread's draws are serialised with the training step's Python and
kernel launches (``benchmarks/gil_bench.py``), a process's run beside them. A process hands
its batches over through shared buffers mapped once (:mod:`landcover.feed.sharedslots`), not
as new shared memory each batch.

One loader serves the whole run (:class:`EpochBatches` spans the epochs left): the processes
are forked and their buffers mapped once, and while an epoch ends (the loss read back,
validation, the checkpoint) they already draw the next epoch's first batches. A loader started
every epoch waited for its first batch at every start: at batch 64 on 2 CPU cores 168 ms an
epoch (fork, then a draw), 8 % of a 64-step epoch at an H200's 33 ms a step
(``benchmarks/epochstart_bench.py``).
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Callable, Generator
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from landcover.feed.prefetch import Prefetcher
from landcover.feed.sharedslots import SharedSlots, bytes_needed, shared_memory_shortfall

log = logging.getLogger(__name__)
_warned: set[str] = set()

Batch = tuple[torch.Tensor, ...]
"""A batch as the sampler draws it (uint8 patches, labels, tile index[, D4 codes])."""

Draw = Callable[[int, np.random.Generator], Batch]
"""Draws a batch of a given size from a generator (a :class:`PatchSampler` method)."""


def batch_rng(seed: int, rank: int, epoch: int, index: int) -> np.random.Generator:
    """Returns the random generator of one batch.

    Args:
        seed: The run's base seed.
        rank: The training worker's rank.
        epoch: The epoch (0-based).
        index: The batch's index in the epoch (micro-batches counted one by one).

    Returns:
        A generator that is the same on every run with the same four numbers.
    """
    return np.random.default_rng([seed, rank, epoch, index])


@dataclass(frozen=True)
class EpochBatches(Dataset):
    """One worker's batches of consecutive epochs, as a map-style dataset.

    Batch ``k`` of epoch ``epoch + e`` is at index ``e * count + k``, drawn from
    :func:`batch_rng` of its own epoch and index: the same batch whether the loader spans one
    epoch or the whole run.

    Attributes:
        draw: Draws a batch (``PatchSampler.batch_with_tiles`` or ``batch_for_device``).
        batch_size: Patches a batch.
        count: Batches an epoch.
        seed: The run's base seed.
        rank: The training worker's rank.
        epoch: The first epoch (0-based).
        epochs: Epochs spanned.
    """

    draw: Draw
    batch_size: int
    count: int
    seed: int
    rank: int
    epoch: int
    epochs: int = 1

    def __len__(self) -> int:
        return self.count * self.epochs

    def __getitem__(self, index: int) -> Batch:
        if not 0 <= index < len(self):
            raise IndexError(
                f"batch {index} of {len(self)} ({self.epochs} epoch(s) of {self.count})"
            )
        epoch, k = divmod(index, self.count)
        return self.draw(self.batch_size, batch_rng(self.seed, self.rank, self.epoch + epoch, k))


def resolve_loader_workers(setting: int | str, device: torch.device) -> int:
    """The worker processes ``data.loader_workers`` asks for on a device.

    ``auto`` is 2 on a GPU and 0, a thread, on the CPU (where the model, not the feed, holds
    the cores, and a thread costs no process). On one H100 (bf16, batch 32, D4 on the GPU as
    ``data.augment_on: auto`` puts it) 2 feed processes trained 1.39x faster than the thread
    (798 against 573 samples/s, second run of 2026-11-27), and the same setting was the fastest
    of the first run too (812): the thread's draws share the GIL with the kernel launches
    (``benchmarks/gil_bench.py``). With D4 on the host the thread had won once (755 against
    663 samples/s), which is why ``auto`` was the thread for a day.

    Args:
        setting: A number of processes, or ``auto``.
        device: The training device.

    Returns:
        The number of worker processes (0: a thread in the training process).
    """
    if setting == "auto":
        return 2 if device.type == "cuda" else 0
    return int(setting)


def describe_feed(workers: int) -> str:
    """Says who draws the batches, for the log.

    Args:
        workers: Worker processes (0: a thread).

    Returns:
        For example ``batches drawn by 2 feed processes``.
    """
    if workers <= 0:
        return "batches drawn in a feed thread"
    return f"batches drawn by {workers} feed process{'es' if workers > 1 else ''}"


def _one_thread(worker_id: int) -> None:
    """A feed process computes with one thread (several would fight the training's)."""
    del worker_id
    torch.set_num_threads(1)


def epoch_loader(
    batches: EpochBatches, workers: int, pin_memory: bool, depth: int = 2
) -> Generator[Batch, None, None]:
    """Iterates over the epochs' batches in order, drawn ahead of the consumer.

    Args:
        batches: The batches (of one epoch, or of the run's epochs left).
        workers: Worker processes drawing them (0: one background thread, the
            :class:`~landcover.feed.prefetch.Prefetcher`). The processes are a
            :class:`~torch.utils.data.DataLoader`'s; each writes its batches into a ring of
            :class:`~landcover.feed.sharedslots.SharedSlots` mapped before they were forked
            and sends only the batch's index.
        pin_memory: Pin the batches' memory (for asynchronous copies to a GPU).
        depth: Batches drawn ahead by the thread, or by each process.

    Returns:
        A generator of ``len(batches)`` batches, each a tuple of tensors. Closing it (or
        dropping it) stops the thread or the processes. Where the shared memory has too
        little room for the processes' slots, the batches are drawn in the thread, with one
        warning line saying why.
    """
    if workers > 0:
        # the slots' shapes: a batch drawn here from a generator of its own (no batch's)
        template = batches.draw(batches.batch_size, np.random.default_rng(0))
        shortfall = shared_memory_shortfall(bytes_needed(template, workers * depth + 1))
        if shortfall is None:
            return _from_processes(batches, workers, pin_memory, depth, template)
        if shortfall not in _warned:
            _warned.add(shortfall)
            log.warning("drawing the batches in a thread: %s", shortfall)
    return _from_thread(batches, pin_memory, depth)


def _from_thread(
    batches: EpochBatches, pin_memory: bool, depth: int
) -> Generator[Batch, None, None]:
    # the thread starts at the first batch asked for: a feed closed before it (an error as the
    # run starts) has no thread to stop
    order = iter(range(len(batches)))
    yield from Prefetcher(lambda: batches[next(order)], len(batches), depth, pin_memory)


def _from_processes(
    batches: EpochBatches, workers: int, pin_memory: bool, depth: int, template: Batch
) -> Generator[Batch, None, None]:
    context = multiprocessing.get_context(
        "fork" if "fork" in multiprocessing.get_all_start_methods() else None
    )
    slots = SharedSlots(template, workers * depth + 1, context, pin_memory)
    loader = DataLoader(
        _SlotWriter(batches, slots),
        batch_size=None,  # an item is a whole batch's index; its tensors are in a slot
        shuffle=False,
        num_workers=workers,
        prefetch_factor=depth,
        worker_init_fn=_one_thread,
        # forked: the workers share the tiles in memory (spawned ones would be sent a copy)
        multiprocessing_context=context,
    )
    return _taken(loader, slots)


def _taken(loader: DataLoader, slots: SharedSlots) -> Generator[Batch, None, None]:
    try:
        for index in loader:
            yield slots.take(int(index))
    finally:
        slots.close()


class _SlotWriter(Dataset):
    """In a worker: draws batch ``k`` into its shared slot and hands on only ``k``."""

    def __init__(self, batches: EpochBatches, slots: SharedSlots) -> None:
        self.batches = batches
        self.slots = slots

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, index: int) -> int:
        self.slots.write(index, self.batches[index])
        return index
