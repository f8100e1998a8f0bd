"""SIGINT around the workers' launch (landcover.parallel.sigint), in this process.

The end-to-end check, Ctrl-C to a real launcher while its workers import torch, is
``tests/cli/test_interrupts.py``; here the pieces: the mask the workers inherit, the relay to
the main thread's handler, and the handlers put back after the launch.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from landcover.parallel.sigint import accept_sigint, sigint_deferred_in_workers

SIGINT_BIT = 1 << (signal.SIGINT - 1)


def _blocked_mask(pid: int | str) -> int:
    """The SigBlk mask of a process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigBlk:"):
            return int(line.split()[1], 16)
    raise AssertionError("no SigBlk line")


def test_a_worker_spawned_inside_starts_with_sigint_blocked() -> None:
    context = multiprocessing.get_context("spawn")  # as torch elastic starts them
    with sigint_deferred_in_workers():
        child = context.Process(target=time.sleep, args=(30,))
        child.start()
    try:
        assert _blocked_mask(child.pid) & SIGINT_BIT
    finally:
        child.kill()
        child.join()
    assert not _blocked_mask("self") & SIGINT_BIT  # and this thread's mask is put back


def test_sigint_reaches_the_main_thread_and_the_handlers_are_put_back() -> None:
    before = signal.getsignal(signal.SIGTERM)

    def elastic_handler(signum: int, frame: object) -> None:  # as torch elastic installs one
        raise RuntimeError(f"signal {signum}")

    with pytest.raises(KeyboardInterrupt), sigint_deferred_in_workers():
        signal.signal(signal.SIGTERM, elastic_handler)
        assert _blocked_mask("self") & SIGINT_BIT
        os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C: to the process, blocked here
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # relayed to Python's handler in this thread
            time.sleep(0.01)
    assert signal.getsignal(signal.SIGTERM) is before
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    accept_sigint()  # a no-op where SIGINT is not blocked
    assert not _blocked_mask("self") & SIGINT_BIT
