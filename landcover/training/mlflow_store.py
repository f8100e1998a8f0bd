"""The MLflow tracking store of a run, checked before anything is written.

``landcover train`` calls :func:`check_tracking_store` in the launcher, before the data's
headers are read and before the run folder exists: a tracking URI that is wrong, unreachable
or needs another package is then one ``error:`` line in seconds, not a failure after the data
is loaded (an unreachable server took MLflow's own retries, over four minutes, and left a
partial run folder; issue 42, item 2).

The check asks the store for one experiment, through MLflow's own client (so its
authentication, Azure ML's included, is the one the run will use), with MLflow's HTTP retries
off and a :data:`PROBE_TIMEOUT_S` timeout. The run itself keeps MLflow's retries.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from landcover.errors import ConfigError, first_line
from landcover.redaction import redact
from landcover.training.mlflow_log import TRACKING_URI, mlflow_client_class

PROBE_TIMEOUT_S = 5
"""Seconds the check waits for the tracking server (connecting and answering)."""

SQL_SCHEMES = frozenset({"sqlite", "postgresql", "mysql", "mssql"})
"""Tracking URI schemes of MLflow's SQL store (``postgresql+psycopg2://`` counts as well)."""

SQL_INSTALL = (
    "an SQL tracking store needs the full MLflow: pip install mlflow "
    "(landcover installs mlflow-skinny, which has no SQL store)"
)

_QUICK = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": str(PROBE_TIMEOUT_S),
}
"""MLflow's HTTP settings during the check: one try, a short timeout."""

_ERRNO = re.compile(r"\[Errno -?\d+\] ([^\"'()\]]+)")
_TIMEOUT = re.compile(r"timed? ?out", re.I)
_NO_SQL_STORE = re.compile(r"Unsupported\w*StoreURI|unsupported URI|sqlalchemy|alembic", re.I)


def tracking_uri_shown(uri: str | None) -> str:
    """The tracking URI as an error line names it (credentials removed).

    Args:
        uri: ``MLFLOW_TRACKING_URI`` (empty or None: MLflow's default store).

    Returns:
        The redacted URI, or ``MLflow's default store (./mlruns)``.
    """
    return redact(uri) if uri else "MLflow's default store (./mlruns)"


def problem(exc: BaseException, uri: str) -> str:
    """Why the tracking store could not be used, as a short clause.

    Args:
        exc: What MLflow raised.
        uri: The tracking URI.

    Returns:
        ``cannot be reached (connection refused)``, ``... (no answer within 5 s)``, ``...
        (name or service not known)`` and the like for a server that cannot be reached;
        what to install for an SQL store that MLflow lacks, what to set for MLflow 3's file
        store; MLflow's first line otherwise.
    """
    text = str(exc)
    scheme = urlsplit(uri).scheme.split("+")[0].lower()
    errno = _ERRNO.search(text)
    if scheme in SQL_SCHEMES and _NO_SQL_STORE.search(f"{type(exc).__name__} {text}"):
        why = SQL_INSTALL  # mlflow-skinny: MLflow's own message lists the schemes it has
    elif "MLFLOW_ALLOW_FILE_STORE" in text:  # MLflow 3 keeps its file store only on request
        why = "MLflow 3 uses a file store only with MLFLOW_ALLOW_FILE_STORE=true set"
    elif errno:
        why = f"cannot be reached ({errno.group(1).strip().rstrip('.').lower()})"
    elif _TIMEOUT.search(text):
        why = f"cannot be reached (no answer within {PROBE_TIMEOUT_S} s)"
    else:
        why = first_line(exc, 300, typed=True)
        if scheme in SQL_SCHEMES:
            why = f"{why}; {SQL_INSTALL}"
    return redact(why)


@contextmanager
def quick_requests() -> Iterator[None]:
    """MLflow's HTTP requests made inside try once, with a short timeout.

    Yields:
        Nothing; the environment's own values are put back on leaving.
    """
    saved = {name: os.environ.get(name) for name in _QUICK}
    os.environ.update(_QUICK)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def check_tracking_store() -> None:
    """Checks that the run can log to the tracking store of ``MLFLOW_TRACKING_URI``.

    Raises:
        ConfigError: If MLflow is not installed, or the store cannot be opened or reached
            (the line names the redacted URI and the problem).
    """
    client_class = mlflow_client_class()
    uri = os.environ.get(TRACKING_URI, "")
    try:
        with quick_requests():
            client_class().search_experiments(max_results=1)
    except Exception as exc:
        raise ConfigError(
            f"MLflow: cannot log to the tracking store {tracking_uri_shown(uri)}: "
            f"{problem(exc, uri)}"
        ) from None
