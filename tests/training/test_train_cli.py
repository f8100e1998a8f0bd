"""End-to-end training through the real CLI: two worker processes, run folder, metrics."""

import json
import math
import os
import re
from pathlib import Path

import pytest
import torch
import yaml

from landcover.checkpoint import load_checkpoint
from landcover.inference.loader import load_inference_model

from conftest import run_cli, train_args

FIELDS = {
    "epoch",
    "train_loss",
    "lr",
    "samples_per_s",
    "epoch_s",
    "workers",
    "val_miou",
    "val_accuracy",
    "val_iou",
}


def _tiles_logged(log_file: Path) -> list[str]:
    text = log_file.read_text()
    match = re.search(r"holds \d+ of \d+ training tiles \[([^\]]*)\]", text)
    assert match, text
    return [t for t in match.group(1).split(", ") if t]


@pytest.mark.slow
def test_two_workers_train_three_epochs(tiny_data: Path, tiny_config: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = run_cli(
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
        "64",
    )
    assert result.returncode == 0, result.stderr

    # two worker processes, disjoint tile shares that together cover the training tiles
    tiles0 = _tiles_logged(run / "logs" / "rank0.log")
    tiles1 = _tiles_logged(run / "logs" / "rank1.log")
    assert tiles0 and tiles1
    assert not set(tiles0) & set(tiles1)
    all_tiles = sorted(p.name[: -len("_naip.tif")] for p in tiny_data.glob("*_naip.tif"))
    assert sorted(tiles0 + tiles1) == all_tiles[:6]  # the last two are held out for validation

    # both ranks end with identical weights (the trainer's replica check logs the digest)
    digests = [
        re.search(
            r"weights identical on all 2 worker\(s\) \(sha256 (\w+)\)",
            (run / "logs" / f"rank{r}.log").read_text(),
        )
        for r in (0, 1)
    ]
    assert all(digests), [(run / "logs" / f"rank{r}.log").read_text() for r in (0, 1)]
    assert digests[0].group(1) == digests[1].group(1)

    assert not (run / "profile").exists()  # run.profile_steps is off by default

    # metrics.jsonl: one line per epoch with the fields users read
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2, 3]
    for r in records:
        assert set(r) >= FIELDS
        assert r["workers"] == 2
        assert 0.0 <= r["val_miou"] <= 1.0
        assert set(r["val_iou"]) == {
            "water",
            "tree_canopy",
            "low_vegetation",
            "barren",
            "impervious",
            "road",
        }
    assert records[-1]["train_loss"] < records[0]["train_loss"]

    # the readable run folder
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["optim"]["epochs"] == 3 and saved["run"]["workers"] == 2
    assert saved["data"]["root"] == str(tiny_data)
    assert (run / "curves.png").stat().st_size > 1000
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    for name in ("last.pt", "best.pt", "epoch-0001.pt", "epoch-0003.pt"):
        state = load_checkpoint(run / "checkpoints" / name)
        assert state.config["data"]["classes"]["name"] == "chesapeake7"
    last = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert last["epoch"] == 3
    assert {"model", "optimizer", "scheduler", "rng", "config"} <= set(last)
    assert last["config"]["data"]["patch_size"] == 64
    assert last["config"]["data"]["bands"] == ["red", "green", "blue", "nir"]

    # rank 0 reports progress; rank 1 stays quiet on the console
    assert "[rank 0] epoch 3/3" in result.stderr
    assert "[rank 1]" not in result.stderr

    # rerunning with the same --epochs has nothing left to do
    again = run_cli(
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
    )
    assert again.returncode == 0, again.stderr
    assert "nothing to do" in again.stderr


