"""Small host tensors to a GPU through pinned buffers, so the copy does not wait for the GPU.

A copy from pageable host memory to a GPU first waits for the work already queued on the
stream (CUDA stages it synchronously); the same copy from pinned (page-locked) memory is queued
like a kernel, and the host goes on. A training step copies a few small host tensors every step
(the photometric draw's values): :class:`PinnedStaging` keeps a few pinned buffers and uses them
in turn, each again only once the copy out of it has run (a CUDA event), so the host may run up
to ``depth`` steps ahead of the GPU.
"""

from __future__ import annotations

import torch

DEPTH = 4
"""Pinned buffers used in turn (the steps the host may queue ahead of the GPU)."""


class PinnedStaging:
    """Copies host tensors to one GPU through pinned buffers used in turn.

    Args:
        device: The CUDA device.
        depth: Buffers used in turn.
    """

    def __init__(self, device: torch.device, depth: int = DEPTH) -> None:
        self.device = device
        self.depth = depth
        self.turn = 0
        self.buffers: list[torch.Tensor | None] = [None] * depth
        self.events: list[torch.cuda.Event | None] = [None] * depth

    def to_device(self, host: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Copies a host tensor to the device without waiting for the device's queued work.

        Args:
            host: A CPU tensor (any memory).
            out: A device tensor of the same shape and dtype to copy into (e.g. a CUDA
                graph's input); ``None``: a new one.

        Returns:
            The device tensor (``out`` when given).
        """
        k = self.turn % self.depth
        self.turn += 1
        event = self.events[k]
        if event is not None:  # the copy out of this buffer, ``depth`` turns ago, has run
            event.synchronize()
        buffer = self.buffers[k]
        if buffer is None or buffer.numel() < host.numel() or buffer.dtype != host.dtype:
            buffer = torch.empty(host.numel(), dtype=host.dtype).pin_memory()
            self.buffers[k] = buffer
        staged = buffer[: host.numel()].view(host.shape)
        staged.copy_(host)
        if out is None:
            out = staged.to(self.device, non_blocking=True)
        else:
            out.copy_(staged, non_blocking=True)
        if event is None:
            event = torch.cuda.Event()
            self.events[k] = event
        event.record(torch.cuda.current_stream(self.device))
        return out
