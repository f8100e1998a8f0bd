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

import pytest

from landcover.threads import (
    ENV,
    GDAL_ENV,
    POLICY,
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
