"""Scale-out on one machine for real: two agents as two nodes, elastic restarts, dead peers."""

import contextlib
import json
import os
import signal
import subprocess
import time
import warnings
from pathlib import Path

import pytest
from azurite import free_port
from netns import two_hosts

from conftest import (
    assert_one_line_error,
    replica_digest,
    run_cli,
    start_cli,
    train_args,
    wait_for_log,
)


@pytest.mark.slow
def test_two_nodes_train_one_model(tiny_data: Path, tiny_config: Path, tmp_path: Path) -> None:
    """Two agents as two nodes: in two network namespaces over a veth link where the machine
    allows it (each node then reaches the other only through its own address), on plain
    loopback otherwise."""
    run = tmp_path / "run"
    port = free_port()
    with two_hosts() as hosts:
        if hosts is None:
            warnings.warn("no network namespaces here: the two nodes share loopback", stacklevel=1)
        args = [
            *train_args(tiny_config, tiny_data, run, "--epochs", "2", "--workers", "2"),
            "--nnodes",
            "2",
            "--workers-per-node",
            "1",
            "--rdzv-endpoint",
            f"{hosts[0].address if hosts else '127.0.0.1'}:{port}",
        ]
        nodes = []
        for rank in (0, 1):
            extra, prefix, env = ["--node-rank", str(rank)], None, None
            if hosts:
                host = hosts[rank]
                extra += ["--set", f"run.local_addr={host.address}"]
                prefix = host.command()
                env = {"GLOO_SOCKET_IFNAME": host.interface}
            nodes.append(start_cli(*args, *extra, prefix=prefix, env=env))
        outputs = [p.communicate(timeout=300) for p in nodes]
    for proc, (_, err) in zip(nodes, outputs, strict=True):
        assert proc.returncode == 0, err
    assert all("starting 1 workers on this node of 2" in err for _, err in outputs)
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["workers"] for r in records] == [2, 2]
    assert replica_digest(run, 0) == replica_digest(run, 1)


def test_unreachable_rendezvous_is_one_line(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    # node 1 of a job whose node 0 never comes up: a closed port on this machine
    result = run_cli(
        *train_args(tiny_config, tiny_data, tmp_path / "run", "--workers", "2"),
        "--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
        "--set", "run.rdzv_timeout_s=5",
    )  # fmt: skip
    assert_one_line_error(result, "rendezvous at 127.0.0.1:", "--rdzv-endpoint")


@pytest.mark.slow
def test_killed_worker_is_restarted_and_training_resumes(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    proc = start_cli(
        *train_args(tiny_config, tiny_data, run, "--epochs", "3", "--workers", "2"),
        "--samples-per-epoch", "400", "--max-restarts", "2",
    )  # fmt: skip
    pid = int(wait_for_log(run / "logs" / "rank1.log", r"rank 1/2: pid (\d+)", proc).group(1))
    wait_for_log(run / "logs" / "rank0.log", r"epoch 2/3 step", proc)
    os.kill(pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=400)
    assert proc.returncode == 0, err
    assert f"worker local rank 1 (pid {pid}) was killed by signal SIGKILL" in err
    assert "restarting the worker group (restart 1 of 2)" in err
    log0 = (run / "logs" / "rank0.log").read_text()
    assert "restart 1 of the worker group" in log0
    assert "1 epoch(s) complete" in log0  # resumed from the epoch-1 checkpoint
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2, 3]


def _two_workers_in_epoch_one(
    config: Path, data: Path, run: Path, timeout_s: int
) -> tuple[subprocess.Popen, int]:
    """Starts a 2-worker run with no restarts; returns it once training runs, and rank 1's pid."""
    proc = start_cli(
        *train_args(config, data, run, "--epochs", "3"),
        "--workers", "2", "--samples-per-epoch", "400", "--max-restarts", "0",
        "--set", f"run.timeout_s={timeout_s}",
    )  # fmt: skip
    pid = int(wait_for_log(run / "logs" / "rank1.log", r"rank 1/2: pid (\d+)", proc).group(1))
    wait_for_log(run / "logs" / "rank0.log", r"epoch 1/3 step", proc)
    return proc, pid


@pytest.mark.slow
def test_killed_peer_without_restarts_ends_the_job(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    timeout_s = 15
    proc, pid = _two_workers_in_epoch_one(tiny_config, tiny_data, tmp_path / "run", timeout_s)
    os.kill(pid, signal.SIGKILL)
    killed = time.time()
    _, err = proc.communicate(timeout=timeout_s + 60)
    assert time.time() - killed < timeout_s + 30
    assert_one_line_error(
        subprocess.CompletedProcess(proc.args, proc.returncode, "", err), "rank 1", "SIGKILL"
    )


@pytest.mark.slow
def test_hung_peer_times_out_with_a_clear_error(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    timeout_s = 15
    proc, pid = _two_workers_in_epoch_one(tiny_config, tiny_data, tmp_path / "run", timeout_s)
    os.kill(pid, signal.SIGSTOP)  # hangs, does not die: only the collective timeout can notice
    stopped = time.time()
    # the timeout ends rank 0; torch then gives the frozen rank 30 s of SIGTERM grace
    try:
        _, err = proc.communicate(timeout=timeout_s + 90)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert time.time() - stopped < timeout_s + 45
    assert_one_line_error(
        subprocess.CompletedProcess(proc.args, proc.returncode, "", err),
        "collective operation failed",
        "timeout_s=15",
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "option",
    [
        ["--grad-compression", "fp16"],
        # PowerSGD after 4 steps of plain all-reduce: most of the 36 steps are compressed
        ["--grad-compression", "powersgd", "--set", "run.powersgd_warmup_steps=4"],
        ["--accumulate", "2"],
        ["--local-sgd-period", "4"],
    ],
    ids=["fp16", "powersgd", "accumulate", "local-sgd"],
)
def test_communication_options_train_two_workers(
    option: list[str], tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    proc = start_cli(
        *train_args(tiny_config, tiny_data, run, "--epochs", "3", "--workers", "2"),
        "--samples-per-epoch", "96", *option,
    )  # fmt: skip
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["train_loss"] < records[0]["train_loss"]  # it still learns
    assert replica_digest(run, 0) == replica_digest(run, 1)  # and the workers end on one model
    if option[0] == "--accumulate":
        assert records[0]["global_batch"] == 4 * 2 * 2
