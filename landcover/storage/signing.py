"""Signed reads of a catalogue's blobs: SAS tokens from the Planetary Computer.

The Planetary Computer's STAC items point at blobs such as
``https://naipeuwest.blob.core.windows.net/naip/v002/md/2018/.../m_3807504_ne_18_060_20180815.tif``
(read as ``abfs://naip@naipeuwest.blob.core.windows.net/...``, see
:func:`landcover.storage.urls.blob_url`). Reading one takes a short-lived SAS token for its
account and container, which the Planetary Computer's token endpoint hands out; the
planetary-computer SDK asks it, keeps each token and asks again within a minute of its expiry.

``--sign`` chooses (:func:`choose_signing`): ``auto`` signs when the ``--stac`` URL is the
Planetary Computer's, ``none`` never, ``planetary-computer`` always. A :class:`Signing` names
the containers of the job's tiles; each process that reads them calls :func:`use` with it (the
launcher, and every worker from the job's spec), and from then on the file systems
(:mod:`.filesystems`) ask :func:`signed_auth_for` for a token, every time one is wanted: a long
job goes on past one token's life. Every other URL keeps the environment's credentials.

Each token is handed to :func:`landcover.redaction.register_secret` as it arrives, so no line
this process prints and no byte it writes carries it, and a :class:`SignedAuth` pickles as "ask
for a token again", never with it.

The blob endpoint is ``https://ACCOUNT.blob.core.windows.net``, unless
``AZURE_STORAGE_BLOB_ENDPOINT`` is set with ``AZURE_STORAGE_ACCOUNT_NAME`` naming that account
(an emulator on loopback; plain http only there). The SDK reads ``PC_SDK_SAS_URL`` (another
token endpoint) and ``PC_SDK_SUBSCRIPTION_KEY`` from the environment.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from landcover.redaction import redact, register_secret
from landcover.storage.credentials import (
    ENV_ACCOUNT_NAME,
    ENV_BLOB_ENDPOINT,
    AzureAuth,
    check_endpoint,
)
from landcover.storage.errors import CredentialsError
from landcover.storage.urls import parse

PLANETARY_COMPUTER = "planetary-computer"
CHOICES = ("auto", "none", PLANETARY_COMPUTER)
"""The values of ``--sign``."""
PC_HOST = "planetarycomputer.microsoft.com"
TOKEN_SOURCE = "the Planetary Computer's token endpoint"
_TOKEN_RETRIES = 3  # the SDK's retries of an unreachable or busy endpoint (its default: 10)

_LOCK = threading.Lock()  # one request at a time: threads that read at once share its token
_ACTIVE: Signing | None = None


@dataclass(frozen=True)
class Signing:
    """Which blobs a job reads with signed tokens.

    Attributes:
        service: The signing service (``planetary-computer``).
        containers: The ``(account, container)`` of each of the job's blob tiles.
    """

    service: str
    containers: frozenset[tuple[str, str]]

    def covers(self, account: str, container: str) -> bool:
        """Whether a blob of this account and container is read signed."""
        return (account.lower(), container) in self.containers


@dataclass(frozen=True)
class SignedAuth(AzureAuth):
    """A SAS token for one container, from the signing service (method ``signed``).

    Attributes:
        container: The container the token is for.
    """

    container: str = ""

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        """Pickles as "ask for a token again", so the token is never serialized."""
        return (signed_auth, (self.account, self.container))


def choose_signing(choice: str, stac: str | None, tiles: list[str]) -> Signing | None:
    """What ``--sign`` means for a job.

    Args:
        choice: ``auto``, ``none`` or ``planetary-computer`` (see :data:`CHOICES`).
        stac: ``--stac``'s URL or file, if any.
        tiles: The job's tiles (paths or URLs).

    Returns:
        The signing of the blob tiles that name their account, or None for none.

    Raises:
        CredentialsError: An unknown choice.
    """
    if choice not in CHOICES:
        raise CredentialsError(f"--sign {choice!r}: use {', '.join(CHOICES)}")
    if choice == "auto":
        host = urlsplit(stac).hostname if stac else None
        choice = PLANETARY_COMPUTER if host == PC_HOST else "none"
    if choice == "none":
        return None
    containers = set()
    for tile in tiles:
        location = parse(tile)
        if location.is_azure and location.account:
            containers.add((location.account.lower(), location.container))
    return Signing(PLANETARY_COMPUTER, frozenset(containers))


def use(signing: Signing | None) -> None:
    """Reads this process's blobs with ``signing`` from now on (None: the environment's).

    Args:
        signing: The job's signing (its spec carries it to every worker).
    """
    global _ACTIVE
    if signing is not None:
        from planetary_computer.settings import Settings

        Settings.get.cache_clear()  # the SDK reads PC_SDK_* of the environment as it is now
    _ACTIVE = signing


def active() -> Signing | None:
    """The signing this process reads its blobs with (see :func:`use`)."""
    return _ACTIVE


def blob_endpoint(account: str, env: Mapping[str, str] | None = None) -> str:
    """The blob service endpoint of a signed account.

    Args:
        account: The storage account.
        env: The environment (default: ``os.environ``).

    Returns:
        ``AZURE_STORAGE_BLOB_ENDPOINT`` where ``AZURE_STORAGE_ACCOUNT_NAME`` names this
        account, else ``https://ACCOUNT.blob.core.windows.net``.

    Raises:
        CredentialsError: That endpoint is plain http beyond loopback.
    """
    env = os.environ if env is None else env
    endpoint = env.get(ENV_BLOB_ENDPOINT, "").strip().rstrip("/")
    if endpoint and env.get(ENV_ACCOUNT_NAME, "").strip().lower() == account.lower():
        check_endpoint(endpoint, f"{ENV_ACCOUNT_NAME} and {ENV_BLOB_ENDPOINT}")
        return endpoint
    return f"https://{account}.blob.core.windows.net"


def _token(account: str, container: str) -> str:
    """The SDK's token for the container (its cached one while it has over a minute left)."""
    import requests
    from planetary_computer.sas import get_token
    from planetary_computer.settings import Settings

    service = Settings.get().sas_url
    # the subscription key travels with the request, and the token comes back in the answer
    check_endpoint(service, "PC_SDK_SAS_URL", "token service", "the Planetary Computer's SAS API")
    where = redact(f"{service}/{account}/{container}")
    try:
        with _LOCK:
            return get_token(account, container, retry_total=_TOKEN_RETRIES).token
    except requests.HTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        reason = exc.response.reason if exc.response is not None else ""
        detail = f"it answered HTTP {status} {reason}".rstrip()
        if status in (401, 403):
            detail += " (PC_SDK_SUBSCRIPTION_KEY holds a subscription key, if one is needed)"
    except requests.RequestException as exc:
        detail = f"it cannot be reached ({type(exc).__name__})"
    except (ValueError, TypeError):  # not JSON, or JSON without msft:expiry and token
        detail = "its answer is not a token (JSON with msft:expiry and token)"
    raise CredentialsError(
        f"cannot get a SAS token for {account}/{container} from {TOKEN_SOURCE} {where}: {detail}"
    )


