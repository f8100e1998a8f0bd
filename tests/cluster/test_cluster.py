"""cluster.json, the VM table, `landcover cluster plan` and `landcover cluster azureml`."""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from landcover.cluster.azureml import (
    MLFLOW_PACKAGES,
    JobTarget,
    PredictJob,
    TrainJob,
    data_input_path,
    write_predict_job,
    write_train_job,
)
from landcover.cluster.azureml import environment as aml_env
from landcover.cluster.azureml.settings import MLFLOW_EXTRA
from landcover.cluster.plan import make_plan, node_layout
from landcover.cluster.planlines import plan_lines
from landcover.cluster.secrets import find_secret, secret_like
from landcover.cluster.spec import ClusterError, load_cluster, parse_cluster
from landcover.cluster.vmsizes import VM_SIZES, close_matches, find_vm_size
from landcover.config import load_config
from landcover.data.pairs import split_pairs
from landcover.registry import DEFAULT_ENGINE, ENGINES, REGION_ENGINE, EngineSpec
from landcover.synthetic.synthetic import write_synthetic_dataset

from conftest import REPO, assert_one_line_error, run_cli

BASE = {"targetNodeCount": 4, "vmPriority": "dedicated", "location": "eastus"}
SMALL_CONFIG = {
    "data": {"val_fraction": 0.25},
    "optim": {"lr": 0.003, "ref_batch": 16, "batch_size": 4, "samples_per_epoch": 1000},
}


def write_cluster(folder: Path, **fields: Any) -> Path:
    path = folder / "cluster.json"
    path.write_text(json.dumps({**BASE, **fields}))
    return path


