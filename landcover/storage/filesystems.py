"""fsspec file systems for each URL form, with our credentials and bounded retries.

Azure URLs get an adlfs ``AzureBlobFileSystem`` whose blob service client is built here: with
the credentials from :mod:`landcover.storage.credentials` (never adlfs's own reading of the
environment), the short SDK retries and timeouts of :mod:`landcover.storage.retry`, and no
listings cache (other processes write too). One instance per process, account, credential and
policy is reused. A container read with tokens from a signing service (:mod:`.signing`) has
its own, made again when the token is renewed.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

import fsspec

from landcover.storage.credentials import AzureAuth, azure_auth, how_to_set, misnamed_variables
from landcover.storage.errors import CredentialsError, StorageError
from landcover.storage.retry import RetryPolicy, default_policy, sdk_client_options
from landcover.storage.signing import signed_auth_for
from landcover.storage.urls import Location, parse

_LOCK = threading.Lock()
_CACHE: dict[tuple[Any, ...], fsspec.AbstractFileSystem] = {}
_SIGNED: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # a signed container's key in _CACHE


def _azure_class() -> type:
    from adlfs import AzureBlobFileSystem

    class LandcoverBlobFileSystem(AzureBlobFileSystem):
        """adlfs with explicit credentials and bounded SDK retries and timeouts.

        Args:
            auth: The account, endpoint and credential.
            policy: Timeouts for the SDK client.
        """

        # fsspec's instance cache keys on repr(), which leaves the secret out: instances are
        # cached by azure_filesystem() instead, keyed on the credential's fingerprint.
        cachable = False

        def __init__(self, auth: AzureAuth, policy: RetryPolicy) -> None:
            self._auth = auth
            self._policy = policy
            # anon=True stops adlfs from building credentials of its own; do_connect below
            # builds the client with ours.
            super().__init__(
                account_name=auth.account,
                anon=True,
                use_listings_cache=False,
            )

        def do_connect(self) -> None:
            """Creates the async blob service client (called by adlfs's constructor)."""
            from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
            from azure.storage.blob.aio import BlobServiceClient

            auth, options = self._auth, sdk_client_options(self._policy)
            if auth.method == "connection_string":
                self.service_client = BlobServiceClient.from_connection_string(
                    auth.secret, **options
                )
                return
            credential: Any
            if auth.method == "account_key":
                credential = AzureNamedKeyCredential(auth.account, auth.secret)
            elif auth.method in ("sas_token", "signed"):
                credential = AzureSasCredential(auth.secret)
            else:
                from azure.identity.aio import DefaultAzureCredential

                # Its failures come back to us as one CredentialsError line; keep its
                # multi-line warnings about every credential it tried off the console.
                quiet = logging.getLogger("azure.identity")
                if quiet.level == logging.NOTSET:
                    quiet.setLevel(logging.ERROR)
                credential = DefaultAzureCredential()
                self.credential = credential  # closed by adlfs's finalizer
            self.service_client = BlobServiceClient(
                account_url=auth.endpoint, credential=credential, **options
            )

    return LandcoverBlobFileSystem


_AZURE_CLASS: type | None = None


def azure_filesystem(
    account: str | None = None, policy: RetryPolicy | None = None, container: str = ""
) -> fsspec.AbstractFileSystem:
    """The blob file system for the credentials in the environment, or a signed container's.

    Args:
        account: The account a URL names, if any.
        policy: Retry and timeout settings (default: :func:`default_policy`).
        container: The container read, for a signed one (:mod:`.signing`).

    Returns:
        An adlfs file system (paths are ``container/blob``).

    Raises:
        CredentialsError: Missing, malformed or insecure credentials, or a signing service
            that gives no token.
    """
    global _AZURE_CLASS
    policy = policy or default_policy()
    signed = signed_auth_for(account, container)
    auth = signed or azure_auth(account)
    key = ("azure", os.getpid(), auth.fingerprint, policy)
    with _LOCK:
        fs = _CACHE.get(key)
        if fs is None:
            if signed is not None:  # a renewed token: the file system of the one before goes
                slot = (os.getpid(), signed.account, signed.container, policy)
                if slot in _SIGNED:
                    _CACHE.pop(_SIGNED[slot], None)
                _SIGNED[slot] = key
            if _AZURE_CLASS is None:
                _AZURE_CLASS = _azure_class()
            try:
                fs = _AZURE_CLASS(auth, policy)
            except ValueError as exc:  # adlfs wraps client construction errors
                if auth.method == "default_credential":  # azure-core: a token needs https
                    raise CredentialsError(
                        f"no credential for account {auth.account} at {auth.endpoint}: Azure's "
                        f"default credential is refused there ({' '.join(str(exc).split())}); "
                        f"{how_to_set()}"
                    ) from exc
                hints = "".join(f"; {hint}" for hint in misnamed_variables())
                raise CredentialsError(
                    f"cannot use the Azure credentials in {auth.source}: they are malformed{hints}"
                ) from exc
            _CACHE[key] = fs
    return fs


def filesystem(
    url: str, policy: RetryPolicy | None = None
) -> tuple[fsspec.AbstractFileSystem, str]:
    """The fsspec file system and in-file-system path of a path or URL.

    Args:
        url: A plain path, ``file://``, ``az://``, ``abfs[s]://`` or ``memory://`` URL.
        policy: Retry and timeout settings for blob URLs.

    Returns:
        The file system and the path to pass to its methods.

    Raises:
        StorageError: An unsupported URL, or missing/insecure credentials for a blob URL.
    """
    return filesystem_of(parse(url), policy)


def filesystem_of(
    location: Location, policy: RetryPolicy | None = None
) -> tuple[fsspec.AbstractFileSystem, str]:
    """Like :func:`filesystem`, for an already parsed location."""
    if location.is_local:
        return fsspec.filesystem("file"), os.path.abspath(location.path)
    if location.protocol == "memory":
        return fsspec.filesystem("memory"), location.path
    if location.is_azure:
        return azure_filesystem(location.account, policy, location.container), location.path
    raise StorageError(f"unsupported URL {location.url!r}")  # pragma: no cover - parse refuses
