"""User-facing errors.

Every problem a user can fix (bad input files, bad config, missing credentials) is raised as a
:class:`LandcoverError`. The CLI prints its message as one line and exits non-zero, without a
traceback.
"""

from __future__ import annotations


class LandcoverError(Exception):
    """A problem the user can fix, reported as one line by the CLI."""

    exit_code: int = 2


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
