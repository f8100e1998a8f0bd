"""The URL forms landcover reads and writes, parsed in one place.

- a plain path (local disk or an NFS mount): ``/mnt/naip/pairs``, ``data/synth``
- ``file:///abs/path`` (the same, as a URL)
- ``az://container/prefix``, ``abfs://container/prefix``, ``abfss://container/prefix``
  (Azure Blob Storage through adlfs; the account comes from the environment)
- ``abfs[s]://container@ACCOUNT.dfs.core.windows.net/prefix`` (the account named in the URL;
  ``ACCOUNT.blob.core.windows.net`` works too)
- ``memory://prefix`` (fsspec's in-process file system, for tests and tools)

An ``https://ACCOUNT.blob.core.windows.net/CONTAINER/PATH`` URL (a STAC item's href) is read
as ``abfs://CONTAINER@ACCOUNT.blob.core.windows.net/PATH`` once :func:`blob_url` has rewritten
it (with ``--sign``, its credential is a token from the Planetary Computer:
:mod:`landcover.storage.signing`).

A URL never carries credentials: those come from the environment (see
:mod:`landcover.storage.credentials`). A blob URL with a shared-access-signature query
(``az://c/t.tif?sv=...&sig=...``, or an ``https://`` SAS URL) is refused with a message that
says where the token goes, and the token itself is redacted from that message.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from landcover.redaction import redact
from landcover.secretforms import AMP, EQUALS, QMARK
from landcover.storage.errors import StorageError

AZURE_PROTOCOLS = ("az", "abfs", "abfss")
LOCAL_PROTOCOLS = ("file", "local")
SUPPORTED = "a path, file://, az://container/path, abfs[s]://container/path or memory://"

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# a query with shared-access-signature fields (a '?' alone is a glob wildcard); its ?, & and =
# also percent-encoded (once or twice), as a URL quoted into a path carries them
_SAS_QUERY = re.compile(
    rf"{QMARK}(?:[^/]*?{AMP})?(?:sig|sv|se|sp|st|spr|srt|ss|sr|skoid|sktid){EQUALS}", re.I
)
_HTTPS_BLOB = re.compile(r"^https?://([a-z0-9]{3,24})\.(?:blob|dfs)\.core\.", re.I)
_ACCOUNT_HOST = re.compile(
    r"^(?P<account>[a-z0-9]{3,24})\.(?:dfs|blob)\.core\.(?:windows\.net|chinacloudapi\.cn|"
    r"usgovcloudapi\.net)$"
)


def protocol(url: str | Path) -> str | None:
    """The URL's scheme (``az``, ``file``, ...), or None for a plain path."""
    match = _SCHEME.match(str(url))
    return match.group(1).lower() if match else None


def is_remote(url: str | Path) -> bool:
    """Whether ``url`` is anything but a plain path or ``file://`` URL (local disk or NFS)."""
    return protocol(url) not in (None, *LOCAL_PROTOCOLS)


def is_azure(url: str | Path) -> bool:
    """Whether ``url`` is an ``az://``, ``abfs://`` or ``abfss://`` blob URL."""
    return protocol(url) in AZURE_PROTOCOLS


@dataclass(frozen=True)
class Location:
    """A parsed URL.

    Attributes:
        url: The URL as given.
        protocol: ``local`` (plain path or ``file://``), ``memory`` or an Azure protocol.
        path: The path inside the file system: a local path, ``/prefix`` for memory,
            ``container/blob`` for Azure.
        account: The storage account named in the URL (``container@ACCOUNT.dfs...``), if any.
        host: The URL's host when it names the account, to rebuild URLs of the same form.
    """

    url: str
    protocol: str
    path: str
    account: str | None = None
    host: str | None = None

    @property
    def is_local(self) -> bool:
        """Whether this is a local (or NFS) path."""
        return self.protocol == "local"

    @property
    def is_azure(self) -> bool:
        """Whether this is an Azure blob URL."""
        return self.protocol in AZURE_PROTOCOLS

    @property
    def container(self) -> str:
        """The Azure container (the first path segment)."""
        return self.path.split("/", 1)[0]

    @property
    def blob(self) -> str:
        """The blob name inside the container ('' for the container itself)."""
        parts = self.path.split("/", 1)
        return parts[1] if len(parts) > 1 else ""

    def url_for(self, fs_path: str) -> str:
        """The URL, in this location's form, of another path of the same file system.

        Args:
            fs_path: A path as the file system returns it (from a listing or a glob).

        Returns:
            A URL that :func:`parse` maps back to ``fs_path``.
        """
        if self.is_local:
            return f"file://{fs_path}" if self.url.startswith("file://") else fs_path
        if self.protocol == "memory":
            return "memory://" + fs_path.lstrip("/")
        if self.host:
            container, _, blob = fs_path.partition("/")
            return f"{self.protocol}://{container}@{self.host}/{blob}"
        return f"{self.protocol}://{fs_path.lstrip('/')}"