@pytest.fixture(scope="module")
def small_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight tiny pairs: six for training, two for validation."""
    folder = tmp_path_factory.mktemp("cluster_data")
    write_synthetic_dataset(folder, tiles=8, size=32, seed=3)
    return folder


@pytest.fixture(scope="module")
def small_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cluster_config") / "small.yaml"
    path.write_text(yaml.safe_dump(SMALL_CONFIG))
    return path


# --- the VM table -------------------------------------------------------------------------


def test_vm_table_figures() -> None:
    nc24 = find_vm_size("standard_nc24")
    assert nc24 is not None and nc24.gpus == 4 and nc24.retired
    h100 = find_vm_size("STANDARD_ND96ISR_H100_V5")
    assert h100 is not None
    assert (h100.gpus, h100.gpu_memory_gb, h100.infiniband, h100.retired) == (8, 80, True, False)
    assert h100.interconnect_gbps == 3200
    a100 = VM_SIZES["standard_nd96asr_v4"]
    assert (a100.gpus, a100.gpu_memory_gb, a100.infiniband, a100.interconnect_gbps) == (
        8,
        40,
        True,
        1600,
    )
    assert VM_SIZES["standard_nd96amsr_a100_v4"].gpu_memory_gb == 80
    assert [VM_SIZES[f"standard_nc{n}ads_a100_v4"].gpus for n in (24, 48, 96)] == [1, 2, 4]
    assert not VM_SIZES["standard_nc96ads_a100_v4"].infiniband
    assert VM_SIZES["standard_nc24rs_v3"].infiniband
    assert VM_SIZES["standard_nc6s_v2"].retired
    assert VM_SIZES["standard_nc40ads_h100_v5"].gpu_memory_gb == 94
    assert VM_SIZES["standard_nc80adis_h100_v5"].gpus == 2
    assert find_vm_size("Standard_NC25") is None
    assert "Standard_NC24" in close_matches("Standard_NC25")


def test_node_layout() -> None:
    assert node_layout(148, 4) == (37, 4, 4, 0)
    assert node_layout(148, 8) == (19, 8, 4, 4)
    assert node_layout(16, 8) == (2, 8, 8, 0)
    assert node_layout(3, 8) == (1, 3, 3, 5)


# --- cluster.json -----------------------------------------------------------------------


def test_cluster_json_in_repo_is_valid() -> None:
    spec = load_cluster(REPO / "cluster.json")
    assert spec.target_node_count >= 1 and spec.vm.gpus >= 1


def test_optional_fields_and_normalisation(tmp_path: Path) -> None:
    path = write_cluster(
        tmp_path,
        vmSize="standard_nd96isr_h100_v5",
        vmPriority="lowPriority",
        minNodeCount=1,
        nodeSetup="nvidia-smi",
        name="lc-h100",
        sshPublicKey="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample me@laptop",
    )
    spec = load_cluster(path)
    assert spec.vm_size == "Standard_ND96isr_H100_v5"
    assert spec.vm_priority == "lowpriority"
    assert spec.node_setup == ["nvidia-smi"]
    assert (spec.min_node_count, spec.name) == (1, "lc-h100")


@pytest.mark.parametrize(
    "field",
    [
        "password",
        "adminPassword",
        "accountKey",
        "connectionString",
        "sasToken",
        "clientSecret",
        "ADMIN_PASSWORD",
        "storage_key",
        "privateKey",
        "apiKey",
    ],
)
def test_secret_field_names_refused(field: str) -> None:
    assert secret_like(field)
    with pytest.raises(ClusterError, match=r"no secrets.*SSH public key.*managed identity"):
        parse_cluster({**BASE, "vmSize": "Standard_NC24s_v3", field: "x"})


@pytest.mark.parametrize(
    "extra",
    [
        {"nodeSetup": ["azcopy copy 'https://a.blob.core.windows.net/c/x?sv=2022&sig=abc' ."]},
        {"nodeSetup": ["export AZ=DefaultEndpointsProtocol=https;AccountKey=abc=="]},
        {
            "sshPublicKey": "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----"
        },
        {"storage": {"credentials": {"user": "x"}}},
    ],
)
def test_secret_values_refused(extra: dict) -> None:
    with pytest.raises(ClusterError, match=r"secret|private key|connection string|SAS"):
        parse_cluster({**BASE, "vmSize": "Standard_NC24s_v3", **extra})


def test_public_key_names_allowed() -> None:
    for name in ("sshPublicKey", "ssh_public_key", "vmSize", "location", "nodeSetup"):
        assert not secret_like(name), name
    with pytest.raises(ClusterError, match="sshPublicKey: must be one SSH public key"):
        parse_cluster({**BASE, "vmSize": "Standard_NC24s_v3", "sshPublicKey": "hello"})


def test_other_field_errors(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match=r"targetNodeCount: .*greater than or equal to 1"):
        parse_cluster({**BASE, "vmSize": "Standard_NC24s_v3", "targetNodeCount": 0})
    with pytest.raises(ClusterError, match="vmPriority: must be dedicated or lowpriority"):
        parse_cluster({**BASE, "vmSize": "Standard_NC24s_v3", "vmPriority": "spot"})
    with pytest.raises(ClusterError, match="unknown field 'vmCount'"):
        parse_cluster({**BASE, "vmSize": "Standard_NC24s_v3", "vmCount": 3})
    with pytest.raises(ClusterError, match="minNodeCount 5 is above targetNodeCount 4"):
        parse_cluster({**BASE, "vmSize": "Standard_NC24s_v3", "minNodeCount": 5})
    with pytest.raises(ClusterError, match="cluster file not found"):
        load_cluster(tmp_path / "missing.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ClusterError, match="must be a JSON object"):
        load_cluster(tmp_path / "list.json")


def bad_unknown_size(folder: Path) -> tuple[Path, tuple[str, ...]]:
    return write_cluster(folder, vmSize="Standard_NC25"), (
        "vmSize",
        "unknown VM size 'Standard_NC25'",
        "close matches",
        "Standard_NC24",
    )


def bad_password(folder: Path) -> tuple[Path, tuple[str, ...]]:
    path = write_cluster(folder, vmSize="Standard_NC24s_v3", adminPassword="hunter2")
    return path, ("adminPassword", "looks like a secret", "SSH public key", "managed identity")


def bad_missing(folder: Path) -> tuple[Path, tuple[str, ...]]:
    path = folder / "cluster.json"
    path.write_text(
        json.dumps({"vmSize": "Standard_NC24s_v3", "vmPriority": "dedicated", "location": "eastus"})
    )
    return path, ("missing required field 'targetNodeCount'",)


def bad_json(folder: Path) -> tuple[Path, tuple[str, ...]]:
    path = folder / "cluster.json"
    path.write_text('{"vmSize": "Standard_NC24s_v3",, }')
    return path, ("not valid JSON", "line 1")


@pytest.mark.parametrize("make_bad", [bad_unknown_size, bad_password, bad_missing, bad_json])
def test_bad_cluster_json_cli(tmp_path: Path, make_bad: Any, small_data: Path) -> None:
    path, needles = make_bad(tmp_path)
    result = run_cli(
        "cluster",
        "plan",
        "--workers",
        "8",
        "--cluster",
        str(path),
        "--data",
        str(small_data),
        timeout=120,
    )
    line = assert_one_line_error(result, str(path), *needles)
    assert "hunter2" not in result.stderr + result.stdout, line


# --- plan -------------------------------------------------------------------------------


def test_plan_cli_nc24_148_workers(tmp_path: Path, small_data: Path) -> None:
    path = write_cluster(tmp_path, vmSize="Standard_NC24")
    result = run_cli(
        "cluster",
        "plan",
        "--workers",
        "148",
        "--cluster",
        str(path),
        "--data",
        str(small_data),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "148 -> 37 nodes x 4 processes" in result.stdout
    assert "idle" not in result.stdout
    assert f'set "targetNodeCount": 37 in {path}' in result.stdout
    retired = [ln for ln in result.stderr.splitlines() if ln.startswith("warning: ")]
    assert any("Standard_NC24 was retired in 2023" in ln for ln in retired), result.stderr
    assert "error" not in result.stderr


def test_plan_cli_nd_h100_148_workers(tmp_path: Path, small_data: Path) -> None:
    path = write_cluster(tmp_path, vmSize="Standard_ND96isr_H100_v5", targetNodeCount=20)
    result = run_cli(
        "cluster",
        "plan",
        "--workers",
        "148",
        "--cluster",
        str(path),
        "--data",
        str(small_data),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "148 -> 19 nodes: 18 x 8 processes + 4 on the last node" in result.stdout
    assert "4 slots stay idle" in result.stdout
    assert "targetNodeCount 20 suffices (19 needed)" in result.stdout
    assert "retired" not in result.stderr


def test_make_plan_numbers(small_config: Path, small_data: Path) -> None:
    config = load_config(small_config)
    nc24 = parse_cluster({**BASE, "vmSize": "Standard_NC24"})
    plan = make_plan(nc24, 148, config, str(small_data))
    assert (plan.nodes, plan.processes_per_node, plan.idle_slots) == (37, 4, 0)
    assert not plan.target_suffices
    assert any('"targetNodeCount": 37' in line for line in plan_lines(plan))
    assert any("retired" in w for w in plan.warnings)
    assert plan.predicted_epoch_s is None

    h100 = parse_cluster({**BASE, "vmSize": "Standard_ND96isr_H100_v5", "targetNodeCount": 19})
    plan = make_plan(h100, 148, config, with_data=False)
    assert (plan.nodes, plan.processes_per_node, plan.last_node_processes) == (19, 8, 4)
    assert plan.idle_slots == 4 and plan.target_suffices and plan.data is None
    assert any("4 slots stay idle" in line for line in plan_lines(plan))
    assert not any("retired" in w for w in plan.warnings)

    geometry = plan.geometry
    assert geometry.global_batch == 148 * 4
    assert geometry.peak_lr == pytest.approx(0.003 * math.sqrt(148 * 4 / 16))  # AdamW: sqrt
    assert geometry.steps_per_epoch == math.ceil(1000 / (148 * 4))
    assert geometry.lr_scaling == "sqrt"


def _plan_stdout(*extra: str) -> str:
    """``landcover cluster plan --workers 148`` with the repository's cluster.json."""
    result = run_cli("cluster", "plan", "--workers", "148", *extra, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _line(stdout: str, prefix: str) -> str:
    return next(ln for ln in stdout.splitlines() if ln.startswith(prefix))


def test_plan_cli_default_config_sqrt_rule(small_data: Path) -> None:
    stdout = _plan_stdout("--config", "configs/default.yaml", "--data", str(small_data))
    peak = 0.001 * math.sqrt(148 * 16 / 16)
    assert _line(stdout, "learning rate: ") == (
        f"learning rate: peak lr {peak:.2e} (AdamW, sqrt rule: 0.001 x sqrt(2368/16)), "
        "reached after 2 warm-up epochs"
    )
    steps = math.ceil(65536 / (148 * 16))
    assert _line(stdout, "batch: ") == (
        f"batch: 148 workers x batch 16 = global batch 2,368; {steps} steps per epoch of "
        "65,536 samples"
    )


def test_plan_cli_sgd_linear_rule_and_accumulate(tmp_path: Path, small_data: Path) -> None:
    tree = yaml.safe_load((REPO / "configs" / "default.yaml").read_text())
    tree["optim"].update(optimizer="sgd", lr=0.01)
    sgd = tmp_path / "sgd.yaml"
    sgd.write_text(yaml.safe_dump(tree))
    stdout = _plan_stdout("--config", str(sgd), "--data", str(small_data))
    peak = 0.01 * 148 * 16 / 16
    assert f"peak lr {peak:.2e} (SGD, linear rule: 0.01 x 2368/16)" in stdout

    # optim.accumulate in the config doubles the global batch (and sets the peak)
    tree["optim"].update(optimizer="adamw", lr=0.001, accumulate=2)
    accumulated = tmp_path / "accumulate.yaml"
    accumulated.write_text(yaml.safe_dump(tree))
    stdout = _plan_stdout("--config", str(accumulated), "--data", str(small_data))
    batch = 148 * 16 * 2
    steps = math.ceil(65536 / batch)
    assert _line(stdout, "batch: ") == (
        f"batch: 148 workers x batch 16 x accumulate 2 = global batch {batch:,}; {steps} steps "
        "per epoch of 65,536 samples"
    )
    peak = 0.001 * math.sqrt(batch / 16)
    assert f"peak lr {peak:.2e} (AdamW, sqrt rule: 0.001 x sqrt({batch}/16))" in stdout
    # --accumulate overrides the config's
    stdout = _plan_stdout(
        "--config", "configs/default.yaml", "--data", str(small_data), "--accumulate", "2"
    )
    assert f"= global batch {batch:,}; {steps} steps" in stdout


@pytest.mark.parametrize("workers", [1, 4, 6, 9])
def test_data_shares_add_up(small_config: Path, small_data: Path, workers: int) -> None:
    config = load_config(small_config)
    cluster = parse_cluster({**BASE, "vmSize": "Standard_NC24ads_A100_v4"})
    plan = make_plan(cluster, workers, config, str(small_data))
    train, val = split_pairs(config.data, str(small_data))
    expected_bytes = sum(os.path.getsize(p.image) + os.path.getsize(p.label) for p in train)
    data = plan.data
    assert data is not None
    assert (data.tiles, data.val_tiles, data.bytes) == (len(train), len(val), expected_bytes)
    assert len(data.shares) == workers
    assert all(s.tiles >= 1 for s in data.shares)
    if workers <= len(train):
        assert sum(s.tiles for s in data.shares) == len(train)
        assert sum(s.bytes for s in data.shares) == expected_bytes
        assert max(s.tiles for s in data.shares) - min(s.tiles for s in data.shares) <= 1
    else:
        assert data.tiles_shared
    line = next(ln for ln in plan_lines(plan) if ln.startswith("per worker: "))
    assert "tile" in line and "kB" in line


# --- azureml ----------------------------------------------------------------------------


def walk_keys(tree: Any) -> list[str]:
    if isinstance(tree, dict):
        return [str(k) for k in tree] + [k for v in tree.values() for k in walk_keys(v)]
    if isinstance(tree, list):
        return [k for v in tree for k in walk_keys(v)]
    return []


def load_yaml_files(folder: Path) -> dict[str, Any]:
    files = {
        p.relative_to(folder).as_posix(): yaml.safe_load(p.read_text())
        for p in folder.rglob("*.yml")
        if "src" not in p.parts
    }
    for name, tree in files.items():
        bad = [k for k in walk_keys(tree) if secret_like(k) and k != "$schema"]
        assert not bad, (name, bad)
        assert find_secret(tree) is None, name
    return files


@pytest.mark.parametrize("engine", ["torch", "horovod"])
def test_azureml_files(tmp_path: Path, small_config: Path, engine: str) -> None:
    cluster = write_cluster(
        tmp_path,
        vmSize="Standard_ND96isr_H100_v5",
        vmPriority="lowpriority",
        minNodeCount=1,
        sshPublicKey="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample me@laptop",
    )
    out = tmp_path / "aml"
    args = [
        "cluster",
        "azureml",
        "--workers",
        "148",
        "--epochs",
        "250",
        "--engine",
        engine,
        "--cluster",
        str(cluster),
        "--config",
        str(small_config),
        "--data",
        "az://naip/pairs",
        "--out",
        str(out),
    ]
    result = run_cli(*args, timeout=120, env={"AZURE_STORAGE_ACCOUNT_NAME": "naipdata"})
    assert result.returncode == 0, result.stderr
    for verb in ("compute", "environment", "job"):
        assert f"az ml {verb} create -f {out / (verb + '.yml')}" in result.stdout
    assert "runs 152 workers (19 x 8), not 148" in result.stderr

    files = load_yaml_files(out)
    compute, env, job = files["compute.yml"], files["environment.yml"], files["job.yml"]
    assert compute["$schema"].endswith("amlCompute.schema.json")
    assert (compute["type"], compute["size"], compute["tier"]) == (
        "amlcompute",
        "Standard_ND96isr_H100_v5",
        "low_priority",
    )
    assert (compute["min_instances"], compute["max_instances"]) == (1, 19)
    assert compute["location"] == "eastus"
    assert compute["ssh_settings"]["ssh_key_value"].startswith("ssh-ed25519 ")

    assert (out / env["build"]["path"] / env["build"]["dockerfile_path"]).is_file()
    conda = files["environment/conda.yml"]
    pip = conda["dependencies"][-1]["pip"]
    assert any(d.startswith("torch") for d in pip) and any(d.startswith("rasterio") for d in pip)
    dockerfile = (out / "environment" / "Dockerfile").read_text()
    assert "conda.yml" in dockerfile and "pip install" in dockerfile
    # the horovod image builds Horovod with the shipped script, against the image's Open MPI
    assert ("HOROVOD_WITH_MPI=1" in dockerfile) == (engine == "horovod")
    assert (out / "environment" / "install-horovod.sh").is_file() == (engine == "horovod")
    assert (out / "environment" / "src" / "pyproject.toml").is_file()
    assert (out / "environment" / "src" / "landcover" / "cli.py").is_file()

    assert job["type"] == "command"
    assert job["compute"] == "azureml:landcover-gpu"
    assert job["environment"].startswith("azureml:landcover")
    assert job["resources"] == {"instance_count": 19}
    assert job["distribution"] == {
        "type": "pytorch" if engine == "torch" else "mpi",
        "process_count_per_instance": 8,
    }
    command = job["command"]
    assert command.startswith("landcover train ")
    assert "--epochs 250" in command and "--workers" not in command
    assert "--data ${{inputs.data}}" in command and "--out ${{outputs.run}}" in command
    assert "--config ${{inputs.config}}" in command
    assert ("--engine horovod" in command) == (engine == "horovod")
    assert job["inputs"]["data"] == {
        "type": "uri_folder",
        "path": "https://naipdata.blob.core.windows.net/naip/pairs",
        "mode": "ro_mount",
    }
    assert job["inputs"]["config"]["type"] == "uri_file"
    assert job["outputs"]["run"]["type"] == "uri_folder"


def test_azureml_small_job_and_local_data(tmp_path: Path, small_data: Path) -> None:
    cluster = write_cluster(
        tmp_path, vmSize="Standard_NC96ads_A100_v4", targetNodeCount=6, nodeSetup=["nvidia-smi"]
    )
    out = tmp_path / "aml"
    result = run_cli(
        "cluster",
        "azureml",
        "--workers",
        "3",
        "--epochs",
        "5",
        "--cluster",
        str(cluster),
        "--data",
        str(small_data),
        "--out",
        str(out),
        "--input-mode",
        "download",
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    files = load_yaml_files(out)
    compute, job = files["compute.yml"], files["job.yml"]
    assert (compute["tier"], compute["min_instances"], compute["max_instances"]) == (
        "dedicated",
        0,
        6,
    )
    assert job["resources"]["instance_count"] == 1
    assert job["distribution"]["process_count_per_instance"] == 3
    assert job["inputs"]["data"]["path"] == str(small_data.resolve())
    assert job["inputs"]["data"]["mode"] == "download"
    assert job["command"].startswith("nvidia-smi && landcover train ")
    assert "warning" not in result.stderr


def test_azureml_config_includes_are_merged(tmp_path: Path) -> None:
    """The job downloads its config as one file: included files are merged into it."""
    cluster = write_cluster(tmp_path, vmSize="Standard_NC96ads_A100_v4", targetNodeCount=2)
    (tmp_path / "stats").mkdir()
    (tmp_path / "stats" / "naip_stats.yaml").write_text(
        "data: {mean: [0.47, 0.52, 0.44, 0.46], std: [0.16, 0.13, 0.1, 0.15]}\n"
    )
    config = tmp_path / "run.yaml"
    config.write_text("include: stats/naip_stats.yaml\noptim: {epochs: 3}\n")
    out = tmp_path / "aml"
    result = run_cli(
        "cluster", "azureml", "--workers", "4", "--epochs", "5", "--cluster", str(cluster),
        "--config", str(config), "--out", str(out), timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    job = load_yaml_files(out)["job.yml"]
    merged = Path(job["inputs"]["config"]["path"])
    assert merged == out / "config.yaml"
    assert f"merged into {merged}" in result.stdout
    assert load_config(merged).model_dump() == load_config(config).model_dump()
    assert load_config(merged).data.mean == [0.47, 0.52, 0.44, 0.46]


def test_azureml_retired_size_warns(tmp_path: Path) -> None:
    cluster = write_cluster(tmp_path, vmSize="Standard_NC24s_v3")
    result = run_cli(
        "cluster",
        "azureml",
        "--workers",
        "8",
        "--epochs",
        "2",
        "--cluster",
        str(cluster),
        "--out",
        str(tmp_path / "aml"),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "warning: Standard_NC24s_v3 was retired 30 Sep 2025" in result.stderr
    job = yaml.safe_load((tmp_path / "aml" / "job.yml").read_text())
    assert "inputs" not in job and "--data" not in job["command"]


def test_azureml_data_paths() -> None:
    env = {"AZURE_STORAGE_ACCOUNT_NAME": "acct"}
    assert data_input_path("az://c/p", env) == "https://acct.blob.core.windows.net/c/p"
    assert (
        data_input_path("abfs://c@other.dfs.core.windows.net/p", {})
        == "abfss://c@other.dfs.core.windows.net/p"
    )
    uri = "azureml://datastores/naip/paths/pairs"
    assert data_input_path(uri, {}) == uri
    with pytest.raises(ClusterError, match="names no storage account"):
        data_input_path("az://c/p", {})
    with pytest.raises(ClusterError, match="SAS"):
        data_input_path("https://acct.blob.core.windows.net/c/p?sv=1&sig=abc", {})


def test_azureml_sas_data_cli(tmp_path: Path) -> None:
    cluster = write_cluster(tmp_path, vmSize="Standard_NC24ads_A100_v4")
    result = run_cli(
        "cluster",
        "azureml",
        "--workers",
        "2",
        "--epochs",
        "2",
        "--cluster",
        str(cluster),
        "--data",
        "https://a.blob.core.windows.net/c/p?sv=1&sig=s3cr3t",
        "--out",
        str(tmp_path / "aml"),
        timeout=120,
    )
    assert_one_line_error(result, "query", "SAS")
    assert "s3cr3t" not in result.stderr
    assert not (tmp_path / "aml").exists()


def test_azureml_predict_job(tmp_path: Path) -> None:
    cluster = write_cluster(tmp_path, vmSize="Standard_NC96ads_A100_v4", targetNodeCount=2)
    checkpoint = tmp_path / "best.pt"
    checkpoint.write_bytes(b"weights")
    out = tmp_path / "aml"
    maps = "azureml://datastores/maps/paths/md2018"
    result = run_cli(
        "cluster", "azureml", "--job", "predict", "--workers", "8", "--cluster", str(cluster),
        "--tiles", "az://naip/md/2018", "--checkpoint", str(checkpoint), "--run-path", maps,
        "--out", str(out),
        timeout=120, env={"AZURE_STORAGE_ACCOUNT_NAME": "naipdata"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "2 x Standard_NC96ads_A100_v4, 4 processes per node, predict job" in result.stdout
    job = load_yaml_files(out)["job.yml"]
    # every process Azure ML starts is one predict worker (no --workers, no launcher)
    assert job["command"] == (
        "landcover predict ${{inputs.tiles}} --checkpoint ${{inputs.checkpoint}} "
        "--out ${{outputs.maps}}"
    )
    assert job["distribution"] == {"type": "pytorch", "process_count_per_instance": 4}
    assert job["resources"] == {"instance_count": 2}
    assert job["inputs"] == {
        "tiles": {
            "type": "uri_folder",
            "path": "https://naipdata.blob.core.windows.net/naip/md/2018",
            "mode": "ro_mount",
        },
        "checkpoint": {"type": "uri_file", "path": str(checkpoint.resolve()), "mode": "download"},
    }
    assert job["outputs"] == {"maps": {"type": "uri_folder", "mode": "rw_mount", "path": maps}}
    assert (out / "environment" / "src" / "landcover" / "mapping" / "job.py").is_file()

    listing = tmp_path / "tiles.txt"
    listing.write_text("az://naip/md/2018/m_1.tif\n")
    result = run_cli(
        "cluster", "azureml", "--job", "predict", "--workers", "2", "--cluster", str(cluster),
        "--tiles", str(listing), "--checkpoint", "az://runs/exp1/best.pt", "--out", str(out),
        timeout=120, env={"AZURE_STORAGE_ACCOUNT_NAME": "naipdata"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "without --run-path each job writes a new maps folder" in result.stdout
    job = load_yaml_files(out)["job.yml"]
    assert job["inputs"]["tiles"] == {
        "type": "uri_file", "path": str(listing.resolve()), "mode": "download"
    }  # fmt: skip
    assert job["inputs"]["checkpoint"]["path"] == (
        "https://naipdata.blob.core.windows.net/runs/exp1/best.pt"
    )

    missing = run_cli(
        "cluster", "azureml", "--job", "predict", "--workers", "2", "--cluster", str(cluster),
        "--tiles", "az://naip/md", "--checkpoint", str(tmp_path / "none.pt"),
        "--out", str(tmp_path / "aml2"), timeout=120, env={"AZURE_STORAGE_ACCOUNT_NAME": "n"},
    )  # fmt: skip
    assert_one_line_error(missing, "none.pt", "file not found here", "--checkpoint")


# --- azureml: the writers' API and the job environment -----------------------------------


def _target(tmp_path: Path, workers: int = 8, **fields: Any) -> JobTarget:
    cluster = write_cluster(tmp_path, vmSize="Standard_NC96ads_A100_v4", **fields)
    spec = load_cluster(cluster)
    plan = make_plan(spec, workers, load_config(None), with_data=False)
    return JobTarget(spec, plan, tmp_path / "aml", cluster_file=cluster)


def _pip(out: Path) -> list[str]:
    conda = yaml.safe_load((out / "environment" / "conda.yml").read_text())
    return conda["dependencies"][-1]["pip"]


def _names(requirements: list[str]) -> list[str]:
    return [aml_env.requirement_name(r) for r in requirements]


@pytest.mark.parametrize("kind", ["train", "predict"])
def test_azureml_environment_has_the_mlflow_packages(tmp_path: Path, kind: str) -> None:
    """Azure ML shows a job's metrics through MLflow: both job kinds' images install it."""
    target = _target(tmp_path)
    if kind == "train":
        files = write_train_job(target, TrainJob(epochs=3))
    else:
        checkpoint = tmp_path / "best.pt"
        checkpoint.write_bytes(b"weights")
        files = write_predict_job(
            target, PredictJob("azureml://datastores/naip/paths/md", str(checkpoint))
        )
    pip = _pip(files.out)
    dependencies = aml_env.project_dependencies(aml_env.project_root())
    # landcover's dependencies first, in order, then the MLflow packages, each once
    assert pip[: len(dependencies)] == dependencies
    assert set(_names(pip[len(dependencies) :])) >= set(MLFLOW_PACKAGES)
    assert len(set(_names(pip))) == len(pip)
    # the MLflow extra's pins (where landcover declares one) are what the image installs
    for requirement in aml_env.project_dependencies(aml_env.project_root(), MLFLOW_EXTRA):
        assert requirement in pip
    dockerfile = (files.build_context / "Dockerfile").read_text()
    assert all(name in dockerfile for name in MLFLOW_PACKAGES)
    assert "conda env create" in dockerfile and "--no-deps /tmp/landcover/src" in dockerfile


def test_azureml_environment_packages() -> None:
    assert aml_env.environment_packages(["torch>=2.3"]) == ["torch>=2.3", *MLFLOW_PACKAGES]
    # a pin from landcover's MLflow extra wins over the bare name; nothing is listed twice
    assert aml_env.environment_packages(
        ["torch>=2.3", "Azureml_MLflow==1.60"], ["mlflow-skinny>=2.10"]
    ) == ["torch>=2.3", "Azureml_MLflow==1.60", "mlflow-skinny>=2.10"]
    assert aml_env.requirement_name("segmentation-models-pytorch[timm]>=0.4") == (
        "segmentation-models-pytorch"
    )
    assert aml_env.project_dependencies(aml_env.project_root(), "no-such-extra") == []


def test_azureml_writers_take_records(tmp_path: Path) -> None:
    target = _target(tmp_path, workers=6, targetNodeCount=2)
    files = write_train_job(target, TrainJob(epochs=4))
    job = yaml.safe_load(files.job.read_text())
    assert job["command"] == "landcover train --out ${{outputs.run}} --epochs 4"
    assert job["description"] == (
        f"landcover train on 2 x Standard_NC96ads_A100_v4 (8 workers, {DEFAULT_ENGINE} engine)"
    )
    assert "inputs" not in job and list(job["outputs"]) == ["run"]
    assert "runs 8 workers (2 x 4), not 6" in files.warnings[-1]
    assert files.commands == [
        f"az ml {verb} create -f {files.out / (verb + '.yml')}"
        for verb in ("compute", "environment", "job")
    ]

    with pytest.raises(ClusterError, match="at least 1"):
        write_train_job(replace(target, out=tmp_path / "none"), TrainJob(epochs=0))
    assert not (tmp_path / "none").exists()
    other = next(name for name, e in ENGINES.items() if not e.maps_regions)
    with pytest.raises(ClusterError, match=f"runs on the {REGION_ENGINE} engine"):
        write_predict_job(
            replace(target, out=tmp_path / "none"), PredictJob("az://c/t", "az://c/b", other)
        )
    assert not (tmp_path / "none").exists()


def test_azureml_install_scripts_follow_the_engine(tmp_path: Path, monkeypatch: Any) -> None:
    """An engine's install script is shipped and run in the image; another engine's is removed."""
    scripted = next(e for e in ENGINES.values() if e.install_script)
    script = Path(scripted.install_script).name
    target = _target(tmp_path)
    files = write_train_job(target, TrainJob(epochs=1, engine=scripted.name))
    assert (files.build_context / script).is_file()
    assert f"bash /tmp/{script}" in (files.build_context / "Dockerfile").read_text()
    files = write_train_job(target, TrainJob(epochs=1))
    assert not (files.build_context / script).exists()
    assert script not in (files.build_context / "Dockerfile").read_text()

    # an engine whose script is missing: the files are written, with a warning
    missing = EngineSpec(
        name=scripted.name,
        display=scripted.display,
        summary="",
        launcher=scripted.launcher,
        install_script="scripts/no-such-install.sh",
    )
    monkeypatch.setitem(ENGINES, scripted.name, missing)
    files = write_train_job(target, TrainJob(epochs=1, engine=scripted.name))
    assert any("scripts/no-such-install.sh was not found" in w for w in files.warnings)
    assert "no-such-install.sh" not in (files.build_context / "Dockerfile").read_text()


def test_azureml_warns_that_loaded_plugins_stay_behind(tmp_path: Path) -> None:
    """A job's image is landcover alone: what a plugin registers is not there on the cluster."""
    cluster = write_cluster(tmp_path, vmSize="Standard_NC96ads_A100_v4", targetNodeCount=2)
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "myplugin.py").write_text("LOADED = True\n")
    env = {"PYTHONPATH": str(tmp_path / "plugins"), "LANDCOVER_PLUGINS": "myplugin"}
    args = ["cluster", "azureml", "--workers", "4", "--epochs", "2", "--cluster", str(cluster)]
    result = run_cli(*args, "--out", str(tmp_path / "aml"), env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "the plugins myplugin are loaded here, but an Azure ML job's image" in result.stderr
    plain = run_cli(*args, "--out", str(tmp_path / "aml2"), env={"LANDCOVER_PLUGINS": ""})
    assert plain.returncode == 0 and "plugins" not in plain.stderr
