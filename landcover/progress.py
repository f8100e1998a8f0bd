"""One progress display for every long task: a rich bar on a terminal, log lines otherwise.

Training epochs, a predict job's tiles and blob transfers all report through a
:class:`ProgressReporter`: on a terminal (stderr is a TTY) a transient rich progress bar with
the task's label, a bar, ``done/total``, a short info text and the time remaining; elsewhere
(a log file, Azure ML's captured output) one log line every ``every_s`` seconds. Callers ask
:meth:`ProgressReporter.due` before building an expensive text (a loss read from the GPU), so
nothing is formatted that is not shown.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from landcover import redaction

log = logging.getLogger("landcover")

BAR_REFRESH_S = 0.5
"""Seconds between refreshes of a bar's info text."""


def _log_line(line: str) -> None:
    log.info("%s", line)


def clock(seconds: float) -> str:
    """A duration as ``H:MM:SS`` (negative durations as zero).

    Args:
        seconds: The duration.

    Returns:
        The text.
    """
    return str(timedelta(seconds=int(max(seconds, 0))))


class ProgressReporter:
    """Reports the progress of one task until :meth:`stop`.

    Args:
        label: The bar's label (``epoch 3/10``, ``tiles``, ``uploaded``).
        total: Units of work in the task (steps, tiles, bytes).
        every_s: Seconds between log lines when not on a terminal.
        enabled: Whether anything is shown (rank 0 only, say).
        remaining: Show rich's time-remaining column on the bar.
        bytes_bar: Show the bar's counts as transferred bytes and speed (for transfers).
        emit: Where a line goes when not on a terminal (default: the ``landcover`` log).
        stderr: Draw the bar on stderr (default: rich's console, stdout).
    """

    def __init__(
        self,
        label: str,
        total: int,
        every_s: float,
        enabled: bool = True,
        remaining: bool = True,
        bytes_bar: bool = False,
        emit: Callable[[str], None] | None = None,
        stderr: bool = False,
    ) -> None:
        self.label = label
        self.total = total
        self.every_s = every_s
        self.enabled = enabled
        self.remaining = remaining
        self.bytes_bar = bytes_bar
        self.emit = emit if emit is not None else _log_line
        self.stderr = stderr
        self.started = time.perf_counter()
        self._last = self.started
        self._bar: Any = None
        self._task: Any = None

    @property
    def on_terminal(self) -> bool:
        """Whether a bar is shown (rather than log lines)."""
        return self._bar is not None

    def start(self) -> ProgressReporter:
        """Starts the clock and, on a terminal, the bar.

        Returns:
            The reporter.
        """
        self.started = self._last = time.perf_counter()
        if self.enabled and sys.stderr.isatty():
            from rich import progress as rp
            from rich.console import Console

            columns: list[Any] = [rp.TextColumn(redaction.redact(self.label)), rp.BarColumn()]
            if self.bytes_bar:
                columns += [rp.DownloadColumn(), rp.TransferSpeedColumn()]
            else:
                columns.append(rp.MofNCompleteColumn())
            columns.append(rp.TextColumn("{task.fields[info]}"))
            if self.remaining:
                columns.append(rp.TimeRemainingColumn())
            console = Console(stderr=True) if self.stderr else None
            self._bar = rp.Progress(*columns, console=console, transient=True)
            self._bar.start()
            # the live bar now holds stdout and stderr in proxies that wrap each line to the
            # terminal's width: redact lines whole before that (a wrapped signature is no
            # longer one for the redacting streams below); the bar's stop puts ours back
            redaction.install()
            self._task = self._bar.add_task(self.label, total=self.total, info="")
        return self

    def __enter__(self) -> ProgressReporter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def elapsed(self) -> float:
        """Seconds since :meth:`start`."""
        return time.perf_counter() - self.started

    def due(self, last: bool = False) -> bool:
        """Whether the next :meth:`show` would be seen (a bar refresh or a log line).

        Args:
            last: The task's last update (always shown).

        Returns:
            True when the caller should build its text and call :meth:`show`.
        """
        if not self.enabled:
            return False
        wait = BAR_REFRESH_S if self.on_terminal else self.every_s
        return last or time.perf_counter() - self._last >= wait

    def advance(self, completed: int) -> None:
        """Moves the bar (cheap; no text): call after every unit of work.

        Args:
            completed: Units done so far.
        """
        if self._bar is not None:
            self._bar.update(self._task, completed=completed)

    def show(self, completed: int, info: str, line: str | None = None) -> None:
        """Shows the progress: the bar's info text, or one log line.

        Args:
            completed: Units done so far.
            info: The bar's short text (loss and speed, say).
            line: The whole log line when not on a terminal (default: ``label info``).
        """
        if not self.enabled:
            return
        self._last = time.perf_counter()
        if self._bar is not None:
            self._bar.update(self._task, completed=completed, info=redaction.redact(info))
        else:
            self.emit(line if line is not None else f"{self.label} {info}")

    def stop(self) -> None:
        """Removes the bar (a no-op when there is none)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class RowProgress:
    """Logs a tile's progress through its rows every ``every_s`` seconds (predict's log).

    Args:
        tile: The tile's path or URL (its name is logged).
        height: Its rows.
        width: Its columns.
        every_s: Seconds between lines.
    """

    def __init__(self, tile: str, height: int, width: int, every_s: float) -> None:
        self.name = Path(tile).name
        self.height, self.width, self.every_s = height, width, every_s
        self.start = self.last = time.perf_counter()

    def update(self, rows_done: int) -> None:
        """Logs a line if one is due.

        Args:
            rows_done: Rows finished so far.
        """
        now = time.perf_counter()
        if now - self.last < self.every_s:
            return
        self.last = now
        done = rows_done / self.height
        log.info(
            "%s: %3.0f%% %.2f Mpx/s ETA %.0f s",
            self.name,
            100 * done,
            rows_done * self.width / 1e6 / (now - self.start),
            (now - self.start) * (1 - done) / max(done, 1e-9),
        )