def check_no_credentials(url: str | Path) -> None:
    """Refuses a blob URL that carries a shared access signature in its query.

    Args:
        url: A path or URL.

    Raises:
        StorageError: The URL is an ``az://``, ``abfs[s]://`` or ``https://`` blob URL with a
            SAS query; the message has the token redacted and says where it goes instead.
    """
    text = str(url)
    proto = protocol(text)
    if proto is None or not _SAS_QUERY.search(text):
        return
    if proto in AZURE_PROTOCOLS or _HTTPS_BLOB.match(text):
        raise StorageError(
            f"blob URL {redact(text)!r} carries a shared access signature: landcover takes "
            f"credentials from the environment, not from URLs; drop the query and put the "
            f"token in AZURE_STORAGE_SAS_TOKEN (with AZURE_STORAGE_ACCOUNT_NAME)"
        )


def blob_url(url: str) -> str:
    """An ``https://`` blob URL (a STAC item's href) in the form landcover reads.

    ``https://ACCOUNT.blob.core.windows.net/CONTAINER/PATH`` becomes
    ``abfs://CONTAINER@ACCOUNT.blob.core.windows.net/PATH`` (percent-decoded); any other URL
    or path is returned as it is.

    Args:
        url: A path or URL.

    Returns:
        The URL to read.

    Raises:
        StorageError: A blob URL with a shared access signature (:func:`check_no_credentials`).
    """
    check_no_credentials(url)
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    container, _, path = parts.path.lstrip("/").partition("/")
    if parts.scheme.lower() != "https" or parts.query or not _ACCOUNT_HOST.match(host):
        return url
    if not container or not path:
        return url
    return f"abfs://{container}@{host}/{unquote(path)}"


def parse(url: str | Path) -> Location:
    """Parses a path or URL.

    Args:
        url: Any of the forms in this module's docstring.

    Returns:
        The parsed location.

    Raises:
        StorageError: An unsupported scheme, or a blob URL without a container.
    """
    text = str(url)
    proto = protocol(text)
    if proto is None:
        return Location(text, "local", text)
    rest = text[len(proto) + 3 :]
    if proto in LOCAL_PROTOCOLS:
        return Location(text, "local", rest)
    if proto == "memory":
        return Location(text, "memory", "/" + rest.lstrip("/"))
    check_no_credentials(text)
    if proto not in AZURE_PROTOCOLS:
        https = _HTTPS_BLOB.match(text)
        hint = (
            f"; for this account write abfs://CONTAINER@{https.group(1)}.blob.core.windows.net/PATH"
            if https
            else ""
        )
        raise StorageError(f"unsupported URL {redact(text)!r}: use {SUPPORTED}{hint}")
    netloc, _, path = rest.partition("/")
    account = host = None
    if "@" in netloc:
        container, _, host = netloc.partition("@")
        match = _ACCOUNT_HOST.match(host.lower())
        if not match:
            raise StorageError(
                f"unsupported blob URL {text!r}: expected "
                f"{proto}://CONTAINER@ACCOUNT.dfs.core.windows.net/PATH"
            )
        account = match.group("account")
    else:
        container = netloc
    if not container:
        raise StorageError(f"blob URL {text!r} names no container: use {proto}://CONTAINER/PATH")
    path = path.strip("/")
    return Location(text, proto, f"{container}/{path}" if path else container, account, host)


def join(url: str | Path, *parts: str) -> str:
    """Joins path segments onto a path or URL with ``/``, keeping its form.

    Args:
        url: A path or URL.
        *parts: Segments to append (leading/trailing slashes are ignored).

    Returns:
        The joined path or URL.
    """
    text = str(url)
    segments = [p.strip("/") for p in parts if p.strip("/")]
    if not segments:
        return text
    if protocol(text) is None:
        return posixpath.join(text, *segments)
    base = text if text.endswith("://") else text.rstrip("/") + "/"
    return base + "/".join(segments)


def name(url: str | Path) -> str:
    """The last segment of a path or URL (the file name)."""
    return str(url).rstrip("/").rsplit("/", 1)[-1]
