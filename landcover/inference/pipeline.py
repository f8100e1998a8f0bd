"""A three-stage pipeline: read ahead in a thread, compute in the caller's thread, write behind.

``landcover predict`` reads and decodes a row of windows (GDAL), runs the model on it (torch)
and encodes and writes the finished strip (numpy, GDAL). Run one after the other, the device
waits for GDAL twice per row. Here item ``i + 1`` is read, and item ``i - 1`` written, while
item ``i`` is computed: GDAL and torch release the GIL, so the stages overlap. The model stays
in the caller's thread (CUDA work is issued from one thread, and CPU torch keeps its own
thread pool to itself); the reader and the writer are one thread each, so items are read and
written in order and each GDAL dataset is only ever used by one thread at a time.

Memory stays bounded: at most ``depth`` items are read ahead and ``depth`` results wait to be
written. The first failure in any stage stops the pipeline: items not yet started are
cancelled, both threads are joined, and the exception is raised in the caller's thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def run_pipelined(
    count: int,
    read: Callable[[int], Item],
    compute: Callable[[int, Item], Result | None],
    write: Callable[[Result], None],
    depth: int = 2,
) -> None:
    """Runs ``write(compute(i, read(i)))`` for ``i`` in ``range(count)``, stages overlapped.

    ``read`` runs in a reader thread and ``write`` in a writer thread, each in order of
    ``i``; ``compute`` runs in the calling thread, in order. A ``None`` result is not written.

    Args:
        count: Number of items.
        read: Reads item ``i`` (e.g. image rows).
        compute: Turns item ``i`` into a result (e.g. the model's probabilities).
        write: Consumes a result (e.g. writes a strip).
        depth: Items read ahead, and results waiting to be written, at most.

    Raises:
        Exception: The first exception raised by any stage, after both threads have stopped.
    """
    reader = ThreadPoolExecutor(1, thread_name_prefix="landcover-read")
    writer = ThreadPoolExecutor(1, thread_name_prefix="landcover-write")
    try:
        reads: deque[Future] = deque(reader.submit(read, i) for i in range(min(depth, count)))
        writes: deque[Future] = deque()
        for i in range(count):
            item = reads.popleft().result()
            if i + depth < count:
                reads.append(reader.submit(read, i + depth))
            result = compute(i, item)
            del item
            if result is not None:
                writes.append(writer.submit(write, result))
            del result
            while writes and (len(writes) > depth or writes[0].done()):
                writes.popleft().result()  # raises a failed write here
        while writes:
            writes.popleft().result()
    finally:
        reader.shutdown(wait=True, cancel_futures=True)
        writer.shutdown(wait=True, cancel_futures=True)
