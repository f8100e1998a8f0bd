"""Progress of a copy (``landcover data upload``/``download``): a bar on a terminal, else lines.

On a terminal (stderr is a TTY), a transient rich bar of bytes with speed, files and time left;
elsewhere (a log file, a batch job's captured output) one line on stderr every few seconds.
Every line is redacted (:mod:`landcover.redaction`).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from landcover.redaction import redact

Advance = Callable[[int, int], None]
"""``advance(nbytes, files)``: moves the progress display (bytes may be negative: a restart)."""


class _LineProgress:
    """Progress lines on stderr every ``every_s`` seconds (when not on a terminal).

    Args:
        verb: "uploaded" or "downloaded".
        total_files: Files to copy.
        total_bytes: Bytes to copy.
        every_s: Seconds between lines.
    """

    def __init__(self, verb: str, total_files: int, total_bytes: int, every_s: float) -> None:
        self.verb, self.total_files, self.total_bytes = verb, total_files, total_bytes
        self.every_s = every_s
        self.files = self.nbytes = 0
        self.start = self.last = time.perf_counter()
        self.lock = threading.Lock()

    def advance(self, nbytes: int = 0, files: int = 0) -> None:
        """Counts bytes and finished files; prints a line when one is due."""
        with self.lock:
            self.nbytes += nbytes
            self.files += files
            now = time.perf_counter()
            if now - self.last >= self.every_s and self.files < self.total_files:
                self.last = now
                rate = self.nbytes / 1e6 / (now - self.start)
                line = (
                    f"{self.verb} {self.files}/{self.total_files} files, "
                    f"{self.nbytes / 1e6:.1f}/{self.total_bytes / 1e6:.1f} MB, {rate:.1f} MB/s"
                )
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
    if not show:
        yield lambda nbytes, files: None
        return
    if not sys.stderr.isatty():
        lines = _LineProgress(verb, total_files, total_bytes, every_s)
        yield lines.advance
        return
    from rich import progress as rp
    from rich.console import Console

    bar = rp.Progress(
        rp.TextColumn(verb),
        rp.BarColumn(),
        rp.DownloadColumn(),
        rp.TransferSpeedColumn(),
        rp.TextColumn(f"{{task.fields[files]}}/{total_files} files"),
        rp.TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = bar.add_task(verb, total=total_bytes, files=0)
    counted = [0]
    lock = threading.Lock()

    def advance(nbytes: int, files: int) -> None:
        with lock:
            counted[0] += files
            bar.update(task, advance=nbytes, files=counted[0])

    with bar:
        yield advance
