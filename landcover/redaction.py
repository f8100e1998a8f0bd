"""One redaction point for every line landcover prints and every record it writes.

A secret must never reach the console, a log file, a run folder, a record, a job file or a
checkpoint. Everything text-shaped we emit passes through :func:`redact`:

- the ``landcover`` log handlers format through :class:`RedactingFormatter`;
- each process's ``sys.stdout`` and ``sys.stderr`` (and their binary ``buffer``) are wrapped by
  :func:`install` (the CLI, every worker), so tracebacks, warnings, progress bars and other
  libraries' lines are covered too; text that rich or click lays out to the terminal's width
  first (a usage error's panel, a line printed under a live progress bar) is redacted whole
  before that, where it is made (``landcover.cli``, ``landcover.progress``), since a secret cut
  by a line break no longer matches;
- the CLI's one-line error, the workers' error files, the text records (``config.yaml``,
  ``summary.json``, STAC items, ``metrics.json``, ``job.yml``, manifests, ...) and the
  configuration stored in a checkpoint.

What counts as a secret:

- the value of every environment variable whose name marks a credential (``*KEY*``,
  ``*SECRET*``, ``*TOKEN*``, ``*PASSWORD*``, ``*CONNECTION_STRING*``, ``*SAS*``, ...), e.g.
  ``AZURE_STORAGE_ACCOUNT_KEY``, ``AZURE_STORAGE_SAS_TOKEN``, ``AZURE_CLIENT_SECRET``, wherever
  it appears, also percent-encoded;
- shared-access-signature fields in a URL query (``sig``, ``se``, ``sp``, ``sv``, ``st``, ...)
  and ``sig=`` anywhere, also with ``?``, ``&`` and ``=`` percent-encoded;
- the password in a URL's user part (``https://user:password@host``, an MLflow tracking URI);
- connection-string parts (``AccountKey=``, ``SharedAccessSignature=``, ``SharedAccessKey=``);
- bearer tokens (``Bearer ...``, ``Authorization: ...``), JSON web tokens, and 88-character
  base64 storage account keys;
- ``password=`` / ``client_secret=`` style assignments;
- secrets learnt at run time (a Planetary Computer SAS token), given to :func:`register_secret`.

This module uses the standard library only, so every package may import it.
"""

from __future__ import annotations

import io
import logging
import os
import re
import sys
from collections.abc import Mapping
from typing import Any, TextIO, TypeVar
from urllib.parse import quote, unquote

MASK = "***"

# Environment variable names (upper case) that mark a credential.
_SECRET_NAME = re.compile(
    r"(KEY|SECRET|TOKEN|PASSWORD|PASSWD|PASSPHRASE|CONNECTION_STRING|SAS|CREDENTIAL|SIGNATURE)"
)
# Names that match the pattern above but hold no secret.
_NOT_SECRET_NAMES = frozenset({"AZURE_STORAGE_ACCOUNT_NAME", "SSH_AUTH_SOCK", "PC_SDK_SAS_URL"})
# Shorter values are not replaced: they would blank out ordinary words and numbers.
_MIN_SECRET_LEN = 8

# Shared-access-signature query fields (Azure's SAS, service and user delegation forms).
_SAS_FIELDS = (
    "sig|se|st|sp|sv|spr|srt|ss|sr|sip|sdd|skoid|sktid|skt|ske|sks|skv|saoid|suoid|scid|"
    "rscc|rscd|rsce|rscl|rsct"
)
# a query value: up to the next field, quote, bracket or space (a colon ending a phrase is prose)
_QUERY_VALUE = r"(?:[^&\s'\"#<>;,:)\]}]|:(?![\s'\"]|$))+"
# ? & = also percent-encoded, once or twice (a whole URL quoted into a path or another URL's
# query); a value after an encoded = runs to the next real separator, over encoded ones
QMARK, AMP, EQUALS = r"(?:\?|%(?:25)?3F)", r"(?:&|%(?:25)?26)", r"(?:=|%(?:25)?3D)"
"""Regular-expression pieces for a URL query's ``?``, ``&`` and ``=``, also percent-encoded
(``landcover.storage.urls`` refuses such queries by the same rule)."""
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # a SAS field in a URL query (after ? or &)
    (re.compile(rf"((?:{QMARK}|{AMP})(?:{_SAS_FIELDS}){EQUALS}){_QUERY_VALUE}", re.I), r"\1"),
    # a signature anywhere
    (re.compile(rf"(\bsig{EQUALS}){_QUERY_VALUE}", re.I), r"\1"),
    # a password in a URL's user part (https://user:password@host)
    (re.compile(r"(\b[a-z][a-z0-9+.\-]*://[^/\s:@'\"]*:)[^@\s/'\"]+(?=@)", re.I), r"\1"),
    # connection-string parts
    (
        re.compile(
            r"((?:AccountKey|SharedAccessSignature|SharedAccessKey|ClientSecret)\s*=\s*)"
            r"[^;\s'\"]+",
            re.I,
        ),
        r"\1",
    ),
    # HTTP authorization headers and bearer tokens
    (re.compile(r"(\bBearer\s+)[A-Za-z0-9\-._~+/]+=*", re.I), r"\1"),
    (re.compile(r"(\bAuthorization['\"]?\s*[:=]\s*['\"]?)(?!Bearer\b)[^\s'\",}]+", re.I), r"\1"),
    # password- and secret-style assignments (password=..., client_secret: "...")
    (
        re.compile(
            r"(\b(?:password|passwd|pwd|client_secret|clientsecret|account_key|accountkey|"
            r"sas_token|sastoken)['\"]?\s*[:=]\s*)(?:\"[^\"]*\"|'[^']*'|[^\s'\",;&}]+)",
            re.I,
        ),
        r"\1",
    ),
    # a shell assignment to a credential variable (export AZURE_STORAGE_ACCOUNT_KEY=...)
    (
        re.compile(
            r"(\b[A-Z0-9_]*(?:KEY|SECRET|TOKEN|PASSWORD|PASSWD|CONNECTION_STRING|SAS)[A-Z0-9_]*"
            r"=)(?!\$)(?:\"[^\"]*\"|'[^']*'|[^\s'\";&|]+)"
        ),
        r"\1",
    ),
    # a password on a command line (az login -p ..., --password ...)
    (
        re.compile(
            r"((?:\baz\s+login\b[^\n]*?\s-p|--password|--client-secret|--account-key|"
            r"--sas-token)(?:\s+|=))(?!\$)(?:\"[^\"]*\"|'[^']*'|[^\s'\"]+)"
        ),
        r"\1",
    ),
    # JSON web tokens (Azure AD access tokens)
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"), ""),
    # a storage account key: 64 random bytes in base64 (86 characters and '==')
    (re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{86}=="), ""),
)

