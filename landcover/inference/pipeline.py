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

A writer thread may be shared from one call to the next (one tile after another): the last
writes of one call are then returned unfinished and overlap the next call's first reads and
computes, so the device does not wait for a tile's last strips to be written before it starts
on the next tile (``benchmarks/latency_bench.py``). The writes stay in order, in the one thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def run_pipelined(
    count: int,
    read: Callable[[int], Item],
    compute: Callable[[int, Item], Result | None],
    write: Callable[[Result], None],
    depth: int = 2,
    writer: ThreadPoolExecutor | None = None,
) -> list[Future]:
    """Runs ``write(compute(i, read(i)))`` for ``i`` in ``range(count)``, stages overlapped.

    ``read`` runs in a reader thread and ``write`` in a writer thread, each in order of
    ``i``; ``compute`` runs in the calling thread, in order. A ``None`` result is not written.

    Args:
        count: Number of items.
        read: Reads item ``i`` (e.g. image rows).
        compute: Turns item ``i`` into a result (e.g. the model's probabilities).
        write: Consumes a result (e.g. writes a strip).
        depth: Items read ahead, and results waiting to be written, at most.
        writer: A one-thread executor shared from call to call (kept by the caller): the
            writes still waiting when the last item is computed are returned, not waited for.
            Default: a thread of this call's own, every write finished on return.

    Returns:
        The writes not finished yet, in order (none without ``writer``): the caller waits
        for them (``Future.result`` raises a failed write) before it uses what they wrote.

    Raises:
        Exception: The first exception raised by any stage, after both threads have stopped
            (and this call's writes in a shared writer have ended).
    """
    own = writer is None
    reader = ThreadPoolExecutor(1, thread_name_prefix="landcover-read")
    if writer is None:
        writer = ThreadPoolExecutor(1, thread_name_prefix="landcover-write")
    writes: deque[Future] = deque()
    try:
        reads: deque[Future] = deque(reader.submit(read, i) for i in range(min(depth, count)))
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
        while own and writes:
            writes.popleft().result()
        return list(writes)
    except BaseException:
        for future in writes:  # those not started; the caller closes its files next
            future.cancel()
        wait(writes)
        raise
    finally:
        reader.shutdown(wait=True, cancel_futures=True)
        if own:
            writer.shutdown(wait=True, cancel_futures=True)
