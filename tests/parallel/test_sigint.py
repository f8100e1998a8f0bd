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
from torch.distributed.elastic.multiprocessing import SignalException
from torch.multiprocessing import start_processes

from landcover.errors import SignalledError
from landcover.parallel.launch import launch_workers
from landcover.parallel.sigint import accept_sigint, sigint_deferred_in_workers

from conftest import spawned_children

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
    before = signal.getsignal(signal.SIGHUP)

    def elastic_handler(signum: int, frame: object) -> None:  # as torch elastic installs one
        raise RuntimeError(f"signal {signum}")

    with pytest.raises(SignalException), sigint_deferred_in_workers():
        signal.signal(signal.SIGHUP, elastic_handler)
        assert _blocked_mask("self") & SIGINT_BIT
        os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C: to the process, blocked here
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # relayed to Python's handler in this thread
            time.sleep(0.01)
    assert signal.getsignal(signal.SIGHUP) is before
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert "TORCHELASTIC_SIGNALS_TO_HANDLE" not in os.environ
    accept_sigint()  # a no-op where SIGINT is not blocked
    assert not _blocked_mask("self") & SIGINT_BIT


class _SignalWhilePickled:
    """An argument whose pickling in the ``at``-th worker's start sends this process a signal
    and gives the relay time to hand it on: Ctrl-C in the middle of the workers' start."""

    signum = signal.SIGINT
    at = 1
    pickled = 0

    def __reduce__(self) -> tuple[type, tuple[()]]:
        _SignalWhilePickled.pickled += 1
        if _SignalWhilePickled.pickled == self.at:
            os.kill(os.getpid(), self.signum)
            time.sleep(1.0)  # the relay hears it in a fraction of a second
        return (_SignalWhilePickled, ())


def _worker(rank: int, _: _SignalWhilePickled) -> None:
    """A worker that ends at once."""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_workers_start_is_raised_once_all_have_started(
    monkeypatch: pytest.MonkeyPatch, signum: int
) -> None:
    """Raised between two workers' starts, the first was left to the launcher's exit: a
    traceback of a worker that lost its start-up data or a semaphore (CI, 2026-11-28)."""
    monkeypatch.setattr(_SignalWhilePickled, "signum", signum)
    monkeypatch.setattr(_SignalWhilePickled, "pickled", 0)
    started = []
    with pytest.raises(SignalException) as raised, sigint_deferred_in_workers():
        started.append(
            start_processes(
                _worker, args=(_SignalWhilePickled(),), nprocs=2, join=False,
                start_method="spawn",
            )
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the signal is raised here, after the start
            time.sleep(0.01)
    assert raised.value.sigval == signum
    assert _SignalWhilePickled.pickled == 2
    assert len(started) == 1, "interrupted while the workers started"
    for process in started[0].processes:
        process.join(60)
        assert process.exitcode == 0


def _sleeper(_: _SignalWhilePickled) -> None:
    """A worker that waits to be stopped."""
    time.sleep(120)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_between_two_workers_starts_under_torch_elastic_stops_both(
    monkeypatch: pytest.MonkeyPatch, signum: int
) -> None:
    """Through torch elastic's own launch (``launch_workers``): its ``elastic_launch`` wrote
    its default into the variable that told it to leave SIGINT to us, and its handler raised
    between the two starts; the first worker was left running, nobody's (CI, 2026-11-28)."""
    monkeypatch.setattr(_SignalWhilePickled, "signum", signum)
    monkeypatch.setattr(_SignalWhilePickled, "at", 2)  # as the second worker starts
    monkeypatch.setattr(_SignalWhilePickled, "pickled", 0)
    with pytest.raises(SignalledError) as raised:
        launch_workers(_sleeper, (_SignalWhilePickled(),), 2)
    assert raised.value.exit_code == 128 + signum
    assert _SignalWhilePickled.pickled >= 2
    assert spawned_children() == []  # both started, both stopped
