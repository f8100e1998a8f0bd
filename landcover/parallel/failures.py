"""Telling a failed peer from a local fault.

A collective that fails because another worker died, hung or became unreachable is reported
as :class:`~landcover.errors.PeerFailureError` (the job restarts or stops with one line about
the peer). A CUDA fault, an out-of-memory error or an NCCL error raised by this worker's own
GPU is a local fault and keeps its traceback: calling it a dead peer would hide the cause.

torch's exception types decide where torch provides them: ``torch.OutOfMemoryError`` and
``torch.AcceleratorError`` are local, ``DistNetworkError`` and ``DistStoreError`` (the
rendezvous store, a refused or lost connection) are peer failures. The rest needs the text:
gloo raises its timeouts and connection resets as a plain ``RuntimeError`` (``Timed out
waiting 3000ms for recv operation``, ``Connection reset by peer``), NCCL raises local and
remote faults alike as ``DistBackendError`` (``invalid usage`` against ``ncclRemoteError``),
and Horovod raises its own ``HorovodInternalError`` (a ``RuntimeError``).
"""

from __future__ import annotations

import torch

_LOCAL_TYPES = (torch.OutOfMemoryError, torch.AcceleratorError)
"""torch's types for a fault of this worker's own device."""

_PEER_TYPES = (torch.distributed.DistNetworkError, torch.distributed.DistStoreError)
"""torch's types for a lost connection to the other workers or their store."""

_LOCAL_SIGNS = (
    "cuda error",
    "out of memory",
    "cublas",
    "cudnn",
    "device-side assert",
    "illegal memory access",
    "invalid usage",
    "invalid argument",
    "nccl version",
    "ncclinvalid",
    "ncclunhandledcudaerror",
    "ncclinternalerror",
)
"""Text of NCCL and CUDA errors raised by this worker's own device or library, whoever else is
alive (NCCL reports them as ``DistBackendError``, older paths as ``RuntimeError``)."""

_PEER_SIGNS = (
    "timed out",
    "timeout",
    "closed by peer",
    "reset by peer",
    "broken pipe",
    "socket closed",
    "remote process exited",
    "ncclremoteerror",
    "remote end",
    "failed to recv",
    "failed to send",
    "unable to find address",
    "connection refused",
    "horovod has been shut down",
    "one of the ranks",
)
"""Text of gloo, NCCL and Horovod errors raised when another worker stops answering."""


def is_peer_failure(exc: BaseException) -> bool:
    """Whether an exception is a collective that failed because of another worker.

    torch's local types (out of memory, an accelerator fault) and local signs in the text
    (CUDA, cuDNN, NCCL's invalid-usage and internal errors) come first: a local fault that
    surfaces inside a collective stays a local fault. Then torch's ``DistNetworkError`` and
    ``DistStoreError``, and the transport messages of a dead or silent peer in any other
    ``RuntimeError`` (gloo, NCCL, Horovod), count as peer failures.

    Args:
        exc: The exception.

    Returns:
        True for a failure caused by a peer.
    """
    if isinstance(exc, _LOCAL_TYPES):
        return False
    text = str(exc).lower()
    if any(sign in text for sign in _LOCAL_SIGNS):
        return False
    if isinstance(exc, _PEER_TYPES):
        return True
    if not isinstance(exc, RuntimeError):
        return False
    return any(sign in text for sign in _PEER_SIGNS)
