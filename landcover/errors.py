"""User-facing errors.

Every problem a user can fix (bad input files, bad config, missing credentials) is raised as a
:class:`LandcoverError`. The CLI prints its message as one line and exits non-zero, without a
traceback.
"""

from __future__ import annotations

import re


def first_line(exc: BaseException, limit: int | None = None, typed: bool = False) -> str:
    """The first line of an exception's message: what a one-line error says about it.

    Args:
        exc: The exception.
        limit: At most this many characters (``None``: the whole line).
        typed: Prefix the exception's class name (for a bug rather than bad input).

    Returns:
        The message's first non-blank line (a ``KeyError``'s key without its quotes), or the
        class name when the message is empty.
    """
    text = str(exc).strip()
    if isinstance(exc, KeyError):
        text = text.strip("'\"")
    line = text.splitlines()[0].strip() if text else ""
    if typed:
        line = f"{type(exc).__name__}: {line}" if line else type(exc).__name__
    elif not line:
        line = type(exc).__name__
    return line if limit is None else line[:limit]


class LandcoverError(Exception):
    """A problem the user can fix, reported as one line by the CLI."""

    exit_code: int = 2


class SignalledError(LandcoverError):
    """The command was stopped by a signal (Ctrl-C, a scheduler's SIGTERM).

    Its exit code is the shell's for a process killed by that signal, 128 + the signal's
    number (130 for SIGINT, 143 for SIGTERM), so a scheduler tells a pre-emption from a
    user error (2).

    Args:
        message: The one-line message.
        signum: The signal's number.
    """

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.exit_code = 128 + int(signum)


class DataError(LandcoverError):
    """A data file is missing, unreadable or does not match the configuration."""


class ConfigError(LandcoverError):
    """The configuration is invalid."""


class CheckpointError(LandcoverError):
    """A checkpoint is missing, corrupt or does not match the configuration."""


class TrainingError(LandcoverError):
    """Training cannot go on (for example, workers fell out of sync)."""


class PeerFailureError(TrainingError):
    """A collective operation failed because another worker died, hung or was unreachable.

    This is usually a consequence, not the cause: the launcher prefers the failed peer's own
    error when there is one.
    """


class OutputError(LandcoverError):
    """An output folder cannot be written: permission, read-only file system, full disk."""


class DiskFullError(OutputError):
    """The output folder's file system (or the user's quota) has no room for the outputs."""


def error_reason(exc: BaseException) -> str:
    """The first line of the innermost useful message of a chained GDAL / OS error.

    Args:
        exc: The exception (rasterio chains GDAL's own message as the cause).

    Returns:
        One line.
    """
    messages = []
    current: BaseException | None = exc
    while current is not None:
        messages.append(first_line(current))
        current = current.__cause__ or current.__context__
    useful = [m for m in messages if "See previous exception" not in m]
    reason = _UNKNOWN_PLACE.sub(",", (useful or messages)[-1])  # libtiff's -1 as unsigned
    short = _SHORT_READ.search(reason)
    if (short and int(short.group(1)) < int(short.group(2))) or _CANNOT_READ.search(reason):
        reason += ": the file is cut short (truncated) or corrupt"
    return reason


_UNKNOWN_PLACE = re.compile(r" at row 4294967295, col 4294967295,")
_SHORT_READ = re.compile(r"got (\d+) bytes, expected (\d+)")  # libtiff's
_CANNOT_READ = re.compile(r"Cannot read \d+ bytes at offset \d+")  # GDAL's
