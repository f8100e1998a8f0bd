"""Azure ML-only settings: schemas, base image, names, distributions and the MLflow packages.

Everything that is particular to Azure ML lives here (and in the rest of
:mod:`landcover.cluster.azureml`); the engines themselves, and how their workers are started,
are declared in :mod:`landcover.registry`.
"""

from __future__ import annotations

from typing import Literal

from landcover.registry import Launcher

DISTRIBUTION: dict[Launcher, str] = {"torchrun": "pytorch", "mpi": "mpi"}
"""Azure ML's ``distribution.type`` for each way an engine's workers are started."""

InputMode = Literal["ro_mount", "download"]
"""How a folder input reaches the nodes: mounted read-only (read on demand, each worker reads
only its share) or downloaded to every node before the command starts."""

SCHEMA_ROOT = "https://azuremlschemas.azureedge.net/latest"
"""Where the CLI v2 YAML schemas (``$schema``) live."""

BASE_IMAGE = "mcr.microsoft.com/azureml/openmpi5.0-cuda12.6-ubuntu24.04"
"""The environment's Docker base image: CUDA, Open MPI, conda and InfiniBand libraries."""

PYTHON_VERSION = "3.11"
"""The environment's Python."""

ENVIRONMENT_NAME = "landcover"
"""The environment's name in the workspace (jobs use its latest version)."""

EXPERIMENT_NAME = "landcover"
"""The experiment the jobs are filed under."""

MLFLOW_PACKAGES = ("mlflow-skinny", "azureml-mlflow")
"""Installed in the job environment beside landcover's dependencies: Azure ML shows a job's
metrics through MLflow (it sets ``MLFLOW_TRACKING_URI`` in the job), which the trainer logs
to when that variable is set; ``azureml-mlflow`` lets MLflow reach the workspace's tracking
server with the job's identity."""

MLFLOW_EXTRA = "mlflow"
"""landcover's optional extra for MLflow logging: where it pins an MLflow package, the job
environment installs that version."""