def signed_auth(account: str, container: str) -> SignedAuth:
    """A token for a container from the Planetary Computer, registered for redaction.

    Args:
        account: The storage account.
        container: The container.

    Returns:
        The account's endpoint with the token (the SDK's cached one while it lasts).

    Raises:
        CredentialsError: The token endpoint refuses, cannot be reached or answers no token;
            or the blob endpoint is insecure.
    """
    token = _token(account, container)
    register_secret(token)
    endpoint = blob_endpoint(account)
    return SignedAuth(account, endpoint, "signed", TOKEN_SOURCE, token, container)


def signed_auth_for(account: str | None, container: str) -> SignedAuth | None:
    """The token for a blob's container, where this process's signing covers it.

    Args:
        account: The account the URL names (None: the environment's account, never signed).
        container: The container.

    Returns:
        The signed credential, or None where the environment's credentials apply.

    Raises:
        CredentialsError: As :func:`signed_auth`.
    """
    signing = _ACTIVE
    if signing is None or account is None or not signing.covers(account, container):
        return None
    return signed_auth(account, container)


def check_signing(signing: Signing | None) -> None:
    """Asks for a token for each of the job's containers, before any work.

    A token endpoint that refuses fails the job at once, with one line.

    Args:
        signing: The job's signing (None: nothing to check).

    Raises:
        CredentialsError: As :func:`signed_auth`.
    """
    for account, container in sorted(signing.containers if signing else ()):
        signed_auth(account, container)
