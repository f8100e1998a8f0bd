"""A few training steps under torch's profiler (``run.profile_steps``): where a step's time goes.

The first epoch a run trains profiles ``N`` optimizer steps on every worker, after
:data:`SKIP` steps (cuDNN's algorithm search, the caching allocator and a compile settle
there) and one warm-up step of the profiler. Each worker writes to ``RUN/profile/``:

- ``rank{r}.pt.trace.json``: the Chrome trace (open it in Perfetto or ``chrome://tracing``;
  TensorBoard's profiler plugin reads the folder);
- ``rank{r}.txt``: the headline, and the operators by self time on the device (CUDA) or the
  CPU (the table of ``torch.profiler``'s ``key_averages``).

The headline (logged by every worker) gives the wall milliseconds a step, the CPU time of
torch's operators a step, and on a GPU the kernels' time a step and its share of the wall:
well under 1, the GPU waits for the host (the input path, Python, a synchronisation), which
the trace then shows. The profiled epoch's samples/s includes the profiler's own overhead.
A profile that cannot be written is one warning line; training goes on.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import torch
from torch.autograd import DeviceType
from torch.autograd.profiler_util import FunctionEvent
from torch.profiler import ProfilerActivity, profile, schedule

from landcover.errors import first_line
from landcover.fileio import atomic_write_text

log = logging.getLogger("landcover")

SKIP = 3
"""Steps of the epoch left out before the profiler's warm-up step."""

ANNOTATIONS = ("ProfilerStep#", "Optimizer.")
"""Names of the profiler's and the optimizer's step annotations (not the GPU's own work)."""

QUIET_KINETO = "6"
"""``KINETO_LOG_LEVEL`` that keeps the profiler's backend from printing its stages (and, on
a machine without a GPU, an error about counting GPUs); a level the user set is kept."""


@dataclass(frozen=True)
class ProfileSummary:
    """What a profiled window of steps took.

    Attributes:
        steps: Steps profiled.
        wall_ms: Wall milliseconds a step.
        cpu_ms: CPU milliseconds of torch's operators a step (self time, every thread).
        device_ms: Milliseconds a step in which the GPU ran a kernel or a copy (overlapping
            ones count once; 0 on the CPU, or when the GPU's activity was not recorded).
        device: ``cuda`` or ``cpu``.
    """

    steps: int
    wall_ms: float
    cpu_ms: float
    device_ms: float
    device: str

    def headline(self) -> str:
        """One line: the step's wall time, operators' CPU time, and the GPU's busy share."""
        line = (
            f"{self.steps} steps profiled: {self.wall_ms:.1f} ms a step, torch operators "
            f"{self.cpu_ms:.1f} ms of CPU a step"
        )
        if self.device != "cuda":
            return line
        if self.device_ms <= 0:
            return line + "; no GPU activity recorded (KINETO_LOG_LEVEL=0 shows why)"
        busy = self.device_ms / self.wall_ms if self.wall_ms > 0 else 0.0
        return line + f", GPU kernels {self.device_ms:.1f} ms a step ({busy:.0%} of the wall)"


def busy_time(intervals: Iterable[tuple[float, float]]) -> float:
    """The time covered by at least one interval (kernels overlapping on streams count once).

    Args:
        intervals: ``(start, end)`` pairs.

    Returns:
        The length of their union.
    """
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def device_intervals(events: Iterable[FunctionEvent]) -> list[tuple[float, float]]:
    """The GPU's kernels and copies among a profile's events, as ``(start, end)`` in us.

    Annotations the profiler mirrors onto the GPU's timeline (``ProfilerStep#N``, the
    optimizer's ``Optimizer.step#...``) span whole steps whether a kernel runs or not; they
    are left out, or the GPU would read busy for the whole wall.

    Args:
        events: ``torch.profiler.profile.events()``.

    Returns:
        The intervals of the device's own activity.
    """
    return [
        (e.time_range.start, e.time_range.end)
        for e in events
        if e.device_type == DeviceType.CUDA
        and not getattr(e, "is_user_annotation", False)
        and not e.name.startswith(ANNOTATIONS)
    ]


def profile_window(steps_per_epoch: int, wanted: int) -> tuple[int, int] | None:
    """The steps to leave out and to profile, fitted to an epoch.

    Args:
        steps_per_epoch: Optimizer steps in the epoch.
        wanted: ``run.profile_steps``.

    Returns:
        ``(skip, active)``, with one warm-up step between them, or ``None`` when the epoch
        has fewer than two steps.
    """
    if wanted <= 0 or steps_per_epoch < 2:
        return None
    active = min(wanted, steps_per_epoch - 1)
    skip = min(SKIP, steps_per_epoch - 1 - active)
    return skip, active


