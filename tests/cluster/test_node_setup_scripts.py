"""The scripts a nodeSetup command runs: scanned for secrets, shipped with the job (issue 42, 4).

Every command is a real ``python -m landcover`` subprocess on a cluster.json and scripts
written here; a shipped job's setup commands are then run by bash in the job's code folder,
as Azure ML runs them in the job's working folder.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import assert_one_line_error, run_cli

CLUSTER = {
    "vmSize": "Standard_NC24ads_A100_v4",
    "targetNodeCount": 2,
    "vmPriority": "dedicated",
    "location": "eastus",
}
KEY = "NODESETUPSCRIPTKEY0123456789abcdefghij=="
SUBPROCESS = {"LANDCOVER_TEST_SUBPROCESS": "1"}


def write_cluster(folder: Path, node_setup: Any) -> Path:
    path = folder / "cluster.json"
    path.write_text(json.dumps({**CLUSTER, "nodeSetup": node_setup}))
    return path


def plan(cluster: Path) -> subprocess.CompletedProcess:
    return run_cli("cluster", "plan", "--cluster", str(cluster), "--workers", "2", env=SUBPROCESS)


def azureml(cluster: Path, out: Path) -> subprocess.CompletedProcess:
    return run_cli(
        "cluster", "azureml", "--cluster", str(cluster), "--workers", "2", "--epochs", "1",
        "--out", str(out), env=SUBPROCESS,
    )  # fmt: skip


@pytest.mark.parametrize(
    "node_setup",
    [
        "bash setup2.sh",
        "sh setup2.sh",
        "./setup2.sh",
        ["echo hi", "source setup2.sh && nvidia-smi"],
        ". setup2.sh; nvidia-smi",
        "FOO=1 bash -e setup2.sh",
        "bash -c 'bash setup2.sh'",
        "setup2.sh",
    ],
)
def test_a_script_a_node_setup_command_runs_is_scanned_by_plan_and_azureml(
    node_setup: Any, tmp_path: Path
) -> None:
    script = tmp_path / "setup2.sh"
    script.write_text(f"#!/bin/bash\nexport AZURE_STORAGE_ACCOUNT_KEY={KEY}\n")
    cluster = write_cluster(tmp_path, node_setup)
    out = tmp_path / "azureml"
    for result in (plan(cluster), azureml(cluster, out)):
        line = assert_one_line_error(result, str(script), "must hold no secrets")
        assert KEY not in result.stdout + result.stderr, line
    assert not out.exists() or not [p for p in out.rglob("*") if p.is_file()]


def test_the_scripts_ship_in_the_code_folder_and_the_command_finds_them(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    first = tmp_path / "scripts" / "setup2.sh"
    first.write_text('#!/bin/bash\necho "setup ran with $1" >> "$MARKER"\n')
    check = tmp_path / "check.sh"
    check.write_text('#!/bin/bash\necho "check ran" >> "$MARKER"\n')
    check.chmod(0o755)
    node_setup = ["bash scripts/setup2.sh 'an arg' && ./check.sh", "nvidia-smi || true"]
    out = tmp_path / "azureml"
    result = azureml(write_cluster(tmp_path, node_setup), out)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr

    job = yaml.safe_load((out / "job.yml").read_text())
    code = out / job["code"]
    assert (code / "scripts" / "setup2.sh").read_bytes() == first.read_bytes()
    assert (code / "check.sh").read_bytes() == check.read_bytes()
    setup, _ = job["command"].split(" && landcover train ", 1)
    assert setup == " && ".join(node_setup)

    # the node: the job's working folder is a copy of the code folder, elsewhere
    node = tmp_path / "node" / "wd"
    node.parent.mkdir()
    subprocess.run(["cp", "-a", str(code), str(node)], check=True)
    marker = tmp_path / "marker.txt"
    ran = subprocess.run(
        ["bash", "-c", setup], cwd=node, env={"MARKER": str(marker), "PATH": "/usr/bin:/bin"}
    )
    assert ran.returncode == 0
    assert marker.read_text().splitlines() == ["setup ran with an arg", "check ran"]


@pytest.mark.parametrize("node_setup", ["bash missing.sh", "./missing.sh", "bash ../up.sh"])
def test_a_node_setup_command_running_a_script_the_job_cannot_find_is_refused(
    node_setup: str, tmp_path: Path
) -> None:
    folder = tmp_path / "c"
    folder.mkdir()
    (tmp_path / "up.sh").write_text("#!/bin/bash\ntrue\n")
    cluster = write_cluster(folder, node_setup)
    out = tmp_path / "azureml"
    for result in (plan(cluster), azureml(cluster, out)):
        assert_one_line_error(result, node_setup.split()[-1].lstrip("./"), "nodeSetup")
    assert not out.exists()


def test_commands_without_local_scripts_are_left_alone(tmp_path: Path) -> None:
    node_setup = ["nvidia-smi", "pip install -r requirements.txt", "bash /opt/setup.sh"]
    out = tmp_path / "azureml"
    result = azureml(write_cluster(tmp_path, node_setup), out)
    assert result.returncode == 0, result.stderr
    job = yaml.safe_load((out / "job.yml").read_text())
    assert "code" not in job
    assert job["command"].startswith(" && ".join(node_setup) + " && landcover train ")
