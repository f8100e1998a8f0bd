"""MLflow logging: a real 2-worker run read back through MLflow's client, resume, redaction."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from landcover.config import load_config
from landcover.errors import ConfigError
from landcover.training.mlflow_log import (
    RUN_FILE,
    MlflowLog,
    flat_params,
    mlflow_client_class,
    mlflow_enabled,
)
from landcover.training.runfolder import RunFolder
from landcover.training.runlog import read_metrics

from conftest import assert_one_line_error, run_cli, train_args

mlflow = pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402

EVERY_EPOCH = ("train_loss", "lr", "samples_per_s", "epoch_s", "val_miou", "val_accuracy")


def _tracking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    # MLflow 3 keeps its file store only on request (a test needs no database server), for
    # the training run's processes and for this one, which reads the run back
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return {
        "MLFLOW_TRACKING_URI": f"file:{tmp_path / 'mlruns'}",
        "MLFLOW_ALLOW_FILE_STORE": "true",
    }


def _only_run(uri: str):
    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments)
    assert len(runs) == 1, [r.info.run_name for r in runs]
    return client, runs[0]


def _assert_history(
    client: MlflowClient, run_id: str, key: str, expected: list[tuple[int, float]]
) -> None:
    """The metric's values, one per epoch (step = epoch), are the expected ones."""
    logged = sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))
    assert [step for step, _ in logged] == [epoch for epoch, _ in expected], key
    values = [value for _, value in logged]
    assert values == pytest.approx([value for _, value in expected], rel=1e-12), key