class StepProfiler(AbstractContextManager["StepProfiler"]):
    """Profiles a window of training steps and writes the worker's trace and table.

    Call :meth:`step` after every optimizer step of the epoch.

    Args:
        folder: ``RUN/profile`` (made when the profile is written).
        rank: The worker's rank (names the files).
        device: The training device.
        skip: Steps left out first.
        active: Steps profiled (after one warm-up step).
    """

    def __init__(self, folder: Path, rank: int, device: torch.device, skip: int, active: int):
        self.folder = folder
        self.rank = rank
        self.device = device
        self.skip = skip
        self.active = active
        self.files: list[Path] = []
        self._steps = 0
        self._start = 0.0
        self._wall = 0.0
        os.environ.setdefault("KINETO_LOG_LEVEL", QUIET_KINETO)
        activities = [ProfilerActivity.CPU]
        if device.type == "cuda":
            activities.append(ProfilerActivity.CUDA)
        self._profiler = profile(
            activities=activities,
            schedule=schedule(wait=skip, warmup=1, active=active, repeat=1),
            on_trace_ready=self._write,
        )

    def __enter__(self) -> StepProfiler:
        """Starts the profiler (it records only in its window)."""
        self._profiler.__enter__()
        self._mark_if_window_starts()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        """Stops the profiler; an epoch shorter than the window writes what it recorded."""
        self._profiler.__exit__(kind, exc, trace)

    def step(self) -> None:
        """Marks the end of an optimizer step."""
        self._steps += 1
        if self._steps == self.skip + 1 + self.active:
            self._sync()
            self._wall = time.perf_counter() - self._start
        self._profiler.step()
        self._mark_if_window_starts()

    def _mark_if_window_starts(self) -> None:
        if self._steps == self.skip + 1:  # the warm-up step is done: the window opens
            self._sync()
            self._start = time.perf_counter()

    def _sync(self) -> None:
        """Waits for the device at the window's edges, so its wall time holds its kernels."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _write(self, prof: profile) -> None:
        """Writes the trace and the table (the profiler calls it when the window closes)."""
        events = prof.key_averages()
        steps = max(1, self.active)
        cpu_us = sum(e.self_cpu_time_total for e in events if not e.key.startswith("ProfilerStep"))
        device_us = busy_time(device_intervals(prof.events()))
        wall = self._wall or time.perf_counter() - self._start
        summary = ProfileSummary(
            steps=self.active,
            wall_ms=wall * 1e3 / steps,
            cpu_ms=cpu_us / 1e3 / steps,
            device_ms=device_us / 1e3 / steps,
            device=self.device.type,
        )
        headline = summary.headline()
        sort = "self_device_time_total" if self.device.type == "cuda" else "self_cpu_time_total"
        trace = self.folder / f"rank{self.rank}.pt.trace.json"
        table = self.folder / f"rank{self.rank}.txt"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            # written first outside the run folder: the trace records the path it is written
            # to ("traceName"), and the run folder's may hold a query; redacted on the way in
            with tempfile.TemporaryDirectory(prefix="landcover-trace-") as scratch:
                raw = Path(scratch) / trace.name
                prof.export_chrome_trace(str(raw))
                atomic_write_text(trace, raw.read_text(encoding="utf-8", errors="replace"))
            text = events.table(sort_by=sort, row_limit=30)
            atomic_write_text(table, f"{headline}\n\n{text}\n")
        except (OSError, RuntimeError) as exc:
            log.warning("rank %d: the profile was not written (%s)", self.rank, first_line(exc))
            return
        self.files = [trace, table]
        log.info("%s; trace and table in %s", headline, trace.parent)


def epoch_profiler(
    folder: Path, rank: int, device: torch.device, steps_per_epoch: int, wanted: int
) -> StepProfiler | None:
    """The profiler of an epoch's steps (``run.profile_steps``), if it is on and they fit.

    Args:
        folder: ``RUN/profile``.
        rank: The worker's rank.
        device: The training device.
        steps_per_epoch: Optimizer steps in the epoch.
        wanted: ``run.profile_steps`` (0: off).

    Returns:
        The profiler, or ``None`` (off, or an epoch of one step: a warning line says so).
    """
    if wanted <= 0:
        return None
    window = profile_window(steps_per_epoch, wanted)
    if window is None:
        log.warning("run.profile_steps: an epoch of one step is not profiled")
        return None
    return StepProfiler(folder, rank, device, *window)
