"""A job's inputs: data locations Azure ML can mount or download, as ``inputs:`` entries."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from landcover import storage
from landcover.cluster.secrets import find_secret
from landcover.cluster.spec import ClusterError
from landcover.storage.credentials import ENV_ACCOUNT_NAME
from landcover.storage.urls import protocol

InputType = Literal["uri_folder", "uri_file"]
"""An input's ``type``: a folder or one file."""

_PASS_THROUGH_SCHEMES = ("azureml", "https", "http", "wasbs", "wasb", "abfss", "adl")


def data_input_path(
    data: str, environ: dict[str, str] | None = None, option: str = "--data", file: bool = False
) -> str:
    """Turns a data location into a path Azure ML can mount or download.

    ``azureml://``, ``https://``, ``wasbs://`` and ``abfss://CONTAINER@ACCOUNT...`` URIs pass
    through; landcover's ``az://CONTAINER/PATH`` (and ``abfs://``) become
    ``https://ACCOUNT.blob.core.windows.net/CONTAINER/PATH`` with the account from the URL or
    ``AZURE_STORAGE_ACCOUNT_NAME``; a local folder (or file) is made absolute (``az ml job
    create`` uploads it).

    Args:
        data: A URI or local folder (or file).
        environ: The environment (defaults to ``os.environ``), for the account name.
        option: The command-line option it came from, for messages.
        file: Whether the input is a file (a checkpoint, a list) rather than a folder.

    Returns:
        The input's ``path``.

    Raises:
        ClusterError: If the URI carries a secret, names no storage account, or the local
            folder (file) does not exist.
    """
    env = os.environ if environ is None else environ
    found = find_secret({"data": data})
    if found or re.match(r"(?i)^https?://[^?]*\?", data):
        raise ClusterError(
            f"{option} {data.split('?')[0]}: the URI carries a query (a SAS token?); give the "
            "URI without it: the job reads the data with its managed identity or your login"
        )
    scheme = protocol(data)
    if scheme in _PASS_THROUGH_SCHEMES:
        return data
    if scheme in ("az", "abfs"):
        location = storage.parse(data)
        if location.host and ".dfs." in location.host:
            return f"abfss://{location.container}@{location.host}/{location.blob}".rstrip("/")
        account = location.account or env.get(ENV_ACCOUNT_NAME, "").strip()
        if not account:
            raise ClusterError(
                f"{option} {data}: names no storage account; set {ENV_ACCOUNT_NAME} or give "
                "https://ACCOUNT.blob.core.windows.net/CONTAINER/PATH or "
                "azureml://datastores/NAME/paths/PATH"
            )
        return f"https://{account}.blob.core.windows.net/{location.path}"
    if scheme not in (None, "file"):
        raise ClusterError(
            f"{option} {data}: Azure ML cannot read {scheme}:// URIs; give azureml://, https:// "
            "or az:// blob URIs, or a local path"
        )
    local = Path(storage.parse(data).path).resolve()
    if not (local.is_file() if file else local.is_dir()):
        raise ClusterError(
            f"{data}: {'file' if file else 'data folder'} not found here; for data already in "
            f"Azure give {option} as an azureml://, https:// or az:// URI"
        )
    return str(local)


def input_spec(kind: InputType, path: str, mode: str) -> dict[str, Any]:
    """One entry of a job's ``inputs``.

    Args:
        kind: ``uri_folder`` or ``uri_file``.
        path: Where it is (from :func:`data_input_path`, or a file written beside job.yml).
        mode: ``ro_mount`` or ``download``.

    Returns:
        The entry as data.
    """
    return {"type": kind, "path": path, "mode": mode}


def upload_note(what: str, given: str, path: str) -> list[str]:
    """The note that ``az ml job create`` uploads a local input, if it is local.

    Args:
        what: The input, as the note names it (``data folder``, ``tiles``, ...).
        given: The location as given (a URI is not uploaded).
        path: The input's ``path``.

    Returns:
        One line for a local input, none for a remote one.
    """
    return [] if storage.is_remote(given) else [f"az ml job create uploads the local {what} {path}"]
