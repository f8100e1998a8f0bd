"""The Horovod engine: horovodrun workers, DistributedOptimizer, one checkpoint format.

These tests need Horovod built into the venv (``bash scripts/install-horovod.sh``, which the
README's test command runs). Without it they fail with that hint when
``LANDCOVER_REQUIRE_HOROVOD=1`` (set by ``scripts/test.sh``, so CI never skips them) and are
skipped otherwise.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import rasterio
import torch

from landcover.parallel.launch import launch_workers

from conftest import REPO, assert_one_line_error, replica_digest, run_cli, train_args
from ddp_helpers import make_batch, one_step


def _horovod_installed() -> bool:
    try:
        import horovod.torch  # noqa: F401
    except ImportError:
        return False
    return True


if not _horovod_installed():
    if os.environ.get("LANDCOVER_REQUIRE_HOROVOD") == "1":
        raise RuntimeError("Horovod is not installed: run bash scripts/install-horovod.sh")
    pytestmark = pytest.mark.skip(reason="Horovod not installed (bash scripts/install-horovod.sh)")


def _records(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def _digests(run: Path) -> set[str]:
    for rank in (0, 1):
        assert "backend horovod" in (run / "logs" / f"rank{rank}.log").read_text()
    return {replica_digest(run, rank) for rank in (0, 1)}


@pytest.mark.slow
def test_horovod_step_equals_one_worker_step_on_the_whole_batch(tmp_path: Path) -> None:
    batch = tmp_path / "batch.pt"
    make_batch(str(batch))
    runner = Path(sys.executable).with_name("horovodrun")
    result = subprocess.run(
        [
            str(runner),
            "-np",
            "2",
            "-H",
            "localhost:2",
            "--gloo",
            sys.executable,
            str(REPO / "tests" / "horovod_step.py"),
            str(batch),
            str(tmp_path / "hvd.pt"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO / "tests")},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    launch_workers(one_step, (str(batch), str(tmp_path / "one.pt")), nproc=1)
    hvd = torch.load(tmp_path / "hvd.pt", weights_only=True)
    one = torch.load(tmp_path / "one.pt", weights_only=True)
    diff = max(float((hvd[k] - one[k]).abs().max()) for k in one if one[k].is_floating_point())
    assert diff < 1e-5


@pytest.mark.slow
def test_horovod_trains_and_its_checkpoint_resumes_and_predicts_under_torch(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    common = ("--workers", "2", "--samples-per-epoch", "96")
    result = run_cli(
        *train_args(tiny_config, tiny_data, run, "--epochs", "3", "--engine", "horovod", *common)
    )
    assert result.returncode == 0, result.stderr
    assert "starting 2 workers (horovodrun" in result.stderr
    records = _records(run)
    assert [r["epoch"] for r in records] == [1, 2, 3]
    assert records[-1]["train_loss"] < records[0]["train_loss"]
    assert len(_digests(run)) == 1  # both workers end with the same weights
    # each rank held its own half of the training tiles
    shares = [
        re.search(
            r"holds 3 of 6 training tiles \[([^\]]+)\]", (run / "logs" / f"rank{r}.log").read_text()
        )
        for r in (0, 1)
    ]
    assert all(shares) and not set(shares[0].group(1).split(", ")) & set(
        shares[1].group(1).split(", ")
    )
    state = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert state["epoch"] == 3 and state["config"]["run"]["engine"] == "horovod"
    assert state["optimizer"]["state"]  # SGD momentum buffers in torch's own format

    # the Horovod checkpoint resumes under torch's DDP...
    result = run_cli(*train_args(tiny_config, tiny_data, run, "--epochs", "4", *common))
    assert result.returncode == 0, result.stderr
    assert re.search(r"resuming from .*last\.pt: 3 epoch\(s\) complete", result.stderr)
    # ...and the torch checkpoint under Horovod again, with fp16 compression
    result = run_cli(
        *train_args(
            tiny_config, tiny_data, run, "--epochs", "5", "--engine", "horovod",
            "--grad-compression", "fp16", *common,
        )
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert re.search(r"resuming from .*last\.pt: 4 epoch\(s\) complete", result.stderr)
    assert [r["epoch"] for r in _records(run)] == [1, 2, 3, 4, 5]
    assert len(_digests(run)) == 1

    tile = tiny_data / "synth_007_naip.tif"
    maps = tmp_path / "maps"
    result = run_cli(
        "predict",
        str(tile),
        "--checkpoint",
        str(run / "checkpoints" / "last.pt"),
        "--out",
        str(maps),
    )
    assert result.returncode == 0, result.stderr
    with rasterio.open(tile) as src, rasterio.open(maps / "synth_007_naip_class.tif") as out:
        assert (out.crs, out.transform, out.shape) == (src.crs, src.transform, src.shape)
        classes = set(out.read(1).ravel().tolist())
        assert classes - {255} and classes <= {0, 1, 2, 3, 4, 5, 255}  # 255: the input's no-data


@pytest.mark.slow
def test_horovod_worker_error_is_one_line(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for path in sorted(tiny_data.glob("synth_00[0-3]_*.tif")):
        (data / path.name).write_bytes(path.read_bytes())
    # synth_001 belongs to rank 1: the message crosses processes and horovodrun
    label = data / "synth_001_lc.tif"
    with rasterio.open(label, "r+") as ds:
        codes = ds.read(1)
        codes[:5, :5] = 9
        ds.write(codes, 1)
    result = run_cli(
        *train_args(tiny_config, data, tmp_path / "run", "--epochs", "1"),
        "--workers", "2", "--engine", "horovod",
    )  # fmt: skip
    assert_one_line_error(result, "synth_001_lc.tif", "label codes [9]")
    assert not (tmp_path / "run" / "checkpoints" / "last.pt").exists()


def test_missing_horovod_says_how_to_install(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    # an importable "horovod" without its torch extension, as a torch-less Horovod install is
    shadow = tmp_path / "shadow" / "horovod"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    result = run_cli(
        *train_args(tiny_config, tiny_data, tmp_path / "run", "--engine", "horovod"),
        "--workers", "2",
        env={"PYTHONPATH": str(shadow.parent)},
    )  # fmt: skip
    assert_one_line_error(result, "--engine horovod needs Horovod", "install-horovod.sh")


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--max-restarts", "2"], "max_restarts needs the torch engine"),
        (["--grad-compression", "powersgd"], "Horovod offers none or fp16"),
    ],
)
def test_horovod_refuses_torch_only_options(
    tiny_config: Path, tiny_data: Path, option: list[str], message: str
) -> None:
    result = run_cli(
        *train_args(tiny_config, tiny_data, Path("unused"), "--engine", "horovod"), *option
    )
    assert_one_line_error(result, message)
