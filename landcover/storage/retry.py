"""Bounded retries: transient errors are retried with exponential back-off, for a bounded time.

Two layers, both bounded:

- The Azure SDK retries single HTTP requests inside one operation (a 5xx, or a connection
  dropped before a chunk's response) a few times with short back-offs. Its defaults (back-offs
  of 15, 18 and 24 s with 20 s connect and 60 s read timeouts) could keep one call busy for
  minutes, so :func:`sdk_client_options` sets short ones and leaves connection failures to us.
- :func:`retrying` retries a whole operation (read, write, upload, download) with tenacity
  while the error is transient (connection refused or reset, timeouts, HTTP 408/429/5xx), waiting 0.5 s, 1 s,
  2 s, ... (at most 8 s) in between, for ``budget_s`` seconds (default 30, or
  ``LANDCOVER_STORAGE_RETRY_S``). Then it raises one :class:`StorageError` line naming the
  URL and the last error.

The budget counts from the start of the first failed attempt when that attempt was short
enough to be nothing but timeouts (a server that is down, unreachable or hung), and from its
failure otherwise (a long transfer that broke still gets the whole budget of retries). So a
server that stays down ends an operation after about 24 s when connections are refused (the
process is gone), about 32 s when packets are dropped (10 s connect timeouts) and about 33 s
when it accepts connections but never answers (15 s read timeouts, tried twice).
"""

from __future__ import annotations

import errno
import logging
import os
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import tenacity

from landcover.errors import LandcoverError, first_line
from landcover.redaction import redact
from landcover.storage.credentials import how_to_set
from landcover.storage.errors import CredentialsError, StorageError, StorageNotFoundError

log = logging.getLogger("landcover")

T = TypeVar("T")

ENV_RETRY_S = "LANDCOVER_STORAGE_RETRY_S"
_SDK_READ_RETRIES = 1


@dataclass(frozen=True)
class RetryPolicy:
    """Retry and timeout settings of storage operations.

    Attributes:
        budget_s: Seconds during which transient errors are retried (counted as the module's
            docstring says).
        first_delay_s: The first back-off; each next one doubles.
        max_delay_s: The longest back-off.
        connect_timeout_s: Seconds to wait for a TCP/TLS connection to the blob service.
        read_timeout_s: Seconds to wait for the next bytes of a response.
    """

    budget_s: float = 30.0
    first_delay_s: float = 0.5
    max_delay_s: float = 8.0
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 15.0

    @property
    def stuck_s(self) -> float:
        """The longest an attempt takes when all it does is time out (with the SDK's retry)."""
        return self.connect_timeout_s + (1 + _SDK_READ_RETRIES) * self.read_timeout_s + 5.0


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
        retry_read=_SDK_READ_RETRIES,
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


def _causes(exc: BaseException) -> list[BaseException]:
    """The error and the errors it wraps (``__cause__``, ``__context__``, Azure's inner)."""
    chain: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        item = todo.pop()
        if item is None or any(item is seen for seen in chain) or len(chain) > 20:
            continue
        chain.append(item)
        todo += [item.__cause__, item.__context__, getattr(item, "inner_exception", None)]
    return chain


def is_certificate_error(exc: BaseException) -> bool:
    """Whether the server's TLS certificate was refused (never retried: not transient)."""
    return any(
        isinstance(e, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(e)
        for e in _causes(exc)
    )


def is_transient(exc: BaseException) -> bool:
    """Whether an error may go away when the operation is tried again.

    Connection failures, timeouts and HTTP 408, 429 and 5xx are transient; missing objects,
    rejected credentials or TLS certificates, other 4xx and local disk errors are not.
    """
    if is_certificate_error(exc):
        return False
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
    text = first_line(exc)
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
        return StorageNotFoundError(f"cannot {action} {url}: no such file, folder or blob")
    status = _status(exc)
    if is_certificate_error(exc):
        return StorageError(
            f"cannot {action} {url}: the server's TLS certificate was refused ({describe(exc)})"
        )
    if isinstance(exc, ClientAuthenticationError) and status is None:
        return CredentialsError(
            f"cannot {action} {url}: no Azure credential could be obtained (a managed identity, "
            f"AZURE_CLIENT_ID/AZURE_CLIENT_SECRET/AZURE_TENANT_ID or az login): {how_to_set()}"
        )
    if isinstance(exc, ClientAuthenticationError) or status in (401, 403):
        return CredentialsError(
            f"cannot {action} {url}: the storage service rejected the credentials "
            f"({describe(exc)}); check them: {how_to_set()}"
        )
    return StorageError(f"cannot {action} {url}: {describe(exc)}")


class _Budget:
    """tenacity's stop condition: the retry budget, counted as the module's docstring says.

    The budget counts from the start of the first failed attempt when that attempt took no
    longer than an attempt that only times out (``policy.stuck_s``), and from its failure
    otherwise; retrying stops when the next back-off would end past it.
    """

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.clock: float | None = None

    def __call__(self, state: tenacity.RetryCallState) -> bool:
        now = time.monotonic()
        if self.clock is None:
            short = now - state.start_time <= self.policy.stuck_s
            self.clock = state.start_time if short else now
        return now - self.clock + (state.upcoming_sleep or 0.0) > self.policy.budget_s


def _retried(exc: BaseException) -> bool:
    """Whether tenacity tries again after ``exc`` (a landcover error is already one line)."""
    return not isinstance(exc, LandcoverError) and is_transient(exc)


def retrying(
    action: str, url: str, operation: Callable[[], T], policy: RetryPolicy | None = None
) -> T:
    """Runs ``operation``, retrying transient errors with exponential back-off (tenacity).

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

    def warn(state: tenacity.RetryCallState) -> None:
        assert state.outcome is not None
        reason = describe(state.outcome.exception())
        log.warning(
            "storage: %s %s failed (%s); retrying in %.1f s",
            action,
            url,
            reason,
            state.upcoming_sleep,
        )

    retryer = tenacity.Retrying(
        retry=tenacity.retry_if_exception(_retried),
        wait=tenacity.wait_exponential(multiplier=policy.first_delay_s, max=policy.max_delay_s),
        stop=_Budget(policy),
        before_sleep=warn,
    )
    begin = time.monotonic()
    try:
        return retryer(operation)
    except tenacity.RetryError as gave_up:
        last = gave_up.last_attempt
        exc = last.exception()
        assert exc is not None
        raise StorageError(
            f"cannot {action} {url}: {describe(exc)} (gave up after {last.attempt_number} "
            f"attempts in {time.monotonic() - begin:.0f} s)"
        ) from exc
    except LandcoverError:  # already one line (a full or read-only disk, say)
        raise
    except Exception as exc:
        raise to_storage_error(action, url, exc) from exc