@pytest.mark.slow
def test_a_two_worker_run_is_one_mlflow_run_with_the_run_folders_values(
    tiny_data: Path, tiny_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    env = _tracking(tmp_path, monkeypatch)
    result = run_cli(*train_args(tiny_config, tiny_data, run, "--workers", "2"), env=env)
    assert result.returncode == 0, result.stderr

    client, logged = _only_run(env["MLFLOW_TRACKING_URI"])
    run_id = logged.info.run_id
    assert logged.info.run_name == "run" and logged.info.status == "FINISHED"
    assert json.loads((run / RUN_FILE).read_text())["run_id"] == run_id

    # the parameters are the effective configuration, flattened (auto values measured)
    saved = yaml.safe_load((run / "config.yaml").read_text())
    params = logged.data.params
    assert params["run.workers"] == "2" and params["optim.epochs"] == "2"
    assert params["model.encoder"] == "resnet18" and params["run.mlflow"] == "false"
    assert json.loads(params["data.mean"]) == saved["data"]["mean"]
    assert params["data.classes.name"] == "chesapeake7"

    # one value per epoch of each metric, as metrics.jsonl has it
    records = read_metrics(run / "metrics.jsonl")
    assert [r["epoch"] for r in records] == [1, 2]
    for key in EVERY_EPOCH:
        _assert_history(client, run_id, key, [(r["epoch"], r[key]) for r in records])
    for name in saved["data"]["classes"]["classes"]:
        key = f"val_iou/{name['name']}"
        ious = [(r["epoch"], r["val_iou"][name["name"]]) for r in records]
        expected = [(epoch, iou) for epoch, iou in ious if iou is not None]  # None: not logged
        _assert_history(client, run_id, key, expected)

    # curves.png as an artifact, the best checkpoint as a tag
    assert [a.path for a in client.list_artifacts(run_id)] == ["curves.png"]
    copy = Path(client.download_artifacts(run_id, "curves.png", str(tmp_path)))
    assert copy.read_bytes() == (run / "curves.png").read_bytes()
    best = max(records, key=lambda r: r["val_miou"])
    assert logged.data.tags["best_checkpoint"] == str(run / "checkpoints" / "best.pt")
    assert logged.data.tags["best_epoch"] == str(best["epoch"])
    assert "logging to MLflow run" in (run / "logs" / "rank0.log").read_text()
    assert "logging to MLflow" not in (run / "logs" / "rank1.log").read_text()


@pytest.mark.slow
def test_resuming_the_run_folder_continues_its_mlflow_run(
    tiny_data: Path, tiny_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    env = _tracking(tmp_path, monkeypatch)
    args = train_args(tiny_config, tiny_data, run, "--workers", "1")
    first = run_cli(*args, "--epochs", "1", env=env)
    assert first.returncode == 0, first.stderr
    second = run_cli(*args, "--epochs", "2", env=env)
    assert second.returncode == 0, second.stderr
    assert "continuing MLflow run" in second.stderr

    client, logged = _only_run(env["MLFLOW_TRACKING_URI"])
    records = read_metrics(run / "metrics.jsonl")
    expected = [(r["epoch"], r["train_loss"]) for r in records]
    _assert_history(client, logged.info.run_id, "train_loss", expected)
    assert logged.info.status == "FINISHED"
    # MLflow keeps a parameter's first value; the new one is a tag
    assert logged.data.params["optim.epochs"] == "1"
    assert logged.data.tags["changed.optim.epochs"] == "2"


def test_parameters_are_flat_and_carry_no_credentials() -> None:
    secret = "sv=2024-11-04&se=2030-01-01&sp=r&sig=c2VjcmV0c2lnbmF0dXJlMTIz"
    url = f"https://acct.blob.core.windows.net/models/init.pt?{secret}"
    config = load_config(None, None, [f"model.weights={url}", "data.val_tiles=[a,b]"])
    params = flat_params(config.to_dict())
    assert "c2VjcmV0c2lnbmF0dXJlMTIz" not in json.dumps(params)
    assert params["model.weights"].startswith("https://acct.blob.core.windows.net/models/init.pt?")
    assert "sig=***" in params["model.weights"]
    assert params["optim.lr"] == "0.001" and params["data.val_tiles"] == '["a", "b"]'
    assert params["run.device"] == "auto" and params["data.root"] == "null"
    assert params["model.arch_options"] == "{}"  # an empty section is one value
    assert all(not isinstance(v, dict) for v in params.values())


class _LateClient(MlflowClient):
    """A real client whose first look for the experiment comes before a rival's creation."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.rival: str | None = None

    def get_experiment_by_name(self, name: str):
        if self.rival is None:  # another training, started together, makes it just after
            self.rival = MlflowClient(self.tracking_uri).create_experiment(name)
            return None
        return super().get_experiment_by_name(name)


def test_two_trainings_that_both_find_no_experiment_log_to_the_one_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = _tracking(tmp_path, monkeypatch)["MLFLOW_TRACKING_URI"]
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    tracker = MlflowLog(RunFolder(str(tmp_path / "run")))
    tracker.client = _LateClient(uri)
    experiment = tracker._experiment()  # its creation fails: the rival's exists
    assert experiment == tracker.client.rival
    named = [
        e.experiment_id for e in MlflowClient(uri).search_experiments() if e.name == "landcover"
    ]
    assert named == [experiment]


def test_mlflow_is_on_by_the_config_or_the_tracking_uri() -> None:
    run = load_config(None).run
    assert not mlflow_enabled(run, {})
    assert mlflow_enabled(run, {"MLFLOW_TRACKING_URI": "azureml://example"})
    assert mlflow_enabled(run.replace(mlflow=True), {})


def test_mlflow_missing_is_a_one_line_error(
    tiny_data: Path, tiny_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)
    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)
    with pytest.raises(ConfigError, match=r"not installed: pip install 'landcover\[mlflow\]'"):
        mlflow_client_class()
    # the CLI says so before it loads any data (here an mlflow package that cannot import)
    shadow = tmp_path / "shadow" / "mlflow"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no mlflow here')\n")
    env = {"PYTHONPATH": str(shadow.parent), "MLFLOW_TRACKING_URI": "http://127.0.0.1:9"}
    result = run_cli(*train_args(tiny_config, tiny_data, tmp_path / "run"), env=env)
    assert_one_line_error(result, "MLFLOW_TRACKING_URI is set", "MLflow is not installed")
    assert not (tmp_path / "run" / "checkpoints").exists()
