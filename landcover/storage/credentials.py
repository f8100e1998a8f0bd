"""Azure Storage credentials, from the environment only.

In order of precedence:

1. ``AZURE_STORAGE_CONNECTION_STRING`` (``AccountName=...;AccountKey=...``, a
   ``SharedAccessSignature=...``, or ``UseDevelopmentStorage=true`` for a local Azurite);
2. ``AZURE_STORAGE_ACCOUNT_NAME`` with ``AZURE_STORAGE_ACCOUNT_KEY`` or
   ``AZURE_STORAGE_SAS_TOKEN``;
3. ``AZURE_STORAGE_ACCOUNT_NAME`` alone: Azure's default credential chain (a managed identity
   on an Azure VM or Azure ML compute, ``AZURE_CLIENT_ID``/``AZURE_CLIENT_SECRET``/
   ``AZURE_TENANT_ID``, or ``az login``).

``AZURE_STORAGE_BLOB_ENDPOINT`` optionally replaces ``https://ACCOUNT.blob.core.windows.net``
(a private endpoint, another cloud, or an emulator) for 2 and 3.

The service is reached over https only; plain http is allowed only for a local emulator on a
loopback address (``127.0.0.1``, ``localhost``, ``[::1]``). Secrets stay in memory: they are
left out of ``repr``, are never logged, and an :class:`AzureAuth` pickles without them (the
receiving process reads its own environment again).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from landcover.redaction import environ_snapshot
from landcover.storage.errors import CredentialsError

ENV_CONNECTION_STRING = "AZURE_STORAGE_CONNECTION_STRING"
ENV_ACCOUNT_NAME = "AZURE_STORAGE_ACCOUNT_NAME"
ENV_ACCOUNT_KEY = "AZURE_STORAGE_ACCOUNT_KEY"
ENV_SAS_TOKEN = "AZURE_STORAGE_SAS_TOKEN"
ENV_BLOB_ENDPOINT = "AZURE_STORAGE_BLOB_ENDPOINT"
SECRET_VARIABLES = (ENV_CONNECTION_STRING, ENV_ACCOUNT_KEY, ENV_SAS_TOKEN)

HOW_TO_SET = (
    f"set {ENV_CONNECTION_STRING}, or {ENV_ACCOUNT_NAME} with {ENV_ACCOUNT_KEY} or "
    f"{ENV_SAS_TOKEN} ({ENV_ACCOUNT_NAME} alone uses a managed identity or az login)"
)

READ_VARIABLES = (
    ENV_CONNECTION_STRING,
    ENV_ACCOUNT_NAME,
    ENV_ACCOUNT_KEY,
    ENV_SAS_TOKEN,
    ENV_BLOB_ENDPOINT,
)
"""Every variable landcover reads its Azure Storage settings from."""

LOOKALIKE_VARIABLES = {
    "AZURE_STORAGE_KEY": ENV_ACCOUNT_KEY,  # the az CLI's name
    "AZURE_STORAGE_ACCESS_KEY": ENV_ACCOUNT_KEY,
    "AZURE_STORAGE_ACCOUNT_ACCESS_KEY": ENV_ACCOUNT_KEY,
    "AZURE_STORAGE_SHARED_KEY": ENV_ACCOUNT_KEY,
    "AZURE_ACCOUNT_KEY": ENV_ACCOUNT_KEY,
    "AZURE_STORAGE_ACCOUNT": ENV_ACCOUNT_NAME,  # the az CLI's name
    "AZURE_STORAGE_NAME": ENV_ACCOUNT_NAME,
    "AZURE_ACCOUNT_NAME": ENV_ACCOUNT_NAME,
    "AZURE_STORAGE_SAS": ENV_SAS_TOKEN,
    "AZURE_STORAGE_SAS_KEY": ENV_SAS_TOKEN,
    "AZURE_STORAGE_TOKEN": ENV_SAS_TOKEN,
    "AZURE_SAS_TOKEN": ENV_SAS_TOKEN,
    "AZURE_STORAGE_CONNECTIONSTRING": ENV_CONNECTION_STRING,
    "AZURE_STORAGE_CONN_STRING": ENV_CONNECTION_STRING,
    "AZURE_CONNECTION_STRING": ENV_CONNECTION_STRING,
    "AZURE_STORAGE_ENDPOINT": ENV_BLOB_ENDPOINT,
    "AZURE_STORAGE_BLOB_URL": ENV_BLOB_ENDPOINT,
    "AZURE_BLOB_ENDPOINT": ENV_BLOB_ENDPOINT,
}
"""Variables users set by mistake (other tools' names), to the one landcover reads instead."""


def misnamed_variables(env: Mapping[str, str] | None = None) -> list[str]:
    """Names variables that look like ours but are not read, where ours is unset.

    ``AZURE_STORAGE_KEY`` (the az CLI's name) for ``AZURE_STORAGE_ACCOUNT_KEY`` and the like,
    and our own names in another case. Only names are returned, never values.

    Args:
        env: The environment (default: a snapshot of ``os.environ``, safe from threads that
            change it).

    Returns:
        Sorted lines such as ``AZURE_STORAGE_KEY is set but landcover reads
        AZURE_STORAGE_ACCOUNT_KEY`` (empty when there is nothing to say).
    """
    env = environ_snapshot() if env is None else env
    hints = []
    for name, value in env.items():
        if not value.strip() or name in READ_VARIABLES:
            continue
        meant = LOOKALIKE_VARIABLES.get(name.upper())
        if meant is None and name.upper() in READ_VARIABLES:
            meant = name.upper()
        if meant is not None and not env.get(meant, "").strip():
            hints.append(f"{name} is set but landcover reads {meant}")
    return sorted(hints)


def how_to_set(env: Mapping[str, str] | None = None) -> str:
    """What to set for credentials, led by any misnamed variable (see :data:`HOW_TO_SET`).

    Args:
        env: The environment (default: ``os.environ``).

    Returns:
        :data:`HOW_TO_SET`, preceded by ``AZURE_STORAGE_KEY is set but landcover reads
        AZURE_STORAGE_ACCOUNT_KEY; `` when such a variable is set.
    """
    return "; ".join([*misnamed_variables(env), HOW_TO_SET])


DEVSTORE_ACCOUNT = "devstoreaccount1"
DEVSTORE_ENDPOINT = f"http://127.0.0.1:10000/{DEVSTORE_ACCOUNT}"

Method = Literal["connection_string", "account_key", "sas_token", "default_credential", "signed"]
"""``signed``: a SAS token for one container from a signing service (:mod:`.signing`)."""


@dataclass(frozen=True)
class AzureAuth:
    """How to reach and sign in to one storage account.

    Attributes:
        account: The storage account name.
        endpoint: The blob service endpoint, e.g. ``https://ACCOUNT.blob.core.windows.net``.
        method: Which credential is used.
        source: The environment variable(s) it came from, for error messages.
        secret: The connection string, account key or SAS token ('' for the default chain);
            never shown by ``repr`` and never pickled (a signed one: see :mod:`.signing`).
    """

    account: str
    endpoint: str
    method: Method
    source: str
    secret: str = field(default="", repr=False, compare=False)

    @property
    def fingerprint(self) -> str:
        """A digest that changes when any setting or the secret changes (a cache key)."""
        text = "\0".join((self.account, self.endpoint, self.method, self.secret))
        return hashlib.sha256(text.encode()).hexdigest()

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        """Pickles as "read the environment again", so the secret is never serialized."""
        return (azure_auth, (self.account,))


def _parse_connection_string(text: str) -> dict[str, str]:
    settings = {}
    for part in text.strip().strip(";").split(";"):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise CredentialsError(
                f"{ENV_CONNECTION_STRING} is malformed: expected Key=Value pairs separated "
                "by ';' (copy it from the portal's Access keys page)"
            )
        settings[key.strip().lower()] = value.strip()
    return settings


def _check_key(key: str, variable: str) -> None:
    try:
        base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError):
        raise CredentialsError(f"{variable}: the account key is not valid base64") from None


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine (``localhost``, ``127.0.0.0/8`` or ``::1``)."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_tls_or_loopback(url: str) -> bool:
    """Whether a service URL is https, or plain http to this machine (a local server).

    Args:
        url: The service's URL.

    Returns:
        True for ``https://HOST...`` and ``http://`` to a loopback address.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    return bool(host) and (
        parts.scheme == "https" or (parts.scheme == "http" and is_loopback(host))
    )


def check_endpoint(
    endpoint: str, source: str, service: str = "blob endpoint", who: str = "Azure Storage"
) -> None:
    """Refuses an endpoint that is not https, unless it is a local emulator.

    Args:
        endpoint: The service's URL.
        source: Where it came from (an environment variable), for the message.
        service: What the URL is, for the message.
        who: What is reached there, for the message.

    Raises:
        CredentialsError: Not an https URL, and not http to a loopback address.
    """
    if is_tls_or_loopback(endpoint):
        return
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    raise CredentialsError(
        f"refusing {service} {parts.scheme}://{host or '?'} from {source}: {who} "
        "is reached over https only (plain http only for a local emulator on 127.0.0.1, "
        "localhost or [::1])"
    )


def _from_connection_string(text: str, env: Mapping[str, str]) -> AzureAuth:
    settings = _parse_connection_string(text)
    source = ENV_CONNECTION_STRING
    if settings.get("usedevelopmentstorage", "").lower() == "true":
        return AzureAuth(DEVSTORE_ACCOUNT, DEVSTORE_ENDPOINT, "connection_string", source, text)
    account = settings.get("accountname", "")
    endpoint = settings.get("blobendpoint", "").rstrip("/")
    if not endpoint and account:
        scheme = settings.get("defaultendpointsprotocol", "https").lower()
        suffix = settings.get("endpointsuffix", "core.windows.net")
        endpoint = f"{scheme}://{account}.blob.{suffix}"
    if not endpoint:
        raise CredentialsError(f"{ENV_CONNECTION_STRING} has neither AccountName nor BlobEndpoint")
    if not account:
        parts = urlsplit(endpoint)
        host = parts.hostname or ""
        account = parts.path.strip("/").split("/")[0] if is_loopback(host) else host.split(".")[0]
    if "accountkey" in settings:
        _check_key(settings["accountkey"], f"{ENV_CONNECTION_STRING}'s AccountKey")
    elif "sharedaccesssignature" not in settings:
        raise CredentialsError(
            f"{ENV_CONNECTION_STRING} has no AccountKey or SharedAccessSignature: {how_to_set(env)}"
        )
    return AzureAuth(account, endpoint, "connection_string", source, text)


def azure_auth(account: str | None = None, env: Mapping[str, str] | None = None) -> AzureAuth:
    """Reads the Azure credentials from the environment.

    Args:
        account: The account a URL names (``container@ACCOUNT.dfs.core.windows.net``), if any;
            the credentials must be for that account.
        env: The environment to read (default: ``os.environ``).

    Returns:
        The account, endpoint and credential to use.

    Raises:
        CredentialsError: No credentials, malformed ones, credentials for another account, or
            an insecure endpoint; the message names the variables to set.
    """
    env = os.environ if env is None else env
    connection_string = env.get(ENV_CONNECTION_STRING, "").strip()
    name = env.get(ENV_ACCOUNT_NAME, "").strip()
    key = env.get(ENV_ACCOUNT_KEY, "").strip()
    sas = env.get(ENV_SAS_TOKEN, "").strip().lstrip("?")
    if connection_string:
        auth = _from_connection_string(connection_string, env)
    elif name or account:
        name = name or str(account)
        source = ENV_ACCOUNT_NAME if env.get(ENV_ACCOUNT_NAME, "").strip() else "the URL"
        endpoint = env.get(ENV_BLOB_ENDPOINT, "").strip().rstrip("/")
        if endpoint:
            source += f" and {ENV_BLOB_ENDPOINT}"
        else:
            endpoint = f"https://{name}.blob.core.windows.net"
        if key:
            _check_key(key, ENV_ACCOUNT_KEY)
            auth = AzureAuth(name, endpoint, "account_key", f"{source} + {ENV_ACCOUNT_KEY}", key)
        elif sas:
            auth = AzureAuth(name, endpoint, "sas_token", f"{source} + {ENV_SAS_TOKEN}", sas)
        else:
            auth = AzureAuth(name, endpoint, "default_credential", source)
    else:
        raise CredentialsError(
            f"no Azure Storage credentials in the environment: {how_to_set(env)}"
        )
    if account and auth.account.lower() != account.lower():
        raise CredentialsError(
            f"the URL names storage account {account!r} but {auth.source} is for account "
            f"{auth.account!r}"
        )
    check_endpoint(auth.endpoint, auth.source)
    return auth
