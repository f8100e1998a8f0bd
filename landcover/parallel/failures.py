"""Telling a failed peer from a local fault.

A collective that fails because another worker died, hung or became unreachable is reported
as :class:`~landcover.errors.PeerFailureError` (the job restarts or stops with one line about
the peer). A CUDA fault, an out-of-memory error or an NCCL error raised by this worker's own
GPU is a local fault and keeps its traceback: calling it a dead peer would hide the cause.
"""

from __future__ import annotations

import torch

_LOCAL_SIGNS = (
    "cuda error",
    "cuda out of memory",
    "out of memory",
    "cublas",
    "cudnn",
    "device-side assert",
    "illegal memory access",
    "unhandled cuda error",
    "invalid usage",
    "invalid argument",
    "nccl version",
    "ncclinvalid",
    "ncclunhandledcudaerror",
    "ncclinternalerror",
)
"""Text of errors raised by this worker's own device or library, whoever else is alive."""

_PEER_SIGNS = (
    "timed out",
    "timeout",
    "connection closed by peer",
    "connection reset by peer",
    "broken pipe",
    "socket closed",
    "remote process exited",
    "ncclremoteerror",
    "remote end",
    "failed to recv",
    "failed to send",
    "unable to find address",
    "connect timeout",
    "connection refused",
    "horovod has been shut down",
    "one of the ranks",
)
"""Text of errors raised when another worker stops answering."""


def is_peer_failure(exc: BaseException) -> bool:
    """Whether an exception is a collective that failed because of another worker.

    Local signs (CUDA errors, out of memory, NCCL's invalid-usage and internal errors) are
    checked first: a local fault that surfaces inside a collective stays a local fault. Then
    torch's ``DistNetworkError``/``DistStoreError`` and transport messages of a dead or silent
    peer count as peer failures.

    Args:
        exc: The exception.

    Returns:
        True for a failure caused by a peer.
    """
    text = str(exc).lower()
    if any(sign in text for sign in _LOCAL_SIGNS):
        return False
    if isinstance(exc, torch.distributed.DistNetworkError | torch.distributed.DistStoreError):
        return True
    if not isinstance(exc, RuntimeError):
        return False
    return any(sign in text for sign in _PEER_SIGNS)
