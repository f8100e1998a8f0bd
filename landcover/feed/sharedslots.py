"""A ring of batch buffers in shared memory, written by feed processes and read by training.

A :class:`torch.utils.data.DataLoader` worker sends each batch's tensors to the training
process as new shared memory: every batch is a new file descriptor passed over a socket, a new
mapping and, on first touch, a page fault for every 4 KiB, all in the training process, about
5 ms a default batch on two cores (``benchmarks/gil_bench.py``: ``process, tensors sent``). With
:class:`SharedSlots` the buffers are mapped once, before the workers are forked: a worker
writes batch ``k`` into slot ``k % S`` and sends only ``k``; the training process copies the
slot out (into pinned memory for a GPU) and frees it.

A worker waits for its slot to be freed (batch ``k - S`` taken) before writing it, so a slot
is never overwritten while it is read, whatever order the workers finish in.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Sequence
from multiprocessing.context import BaseContext

import torch

SHM_DIR = "/dev/shm"
"""Where Linux keeps shared memory (a tmpfs; a container's is 64 MiB unless it is given more)."""

_POLL_S = 0.0005
"""How often a worker looks whether its slot was freed (it rarely has to wait)."""


def bytes_needed(template: Sequence[torch.Tensor], count: int) -> int:
    """Shared memory that ``count`` slots shaped like ``template`` take.

    Args:
        template: A batch.
        count: Slots.

    Returns:
        Bytes.
    """
    return count * sum(t.numel() * t.element_size() for t in template)


def shared_memory_shortfall(need: int, shm_dir: str = SHM_DIR) -> str | None:
    """Says why ``need`` bytes of shared memory would not fit, or ``None`` if they would.

    Touching shared memory beyond a full tmpfs kills the process with SIGBUS, so the room is
    looked at before the slots are made (with a margin of twice the need, for the other
    training workers of the machine and for torch's own).

    Args:
        need: Bytes the slots take.
        shm_dir: The shared-memory file system.

    Returns:
        A one-line reason, or ``None``.
    """
    try:
        stat = os.statvfs(shm_dir)
    except OSError:
        return None  # no such file system to look at (not Linux): the platform's own rules
    free = stat.f_bavail * stat.f_frsize
    if free >= 2 * need:
        return None
    return (
        f"{shm_dir} has {free / 2**20:.0f} MiB free, the feed processes' batches need "
        f"{need / 2**20:.0f} MiB (twice that to be safe): give the container more shared "
        "memory (docker --shm-size) or set data.loader_workers: 0"
    )


class SlotsClosedError(Exception):
    """The reader left: a worker waiting for a slot gives up."""


class SharedSlots:
    """``count`` batch buffers shaped like ``template``, in memory shared with forked workers.

    Args:
        template: A batch (a tuple of tensors) whose shapes and dtypes every batch has.
        count: Slots in the ring (more than the batches in flight at once).
        context: The multiprocessing context the workers are forked from.
        pin_memory: :meth:`take` copies a batch into pinned memory (for asynchronous copies
            to a GPU).
    """

    def __init__(
        self,
        template: Sequence[torch.Tensor],
        count: int,
        context: BaseContext | None = None,
        pin_memory: bool = False,
    ) -> None:
        ctx = context or multiprocessing.get_context()
        self.count = count
        self.pin_memory = pin_memory
        self.slots = [
            tuple(torch.empty_like(t, device="cpu").share_memory_() for t in template)
            for _ in range(count)
        ]
        # taken[s]: the last batch read from slot s (slot s first holds batch s)
        self._taken = ctx.Array("q", [s - count for s in range(count)])
        self._closed = ctx.Event()

    def write(self, index: int, batch: Sequence[torch.Tensor]) -> None:
        """Writes batch ``index`` into its slot, once the slot's previous batch was taken.

        Args:
            index: The batch's index in the epoch.
            batch: Tensors shaped as the template's.

        Raises:
            ValueError: If the batch's shapes or dtypes are not the template's.
            SlotsClosedError: If the reader left while the worker waited.
        """
        slot = self.slots[index % self.count]
        if len(batch) != len(slot) or any(
            t.shape != s.shape or t.dtype != s.dtype for t, s in zip(batch, slot, strict=False)
        ):
            shapes = [tuple(t.shape) for t in batch]
            raise ValueError(f"batch {index} has shapes {shapes}, the slots hold another")
        while self._last_taken(index % self.count) < index - self.count:
            if self._closed.is_set():
                raise SlotsClosedError(f"batch {index}: the reader left")
            time.sleep(_POLL_S)
        for dst, src in zip(slot, batch, strict=True):
            dst.copy_(src)

    def _last_taken(self, slot: int) -> int:
        with self._taken.get_lock():  # a lock: the reader's copy is complete before it is seen
            return int(self._taken[slot])

    def take(self, index: int) -> tuple[torch.Tensor, ...]:
        """Copies batch ``index`` out of its slot and frees the slot.

        Args:
            index: The batch's index (written by :meth:`write`).

        Returns:
            The batch's tensors (pinned when ``pin_memory``), the reader's own.
        """
        slot = index % self.count
        out = tuple(
            torch.empty_like(t, pin_memory=self.pin_memory).copy_(t) for t in self.slots[slot]
        )
        with self._taken.get_lock():
            self._taken[slot] = index
        return out

    def close(self) -> None:
        """Tells waiting workers that the reader left."""
        self._closed.set()
