"""The overall progress of a predict job on rank 0: tiles done, Mpx/s and ETA.

A thread reads the job's shared counters (:class:`~landcover.mapping.deal.TileBoard`), so
the line covers every worker on every node. It is shown as every long task's progress is
(:class:`~landcover.progress.ProgressReporter`): a rich bar on a terminal, otherwise a log
line every ``every_s`` seconds.
"""

from __future__ import annotations

import logging
import threading
import time

from landcover.mapping.deal import BoardCounts, TileBoard
from landcover.progress import BAR_REFRESH_S, ProgressReporter, clock

log = logging.getLogger("landcover")


class JobProgress:
    """Reports a job's progress from a background thread until :meth:`close`.

    Args:
        board: The job's counters.
        total_cost: Summed size of the tiles to process (the ETA's unit).
        every_s: Seconds between log lines when not on a terminal.
        enabled: Whether this worker reports (rank 0).
        refused: Tiles of the job that failed their check before it started (not on the
            board): counted as finished and failed, so the line's totals match the summary's.
    """

    def __init__(
        self, board: TileBoard, total_cost: int, every_s: float, enabled: bool, refused: int = 0
    ) -> None:
        self.board = board
        self.refused = refused
        self.total = board.total + refused
        self.total_cost = total_cost
        self.every_s = every_s
        self.enabled = enabled
        self._start = time.perf_counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reporter = ProgressReporter("tiles", self.total, every_s, enabled, remaining=False)
        self._share = 0.0  # never shown lower: the counters are read one by one

    def __enter__(self) -> JobProgress:
        if not self.enabled:
            return self
        self._start = time.perf_counter()
        self._reporter.start()
        self._thread = threading.Thread(target=self._run, name="job-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(stopped=exc_type is not None)

    def line(self, counts: BoardCounts, final: bool = False) -> str:
        """The progress line for some counts.

        Args:
            counts: The job's counters.
            final: The last line (no ETA).

        Returns:
            ``tiles 5/12 (3 predicted, 2 skipped, 0 failed) 1.23 Mpx/s ETA 0:01:05``.
        """
        elapsed = max(time.perf_counter() - self._start, 1e-9)
        partial = 0 if final else counts.pixels_partial  # rows of tiles still in progress
        rate = (counts.pixels_done + partial) / 1e6 / elapsed
        text = (
            f"tiles {counts.finished + self.refused}/{self.total} ({counts.done} predicted, "
            f"{counts.skipped} skipped, {counts.failed + self.refused} failed) {rate:.2f} Mpx/s"
        )
        done = counts.cost_done + counts.cost_partial
        if not final and done > 0 and counts.finished < self.board.total:
            finished = counts.cost_finished + counts.cost_partial
            share = min(max(finished / max(self.total_cost, 1), self._share), 1.0)
            self._share = share
            remaining = max(self.total_cost - finished, 0)
            text += f", {100 * share:.0f} % ETA {clock(remaining / (done / elapsed))}"
        return text

    def _run(self) -> None:
        interval = BAR_REFRESH_S if self._reporter.on_terminal else self.every_s
        while not self._stop.wait(interval):
            counts = self.board.counts()
            text = self.line(counts)
            self._reporter.show(counts.finished + self.refused, text, text)

    def close(self, stopped: bool = False) -> None:
        """Stops reporting; logs the final line.

        Args:
            stopped: The job was stopped (an error, Ctrl-C): the line says so, not that the
                job took that long.
        """
        if not self.enabled or self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._reporter.stop()
        elapsed = clock(time.perf_counter() - self._start)
        ending = "stopped after" if stopped else "in"
        log.info("%s %s %s", self.line(self.board.counts(), final=True), ending, elapsed)
