import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from landcover.parallel.env import DistEnv, env_from_environ

from conftest import REPO


def test_no_launcher_variables() -> None:
    assert env_from_environ({}) is None


def test_torchrun_and_azureml_variables() -> None:
    env = env_from_environ(
        {"RANK": "5", "WORLD_SIZE": "16", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "8"}
    )
    assert env == DistEnv(rank=5, world_size=16, local_rank=1, local_world_size=8)
    assert not env.is_main and env.distributed


def test_open_mpi_variables() -> None:
    env = env_from_environ(
        {
            "OMPI_COMM_WORLD_RANK": "3",
            "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
        }
    )
    assert env == DistEnv(rank=3, world_size=4, local_rank=1, local_world_size=2)


def test_mpich_variables() -> None:
    env = env_from_environ({"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALRANKID": "0"})
    assert env == DistEnv(rank=0, world_size=2, local_rank=0, local_world_size=2)


@pytest.mark.slow
def test_train_under_an_external_torchrun(
    tiny_data: Path, tiny_config: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    torchrun = Path(sys.executable).with_name("torchrun")
    result = subprocess.run(
        [
            str(torchrun),
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "landcover",
            "train",
            "--config",
            str(tiny_config),
            "--data",
            str(tiny_data),
            "--out",
            str(run),
            "--epochs",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert result.returncode == 0, result.stderr
    record = json.loads((run / "metrics.jsonl").read_text())
    assert record["workers"] == 2
    assert (run / "logs" / "rank1.log").is_file()
