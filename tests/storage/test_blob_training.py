"""Training, resuming, predicting and loading with data and outputs on a real Azurite server."""

import os
import re
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import rasterio
import torch

from landcover.synthetic.synthetic import write_pair

from conftest import assert_one_line_error, run_cli, start_cli, wait_for_log


def _blob_env(azurite) -> dict[str, str]:
    return azurite.env("connection_string")


def _download_folder(azurite, url: str, dest: Path) -> Path:
    result = run_cli("data", "download", url, str(dest), env=_blob_env(azurite))
    assert result.returncode == 0, result.stderr
    return dest


@pytest.mark.slow
def test_train_resume_and_predict_on_blob(
    azurite, tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    env = _blob_env(azurite)
    container = azurite.create_container()
    data, run, maps = f"az://{container}/data", f"az://{container}/run", f"az://{container}/maps"
    assert run_cli("data", "upload", str(tiny_data), data, env=env).returncode == 0

    first = run_cli(
        "train",
        "--config",
        str(tiny_config),
        "--data",
        data,
        "--out",
        run,
        "--epochs",
        "2",
        "--workers",
        "2",
        env=env,
    )
    assert first.returncode == 0, first.stderr
    blobs = {b.name for b in azurite.service_client().get_container_client(container).list_blobs()}
    for name in ("last.pt", "best.pt", "epoch-0001.pt", "epoch-0002.pt"):
        assert f"run/checkpoints/{name}" in blobs
    for name in ("config.yaml", "metrics.jsonl", "curves.png", "logs/rank0.log", "logs/rank1.log"):
        assert f"run/{name}" in blobs
    assert any(b.startswith("run/tensorboard/events.out.tfevents") for b in blobs)

    second = run_cli(
        "train",
        "--config",
        str(tiny_config),
        "--data",
        data,
        "--out",
        run,
        "--epochs",
        "3",
        "--workers",
        "2",
        env=env,
    )
    assert second.returncode == 0, second.stderr
    assert f"resuming from {run}/checkpoints/last.pt: 2 epoch(s) complete" in second.stderr

    local_run = _download_folder(azurite, run, tmp_path / "run")
    lines = (local_run / "metrics.jsonl").read_text().splitlines()
    assert [int(re.search(r'"epoch": (\d+)', x).group(1)) for x in lines] == [1, 2, 3]
    assert torch.load(local_run / "checkpoints" / "last.pt", weights_only=True)["epoch"] == 3

    # each worker fetched only its share: byte counts add up to the training set, lists disjoint
    shares = []
    for rank in (0, 1):
        text = (local_run / "logs" / f"rank{rank}.log").read_text()
        match = re.search(r"holds \d+ of 6 training tiles \[([^\]]*)\]: fetched (\d+) bytes", text)
        assert match, text
        shares.append((match.group(1).split(", "), int(match.group(2))))
    assert not set(shares[0][0]) & set(shares[1][0])
    train_names = sorted(shares[0][0] + shares[1][0])
    expected = sum(
        (tiny_data / f"{n}{suffix}").stat().st_size
        for n in train_names
        for suffix in ("_naip.tif", "_lc.tif")
    )
    assert len(train_names) == 6
    assert shares[0][1] + shares[1][1] == expected

    result = run_cli(
        "predict",
        f"{data}/synth_007_naip.tif",
        "--checkpoint",
        f"{run}/checkpoints/last.pt",
        "--out",
        maps,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    local_maps = _download_folder(azurite, maps, tmp_path / "maps")
    with (
        rasterio.open(local_maps / "synth_007_naip_class.tif") as out,
        rasterio.open(tiny_data / "synth_007_naip.tif") as src,
    ):
        assert (out.crs, out.transform, out.shape) == (src.crs, src.transform, src.shape)
        assert out.read(1).max() < 255 or (out.read(1) == 255).any()
    assert (local_maps / "synth_007_naip_prob.tif").is_file()
    assert (local_maps / "synth_007_naip_preview.png").is_file()

    # no credential in any file of the run folder, the maps, or the output of any command
    secrets = [azurite.account_key, azurite.connection_string]
    outputs = [
        first.stdout + first.stderr,
        second.stdout + second.stderr,
        result.stdout + result.stderr,
    ]
    files = [p for folder in (local_run, local_maps) for p in folder.rglob("*") if p.is_file()]
    assert files
    for secret in secrets:
        for text in outputs:
            assert secret not in text
        for path in files:
            assert secret.encode() not in path.read_bytes(), path


@pytest.mark.slow
def test_server_stopped_mid_load_ends_the_run_cleanly(
    azurite_private, tiny_config: Path, tmp_path: Path
) -> None:
    """A blob server that goes away while workers fetch: one line, non-zero exit, < 60 s."""
    env = _blob_env(azurite_private)
    container = azurite_private.create_container()
    folder = tmp_path / "big"
    rng = np.random.default_rng(0)
    for i in range(10):  # ~170 MB of incompressible imagery: the fetch takes seconds
        image = rng.integers(1, 255, size=(4, 2048, 2048), dtype=np.uint8)
        label = rng.choice(np.array([1, 2, 3], dtype=np.uint8), size=(2048, 2048))
        image_path, label_path = write_pair(
            folder, f"big_{i:02d}", image, label, (400000.0 + 3000 * i, 4300000.0)
        )
        for path in (image_path, label_path):
            with rasterio.open(path) as ds:
                profile, arr = ds.profile, ds.read()
            profile.update(compress=None)
            with rasterio.open(path, "w", **profile) as ds:
                ds.write(arr)
    data = f"az://{container}/big"
    assert run_cli("data", "upload", str(folder), data, env=env).returncode == 0
    run = tmp_path / "run"
    proc = start_cli(
        "train",
        "--config",
        str(tiny_config),
        "--data",
        data,
        "--out",
        str(run),
        "--epochs",
        "1",
        "--workers",
        "2",
        "--set",
        "data.fetch_concurrency=1",
        env=env,
    )
    log0 = run / "logs" / "rank0.log"
    wait_for_log(log0, "fetching", proc, timeout=120, poll=0.02)
    azurite_private.stop()
    stopped = time.time()
    try:
        _, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    elapsed = time.time() - stopped
    # a run that never started leaves no log in a new --out (issue 42, item 8); one that
    # had loaded its data would have written its config.yaml
    assert not (run / "config.yaml").exists(), "the server stopped after the load finished"
    assert not log0.exists() or "fetched" not in log0.read_text()
    result = subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr)
    line = assert_one_line_error(result)
    assert "az://" in line or "blob" in line.lower() or "storage" in line.lower(), line
    assert elapsed < 60, elapsed
    assert not (run / "checkpoints").exists() or not list((run / "checkpoints").iterdir())
