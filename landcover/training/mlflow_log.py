"""Logging a training run to MLflow, from rank 0, when asked or when Azure ML asks.

On when ``run.mlflow`` is true or ``MLFLOW_TRACKING_URI`` is set (Azure ML sets it in a job);
MLflow (``mlflow-skinny``, the ``mlflow`` extra) is imported only then. The run logs:

- its parameters: the configuration flattened to dotted keys (``optim.lr``, ``data.mean``),
  redacted first (:func:`~landcover.redaction.redact_tree`: a URL's SAS query never becomes a
  parameter);
- each epoch's metrics at the step of the epoch's number, under TensorBoard's names:
  ``train_loss``, ``lr``, ``samples_per_s``, ``epoch_s``, ``val_miou``, ``val_accuracy`` and
  ``val_iou/{class}``;
- ``curves.png`` as an artifact (after each epoch), and the best checkpoint's path and epoch as
  the tags ``best_checkpoint`` and ``best_epoch``.

The MLflow run is named after the run folder, in the experiment ``MLFLOW_EXPERIMENT_ID`` or
``MLFLOW_EXPERIMENT_NAME`` names (default ``landcover``). Its id is kept in the run folder
(``mlflow.json``), so resuming the run folder continues the same MLflow run on the same tracking
server (settings that changed are recorded as ``changed.{key}`` tags: MLflow keeps a
parameter's first value). Inside an Azure ML job (``MLFLOW_RUN_ID`` set) it logs to the job's
own run and leaves its status to Azure ML.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import PurePosixPath
from typing import Any

from landcover.config import Config, RunConfig
from landcover.errors import ConfigError, TrainingError, first_line
from landcover.fileio import atomic_write_text
from landcover.redaction import redact, redact_tree
from landcover.training.callbacks import Callback
from landcover.training.curves import CURVES
from landcover.training.mlflowtls import check_tracking_tls
from landcover.training.records import EpochRecord
from landcover.training.runfolder import RunFolder

log = logging.getLogger("landcover")

TRACKING_URI = "MLFLOW_TRACKING_URI"
"""The environment variable that names the tracking server (and turns logging on)."""

RUN_FILE = "mlflow.json"
"""The run folder's record of its MLflow run (id, experiment, tracking server)."""

EXPERIMENT = "landcover"
"""The experiment of runs when the environment names none."""

SCALARS = ("train_loss", "lr", "samples_per_s", "epoch_s", "val_miou", "val_accuracy")
"""The record's values logged as metrics under their own names (``val_iou/{class}`` besides)."""

PARAM_LENGTH = 6000
"""Longest parameter value MLflow stores (longer ones are cut)."""

BATCH = 100
"""Parameters per request (MLflow's limit)."""

_UNSAFE = re.compile(r"[^\w./\- ]")

INSTALL = "pip install 'landcover[mlflow]' (mlflow-skinny)"

TELEMETRY_OFF = "MLFLOW_DISABLE_TELEMETRY"
"""MLflow's documented switch of its usage telemetry, set to ``true`` unless already set."""


def mlflow_enabled(run: RunConfig, environ: Mapping[str, str] | None = None) -> bool:
    """Whether a run logs to MLflow.

    Args:
        run: The run settings (``run.mlflow``).
        environ: The environment (default: ``os.environ``).

    Returns:
        True when ``run.mlflow`` is set or ``MLFLOW_TRACKING_URI`` is not empty.
    """
    environ = os.environ if environ is None else environ
    return run.mlflow or bool(environ.get(TRACKING_URI))


def mlflow_client_class() -> type:
    """MLflow's tracking client class, imported now, with MLflow's usage telemetry off.

    MLflow 3 sends usage telemetry from a thread, and that thread removes a variable from
    ``os.environ`` (``_MLFLOW_TELEMETRY_SESSION_ID``) while training goes on; training nodes
    often have no internet for it either. ``MLFLOW_DISABLE_TELEMETRY`` is set to ``true``
    before MLflow is imported (and inherited by the workers), unless the environment sets it.

    Returns:
        ``mlflow.tracking.MlflowClient``.

    Raises:
        ConfigError: If MLflow is not installed, or would send credentials over plain http
            to another machine (:mod:`~landcover.training.mlflowtls`).
    """
    os.environ.setdefault(TELEMETRY_OFF, "true")
    uri = os.environ.get(TRACKING_URI, "")
    why = f"{TRACKING_URI} is set" if uri else "run.mlflow is true"
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise ConfigError(
            f"MLflow logging is on ({why}) but MLflow is not installed: {INSTALL}"
        ) from None
    check_tracking_tls(uri)
    return MlflowClient


