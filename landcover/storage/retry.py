"""Bounded retries: transient errors are retried with exponential back-off, for a bounded time.

Two layers, both bounded:

- The Azure SDK retries single HTTP requests inside one operation (a 5xx or a dropped
  connection while reading a chunk) a few times with short back-offs. Its defaults (15 s, 18 s,
  24 s back-offs with 20 s connect and 60 s read timeouts) could keep one call busy for minutes,
  so :func:`sdk_client_options` sets short ones and leaves connection failures to us.
- :func:`retrying` retries a whole operation (read, write, upload, download) while the error is
  transient (connection refused or reset, timeouts, HTTP 408/429/5xx), waiting 0.5 s, 1 s,
  2 s, ... (at most 8 s) in between, until ``budget_s`` seconds (default 30, or
  ``LANDCOVER_STORAGE_RETRY_S``) have passed since the first failure. Then it raises one
  :class:`StorageError` line naming the URL and the last error.

So a server that stays down fails an operation after about ``budget_s`` seconds (plus at most
one connect timeout, 10 s, when packets are silently dropped); a server that stops answering
mid-transfer after at most two read timeouts (2 x 20 s) more.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from landcover.storage.credentials import HOW_TO_SET, redact
from landcover.storage.errors import CredentialsError, StorageError, StorageNotFoundError

log = logging.getLogger("landcover")

T = TypeVar("T")

ENV_RETRY_S = "LANDCOVER_STORAGE_RETRY_S"


@dataclass(frozen=True)
class RetryPolicy:
    """Retry and timeout settings of storage operations.

    Attributes:
        budget_s: Seconds after the first failure during which transient errors are retried.
        first_delay_s: The first back-off; each next one doubles.
        max_delay_s: The longest back-off.
        connect_timeout_s: Seconds to wait for a TCP/TLS connection to the blob service.
        read_timeout_s: Seconds to wait for the next bytes of a response.
    """

    budget_s: float = 30.0
    first_delay_s: float = 0.5
    max_delay_s: float = 8.0
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 20.0


def default_policy() -> RetryPolicy:
    """The policy in force: defaults, with ``LANDCOVER_STORAGE_RETRY_S`` as the budget if set.

    Raises:
        StorageError: ``LANDCOVER_STORAGE_RETRY_S`` is not a non-negative number.
    """
    text = os.environ.get(ENV_RETRY_S, "").strip()
    if not text:
        return RetryPolicy()
    try:
        budget = float(text)
        if budget < 0:
            raise ValueError(text)
    except ValueError:
        raise StorageError(f"{ENV_RETRY_S}={text!r} is not a number of seconds >= 0") from None
    return RetryPolicy(budget_s=budget)


def sdk_client_options(policy: RetryPolicy) -> dict[str, Any]:
    """Keyword arguments for an async ``BlobServiceClient`` that keep its own retries short.

    Args:
        policy: The retry settings.

    Returns:
        ``retry_policy``, ``connection_timeout`` and ``read_timeout``.
    """
    from azure.storage.blob.aio import ExponentialRetry

    retry = ExponentialRetry(
        initial_backoff=0.5,
        increment_base=2,
        retry_total=3,
        retry_connect=0,  # a refused/unreachable server is retried by `retrying`, with a budget
        retry_read=1,
        retry_status=3,
        random_jitter_range=0.25,
    )
    return {
        "retry_policy": retry,
        "connection_timeout": policy.connect_timeout_s,
        "read_timeout": policy.read_timeout_s,
    }


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def is_transient(exc: BaseException) -> bool:
    """Whether an error may go away when the operation is tried again.

    Connection failures, timeouts and HTTP 408, 429 and 5xx are transient; missing objects,
    rejected credentials, other 4xx and local disk errors are not.
    """
    from azure.core.exceptions import (
        ClientAuthenticationError,
        HttpResponseError,
        ServiceRequestError,
        ServiceResponseError,
    )
    from fsspec.exceptions import FSTimeoutError

    if isinstance(exc, ClientAuthenticationError):
        return False
    if isinstance(exc, (ServiceRequestError, ServiceResponseError)):
        return "not permitted for non-TLS" not in str(exc)
    if isinstance(exc, HttpResponseError):
        status = _status(exc)
        return status is not None and (status in (408, 429) or status >= 500)
    if isinstance(exc, (ConnectionError, TimeoutError, FSTimeoutError)):
        return True
    try:
        import aiohttp
    except ImportError:  # pragma: no cover - aiohttp comes with adlfs
        return False
    return isinstance(exc, aiohttp.ClientError)


def describe(exc: BaseException) -> str:
    """A short one-line description of an error, with any credential removed."""
    status = _status(exc)
    code = getattr(exc, "error_code", None)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror and not status:
        text = exc.strerror
    if status:
        text = f"HTTP {status}" + (f" {code}" if code else "") + f" ({text})"
    text = redact(text)
    return text if len(text) <= 240 else text[:237] + "..."


def to_storage_error(action: str, url: str, exc: BaseException) -> StorageError:
    """Turns a non-transient error into a one-line :class:`StorageError`.

    Args:
        action: What was being done ("read", "write", ...).
        url: The path or URL.
        exc: The error.

    Returns:
        A :class:`StorageNotFoundError`, :class:`CredentialsError` or :class:`StorageError`.
    """
    from azure.core.exceptions import ClientAuthenticationError, ResourceNotFoundError

    if isinstance(exc, StorageError):
        return exc
    code = str(getattr(exc, "error_code", "") or "")
    if code == "ContainerNotFound":
        return StorageNotFoundError(f"cannot {action} {url}: the container does not exist")
    if isinstance(exc, (FileNotFoundError, ResourceNotFoundError)) or (
        isinstance(exc, OSError) and exc.errno == errno.ENOENT
    ):
        return StorageNotFoundError(f"cannot {action} {url}: no such file or blob")
    status = _status(exc)
    if isinstance(exc, ClientAuthenticationError) or status in (401, 403):
        return CredentialsError(
            f"cannot {action} {url}: the storage service rejected the credentials "
            f"({describe(exc)}); check them: {HOW_TO_SET}"
        )
    return StorageError(f"cannot {action} {url}: {describe(exc)}")


def retrying(
    action: str, url: str, operation: Callable[[], T], policy: RetryPolicy | None = None
) -> T:
    """Runs ``operation``, retrying transient errors with exponential back-off.

    Args:
        action: What the operation does, for messages ("read", "upload to", ...).
        url: The path or URL it works on, for messages.
        operation: The whole operation; it must be safe to run again from the start.
        policy: Retry settings (default: :func:`default_policy`).

    Returns:
        The operation's result.

    Raises:
        StorageError: A non-transient error, or transient ones past ``policy.budget_s``.
    """
    policy = policy or default_policy()
    delay = policy.first_delay_s
    first_failure: float | None = None
    attempt = 0
    while True:
        attempt += 1
        try:
            return operation()
        except StorageError:
            raise
        except Exception as exc:
            if not is_transient(exc):
                raise to_storage_error(action, url, exc) from exc
            now = time.monotonic()
            first_failure = now if first_failure is None else first_failure
            waited = now - first_failure
            if waited + delay > policy.budget_s:
                raise StorageError(
                    f"cannot {action} {url}: {describe(exc)} (gave up after {attempt} "
                    f"attempts in {waited:.0f} s)"
                ) from exc
            log.warning(
                "storage: %s %s failed (%s); retrying in %.1f s", action, url, describe(exc), delay
            )
            time.sleep(delay)
            delay = min(delay * 2, policy.max_delay_s)