T = TypeVar("T")


def secret_variable(name: str) -> bool:
    """Whether an environment variable's name marks a credential.

    Args:
        name: The variable's name.

    Returns:
        True for names such as ``AZURE_STORAGE_ACCOUNT_KEY``, ``AZURE_STORAGE_SAS_TOKEN``,
        ``AZURE_CLIENT_SECRET`` or ``AZURE_STORAGE_CONNECTION_STRING``.
    """
    upper = name.upper()
    return upper not in _NOT_SECRET_NAMES and bool(_SECRET_NAME.search(upper))


def environ_snapshot() -> dict[str, str]:
    """A copy of ``os.environ`` that another thread changing it cannot break.

    Iterating ``os.environ`` itself (``items()``, ``dict(os.environ)``, ``os.environ.copy()``)
    lists its names, then looks each one up: a variable another thread removes in between
    raises ``KeyError``. MLflow's telemetry thread does so (it pops
    ``_MLFLOW_TELEMETRY_SESSION_ID``), and every redacted line reads the environment, so such
    a ``KeyError`` surfaced anywhere, at random (issue 42, item 1). Here the names are listed
    at once and a variable gone by its lookup is left out.

    Returns:
        The variables' names and values.
    """
    snapshot: dict[str, str] = {}
    for name in list(os.environ):  # one list of the names, taken under the interpreter lock
        value = os.environ.get(name)  # None, not KeyError, for a variable removed meanwhile
        if value is not None:
            snapshot[name] = value
    return snapshot


def _forms(value: str) -> set[str]:  # a secret as it may be printed: ?-less, percent-encoded
    bare = {value.strip(), value.strip().lstrip("?")}
    forms = {f for b in bare for f in (b, quote(b, safe=""), quote(b, safe="=&"))}
    return {form for form in forms if len(form) >= _MIN_SECRET_LEN}


def environment_secrets(env: Mapping[str, str] | None = None) -> list[str]:
    """The credential values of an environment, in the forms they may be printed in.

    Args:
        env: The environment (default: a snapshot of ``os.environ``, see
            :func:`environ_snapshot`).

    Returns:
        Each secret value (and its ``?``-less and percent-encoded forms), longest first.
    """
    env = environ_snapshot() if env is None else env
    found: set[str] = set()
    for name, value in env.items():
        if secret_variable(name):
            found |= _forms(value)
    return sorted(found, key=len, reverse=True)


_RUNTIME_SECRETS: tuple[str, ...] = ()


def register_secret(value: str) -> None:
    """Redacts, from now on in this process, a secret learnt at run time (a SAS token).

    Args:
        value: The secret; a SAS token's ``sig`` value is added alone too, also decoded.
    """
    global _RUNTIME_SECRETS
    found = _forms(value)
    for field, _, text in (part.partition("=") for part in value.lstrip("?").split("&")):
        if field.lower() == "sig" and text:
            found |= _forms(text) | _forms(unquote(text))
    # a new tuple swapped in whole: a thread redacting meanwhile sees the old or the new one
    _RUNTIME_SECRETS = tuple({*_RUNTIME_SECRETS, *found})