def flat_params(tree: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A configuration as MLflow parameters: dotted keys, values as text, credentials removed.

    Args:
        tree: The configuration as plain data (:meth:`~landcover.config.Config.to_dict`).
        prefix: Put before every key (the section's dotted key and a dot).

    Returns:
        One entry per leaf (a list is one value, as JSON; strings as they are, other values
        as JSON), each redacted and at most :data:`PARAM_LENGTH` characters.
    """
    params: dict[str, str] = {}
    _flatten(redact_tree(dict(tree)), prefix, params)
    return params


def _flatten(tree: Mapping[str, Any], prefix: str, params: dict[str, str]) -> None:
    for key, value in tree.items():
        name = mlflow_key(f"{prefix}{key}")
        if isinstance(value, Mapping) and value:
            _flatten(value, f"{name}.", params)
        else:
            text = value if isinstance(value, str) else json.dumps(value)
            params[name] = text[:PARAM_LENGTH]


def mlflow_key(name: str) -> str:
    """A parameter, metric or tag name MLflow accepts (other characters become ``_``).

    Args:
        name: The name, e.g. ``val_iou/tree_canopy``.

    Returns:
        The name with only letters, digits, ``_``, ``-``, ``.``, ``/`` and spaces.
    """
    return _UNSAFE.sub("_", name)


def epoch_metrics(record: EpochRecord) -> dict[str, float]:
    """An epoch's values logged as MLflow metrics.

    Args:
        record: The epoch's record.

    Returns:
        Metric names to values (a value the epoch does not have is left out).
    """
    values = record.to_dict()
    metrics = {key: float(values[key]) for key in SCALARS if values[key] is not None}
    for name, iou in (record.val_iou or {}).items():
        if iou is not None:
            metrics[mlflow_key(f"val_iou/{name}")] = float(iou)
    return metrics


class MlflowLog(Callback):
    """Logs the run to MLflow (rank 0 only: the trainer gives it no other rank).

    Args:
        folder: The run folder (it keeps the MLflow run's id in ``mlflow.json``).
    """

    def __init__(self, folder: RunFolder) -> None:
        self.folder = folder
        self.client: Any = None
        self.run_id: str | None = None
        self.owned = False  # the run's status is ours to set (not an Azure ML job's run)

    def on_train_start(self, config: Config) -> None:
        """Starts (or continues) the MLflow run and logs the parameters.

        A run opened here and not logged to is ended ``FAILED`` before the error is raised:
        none is left ``RUNNING``.

        Args:
            config: The run's effective configuration.

        Raises:
            ConfigError: If MLflow is not installed.
            TrainingError: If the tracking server cannot be reached or refuses the run.
        """
        client_class = mlflow_client_class()
        try:
            self.client = client_class()
            self.run_id, self.owned, existing = self._open_run()
            self._log_params(flat_params(config.to_dict()), existing)
        except Exception as exc:
            self.on_train_end(False)  # the run opened, if any, ends FAILED
            self.run_id = None  # and nothing more is logged to it
            uri = redact(os.environ.get(TRACKING_URI) or "MLflow's default store")
            raise TrainingError(
                f"MLflow: cannot log the run to {uri}: {first_line(exc, 300, typed=True)}"
            ) from None
        record = {
            "run_id": self.run_id,
            "tracking_uri": redact(self.client.tracking_uri),
            "run_name": self._name(),
        }
        atomic_write_text(self.folder.path(RUN_FILE), json.dumps(record, indent=2) + "\n")
        self.folder.publish(RUN_FILE)
        log.info("logging to MLflow run %s (%s)", self.run_id, record["tracking_uri"])

    def on_checkpoint(self, path: str, best: bool) -> None:
        """Tags the best checkpoint's path.

        Args:
            path: The checkpoint file.
            best: Whether it is the best checkpoint.
        """
        if best:
            self._safely("tag the best checkpoint", self._tag, "best_checkpoint", redact(path))

    def on_epoch_end(self, record: EpochRecord) -> None:
        """Logs the epoch's metrics and the curves (an MLflow failure is a warning).

        Args:
            record: The epoch's record.
        """
        self._safely("log the epoch's metrics", self._log_epoch, record)
        curves = self.folder.path(CURVES)
        if curves.is_file():
            self._safely("log curves.png", self._artifact, str(curves))

    def on_train_end(self, completed: bool) -> None:
        """Ends the MLflow run: ``FINISHED``, or ``FAILED`` when training failed.

        Args:
            completed: Whether every epoch was trained.
        """
        if self.owned and self.run_id is not None:
            status = "FINISHED" if completed else "FAILED"
            self._safely("end the run", self.client.set_terminated, self.run_id, status)

    def _name(self) -> str:
        url = redact(self.folder.url)  # a SAS query never names the run
        return PurePosixPath(url).name or url

    def _stored_run(self) -> str | None:
        """The run id ``mlflow.json`` keeps for this tracking server, if any."""
        self.folder.pull(RUN_FILE)
        path = self.folder.path(RUN_FILE)
        try:
            stored = json.loads(path.read_text()) if path.is_file() else {}
        except (OSError, ValueError):
            return None
        if not isinstance(stored, dict):
            return None
        if stored.get("tracking_uri") != redact(self.client.tracking_uri):
            return None  # another tracking server: its runs are not there
        run_id = stored.get("run_id")
        return run_id if isinstance(run_id, str) else None

    def _open_run(self) -> tuple[str, bool, dict[str, str]]:
        """The run to log to: the Azure ML job's, the run folder's, or a new one.

        Returns:
            Its id, whether its status is ours to set, and the parameters it has.
        """
        job_run = os.environ.get("MLFLOW_RUN_ID")
        if job_run:
            return job_run, False, dict(self.client.get_run(job_run).data.params)
        stored = self._stored_run()
        if stored is not None:
            try:
                run = self.client.get_run(stored)
            except Exception as exc:  # deleted, or the store was emptied
                why = first_line(exc, 200)
                log.info("MLflow run %s not found (%s): starting a new one", stored, why)
            else:
                if run.info.lifecycle_stage == "active":
                    self.client.update_run(stored, status="RUNNING")
                    log.info("continuing MLflow run %s of this run folder", stored)
                    return stored, True, dict(run.data.params)
        tags = {"landcover.run_folder": redact(self.folder.url)}
        run = self.client.create_run(self._experiment(), tags=tags, run_name=self._name())
        return run.info.run_id, True, {}

    def _experiment(self) -> str:
        """The id of the environment's experiment (created when it does not exist)."""
        if os.environ.get("MLFLOW_EXPERIMENT_ID"):
            return os.environ["MLFLOW_EXPERIMENT_ID"]
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or EXPERIMENT
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        from mlflow.exceptions import MlflowException

        try:
            return self.client.create_experiment(name)
        except MlflowException as exc:  # another training made it since: two started together
            found = self.client.get_experiment_by_name(name)
            if exc.error_code != "RESOURCE_ALREADY_EXISTS" or found is None:
                raise
            return found.experiment_id

    def _log_params(self, params: dict[str, str], existing: dict[str, str]) -> None:
        """Logs the parameters the run lacks; a changed one becomes a ``changed.`` tag."""
        from mlflow.entities import Param, RunTag

        new = [Param(k, v) for k, v in params.items() if k not in existing]
        changed = [RunTag(f"changed.{k}", v) for k, v in params.items() if existing.get(k, v) != v]
        for i in range(0, len(new), BATCH):
            self.client.log_batch(self.run_id, params=new[i : i + BATCH])
        for i in range(0, len(changed), BATCH):
            self.client.log_batch(self.run_id, tags=changed[i : i + BATCH])
        if changed:
            names = ", ".join(t.key.removeprefix("changed.") for t in changed)
            log.info("MLflow keeps the first values of the changed settings %s", names)

    def _log_epoch(self, record: EpochRecord) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [
            Metric(key, value, now, record.epoch) for key, value in epoch_metrics(record).items()
        ]
        self.client.log_batch(self.run_id, metrics=metrics)
        if record.best:
            self._tag("best_epoch", str(record.epoch))

    def _tag(self, key: str, value: str) -> None:
        self.client.set_tag(self.run_id, key, value)

    def _artifact(self, path: str) -> None:
        self.client.log_artifact(self.run_id, path)

    def _safely(self, what: str, action: Callable[..., Any], *args: Any) -> None:
        """Runs an MLflow call; a failure is logged as a warning and training goes on."""
        if self.client is None or self.run_id is None:
            return
        try:
            action(*args)
        except Exception as exc:
            log.warning("MLflow: could not %s: %s", what, first_line(exc, 300, typed=True))
