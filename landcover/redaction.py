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

What counts as a secret, and how it is found in text: :mod:`landcover.secretforms`.

This module uses the standard library only, so every package may import it.
"""

from __future__ import annotations

import io
import logging
import os
import sys
from collections.abc import Mapping
from typing import Any, TextIO, TypeVar
from urllib.parse import quote, unquote

from landcover.secretforms import MIN_SECRET_LEN, TEXT_PATTERNS, secret_variable

MASK = "***"

T = TypeVar("T")


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
    return {form for form in forms if len(form) >= MIN_SECRET_LEN}


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
    for pattern, keep in TEXT_PATTERNS:
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
