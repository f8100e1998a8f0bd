"""The C allocator's settings for a process that allocates large, short-lived tensors.

PyTorch on the CPU has no caching allocator: every tensor is a ``malloc`` and a ``free``.
glibc serves requests above its mmap threshold (at most 32 MB, adjusted as it goes) with a
fresh ``mmap`` and returns them with ``munmap``, so each new large tensor (a window's logits
and probabilities, a strip of blended probabilities, a batch's activations) costs a page
fault per 4 kB page and the kernel's zeroing of it. Raising the mmap threshold to
:data:`MMAP_THRESHOLD` and the trim threshold to :data:`TRIM_THRESHOLD` keeps freed blocks in
the process for the next tensor of the same size, as jemalloc and tcmalloc (which PyTorch's
CPU performance guides recommend preloading) do. Measured on 2 CPU cores: predict's blending
stage with a model that allocates its output, 2.7 -> 7.5 Mpx/s; ``landcover predict`` with
``configs/cpu.yaml``'s model on a 3,000 x 1,500 tile, 1.14x (0.65-0.68 -> 0.74-0.78 Mpx/s,
alternating runs); ``benchmarks/ceiling_bench.py`` keeps a row with glibc's defaults.

Applied once at the start of a command's process and of each worker process. Nothing is
changed when ``LANDCOVER_MALLOC=default`` is set, when the user has set glibc's own
``MALLOC_*`` variables or preloads another allocator (``LD_PRELOAD``), or on a C library
without ``mallopt`` (macOS, musl).
"""

from __future__ import annotations

import ctypes
import os
import sys

MMAP_THRESHOLD = 1 << 30
"""Requests up to 1 GiB come from the heap, so their memory is reused."""

TRIM_THRESHOLD = 1 << 30
"""Free memory at the heap's top is returned to the system above 1 GiB (``mallopt`` takes a
C ``int``: at most 2 GiB - 1)."""

ENV_SWITCH = "LANDCOVER_MALLOC"
"""``default`` leaves the C library's defaults."""

_M_TRIM_THRESHOLD = -1  # glibc's malloc.h
_M_MMAP_THRESHOLD = -3


def allocator_is_tuned_elsewhere(environ: dict[str, str] | None = None) -> bool:
    """Whether the user chose the allocator's behaviour themselves.

    Args:
        environ: The environment (default: this process's).

    Returns:
        True when ``LANDCOVER_MALLOC=default``, a ``MALLOC_*`` variable or ``LD_PRELOAD`` is set.
    """
    env = os.environ if environ is None else environ
    if env.get(ENV_SWITCH, "").lower() == "default" or env.get("LD_PRELOAD"):
        return True
    return any(key.startswith("MALLOC_") or key.startswith("GLIBC_TUNABLES") for key in env)


def tune_allocator() -> bool:
    """Raises glibc's mmap and trim thresholds for this process (see the module).

    Returns:
        True when the thresholds were set, False when nothing was changed.
    """
    if not sys.platform.startswith("linux") or allocator_is_tuned_elsewhere():
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no C library with mallopt
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
