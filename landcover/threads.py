"""Threads of landcover's processes: OpenMP's passive wait policy, and the cores a process may use.

torch's CPU kernels run on an OpenMP thread pool (GNU libgomp in PyPI's wheels) whose threads,
by default, keep spinning for a while after every parallel region, waiting for the next one.
landcover runs torch beside threads of its own (decoding tiles, writing and compressing maps,
publishing COGs, loading data), and spinning pool threads take the cores those threads need:
on the predict ceiling tile with 2 cores (``benchmarks/ceiling_bench.py``) the pipeline spent
8 % more CPU and 13 % more wall time with spinning threads. ``OMP_WAIT_POLICY=PASSIVE`` makes
an idle pool thread sleep at once; a parallel region of a convolution lasts milliseconds, so
waking its threads costs nothing measurable.

libgomp reads the policy once, when torch loads it, so :func:`passive_openmp` sets it in the
environment of the ``landcover`` command before anything imports torch; worker processes
inherit it. A policy the user set (``OMP_WAIT_POLICY=ACTIVE``, say) is kept.

GDAL decodes tiles and compresses maps on threads of its own (``GDAL_NUM_THREADS``, the COG
driver's ``NUM_THREADS``): every core, unless the user set ``GDAL_NUM_THREADS``
(:func:`gdal_threads`). Predict workers sharing a node keep every core for GDAL although
torch's threads get each worker's share (:func:`core_share`): on one H100 with 16 host cores,
4 workers mapped 29.6 Mpx/s with GDAL on every core and 27.2 with GDAL capped at 4 threads
each (``benchmarks/predict_bench.py``, 2026-11-27); a worker's decoding and compression come
in bursts that the others' idle threads leave room for.
"""

from __future__ import annotations

import os

ENV = "OMP_WAIT_POLICY"
"""The OpenMP variable (read by libgomp, Intel's and LLVM's OpenMP runtimes alike)."""

POLICY = "PASSIVE"


def passive_openmp() -> bool:
    """Sets ``OMP_WAIT_POLICY=PASSIVE`` for this process and its children, unless the user chose.

    Call it before torch is imported: the OpenMP runtime reads the variable when it loads.

    Returns:
        True when the policy was set here, False when the user's own is kept.
    """
    if os.environ.get(ENV):
        return False
    os.environ[ENV] = POLICY
    return True


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one).

    Returns:
        At least 1.
    """
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


GDAL_ENV = "GDAL_NUM_THREADS"
"""GDAL's configuration option (read from the environment too) for its decoding threads."""

ALL_CPUS = "ALL_CPUS"


def gdal_threads() -> str:
    """GDAL's threads for decoding a tile and for compressing a map: ``GDAL_NUM_THREADS``.

    Returns:
        ``GDAL_NUM_THREADS`` where the user set it, else ``ALL_CPUS``.
    """
    return os.environ.get(GDAL_ENV, "").strip() or ALL_CPUS


def core_share(workers: int, cores: int | None = None) -> int:
    """One worker's share of the cores when ``workers`` processes share them.

    Args:
        workers: Processes on this node.
        cores: The cores (default: :func:`usable_cores`).

    Returns:
        At least 1.
    """
    return max(1, (usable_cores() if cores is None else cores) // max(1, workers))
