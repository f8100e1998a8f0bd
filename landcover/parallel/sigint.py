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
SIGINT and hands it to the main thread's Python handler (``_thread.interrupt_main``). A thread
torch starts at its import does not block SIGINT, and the kernel may hand the signal to it
instead: Python then runs the same handler in the main thread at once.

That handler, for SIGINT and SIGTERM, is this module's, in place of torch elastic's (told by
``LaunchConfig.signals_to_handle``, :data:`ELASTIC_SIGNALS`, to handle only the others; a value
only in ``TORCHELASTIC_SIGNALS_TO_HANDLE`` was overwritten by ``elastic_launch``, and torch
elastic's handler raised inside the start as before: CI, 2026-11-28, again). It raises what torch
elastic's raises, a ``SignalException`` (the agent stops the workers), except while the main thread
is inside torch's ``start_processes`` (a few milliseconds a worker): raised there, between one
worker's start and the next, the workers already started were nobody's to stop (torch elastic keeps
their handle only once all have started) and the launcher exited under them, each printing a
traceback (``EOFError`` reading its start-up data, ``FileNotFoundError`` for a semaphore the
launcher had removed; CI, 2026-11-28). Held there, it is raised once the start returns.

torch elastic installs its handlers (of SIGHUP and SIGQUIT now) when it starts the workers and
leaves them installed: a signal after the job (while the launcher writes a predict
job's summary, say) raised its ``SignalException`` where nothing expects it, a traceback. The
handlers found on entry are put back on exit.
"""

from __future__ import annotations

import _thread
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing import resource_tracker
from types import FrameType

from torch.distributed.elastic.multiprocessing import SignalException
from torch.multiprocessing import start_processes

_POLL_S = 0.2
_HELD_POLL_S = 0.01
_ELASTIC_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
"""The signals torch elastic handles (its ``TORCHELASTIC_SIGNALS_TO_HANDLE`` default)."""
_OURS = ("SIGINT", "SIGTERM")
"""The signals handled here while workers start; torch elastic keeps the others."""
_ELASTIC_ENV = "TORCHELASTIC_SIGNALS_TO_HANDLE"
ELASTIC_SIGNALS = ",".join(n for n in _ELASTIC_SIGNALS if n not in _OURS)
"""What torch elastic handles while workers are launched: ``LaunchConfig.signals_to_handle``
(``elastic_launch`` writes it into :data:`_ELASTIC_ENV`, which torch elastic reads)."""
_STARTING = start_processes.__code__


class _HeldWhileStarting:
    """A SIGINT/SIGTERM handler: torch elastic's ``SignalException``, after any start.

    Inside a start of workers the signal is kept (``pending``) to be raised after it.
    """

    def __init__(self) -> None:
        self.pending: int | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        while frame is not None:
            if frame.f_code is _STARTING:
                self.pending = signum
                return
            frame = frame.f_back
        self.pending = None
        sigval = signal.Signals(signum)
        raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)


@contextmanager
def sigint_deferred_in_workers() -> Iterator[None]:
    """Blocks SIGINT in this thread (and the processes it starts) and relays it to Python.

    SIGINT and SIGTERM raise torch elastic's ``SignalException`` inside, once no start of
    workers is under way. Only in the main thread (elsewhere Python handles no signal): a
    no-op in any other. The handlers of torch elastic's signals, and its environment
    variable, found on entry are put back on exit.

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
    elastic_env = os.environ.get(_ELASTIC_ENV)
    os.environ[_ELASTIC_ENV] = ELASTIC_SIGNALS  # for a torch without LaunchConfig's field
    held = _HeldWhileStarting()
    for name in _OURS:
        signal.signal(getattr(signal, name), held)
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    stop = threading.Event()

    def relay() -> None:  # a thread started here inherits the blocked mask: sigwait works
        while not stop.is_set():
            wait_s = _POLL_S if held.pending is None else _HELD_POLL_S
            if signal.sigtimedwait({signal.SIGINT}, wait_s) is not None:
                _thread.interrupt_main(signal.SIGINT)
            elif (waiting := held.pending) is not None:  # raised if the start is over
                _thread.interrupt_main(waiting)  # (else held again)

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
        if elastic_env is None:
            os.environ.pop(_ELASTIC_ENV, None)
        else:
            os.environ[_ELASTIC_ENV] = elastic_env
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def accept_sigint() -> None:
    """Unblocks SIGINT in a worker; one that came while it started is raised now."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
