"""Azure ML (CLI v2) files for a distributed training or predict job: compute, environment, job.

``landcover cluster azureml`` writes into one folder:

- ``compute.yml``: an AmlCompute cluster of the cluster.json VM size and priority, scaling
  from ``minNodeCount`` to the nodes the run needs;
- ``environment.yml`` and its Docker build context ``environment/``: a Dockerfile on an
  Azure ML GPU base image, ``conda.yml`` with Python, landcover's dependencies (read from
  ``pyproject.toml``) and ``mlflow-skinny`` / ``azureml-mlflow`` (Azure ML shows a job's
  metrics through MLflow), and a copy of landcover's source, installed with ``pip install``;
- ``job.yml``: a command job running ``landcover train`` on every GPU
  (:mod:`~landcover.cluster.azureml.train`), or ``landcover predict``
  (:mod:`~landcover.cluster.azureml.predict`): inputs ``tiles`` (a folder, or a
  list/manifest file) and ``checkpoint``, output ``maps``.

No file holds a secret: data are read with the job's identity (a managed identity or the
submitting user), nodes are reached with an SSH public key.

Modules: :mod:`~landcover.cluster.azureml.settings` (Azure ML-only settings: schemas, base
image, distributions, MLflow packages), :mod:`~landcover.cluster.azureml.inputs` (data
locations as job inputs), :mod:`~landcover.cluster.azureml.documents` (compute, environment
and conda YAML), :mod:`~landcover.cluster.azureml.environment` (the Docker build context),
:mod:`~landcover.cluster.azureml.writer` (what both job kinds share: job.yml, nodeSetup,
writing the folder), and one writer per job kind.
"""

from landcover.cluster.azureml.inputs import data_input_path
from landcover.cluster.azureml.predict import PredictJob, write_predict_job
from landcover.cluster.azureml.settings import DISTRIBUTION, MLFLOW_PACKAGES, InputMode
from landcover.cluster.azureml.train import TrainJob, write_train_job
from landcover.cluster.azureml.writer import AzureMLFiles, JobTarget

__all__ = [
    "DISTRIBUTION",
    "MLFLOW_PACKAGES",
    "AzureMLFiles",
    "InputMode",
    "JobTarget",
    "PredictJob",
    "TrainJob",
    "data_input_path",
    "write_predict_job",
    "write_train_job",
]
