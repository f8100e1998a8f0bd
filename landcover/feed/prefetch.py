"""Background batch preparation, so drawing patches overlaps the training step."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator
from contextlib import suppress
from typing import Any

_DONE = object()


class Prefetcher:
    """Runs ``make_batch`` for ``steps`` batches in a background thread, ``depth`` ahead.

    The batches come out in the order they were made, so a seeded producer stays
    reproducible. Errors in the producer are raised in the consumer.

    Args:
        make_batch: Produces one batch (called ``steps`` times, from one thread).
        steps: Number of batches.
        depth: Batches prepared ahead of the consumer.
        pin_memory: Pin the batch tensors (for asynchronous copies to a GPU).
    """

    def __init__(
        self, make_batch: Callable[[], Any], steps: int, depth: int = 2, pin_memory: bool = False
    ) -> None:
        self._make = make_batch
        self._steps = steps
        self._pin = pin_memory
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="landcover-prefetch", daemon=True)
        self._thread.start()

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for _ in range(self._steps):
                batch = self._make()
                if self._pin:
                    batch = tuple(t.pin_memory() for t in batch)
                if not self._put(batch):
                    return
            self._put(_DONE)
        except BaseException as exc:  # handed to the consumer
            self._put(exc)

    def __iter__(self) -> Generator[Any, None, None]:
        try:
            while True:
                item = self._queue.get()
                if item is _DONE:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self.close()

    def close(self) -> None:
        """Stops the producer (also when the consumer leaves early)."""
        self._stop.set()
        # a second Ctrl-C (the launcher passes it on) while stopping: the thread is a daemon
        with suppress(KeyboardInterrupt):
            self._thread.join(timeout=5)
