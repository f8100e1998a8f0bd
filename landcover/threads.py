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

import math
import os
from pathlib import Path

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


CGROUP_ROOT = Path("/sys/fs/cgroup")
"""Where the control groups are mounted (cgroup v2 there; v1 with its ``cpu`` controller under it)."""


def _quota(folder: Path) -> int | None:
    """One control group's CPU bandwidth quota in CPUs (rounded up), None when unlimited."""
    try:
        if (folder / "cpu.max").is_file():  # cgroup v2: "max 100000" when unlimited
            quota, period = (folder / "cpu.max").read_text().split()[:2]
        else:  # cgroup v1: a negative quota when unlimited
            quota = (folder / "cpu.cfs_quota_us").read_text().strip()
            period = (folder / "cpu.cfs_period_us").read_text().strip()
        if quota == "max" or int(quota) <= 0 or int(period) <= 0:
            return None
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        return None


def _own_groups(root: Path, membership: str) -> list[Path]:
    """The folders of this process's CPU control group and of each group above it."""
    for line in membership.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            base = root  # cgroup v2's unified hierarchy
        elif "cpu" in controllers.split(","):
            base = root / "cpu"  # cgroup v1 (cpu,cpuacct is linked as cpu)
        else:
            continue
        folder = base / path.strip().lstrip("/")
        return [folder, *(p for p in folder.parents if p.is_relative_to(base))]
    return [root, root / "cpu"]


def cgroup_cpu_limit(root: Path = CGROUP_ROOT, membership: str | None = None) -> int | None:
    """The CPUs the control groups' bandwidth quotas allow this process, if any is set.

    Kubernetes' CPU limits, Docker's ``--cpus`` and systemd's ``CPUQuota`` cap a container's
    CPU time without shrinking its affinity mask: a pod limited to 4 CPUs on a 96-core node
    still sees 96 cores, and torch, OpenMP and GDAL sized by them run 24 threads per CPU of
    quota, throttled every period. The quota is read as loky (joblib) reads it, cgroup v2's
    ``cpu.max`` or cgroup v1's ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``, in this
    process's own group (``/proc/self/cgroup``; a container's namespace shows it as the root)
    and every group above it: the smallest quota holds.

    Args:
        root: The cgroup file system's mount point.
        membership: ``/proc/self/cgroup``'s text (read here when None).

    Returns:
        The quota in CPUs (at least 1), or None when no quota is set or none can be read.
    """
    if membership is None:
        try:
            membership = Path("/proc/self/cgroup").read_text()
        except OSError:
            membership = ""
    quotas = [q for q in map(_quota, _own_groups(root, membership)) if q is not None]
    return min(quotas, default=None)


def usable_cores() -> int:
    """The CPU cores this process may run on: its affinity mask, capped by a cgroup CPU quota.

    Returns:
        At least 1.
    """
    limit = cgroup_cpu_limit()
    return _affinity_cores() if limit is None else min(_affinity_cores(), limit)


def _affinity_cores() -> int:
    """The cores of this process's affinity mask (every core where the OS has none)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


GDAL_ENV = "GDAL_NUM_THREADS"
"""GDAL's configuration option (read from the environment too) for its decoding threads."""

ALL_CPUS = "ALL_CPUS"


def gdal_threads() -> str:
    """GDAL's threads for decoding a tile and for compressing a map: ``GDAL_NUM_THREADS``.

    Returns:
        ``GDAL_NUM_THREADS`` where the user set it; else ``ALL_CPUS``, or the quota's count
        where a cgroup CPU quota allows fewer cores than the affinity mask has (GDAL's
        ``ALL_CPUS`` counts the mask, not the quota): :func:`usable_cores` either way.
    """
    chosen = os.environ.get(GDAL_ENV, "").strip()
    if chosen:
        return chosen
    limit = cgroup_cpu_limit()  # read once: GDAL_NUM_THREADS is asked for every tile
    if limit is not None and limit < _affinity_cores():
        return str(limit)
    return ALL_CPUS


def core_share(workers: int, cores: int | None = None) -> int:
    """One worker's share of the cores when ``workers`` processes share them.

    Args:
        workers: Processes on this node.
        cores: The cores (default: :func:`usable_cores`).

    Returns:
        At least 1.
    """
    return max(1, (usable_cores() if cores is None else cores) // max(1, workers))
