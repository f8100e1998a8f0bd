"""Ctrl-C while workers start: the launcher's SIGINT stays its own, the workers' waits.

A terminal's Ctrl-C sends SIGINT to the whole process group: the launcher and every worker.
A worker that has started runs inside torch's wrapper, which ends quietly on
``KeyboardInterrupt``. A worker that is still starting does not: for its first seconds a spawned
Python process imports torch, segmentation-models-pytorch and landcover, and a
``KeyboardInterrupt`` there printed two 40-line tracebacks (one a worker) above our one line,
every time Ctrl-C came in those seconds (2026-11-27: 9 of 10 tries).

While :func:`sigint_deferred_in_workers` is open, SIGINT is blocked in the launcher's threads.
Processes inherit the blocked mask through ``fork`` and ``exec``, so the workers start with
SIGINT blocked, and one that arrives while they import waits, pending, until the worker's
entry point calls :func:`accept_sigint`; it is then an ordinary ``KeyboardInterrupt`` there.
The launcher still hears it within a fraction of a second: a thread of its own waits for
SIGINT and hands it to the main thread's Python handler (``_thread.interrupt_main``), which is
torch elastic's (it stops the workers and raises ``SignalException``) or Python's
``KeyboardInterrupt``.

torch elastic installs its handlers of SIGINT, SIGTERM, SIGHUP and SIGQUIT when it starts the
workers and leaves them installed: a signal after the job (while the launcher writes a predict
job's summary, say) raised its ``SignalException`` where nothing expects it, a traceback. The
handlers found on entry are put back on exit.
"""

from __future__ import annotations

import _thread
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing import resource_tracker

_POLL_S = 0.2
_ELASTIC_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
"""The signals torch elastic handles (its ``TORCHELASTIC_SIGNALS_TO_HANDLE`` default)."""


@contextmanager
def sigint_deferred_in_workers() -> Iterator[None]:
    """Blocks SIGINT in this thread (and the processes it starts) and relays it to Python.

    Only in the main thread (elsewhere Python handles no signal): a no-op in any other. The
    handlers of torch elastic's signals found on entry are put back on exit.

    Yields:
        Nothing; start the worker processes inside.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # multiprocessing starts its resource tracker at the first spawn and then *unblocks*
    # SIGINT in the calling thread, whatever the mask was (CPython 3.11's ensure_running):
    # started now, it is left running and the mask stays as set here
    resource_tracker.ensure_running()
    numbers = [getattr(signal, name) for name in _ELASTIC_SIGNALS if hasattr(signal, name)]
    handlers = {number: signal.getsignal(number) for number in numbers}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    stop = threading.Event()

    def relay() -> None:  # a thread started here inherits the blocked mask: sigwait works
        while not stop.is_set():
            if signal.sigtimedwait({signal.SIGINT}, _POLL_S) is not None:
                _thread.interrupt_main(signal.SIGINT)

    thread = threading.Thread(target=relay, name="landcover-sigint", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        for number, handler in handlers.items():
            if handler is not None:  # None: set outside Python, cannot be put back
                signal.signal(number, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def accept_sigint() -> None:
    """Unblocks SIGINT in a worker; one that came while it started is raised now."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
