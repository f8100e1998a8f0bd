"""Storage: local disk, NFS mounts and Azure Blob Storage behind one set of functions.

Every path or URL form (a plain path, ``file://``, ``az://container/prefix``,
``abfs[s]://container/prefix``, ``abfs://container@ACCOUNT.dfs.core.windows.net/prefix``,
``memory://``) is parsed in :mod:`~landcover.storage.urls`; credentials come from the
environment only (:mod:`~landcover.storage.credentials`); transient errors are retried for a
bounded time (:mod:`~landcover.storage.retry`); writes are atomic
(:mod:`~landcover.storage.io`) and whole-file downloads checked (:mod:`~landcover.storage.files`); remote objects can be cached on local disk
(:mod:`~landcover.storage.cache`) and many read at once (:mod:`~landcover.storage.fetch`); folders are copied in parallel by
:mod:`~landcover.storage.transfer` (``landcover data upload`` / ``download``).

Every failure is a one-line :class:`StorageError` (a :class:`~landcover.errors.LandcoverError`).
"""

from landcover.storage.cache import cached_read
from landcover.storage.credentials import HOW_TO_SET, AzureAuth, azure_auth
from landcover.storage.errors import CredentialsError, StorageError, StorageNotFoundError
from landcover.storage.fetch import Fetched, fetch_many, read_many
from landcover.storage.files import download_file, upload_file
from landcover.storage.filesystems import filesystem
from landcover.storage.io import (
    ObjectInfo,
    exists,
    glob,
    is_file,
    list_files,
    listdir,
    read_bytes,
    remove,
    stat,
    write_bytes,
    write_set,
    write_text,
)
from landcover.storage.retry import RetryPolicy, default_policy
from landcover.storage.urls import is_azure, is_remote, join, name, parse

__all__ = [
    "HOW_TO_SET",
    "AzureAuth",
    "CredentialsError",
    "Fetched",
    "ObjectInfo",
    "RetryPolicy",
    "StorageError",
    "StorageNotFoundError",
    "azure_auth",
    "cached_read",
    "default_policy",
    "download_file",
    "exists",
    "fetch_many",
    "filesystem",
    "glob",
    "is_azure",
    "is_file",
    "is_remote",
    "join",
    "list_files",
    "listdir",
    "name",
    "parse",
    "read_bytes",
    "read_many",
    "remove",
    "stat",
    "upload_file",
    "write_bytes",
    "write_set",
    "write_text",
]
