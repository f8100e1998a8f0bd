"""Progress of a copy (``landcover data upload``/``download``) on the one progress display.

:class:`~landcover.progress.ProgressReporter` shows it: on a terminal (stderr is a TTY), a
transient rich bar of bytes with speed, files and time left, on stderr; elsewhere (a log file,
a batch job's captured output) one line on stderr every few seconds while files remain. Every
line is redacted (:mod:`landcover.redaction`).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from landcover.progress import ProgressReporter
from landcover.redaction import redact

Advance = Callable[[int, int], None]
"""``advance(nbytes, files)``: moves the progress display (bytes may be negative: a restart)."""


def _print_line(line: str) -> None:
    print(redact(line), file=sys.stderr, flush=True)


@contextmanager
def transfer_progress(
    verb: str, total_files: int, total_bytes: int, show: bool = True, every_s: float = 5.0
) -> Iterator[Advance]:
    """Shows a copy's progress while the block runs.

    Args:
        verb: "uploaded" or "downloaded".
        total_files: Files to copy.
        total_bytes: Bytes to copy.
        show: Whether anything is shown.
        every_s: Seconds between lines when stderr is not a terminal.

    Yields:
        ``advance(nbytes, files)``, to call as bytes arrive and files finish (thread-safe).
    """
    reporter = ProgressReporter(
        verb, total_bytes, every_s, show, bytes_bar=True, emit=_print_line, stderr=True
    )
    done = {"bytes": 0, "files": 0}
    lock = threading.Lock()

    def advance(nbytes: int, files: int) -> None:
        with lock:
            done["bytes"] += nbytes
            done["files"] += files
            copied, finished = done["bytes"], done["files"]
            reporter.advance(copied)
            # lines only while files remain (the summary line follows); the bar always
            if (reporter.on_terminal or finished < total_files) and reporter.due():
                rate = copied / 1e6 / max(reporter.elapsed, 1e-9)
                reporter.show(
                    copied,
                    f"{finished}/{total_files} files",
                    f"{verb} {finished}/{total_files} files, "
                    f"{copied / 1e6:.1f}/{total_bytes / 1e6:.1f} MB, {rate:.1f} MB/s",
                )

    with reporter:
        yield advance