def test_single_worker_runs_in_process_without_ddp(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    result = run_cli(
        "train",
        "--config",
        str(tiny_config),
        "--data",
        str(tiny_data),
        "--out",
        str(run),
        "--epochs",
        "1",
        "--workers",
        "1",
        "--classes",
        "cvpr4",
    )
    assert result.returncode == 0, result.stderr
    assert "starting" not in result.stderr  # no launcher
    record = json.loads((run / "metrics.jsonl").read_text())
    assert record["workers"] == 1
    assert set(record["val_iou"]) == {"water", "forest", "field", "impervious"}


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores to take one away")
def test_a_worker_pinned_to_one_core_runs_one_thread(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    """A job pinned to some cores of a node (Slurm's cpusets, taskset) sizes its threads to them."""
    run = tmp_path / "run"
    args = train_args(tiny_config, tiny_data, run, "--epochs", "1", "--workers", "1")
    result = run_cli(*args, "--samples-per-epoch", "16", one_core=True)
    assert result.returncode == 0, result.stderr
    started = re.search(r"rank 0/1: pid \d+, local rank 0, (\d+) threads", result.stderr)
    assert started, result.stderr
    assert started.group(1) == "1"  # not the node's len(os.sched_getaffinity) >= 2


def test_data_synth_cli(tmp_path: Path) -> None:
    result = run_cli(
        "data", "synth", str(tmp_path / "d"), "--tiles", "2", "--size", "64", "--seed", "3"
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == [
        "synth_000_lc.tif",
        "synth_000_naip.tif",
        "synth_001_lc.tif",
        "synth_001_naip.tif",
    ]


@pytest.mark.parametrize(
    ("optimizer", "rule", "factor"),
    [("adamw", "sqrt", math.sqrt(8 / 4)), ("sgd", "linear", 8 / 4)],
    ids=["adamw-sqrt", "sgd-linear"],
)
def test_train_logs_the_scaled_peak_lr_and_follows_it(
    tiny_data: Path, tiny_config: Path, tmp_path: Path, optimizer: str, rule: str, factor: float
) -> None:
    """Global batch 1 worker x 4 x accumulate 2 = 8 at ref_batch 4; lr 0.003, warm-up 0.5."""
    run = tmp_path / "run"
    result = run_cli(
        *train_args(tiny_config, tiny_data, run, "--workers", "1", "--accumulate", "2"),
        *("--samples-per-epoch", "16", "--set", "optim.ref_batch=4"),
        *("--set", f"optim.optimizer={optimizer}", "--set", "run.val_every=5"),
    )
    assert result.returncode == 0, result.stderr
    peak = 0.003 * factor
    name = {"adamw": "AdamW", "sgd": "SGD"}[optimizer]
    how = "sqrt(8/4)" if rule == "sqrt" else "8/4"
    geometry = "1 worker x batch 4 x accumulate 2 = global batch 8, 2 steps/epoch (16 samples)"
    assert geometry in result.stderr
    assert f"peak lr {peak:.2e} ({name}, {rule} rule: 0.003 x {how})" in result.stderr
    assert yaml.safe_load((run / "config.yaml").read_text())["optim"]["lr_scaling"] == rule

    # metrics.jsonl's lr is each epoch's last step's (progress 0.5, then 1.5 epochs): the peak
    # at the end of the 0.5-epoch warm-up, then cosine from the peak to 1 % of it over 1.5
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["global_batch"] for r in records] == [8, 8]
    assert records[0]["lr"] == pytest.approx(peak, rel=1e-9)
    floor = 0.01 * peak
    cosine = floor + (peak - floor) * 0.5 * (1 + math.cos(math.pi * (1.5 - 0.5) / (2 - 0.5)))
    assert records[1]["lr"] == pytest.approx(cosine, rel=1e-9)

    # a checkpoint whose config has the deprecated scale_lr (no lr_scaling) still loads
    state = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    del state["config"]["optim"]["lr_scaling"]
    state["config"]["optim"]["scale_lr"] = False
    old = run / "checkpoints" / "old.pt"
    torch.save(state, old)
    model = load_inference_model(old, device="cpu")
    assert model.config.optim.lr_scaling == "none"
    assert model.epoch == 2


def test_d4_on_the_device_trains_the_same_weights(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    # data.augment_on: device moves the flips and transposes from the feeder thread to one
    # gather in the training thread; the batches are the same, so on the CPU are the weights
    weights = {}
    for where in ("host", "device"):
        run = tmp_path / where
        args = train_args(tiny_config, tiny_data, run, "--epochs", "1", "--workers", "1")
        result = run_cli(*args, "--set", f"data.augment_on={where}", "--set", "data.augment=true")
        assert result.returncode == 0, result.stderr
        weights[where] = load_checkpoint(run / "checkpoints" / "last.pt").model
    assert weights["host"].keys() == weights["device"].keys()
    for name, value in weights["host"].items():
        assert torch.equal(value, weights["device"][name]), name


def test_feed_processes_train_the_same_weights_as_the_feed_thread(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    # data.loader_workers: N draws the batches in N forked processes instead of a thread of
    # the training process; each batch has its own generator, so the batches and the weights
    # are the same
    weights = {}
    for workers in (0, 2):
        run = tmp_path / f"feed{workers}"
        args = train_args(tiny_config, tiny_data, run, "--epochs", "2", "--workers", "1")
        result = run_cli(*args, "--set", f"data.loader_workers={workers}")
        assert result.returncode == 0, result.stderr
        said = "in a feed thread" if workers == 0 else f"by {workers} feed processes"
        assert f"batches drawn {said}" in (run / "logs" / "rank0.log").read_text()
        weights[workers] = load_checkpoint(run / "checkpoints" / "last.pt").model
    assert weights[0].keys() == weights[2].keys()
    for name, value in weights[0].items():
        assert torch.equal(value, weights[2][name]), name
