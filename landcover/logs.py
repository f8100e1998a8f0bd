"""Logging setup: rank 0 talks on the console, every rank writes its own log file."""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from pathlib import Path

from landcover.parallel.env import DistEnv
from landcover.redaction import redact


class RedactingFormatter(logging.Formatter):
    """A formatter whose lines (messages, arguments and tracebacks) carry no credential."""

    def format(self, record: logging.LogRecord) -> str:
        """Formats the record, then redacts it.

        Args:
            record: The log record.

        Returns:
            The line, with every secret replaced by ``***``.
        """
        return redact(super().format(record))


class ConsoleFormatter(RedactingFormatter):
    """The console's format: INFO lines timed, every WARNING line ``warning: ...``.

    One format for every warning record whoever logs it, so a warning reads as the CLI's
    other ``warning:`` lines do and stands out of the progress lines around it.

    Args:
        prefix: What goes before each message (``[rank R] `` with several workers).
    """

    def __init__(self, prefix: str = "") -> None:
        super().__init__(f"%(asctime)s {prefix}%(message)s", "%H:%M:%S")
        self.warning = RedactingFormatter(f"warning: {prefix}%(message)s")

    def format(self, record: logging.LogRecord) -> str:
        """Formats the record: a WARNING record as one ``warning:`` line.

        Args:
            record: The log record.

        Returns:
            The redacted line.
        """
        if record.levelno == logging.WARNING:
            return self.warning.format(record)
        return super().format(record)


class LogFileHandler(logging.FileHandler):
    """A log file that stops quietly when it cannot be written (a full or read-only disk).

    The first failed write prints one ``warning:`` line (not logging's traceback) and the
    file gets no further lines; the command's own error, if any, says what went wrong.
    """

    failed: bool = False

    def emit(self, record: logging.LogRecord) -> None:
        """Writes a record unless an earlier write failed."""
        if not self.failed:
            super().emit(record)

    def handleError(self, record: logging.LogRecord | None) -> None:  # noqa: N802
        """Reports the first failed write in one line and stops writing (logging's name)."""
        if self.failed:
            return
        self.failed = True
        error = sys.exc_info()[1]
        reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
        with contextlib.suppress(Exception):  # nowhere left to report it
            sys.stderr.write(
                f"warning: cannot write the log file {self.baseFilename}: {reason}; "
                "no more lines go to it\n"
            )

    def flush(self) -> None:
        """Flushes the file; a failure is reported once and stops the file."""
        try:
            super().flush()
        except OSError:
            self.handleError(None)  # type: ignore[arg-type] - the record is not used

    def close(self) -> None:
        """Closes the file, ignoring the failure to flush a full or read-only one."""
        with contextlib.suppress(OSError):
            super().close()


def _warning_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: object = None,
    line: str | None = None,
) -> None:
    """Shows a library's Python warning as one log line.

    Python's own shows the library's file and source line: two lines of someone else's code.
    """
    text = str(message).strip().splitlines()
    logging.getLogger("landcover").warning("%s (%s)", text[0] if text else "", category.__name__)


def setup_logging(env: DistEnv, out: str | None) -> None:
    """Sends rank 0's INFO lines to the console, other ranks' only from WARNING up.

    Warnings print as ``warning: MESSAGE`` (:class:`ConsoleFormatter`), whoever logs them.

    Every rank also logs INFO to ``{out}/logs/rank{R}.log``. Python warnings (a library's
    deprecation, say) become one log line each.

    Args:
        env: The worker's place.
        out: The run folder, or ``None`` for console only.
    """
    logger = logging.getLogger("landcover")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(logging.INFO if env.is_main else logging.WARNING)
    prefix = "" if env.world_size == 1 else f"[rank {env.rank}] "
    console.setFormatter(ConsoleFormatter(prefix))
    logger.addHandler(console)
    warnings.showwarning = _warning_line
    if out is not None:
        folder = Path(out) / "logs"
        folder.mkdir(parents=True, exist_ok=True)
        file_handler = LogFileHandler(folder / f"rank{env.rank}.log")
        file_handler.setFormatter(
            RedactingFormatter(f"%(asctime)s rank{env.rank} %(levelname)s %(message)s")
        )
        logger.addHandler(file_handler)
