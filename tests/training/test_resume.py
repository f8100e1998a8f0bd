"""Resume after SIGKILL, and with a different worker count."""

import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from landcover.checkpoint import load_checkpoint

from conftest import run_cli, start_cli, wait_for_log


@pytest.mark.slow
def test_sigkill_during_epoch_two_then_resume(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    args = [
        "train",
        "--config",
        str(tiny_config),
        "--data",
        str(tiny_data),
        "--out",
        str(run),
        "--epochs",
        "3",
        "--workers",
        "2",
        "--samples-per-epoch",
        "400",
    ]
    proc = start_cli(*args)
    last = run / "checkpoints" / "last.pt"
    rank0 = run / "logs" / "rank0.log"
    # epoch 1 is checkpointed; then wait for a progress line of epoch 2 and kill everything
    wait_for_log(rank0, "epoch 2/3 step", proc, poll=0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert load_checkpoint(last).epoch == 1

    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    assert "resuming from" in result.stderr and "1 epoch(s) complete" in result.stderr
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2, 3]
    ckpts = sorted((run / "checkpoints").iterdir())
    assert not [p for p in ckpts if p.suffix != ".pt"], ckpts  # no temporary left behind
    for path in ckpts:
        load_checkpoint(path)
    assert load_checkpoint(last).epoch == 3

    # a 2-worker run resumes with one worker up to a new total
    more = run_cli(*args[:-4], "--epochs", "4", "--workers", "1")
    assert more.returncode == 0, more.stderr
    assert "trained with 2 workers, now 1" in more.stderr
    state = load_checkpoint(last)
    assert state.epoch == 4 and state.workers == 1


def test_a_run_without_last_pt_resumes_from_its_newest_epoch_checkpoint(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    """An epoch file with no ``last.pt`` beside it (removed, or a disk that filled between
    the two writes of an earlier version) is a complete epoch: the rerun resumes from it
    instead of starting over and writing over it."""
    run = tmp_path / "run"

    def train(epochs: int):
        return run_cli(
            "train", "--config", str(tiny_config), "--data", str(tiny_data), "--out", str(run),
            "--epochs", str(epochs), "--workers", "1", "--samples-per-epoch", "16",
        )  # fmt: skip

    assert train(2).returncode == 0
    checkpoints = run / "checkpoints"
    (checkpoints / "last.pt").unlink()
    (checkpoints / "best.pt").unlink()
    second = (checkpoints / "epoch-0002.pt").read_bytes()
    result = train(3)
    assert result.returncode == 0, result.stderr
    log = (run / "logs" / "rank0.log").read_text()
    assert "resuming from" in log and "epoch-0002.pt: 2 epoch(s) complete" in log
    assert (checkpoints / "epoch-0002.pt").read_bytes() == second  # not trained again
    assert load_checkpoint(checkpoints / "last.pt").epoch == 3
    epochs = [
        json.loads(line)["epoch"] for line in (run / "metrics.jsonl").read_text().splitlines()
    ]
    assert epochs == [1, 2, 3]


def test_a_run_stopped_between_last_pt_and_best_pt_writes_best_pt_on_resume(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    """last.pt is written before best.pt: a run stopped between the two (a full disk, a kill)
    resumed with that epoch's best mIoU counted, so best.pt stayed missing unless a later
    epoch beat it. The rerun writes it again from the epoch it resumes from."""
    run = tmp_path / "run"
    args = ("train", "--config", str(tiny_config), "--data", str(tiny_data), "--out", str(run))
    common = ("--workers", "1", "--samples-per-epoch", "16", "--set", "run.val_every=1")
    assert run_cli(*args, *common, "--epochs", "1").returncode == 0
    checkpoints = run / "checkpoints"
    last = (checkpoints / "last.pt").read_bytes()
    assert (checkpoints / "best.pt").read_bytes() == last  # the first validated epoch is best
    (checkpoints / "best.pt").unlink()  # stopped before its write
    result = run_cli(*args, *common, "--epochs", "1")  # nothing left to train: resume only
    assert result.returncode == 0, result.stderr
    assert (checkpoints / "best.pt").read_bytes() == last


def _two_epochs(
    config: Path, data: Path, run: Path
) -> tuple[Callable[[str], subprocess.CompletedProcess], Path]:
    """Trains two short epochs into ``run``; returns how to train it to N epochs again, and
    its ``metrics.jsonl``."""

    def train(epochs: str) -> subprocess.CompletedProcess:
        return run_cli(
            "train", "--config", str(config), "--data", str(data), "--out", str(run),
            "--workers", "1", "--samples-per-epoch", "16", "--set", "run.val_every=1",
            "--epochs", epochs,
        )  # fmt: skip

    assert train("2").returncode == 0
    return train, run / "metrics.jsonl"


def test_a_run_stopped_before_its_metrics_line_writes_it_on_resume(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    """An epoch's checkpoint is written before its metrics.jsonl line: a run stopped between
    the two resumed without that line for good (the last epoch's too, with nothing left to
    train). The rerun writes it again from the checkpoint's record."""
    train, metrics = _two_epochs(tiny_config, tiny_data, tmp_path / "run")
    lines = metrics.read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [1, 2]
    metrics.write_text(lines[0] + "\n")  # stopped before epoch 2's line
    result = train("2")  # nothing left to train: resume only
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in metrics.read_text().splitlines()] == [
        json.loads(line) for line in lines
    ]
    assert train("3").returncode == 0
    assert [json.loads(line)["epoch"] for line in metrics.read_text().splitlines()] == [1, 2, 3]


def test_a_metrics_line_cut_short_is_left_out_and_written_again_on_resume(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    """An older landcover appended each epoch's line in place: a crash mid-write left half a
    line, and the resume stopped on it with a JSONDecodeError traceback. Now the line is left
    out with a warning and written again from the checkpoint; the file is written whole each
    epoch (a temporary name, then a rename), so no line is cut short any more."""
    train, metrics = _two_epochs(tiny_config, tiny_data, tmp_path / "run")
    lines = metrics.read_text().splitlines()
    metrics.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])  # no newline either
    result = train("2")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert f"{metrics}: line 2 is not an epoch's record: left out" in result.stderr
    assert [json.loads(line) for line in metrics.read_text().splitlines()] == [
        json.loads(line) for line in lines
    ]
