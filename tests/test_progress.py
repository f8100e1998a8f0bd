"""The one progress reporter (landcover.progress): log lines off a terminal, a bar on one."""

from __future__ import annotations

import io
import logging
import sys
import time

import pytest

from landcover.progress import ProgressReporter, clock


def test_clock() -> None:
    assert clock(0) == "0:00:00"
    assert clock(3725.9) == "1:02:05"
    assert clock(-5) == "0:00:00"


def test_lines_every_interval_and_always_the_last(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="landcover")
    reporter = ProgressReporter("tiles", 10, every_s=0.2).start()
    assert not reporter.on_terminal  # pytest captures stderr: not a TTY
    assert not reporter.due()  # nothing before the interval
    assert reporter.due(last=True)
    time.sleep(0.25)
    assert reporter.due()
    reporter.show(3, "3 done", "tiles 3/10 (3 done)")
    assert not reporter.due()  # the interval starts again
    reporter.show(10, "10 done")
    reporter.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "landcover"]
    assert lines == ["tiles 3/10 (3 done)", "tiles 10 done"]


def test_a_disabled_reporter_shows_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="landcover")
    reporter = ProgressReporter("epoch 1/2", 5, every_s=0.0, enabled=False).start()
    assert not reporter.due(last=True)
    reporter.show(5, "done")
    reporter.stop()
    assert [r for r in caplog.records if r.name == "landcover"] == []


def test_a_bar_on_a_terminal_and_no_lines(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="landcover")
    terminal = io.StringIO()
    terminal.isatty = lambda: True  # type: ignore[method-assign]
    monkeypatch.setattr(sys, "stderr", terminal)
    with ProgressReporter("uploaded", 4096, every_s=60.0, bytes_bar=True) as reporter:
        assert reporter.on_terminal
        assert reporter.due(last=True)
        reporter.advance(1024)
        reporter.show(4096, "2 files")
    assert not reporter.on_terminal  # removed on exit
    assert [r for r in caplog.records if r.name == "landcover"] == []
