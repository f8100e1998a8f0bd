"""Storage errors: one line each, never holding a credential."""

from __future__ import annotations

from landcover.errors import LandcoverError


class StorageError(LandcoverError):
    """Reading or writing a local path, NFS mount or blob URL failed (after any retries)."""


class StorageNotFoundError(StorageError, FileNotFoundError):
    """The file, blob or container does not exist.

    Also a :class:`FileNotFoundError`, so callers that look for a missing file catch it.
    """


class CredentialsError(StorageError):
    """Azure credentials are missing, malformed, insecure or rejected by the service."""
