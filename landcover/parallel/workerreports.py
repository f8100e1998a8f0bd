"""What a worker leaves for its launcher when it fails, and the one line the launcher prints.

A worker started by one of our launchers runs :func:`run_guarded`: its own
:class:`~landcover.errors.LandcoverError` is filed as ``rank{N}.cause.txt``, a failure caused
by another worker (:class:`~landcover.errors.PeerFailureError`) as ``rank{N}.peer.txt``, and a
crash (a bug, not bad input) as ``rank{N}.crash.txt``, each redacted, in the folder named by
:data:`ERROR_DIR_ENV`. :func:`failure_message` picks the line that best explains a failed group.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from landcover.diskerrors import uncaught_output_error
from landcover.errors import LandcoverError, PeerFailureError, first_line
from landcover.parallel.sigint import accept_sigint
from landcover.plugins import load_plugins
from landcover.redaction import install as install_redaction
from landcover.redaction import redact

ERROR_DIR_ENV = "LANDCOVER_ERROR_DIR"


def set_parent_death_signal() -> None:
    """Asks Linux to kill this process if its parent dies (no orphans after a SIGKILL)."""
    if sys.platform != "linux":
        return
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def report_worker_error(exc: LandcoverError, rank: int) -> bool:
    """Leaves a worker's error for its launcher, when a launcher of ours started it.

    Args:
        exc: The worker's error.
        rank: The worker's global rank.

    Returns:
        True if the error was written for the launcher (which prints it), False otherwise.
    """
    error_dir = os.environ.get(ERROR_DIR_ENV)
    if not error_dir:
        return False
    kind = "peer" if isinstance(exc, PeerFailureError) else "cause"
    Path(error_dir, f"rank{rank}.{kind}.txt").write_text(redact(str(exc)))
    return True


def reported_error(error_dir: Path, first_failed_rank: int | None = None) -> str | None:
    """The reported worker error that best explains a failed job.

    A worker's own LandcoverError (bad data, bad config...) comes first, then the peer-failure
    message of the first rank to fail (or of any rank when that is unknown).

    Args:
        error_dir: The folder the workers reported into.
        first_failed_rank: The rank that failed first, if the launcher knows it.

    Returns:
        The message, or ``None`` when no worker reported one.
    """
    causes = sorted(error_dir.glob("rank*.cause.txt"))
    if causes:
        return causes[0].read_text().strip()
    peers = sorted(error_dir.glob("rank*.peer.txt"))
    if first_failed_rank is not None:
        peers = [p for p in peers if p.name == f"rank{first_failed_rank}.peer.txt"]
    return peers[0].read_text().strip() if peers else None


def _report_and_exit(exc: LandcoverError) -> NoReturn:
    """Leaves a worker's LandcoverError for the launcher (else prints it) and exits non-zero."""
    if not report_worker_error(exc, int(os.environ.get("RANK", "0"))):
        print(f"error: {exc}", file=sys.stderr)
    raise SystemExit(exc.exit_code) from None


def run_guarded(fn: Callable[..., Any], *args: Any) -> Any:
    """Runs ``fn`` in a worker; a LandcoverError is reported to the launcher, exit non-zero."""
    set_parent_death_signal()
    install_redaction()
    try:
        accept_sigint()  # blocked while the worker started (landcover.parallel.sigint)
        load_plugins()  # a spawned process imports only what the function needs
        return fn(*args)
    except LandcoverError as exc:
        _report_and_exit(exc)
    except Exception as exc:
        translated = uncaught_output_error(exc)
        if translated is not None:  # a read-only, unwritable or full destination
            _report_and_exit(translated)
        # a bug, not bad input: keep the worker's traceback for the report
        traceback.print_exc()
        error_dir = os.environ.get(ERROR_DIR_ENV)
        if error_dir:
            last = first_line(exc, 300, typed=True)
            Path(error_dir, f"rank{os.environ.get('RANK', '0')}.crash.txt").write_text(redact(last))
        raise SystemExit(1) from None


def describe_exit(code: int | None) -> str:
    """How a process ended, from its exit code (negative: killed by that signal).

    Args:
        code: The exit code.

    Returns:
        For example ``exited with code 1`` or ``was killed by signal SIGKILL``.
    """
    if code is not None and code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def failure_message(exc: Any, error_dir: Path) -> str:
    """The one line that best explains a failed worker group.

    A worker's own LandcoverError (bad data, bad config...) comes first; then the first
    worker to fail, by its own message when it reported a peer failure, else by how it died.
    """
    rank, failure = exc.get_first_failure()
    reported = reported_error(error_dir, rank)
    if reported:
        return reported
    crash = error_dir / f"rank{rank}.crash.txt"
    if crash.is_file():
        return f"worker rank {rank} failed with {crash.read_text().strip()} (traceback above)"
    detail = ""
    if isinstance(failure.message, str) and failure.message not in ("", "<N/A>"):
        detail = ": " + failure.message.strip().splitlines()[-1][:300]
    return f"worker rank {rank} {describe_exit(failure.exitcode)}{detail}"
