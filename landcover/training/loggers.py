"""The loggers of a training run's folder, as the trainer's callbacks.

Rank 0 writes ``metrics.jsonl`` (:mod:`~landcover.training.runlog`), TensorBoard's event files
(:mod:`~landcover.training.tensorboard_log`) and ``curves.png``
(:mod:`~landcover.training.curves`), warns of unlearned classes
(:mod:`~landcover.training.health`), reports progress (:mod:`~landcover.training.progress`)
and, when enabled, logs to MLflow (:mod:`~landcover.training.mlflow_log`); the other ranks log
nothing. A new logger is a :class:`~landcover.training.callbacks.Callback` added here.
"""

from __future__ import annotations

from landcover.config import Config
from landcover.training.callbacks import Callback, registered_callbacks
from landcover.training.curves import CurvesPlot
from landcover.training.health import HealthCheck
from landcover.training.mlflow_log import MlflowLog, mlflow_enabled
from landcover.training.progress import Progress
from landcover.training.runfolder import RunFolder
from landcover.training.runlog import MetricsFile
from landcover.training.tensorboard_log import TensorBoardLog


def run_callbacks(
    config: Config, folder: RunFolder, resume_epoch: int, is_main: bool
) -> list[Callback]:
    """The loggers of a worker, in the order they run.

    ``curves.png`` is drawn from ``metrics.jsonl`` and MLflow uploads it, so each comes after
    the callback that writes what it reads.

    Args:
        config: The run's effective configuration.
        folder: The run folder.
        resume_epoch: Completed epochs of the checkpoint resumed from (0 for a fresh run).
        is_main: Whether the worker is rank 0 (the only one that logs).

    Returns:
        The callbacks (none for a rank other than 0).
    """
    if not is_main:
        return []
    callbacks: list[Callback] = [
        MetricsFile(folder, resume_epoch),
        TensorBoardLog(folder, resume_epoch),
        CurvesPlot(folder),
        HealthCheck(),
        Progress(config.run.log_every_s, config.optim.epochs),
    ]
    if mlflow_enabled(config.run):
        callbacks.append(MlflowLog(folder))
    return callbacks + registered_callbacks(config, folder)
