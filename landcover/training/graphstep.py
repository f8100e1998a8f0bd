"""The training step as one CUDA graph (``run.cuda_graph``): launched once, not kernel by kernel.

At the batch a GPU trains with (16 patches of 256 px), a step of the default U-Net is some
hundreds of kernels of a few microseconds each: the host, launching them one by one from
Python, is slower than the GPU running them (the plain loop of issue 43 keeps an H200 busy 4 %
of a step). A CUDA graph records the step's kernels once and replays them with one launch.
:class:`GraphedStep` records the whole step — the batch made model input (D4, normalisation),
forward, loss, backward, the optimizer's update and the weights' moving average — on its first
capture and replays it for every later batch, which it copies into the graph's own input
tensors first. What changes from step to step outside the kernels' inputs (the learning rate,
the average's decay) lives in device tensors the caller fills before each replay.

Every call trains on its own batch, also the first ones: the ``warmup`` calls run the step
eagerly on a side stream (cuDNN chooses its algorithms, the optimizer makes its state), the
next one captures the step and replays it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

from landcover.feed.staging import PinnedStaging

log = logging.getLogger("landcover")

WARMUP_STEPS = 3
"""Eager steps on a side stream before the capture (torch's advice for whole-network capture)."""


class GraphedStep:
    """A step function captured as one CUDA graph after a few eager calls, then replayed.

    Args:
        body: One step on the batch's device tensors (the static inputs, once captured);
            returns the step's loss as a device scalar. It must not read a value back to
            the host and must keep its tensors' shapes from call to call.
        device: The CUDA device.
        warmup: Eager calls before the capture.
    """

    def __init__(
        self,
        body: Callable[[tuple[torch.Tensor, ...]], torch.Tensor],
        device: torch.device,
        warmup: int = WARMUP_STEPS,
    ) -> None:
        self.body = body
        self.device = device
        self.warmup = warmup
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static: tuple[torch.Tensor, ...] | None = None
        self.loss: torch.Tensor | None = None
        self.stream = torch.cuda.Stream(device)
        self.staging = PinnedStaging(device)

    def __call__(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Trains one step on a batch.

        Args:
            batch: The batch's tensors (host tensors, or device tensors), the same shapes and
                dtypes every call. A host tensor not in pinned memory goes through pinned
                buffers of the step's own (:class:`PinnedStaging`), so no copy waits for the GPU.

        Returns:
            The step's loss (a device scalar; after the capture the graph's own output,
            overwritten by the next replay, so read or add it before the next call).
        """
        self.calls += 1
        if self.static is None:
            self.static = tuple(t.to(self.device, non_blocking=True).clone() for t in batch)
        else:
            for target, source in zip(self.static, batch, strict=True):
                if source.device.type == "cpu" and not source.is_pinned():  # e.g. a draw
                    self.staging.to_device(source, out=target)
                else:
                    target.copy_(source, non_blocking=True)
        if self.graph is not None:
            self.graph.replay()
            assert self.loss is not None
            return self.loss
        if self.calls <= self.warmup:
            return self._side_stream(lambda: self.body(self.static))  # type: ignore[arg-type]
        graph = torch.cuda.CUDAGraph()
        # the capture records the step without running it; the replay then runs it
        with torch.cuda.graph(graph, stream=self.stream):
            self.loss = self.body(self.static)
        self.graph = graph
        graph.replay()
        return self.loss

    def _side_stream(self, run: Callable[[], torch.Tensor]) -> torch.Tensor:
        current = torch.cuda.current_stream(self.device)
        self.stream.wait_stream(current)
        with torch.cuda.stream(self.stream):
            out = run()
        current.wait_stream(self.stream)
        return out


def graph_obstacle(
    device: torch.device,
    accumulate: int,
    world_size: int,
    grad_scaling: bool,
    hooked_optimizer: bool,
    compiled: bool = False,
) -> str | None:
    """Why a run's step cannot be captured as one CUDA graph, or ``None`` when it can.

    Args:
        device: The worker's device.
        accumulate: ``optim.accumulate``.
        world_size: Workers in the run.
        grad_scaling: Whether fp16's gradient scaler is on (its skipped steps branch).
        hooked_optimizer: Whether the optimizer all-reduces in hooks of its own (Horovod's
            ``DistributedOptimizer``).
        compiled: Whether the model runs under ``torch.compile`` (``run.compile``).

    Returns:
        The reason in a few words, or ``None``.
    """
    if device.type != "cuda":
        return f"the device is {device.type}, not a CUDA GPU"
    if accumulate > 1:
        return "optim.accumulate > 1"
    if world_size > 1:
        return "more than one worker (gradient all-reduce not captured yet)"
    if grad_scaling:
        return "fp16 gradient scaling"
    if hooked_optimizer:
        return "the engine's distributed optimizer"
    if compiled:
        return "run.compile is on"
    return None