def redact(text: str, env: Mapping[str, str] | None = None) -> str:
    """Removes every credential from a piece of text.

    Args:
        text: A message, log line, exception text or file content.
        env: The environment whose credential values to remove (default: ``os.environ``).

    Returns:
        The text with each secret replaced by ``***``.
    """
    if not text:
        return text
    for secret in sorted({*environment_secrets(env), *_RUNTIME_SECRETS}, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    for pattern, keep in _PATTERNS:
        text = pattern.sub(lambda m, k=keep: m.expand(k) + MASK, text)
    return text


def redact_tree(tree: T, env: Mapping[str, str] | None = None) -> T:
    """Redacts every string inside JSON- or YAML-like data (dicts, lists, tuples, scalars).

    Args:
        tree: The data; it is not modified.
        env: The environment whose credential values to remove (default: ``os.environ``).

    Returns:
        A copy with every string (keys included) redacted (mappings become dicts); other
        values unchanged.
    """
    if isinstance(tree, str):
        return redact(tree, env)  # type: ignore[return-value]
    if isinstance(tree, Mapping):
        return {redact_tree(k, env): redact_tree(v, env) for k, v in tree.items()}  # type: ignore[return-value]
    if isinstance(tree, list):
        return [redact_tree(v, env) for v in tree]  # type: ignore[return-value]
    if isinstance(tree, tuple):
        return tuple(redact_tree(v, env) for v in tree)  # type: ignore[return-value]
    return tree


class RedactingBuffer(io.RawIOBase):
    """The binary side of a :class:`RedactingStream`: bytes are redacted as text, then passed on.

    Click writes to ``sys.stdout.buffer`` itself where the stream's encoding is ASCII
    (``PYTHONIOENCODING=ascii``, a C locale), so that side is wrapped too.

    Args:
        buffer: The binary stream written to (the wrapped text stream's ``buffer``).
        encoding: The text stream's encoding; bytes it cannot decode pass through unchanged.
    """

    def __init__(self, buffer: Any, encoding: str) -> None:
        super().__init__()
        self._buffer = buffer
        self._encoding = encoding

    def write(self, data: Any) -> int:  # noqa: D102 - io.RawIOBase's
        raw = bytes(data)
        text = raw.decode(self._encoding, "surrogateescape")
        self._buffer.write(redact(text).encode(self._encoding, "surrogateescape"))
        return len(raw)

    def flush(self) -> None:  # noqa: D102 - io.RawIOBase's
        self._buffer.flush()

    def fileno(self) -> int:  # noqa: D102 - io.RawIOBase's
        return self._buffer.fileno()

    def isatty(self) -> bool:  # noqa: D102 - io.RawIOBase's
        return self._buffer.isatty()

    def writable(self) -> bool:  # noqa: D102 - io.RawIOBase's
        return True


class RedactingStream(io.TextIOBase):
    """A text stream that redacts every write before passing it on.

    Args:
        stream: The stream written to (``sys.stderr``, ...).
    """

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream
        raw = getattr(stream, "buffer", None)
        self._buffer = None if raw is None else RedactingBuffer(raw, self.encoding)

    @property
    def buffer(self) -> RedactingBuffer:
        """The binary side, redacted as well (AttributeError where the stream has none)."""
        if self._buffer is None:
            raise AttributeError("buffer")
        return self._buffer

    @property
    def wrapped(self) -> TextIO:
        """The stream written to."""
        return self._stream

    def write(self, text: str) -> int:  # noqa: D102 - io.TextIOBase's
        self._stream.write(redact(text))
        return len(text)

    def writelines(self, lines: Any) -> None:  # noqa: D102 - io.TextIOBase's
        for line in lines:
            self.write(line)

    def flush(self) -> None:  # noqa: D102 - io.TextIOBase's
        self._stream.flush()

    def fileno(self) -> int:  # noqa: D102 - io.TextIOBase's
        return self._stream.fileno()

    def isatty(self) -> bool:  # noqa: D102 - io.TextIOBase's
        return self._stream.isatty()

    def writable(self) -> bool:  # noqa: D102 - io.TextIOBase's
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]  # noqa: D102
        return getattr(self._stream, "encoding", "utf-8") or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]  # noqa: D102
        return getattr(self._stream, "errors", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def install() -> None:
    """Wraps this process's ``sys.stdout`` and ``sys.stderr`` so that nothing printed leaks.

    Called first thing by the CLI and by every worker process; calling it again is harmless.
    """
    wrapped: dict[int, RedactingStream] = {}
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactingStream):
            wrapper = RedactingStream(stream)
            wrapped[id(stream)] = wrapper
            setattr(sys, name, wrapper)
    # log handlers made before this call (a library imported earlier) hold the bare streams
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for logger in loggers:
        for handler in getattr(logger, "handlers", ()):
            if isinstance(handler, logging.StreamHandler) and id(handler.stream) in wrapped:
                handler.setStream(wrapped[id(handler.stream)])
