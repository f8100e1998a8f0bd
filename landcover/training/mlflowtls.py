"""No MLflow credential over plain http to another machine.

MLflow sends a token or a user name and password with every request to an ``http(s)://``
tracking server: from ``MLFLOW_TRACKING_TOKEN``, ``MLFLOW_TRACKING_USERNAME`` /
``_PASSWORD``, the URI's user part, its own credentials file (``~/.mlflow/credentials``) or an
auth plugin (``MLFLOW_TRACKING_AUTH``). :func:`check_tracking_tls` refuses, in one line, a plain
``http://`` server off this machine when any of them is set; https, or a server on 127.0.0.1,
localhost or [::1], is used as given.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from landcover.errors import ConfigError
from landcover.redaction import redact
from landcover.storage.credentials import is_tls_or_loopback

CREDENTIALS = ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")
"""The environment's credentials MLflow sends to an ``http(s)://`` tracking server."""

AUTH_PLUGIN = "MLFLOW_TRACKING_AUTH"


def _credentials_file() -> bool:
    """Whether MLflow's own credentials file names a user or password (MLflow imported)."""
    try:
        from mlflow.utils.credentials import read_mlflow_creds
    except ImportError:  # an MLflow without the file: nothing read from it
        return False
    creds = read_mlflow_creds()
    return bool(creds.username or creds.password)


def check_tracking_tls(uri: str) -> None:
    """Refuses credentials for a plain-http tracking server on another machine.

    Args:
        uri: ``MLFLOW_TRACKING_URI``.

    Raises:
        ConfigError: ``uri`` is ``http://`` to another machine and MLflow would send it
            credentials (named in the message, never their values).
    """
    if urlsplit(uri).scheme != "http" or is_tls_or_loopback(uri):
        return
    sent = [name for name in (*CREDENTIALS, AUTH_PLUGIN) if os.environ.get(name)]
    if "@" in urlsplit(uri).netloc:
        sent.append("its URL")
    if _credentials_file():
        sent.append("~/.mlflow/credentials")
    if sent:
        raise ConfigError(  # MLflow would send them in the clear
            f"refusing MLFLOW_TRACKING_URI {redact(uri)}: credentials ({', '.join(sent)}) go "
            "to a tracking server over https only (plain http only on 127.0.0.1, localhost or "
            "[::1])"
        )
