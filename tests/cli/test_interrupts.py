"""Interrupted commands: one line, and the shell's exit code for the signal.

A scheduler that pre-empts a job (SIGTERM) or a user's Ctrl-C (SIGINT to the terminal's
process group) must see a code that tells an interruption (128 + the signal's number: 130,
143) from a user error (2), and the user one line that says what happened, never a
traceback nor, for a job of one process, nothing at all.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import rasterio
from affine import Affine

from conftest import spawned_children, start_cli, train_args, wait_for_log


def _ended(proc, sig: int, group: bool) -> tuple[int, list[str]]:
    """Sends ``sig`` (to the whole process group, as a terminal's Ctrl-C does, or to the
    command alone, as a scheduler does) and waits for the command to end."""
    if group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=120)
    assert "Traceback" not in stderr, stderr
    return proc.returncode, [line for line in stderr.splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("sig", "group", "code"), [(signal.SIGINT, False, 130), (signal.SIGTERM, False, 143)]
)
def test_training_workers_interrupted(
    tiny_config: Path, tiny_data: Path, tmp_path: Path, sig: int, group: bool, code: int
) -> None:
    run = tmp_path / "run"
    proc = start_cli(
        *train_args(tiny_config, tiny_data, run),
        *("--workers", "2", "--epochs", "50", "--samples-per-epoch", "64"),
    )
    try:
        wait_for_log(run / "logs" / "rank0.log", r"epoch 1/50 ", proc)
        returncode, lines = _ended(proc, sig, group)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    name = signal.Signals(sig).name
    assert returncode == code, lines
    assert lines[-1] == (
        f"error: interrupted by {name}; workers stopped (rerun the same command to resume)"
    )


@pytest.mark.parametrize("started", [1, 2])
def test_ctrl_c_while_the_workers_start_prints_no_traceback(
    tiny_config: Path, tiny_data: Path, tmp_path: Path, started: int
) -> None:
    """Ctrl-C in the seconds a spawned worker imports torch raised KeyboardInterrupt in its
    imports: two tracebacks above the one line, 9 times in 10 (now the workers start with
    SIGINT blocked and take it once they run)."""
    proc = start_cli(
        *train_args(tiny_config, tiny_data, tmp_path / "run"),
        *("--workers", "2", "--epochs", "50", "--samples-per-epoch", "64"),
    )
    try:
        deadline = time.monotonic() + 120
        while len(spawned_children(proc.pid)) < started:  # spawned, still starting (seconds)
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.02)
        returncode, lines = _ended(proc, signal.SIGINT, group=True)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert returncode == 130, lines
    assert lines[-1] == (
        "error: interrupted by SIGINT; workers stopped (rerun the same command to resume)"
    )
    assert not (tmp_path / "run" / "logs" / "rank0.log").exists()  # before any worker ran


def test_a_one_process_predict_says_it_was_interrupted(
    quick_checkpoint: Path, tmp_path: Path
) -> None:
    """Ctrl-C in ``predict`` of one worker (the default on a CPU): typer exited 130 without a
    word, after a final progress line as if the job had ended."""
    tiles = tmp_path / "tiles"
    tiles.mkdir()
    rng = np.random.default_rng(0)
    for i in range(6):  # enough work to be interrupted in the middle
        with rasterio.open(
            tiles / f"t{i}_naip.tif", "w", driver="GTiff", width=1024, height=1024, count=4,
            dtype="uint8", crs="EPSG:26918", transform=Affine(1, 0, 400000, 0, -1, 4300000),
        ) as dst:  # fmt: skip
            dst.write(rng.integers(1, 255, size=(4, 1024, 1024), dtype=np.uint8))
    out = tmp_path / "maps"
    proc = start_cli(
        "predict", str(tiles), "-k", str(quick_checkpoint), "--out", str(out), "--no-preview"
    )
    try:
        wait_for_log(out / "logs" / "rank0.log", r"t\d_naip\.tif: 1024 x 1024 px", proc)
        returncode, lines = _ended(proc, signal.SIGINT, group=True)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert returncode == 130, lines
    assert lines[-1] == "error: interrupted by SIGINT (rerun the same command to resume)"
    assert not any(" in 0:" in line and "tiles " in line for line in lines), lines
