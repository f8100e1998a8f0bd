"""Dealing a predict job's tiles to its workers: largest first, each claimed exactly once.

Every worker holds the same list of tiles, ordered largest first (rank 0 measures it and
broadcasts it). A worker that is free claims the next tile with one atomic ``add`` on a counter
in the job's c10d store (the rendezvous store every worker of a torch job already reaches), so
tile ``i`` goes to exactly one worker: the one whose ``add`` returned ``i + 1``.

Why claiming rather than a static longest-processing-time (LPT) assignment that every rank
could compute from the sizes alone: the sizes only estimate a tile's time. Tiles whose outputs
are already complete (a resumed job) take milliseconds, failed tiles stop early, blob downloads
vary with the network, and nodes differ in speed; a static plan leaves workers idle while
others still hold a queue, whereas claiming hands the next tile to whichever worker is free.
Taking the largest first keeps the LPT property that the last tiles to start are the small
ones, so the job ends within about one small tile of its least loaded worker. It costs one
store round trip per tile (about a millisecond, against seconds per tile).

Which worker predicts which tile depends on timing; that each tile is claimed exactly once
does not (the store's ``add`` is atomic), and the summary records the rank per tile.

The same store carries the job's counters (tiles finished, pixels predicted) for rank 0's
overall progress line, and the stop flag of ``--fail-fast``. A job of one worker keeps them
in the process.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

PREFIX = "landcover/predict/"


@dataclass(frozen=True)
class BoardCounts:
    """The job's counters at one moment.

    Attributes:
        claimed: Tiles handed out (including those in progress).
        done: Tiles predicted.
        skipped: Tiles whose outputs were already complete.
        failed: Tiles that failed.
        cost_done: Summed size (pixels or bytes) of the predicted tiles.
        cost_finished: Summed size of the finished tiles.
        pixels_done: Pixels predicted.
        stopped: Whether a worker asked the job to stop (``--fail-fast``).
        cost_partial: Summed size of the rows predicted so far of the tiles in progress.
        pixels_partial: Pixels predicted so far of the tiles in progress.
    """

    claimed: int
    done: int
    skipped: int
    failed: int
    cost_done: int
    cost_finished: int
    pixels_done: int
    stopped: bool
    cost_partial: int = 0
    pixels_partial: int = 0

    @property
    def finished(self) -> int:
        """Tiles finished one way or another."""
        return self.done + self.skipped + self.failed


class TileBoard:
    """The shared counters of a job: in a c10d store, or in this process for one worker.

    Thread-safe (rank 0's progress thread reads it while its main thread claims tiles).

    Args:
        total: Tiles in the job.
        store: The job's store (``None``: counters kept in this process).
        workers: Workers claiming tiles (for :meth:`claim_ahead`).
    """

    def __init__(self, total: int, store: Any | None = None, workers: int = 1) -> None:
        self.total = total
        self.workers = workers
        self._store = store
        self._local: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def _add(self, key: str, amount: int) -> int:
        with self._lock:
            if self._store is None:
                self._local[key] += amount
                return self._local[key]
            return int(self._store.add(PREFIX + key, amount))

    def claim(self) -> int | None:
        """Claims the next tile.

        Returns:
            Its index in the job's list, or ``None`` when none is left or the job stops.
        """
        if self.stopped():
            return None
        index = self._add("next", 1) - 1
        return index if index < self.total else None

    def claim_ahead(self) -> int | None:
        """Claims the tile after the one a worker is about to predict, to decode it meanwhile.

        Only while at least as many tiles are unclaimed as there are workers: near the job's
        end a tile held ahead by a busy worker would leave a free one idle, so there a worker
        claims its next tile when it is free (:meth:`claim`).

        Returns:
            Its index in the job's list, or ``None`` (claim the next tile when free).
        """
        if self.stopped() or min(self._add("next", 0), self.total) + self.workers > self.total:
            return None
        return self.claim()

    def finish(self, status: str, cost: int = 0, pixels: int = 0) -> None:
        """Counts a finished tile.

        Args:
            status: ``done``, ``skipped`` or ``failed``.
            cost: Its size in the job's order.
            pixels: Its pixels (counted for predicted tiles).
        """
        self._add(status, 1)
        self._add("cost_finished", cost)
        if status == "done":
            self._add("cost_done", cost)
            self._add("pixels_done", pixels)

    def advance(self, cost: int, pixels: int) -> None:
        """Counts rows of a tile in progress (negative: taken back when the tile finishes).

        Args:
            cost: Their share of the tile's size.
            pixels: Their pixels.
        """
        self._add("cost_partial", cost)
        self._add("pixels_partial", pixels)

    def stop(self) -> None:
        """Asks every worker to claim no further tile."""
        self._add("stop", 1)

    def stopped(self) -> bool:
        """Whether a worker asked the job to stop."""
        return self._add("stop", 0) > 0

    def counts(self) -> BoardCounts:
        """The counters now."""
        claimed = min(self._add("next", 0), self.total)
        return BoardCounts(
            claimed=claimed,
            done=self._add("done", 0),
            skipped=self._add("skipped", 0),
            failed=self._add("failed", 0),
            cost_done=self._add("cost_done", 0),
            cost_finished=self._add("cost_finished", 0),
            pixels_done=self._add("pixels_done", 0),
            stopped=self._add("stop", 0) > 0,
            cost_partial=self._add("cost_partial", 0),
            pixels_partial=self._add("pixels_partial", 0),
        )
