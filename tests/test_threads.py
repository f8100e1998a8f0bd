"""OpenMP's wait policy: landcover's processes do not leave torch's idle threads spinning.

Each probe runs in a fresh process (the OpenMP runtime reads the policy once, when torch
loads it) and counts the CPU seconds the process spends while its only thread sleeps between
small 2-thread torch operations: spinning pool threads burn CPU there, sleeping ones do not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from landcover.threads import (
    CGROUP_ROOT,
    ENV,
    GDAL_ENV,
    POLICY,
    cgroup_cpu_limit,
    core_share,
    gdal_threads,
    passive_openmp,
)

PROBE = """
import json, resource, sys, time
if sys.argv[1] == "landcover":
    from landcover.threads import passive_openmp
    passive_openmp()
import torch
torch.set_num_threads(2)
x = torch.randn(2_000_000)
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
idle = 0.0
for _ in range(20):
    (x * 2).sum()
    before = cpu()
    time.sleep(0.02)
    idle += cpu() - before
print(json.dumps({"idle_cpu_s": idle}))
"""


def _idle_cpu(mode: str) -> float:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    result = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])["idle_cpu_s"]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores for 2 threads")
def test_idle_openmp_threads_sleep_in_landcover_processes() -> None:
    # 20 sleeps of 20 ms: 0.4 s of idle time in which spinning threads burn CPU
    assert _idle_cpu("landcover") < 0.02
    # the runtime's own default spins (the reason for the setting)
    assert _idle_cpu("default") > 0.03


def test_the_command_sets_the_policy_before_torch_loads() -> None:
    probe = (
        "import json, os, sys\n"
        "sys.argv = ['landcover', '--help']\n"
        "import landcover.cli as cli\n"
        "loaded = 'torch' in sys.modules\n"
        "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
        f"print(json.dumps({{'policy': os.environ.get('{ENV}'), 'torch_before_main': loaded}}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != ENV}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    ).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen == {"policy": POLICY, "torch_before_main": False}


def test_the_users_own_policy_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "ACTIVE")
    assert passive_openmp() is False
    assert os.environ[ENV] == "ACTIVE"
    monkeypatch.delenv(ENV)
    assert passive_openmp() is True
    assert os.environ[ENV] == POLICY


CORES_PROBE = "from landcover.threads import usable_cores; print(usable_cores())"


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores to take one away")
def test_usable_cores_follow_the_affinity_mask() -> None:
    """A process pinned to one core (as Slurm's cpusets or taskset pin it) counts one core."""
    first = min(os.sched_getaffinity(0))
    pinned = subprocess.run(
        [sys.executable, "-c", CORES_PROBE],
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=lambda: os.sched_setaffinity(0, {first}),
    )
    assert pinned.stdout.strip() == "1"
    free = subprocess.run(
        [sys.executable, "-c", CORES_PROBE], capture_output=True, text=True, check=True
    )
    assert int(free.stdout) == len(os.sched_getaffinity(0)) >= 2


V2 = "0::/kubepods/pod1/box\n"
V1 = "4:memory:/docker/box\n3:cpu,cpuacct:/docker/box\n1:name=systemd:/docker/box\n"


@pytest.mark.parametrize(
    ("membership", "files", "expected"),
    [
        (V2, {"kubepods/pod1/box/cpu.max": "250000 100000\n"}, 3),  # 2.5 CPUs, rounded up
        (V2, {"kubepods/pod1/box/cpu.max": "50000 100000\n"}, 1),  # half a CPU: one thread
        (V2, {"kubepods/pod1/box/cpu.max": "max 100000\n"}, None),  # no limit
        # a quota GDAL-style ("4e5") is not cgroup's: ignored, not a crash
        (V2, {"kubepods/pod1/box/cpu.max": "max 100000", "kubepods/pod1/cpu.max": "4e5 1e5"}, None),
        (  # the pod's limit above the container's own unlimited group holds
            V2,
            {"kubepods/pod1/box/cpu.max": "max 100000", "kubepods/pod1/cpu.max": "400000 100000"},
            4,
        ),
        (V2, {"cpu.max": "800000 100000", "kubepods/pod1/box/cpu.max": "200000 100000"}, 2),
        (
            V1,
            {
                "cpu/docker/box/cpu.cfs_quota_us": "400000\n",
                "cpu/docker/box/cpu.cfs_period_us": "100000\n",
            },
            4,
        ),
        (
            V1,
            {
                "cpu/docker/box/cpu.cfs_quota_us": "-1\n",
                "cpu/docker/box/cpu.cfs_period_us": "100000\n",
            },
            None,
        ),
        ("0::/\n", {"cpu.max": "300000 100000\n"}, 3),  # a container's namespace: its own root
        (V2, {"kubepods/pod1/box/cpu.max": "garbage\n"}, None),  # unreadable: no crash
        ("", {}, None),  # no cgroup file system (macOS, a bare chroot)
    ],
)
def test_a_cgroup_cpu_quota_is_read_from_v2_and_v1_files(
    tmp_path: Path, membership: str, files: dict[str, str], expected: int | None
) -> None:
    """Kubernetes' CPU limits and Docker's --cpus leave the affinity mask whole; the quota of
    the process's own group, or of a group above it, is what it may use."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cgroup_cpu_limit(tmp_path, membership) == expected


def _cpu_cgroup() -> Path | None:
    """A fresh cgroup of the real cpu controller (v1 or v2), where this machine lets us make one."""
    for parent in (CGROUP_ROOT / "cpu", CGROUP_ROOT):
        quota = "cpu.cfs_quota_us" if parent.name == "cpu" else "cpu.max"
        if not (parent / quota).is_file():
            continue
        group = parent / f"landcover-test-{os.getpid()}"
        try:
            group.mkdir()
        except OSError:
            return None
        return group
    return None


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores to limit to one")
def test_a_process_in_a_cgroup_with_one_cpu_of_quota_counts_one_core() -> None:
    """A real control group with a quota of one CPU (as ``docker run --cpus 1`` makes): the
    affinity mask still has every core, the process counts one, GDAL gets one thread."""
    group = _cpu_cgroup()
    if group is None:
        pytest.skip("no writable cpu cgroup here (needs root); the file-based cases still run")
    try:
        if (group / "cpu.max").is_file():
            (group / "cpu.max").write_text("100000 100000")
        else:
            (group / "cpu.cfs_period_us").write_text("100000")
            (group / "cpu.cfs_quota_us").write_text("100000")
        probe = (
            "import os; from landcover.threads import usable_cores, gdal_threads; "
            "print(len(os.sched_getaffinity(0)), usable_cores(), gdal_threads())"
        )
        result = subprocess.run(
            [sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            check=True,
            env={k: v for k, v in os.environ.items() if k != GDAL_ENV},
            preexec_fn=lambda: (group / "cgroup.procs").write_text(str(os.getpid())),
        )
        affinity, cores, gdal = result.stdout.split()
        assert int(affinity) == len(os.sched_getaffinity(0)) >= 2
        assert (cores, gdal) == ("1", "1")
    finally:
        group.rmdir()


def test_gdal_threads_default_to_every_core_and_torch_gets_a_workers_share(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(GDAL_ENV, raising=False)
    assert gdal_threads() == "ALL_CPUS"
    assert core_share(4, cores=16) == 4
    assert core_share(8, cores=4) == 1  # never none
    assert core_share(2) == max(1, len(os.sched_getaffinity(0)) // 2)


def test_the_users_own_gdal_threads_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(GDAL_ENV, " 3 ")
    assert gdal_threads() == "3"
