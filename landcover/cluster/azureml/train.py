"""The training job: ``landcover train`` on every GPU, one worker per process Azure ML starts.

With an engine started by ``torchrun`` (the default), Azure ML's ``pytorch`` distribution
starts one process per GPU and sets ``RANK``/``WORLD_SIZE``/``MASTER_ADDR``, and landcover
runs as that one worker (it starts no launcher of its own); with an engine started by MPI,
the ``mpi`` distribution starts the processes
(:data:`~landcover.cluster.azureml.settings.DISTRIBUTION`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from landcover.cluster.azureml.inputs import data_input_path, input_spec, upload_note
from landcover.cluster.azureml.writer import (
    AzureMLFiles,
    JobParts,
    JobTarget,
    source_root,
    write_job_files,
)
from landcover.cluster.spec import ClusterError
from landcover.config import read_config_tree
from landcover.registry import DEFAULT_ENGINE

MERGED_CONFIG = "config.yaml"
"""The file beside job.yml that a config and the files it includes are merged into."""


@dataclass(frozen=True)
class TrainJob:
    """What a training job trains.

    Attributes:
        epochs: Total epochs to train to.
        engine: The data-parallel engine (a name in :data:`~landcover.registry.ENGINES`).
        config_path: A landcover config file, passed to the job as an input.
        data: The training data: ``azureml://``, ``https://``, ``az://`` or a local folder;
            ``None`` trains on the config's ``data.root`` or the built-in synthetic sample.
    """

    epochs: int
    engine: str = DEFAULT_ENGINE
    config_path: Path | None = None
    data: str | None = None


def train_command(job: TrainJob) -> str:
    """The ``landcover train`` command each process runs.

    The command has no ``--workers``: every process Azure ML starts is one worker.

    Args:
        job: The training job.

    Returns:
        The command line, with the job's inputs and output as ``${{...}}`` references.
    """
    parts = ["landcover", "train"]
    if job.config_path is not None:
        parts += ["--config", "${{inputs.config}}"]
    if job.data is not None:
        parts += ["--data", "${{inputs.data}}"]
    parts += ["--out", "${{outputs.run}}", "--epochs", str(job.epochs)]
    if job.engine != DEFAULT_ENGINE:
        parts += ["--engine", job.engine]
    return " ".join(parts)


def _config_input(job: TrainJob, out: Path) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """The ``config`` input, the merged config to write beside job.yml, and notes.

    Raises:
        ClusterError: If the config file does not exist.
    """
    if job.config_path is None:
        return {}, {}, []
    config_file = Path(job.config_path).resolve()
    if not config_file.is_file():
        raise ClusterError(f"{job.config_path}: config file not found")
    read = read_config_tree(config_file)
    if not read.includes:
        return {"config": input_spec("uri_file", str(config_file), "download")}, {}, []
    # the job downloads one file: merge the included ones into it
    merged = out / MERGED_CONFIG
    note = f"{job.config_path} and the files it includes are merged into {merged}"
    inputs = {"config": input_spec("uri_file", str(merged), "download")}
    return inputs, {MERGED_CONFIG: read.tree}, [note]


def write_train_job(target: JobTarget, job: TrainJob) -> AzureMLFiles:
    """Writes the files of a training job: compute.yml, environment.yml and job.yml.

    Args:
        target: Where the job runs and where the files go; ``run_path`` is the run folder
            (a rerun there resumes from the last checkpoint).
        job: What it trains.

    Returns:
        The files written and the ``az ml`` commands to run.

    Raises:
        ClusterError: If ``epochs`` is below 1, the data location cannot be used by Azure
            ML, the config file is missing, or the source tree is not found.
    """
    if job.epochs < 1:
        raise ClusterError(f"--epochs must be at least 1, not {job.epochs}")
    root = source_root(target)
    inputs: dict[str, Any] = {}
    notes: list[str] = []
    if job.data is not None:
        path = data_input_path(job.data)
        inputs["data"] = input_spec("uri_folder", path, target.input_mode)
        notes += upload_note("data folder", job.data, path)
    else:
        notes.append("no --data and no data.root: the job trains on the built-in synthetic sample")
    config_inputs, documents, config_notes = _config_input(job, Path(target.out))
    plan = target.plan
    parts = JobParts(
        engine=job.engine,
        command=train_command(job),
        inputs=inputs | config_inputs,
        output="run",
        display_name=f"landcover-{plan.workers}w-{target.cluster.vm_size.lower()}",
        description=(
            f"landcover train on {plan.nodes} x {target.cluster.vm_size} "
            f"({plan.nodes * plan.processes_per_node} workers, {job.engine} engine)"
        ),
        notes=notes + config_notes,
        documents=documents,
    )
    return write_job_files(target, parts, root)
