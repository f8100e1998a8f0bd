"""What the train and predict writers share: the target, job.yml, nodeSetup, the files written.

A job kind's writer (:mod:`~landcover.cluster.azureml.train`,
:mod:`~landcover.cluster.azureml.predict`) checks its own options, builds its inputs and
command as :class:`JobParts`, and hands them to :func:`write_job_files`, which writes
``compute.yml``, ``environment.yml`` with its build context and ``job.yml`` into the
:class:`JobTarget`'s folder.
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from landcover.cluster.azureml.documents import compute_spec, dump_yaml, environment_spec
from landcover.cluster.azureml.environment import project_root, write_build_context
from landcover.cluster.azureml.settings import (
    BASE_IMAGE,
    DISTRIBUTION,
    ENVIRONMENT_NAME,
    EXPERIMENT_NAME,
    SCHEMA_ROOT,
    InputMode,
)
from landcover.cluster.plan import ClusterPlan
from landcover.cluster.secrets import find_secret
from landcover.cluster.setupscripts import setup_scripts
from landcover.cluster.spec import ClusterError, ClusterSpec, check_setup_scripts
from landcover.diskerrors import check_output_folder
from landcover.registry import ENGINES


@dataclass(frozen=True)
class JobTarget:
    """Where a job runs and where its files go: what every job kind needs.

    Attributes:
        cluster: cluster.json.
        plan: The run's plan (from :func:`~landcover.cluster.plan.make_plan`).
        out: The folder for the files (created; files in it are replaced).
        cluster_file: cluster.json's path (nodeSetup scripts are relative to it).
        input_mode: ``ro_mount`` (read on demand; each worker reads only its share) or
            ``download`` (copied to every node first), for folder inputs.
        run_path: Where the job's output folder lives (``azureml://datastores/NAME/paths/
            PATH``); rerunning the job with the same path resumes. ``None``: a new folder per
            job.
        base_image: The Docker base image.
    """

    cluster: ClusterSpec
    plan: ClusterPlan
    out: Path
    cluster_file: Path = Path("cluster.json")
    input_mode: InputMode = "ro_mount"
    run_path: str | None = None
    base_image: str = BASE_IMAGE


@dataclass(frozen=True)
class JobParts:
    """What a job kind contributes to the files: its command, inputs, output and notes.

    Attributes:
        engine: The engine its workers run on (the distribution; an install script for the
            image).
        command: The landcover command every process runs (nodeSetup commands go first).
        inputs: job.yml's ``inputs``.
        output: The name of the job's output folder (``run``, ``maps``).
        display_name: job.yml's ``display_name``.
        description: job.yml's ``description``.
        notes: Lines about the inputs, worth reading before submitting.
        documents: YAML files written beside job.yml, by file name, as data (an input's
            ``path`` may name one).
    """

    engine: str
    command: str
    inputs: dict[str, Any]
    output: str
    display_name: str
    description: str
    notes: list[str] = field(default_factory=list)
    documents: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AzureMLFiles:
    """What ``landcover cluster azureml`` wrote.

    Attributes:
        out: The folder.
        compute: ``compute.yml``.
        environment: ``environment.yml``.
        job: ``job.yml``.
        build_context: The environment's Docker build context folder.
        commands: The ``az ml`` commands that create the compute, environment and job.
        notes: Lines worth reading before submitting.
        warnings: Lines about problems (retired size, more processes than workers, ...).
    """

    out: Path
    compute: Path
    environment: Path
    job: Path
    build_context: Path
    commands: list[str]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def source_root(target: JobTarget) -> Path:
    """Checks what every job needs before anything is written, and finds the source to ship.

    Args:
        target: The job's target.

    Returns:
        landcover's source checkout (copied into the image).

    Raises:
        ClusterError: If the run path carries a secret, or landcover does not run from a
            source checkout.
    """
    if target.run_path and find_secret({"run": target.run_path}):
        raise ClusterError("--run-path carries a secret; give the URI without it")
    root = project_root()
    if root is None:
        raise ClusterError(
            "landcover's source tree (pyproject.toml beside the package) was not found: run "
            "`landcover cluster azureml` from a source checkout installed with pip install -e"
        )
    return root


def job_spec(target: JobTarget, parts: JobParts, command: str, code: str | None) -> dict[str, Any]:
    """The command job (``job.yml``).

    Args:
        target: The cluster (the compute's name), the plan (nodes, processes per node) and
            the run path (the output's ``path``, if given).
        parts: The job kind's inputs, output, engine, names.
        command: The command each process runs.
        code: A local folder uploaded as the job's working directory, if any.

    Returns:
        The YAML document as data.
    """
    output: dict[str, Any] = {"type": "uri_folder", "mode": "rw_mount"}
    if target.run_path:
        output["path"] = target.run_path
    spec: dict[str, Any] = {
        "$schema": f"{SCHEMA_ROOT}/commandJob.schema.json",
        "type": "command",
        "experiment_name": EXPERIMENT_NAME,
        "display_name": parts.display_name,
        "description": parts.description,
    }
    if code:
        spec["code"] = code
    spec |= {
        "command": command,
        "environment": f"azureml:{ENVIRONMENT_NAME}@latest",
        "compute": f"azureml:{target.cluster.name}",
        "resources": {"instance_count": target.plan.nodes},
        "distribution": {
            "type": DISTRIBUTION[ENGINES[parts.engine].launcher],
            "process_count_per_instance": target.plan.processes_per_node,
        },
    }
    if parts.inputs:
        spec["inputs"] = parts.inputs
    spec["outputs"] = {parts.output: output}
    return spec


def setup_commands(cluster: ClusterSpec, cluster_dir: Path, code_dir: Path) -> list[str]:
    """The nodeSetup commands; the script files they run are copied into the job's code folder.

    A script goes where the command names it, relative to the code folder (the job's working
    folder), so ``bash setup.sh`` or ``source env/vars.sh && ./check.sh`` run as written; a
    bare script path runs as ``bash NAME``.

    Args:
        cluster: cluster.json.
        cluster_dir: cluster.json's folder (script paths are relative to it).
        code_dir: The job's code folder (created when a script is copied).

    Returns:
        The commands, in order.

    Raises:
        ClusterError: A nodeSetup script holds what looks like a credential, or a command runs
            a script that is missing or outside cluster.json's folder.
    """
    for script in check_setup_scripts(cluster, cluster_dir):
        target = code_dir / script.named
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(script.path, target)
    commands = []
    for item in cluster.node_setup:
        bare = setup_scripts(item, cluster_dir) if " " not in item.strip() else []
        commands.append(f"bash {shlex.quote(bare[0].named)}" if bare else item)
    return commands


def write_job_files(target: JobTarget, parts: JobParts, root: Path) -> AzureMLFiles:
    """Writes compute.yml, environment.yml (with its build context) and job.yml.

    Call it after every check of the job's options, so that a refused job leaves no folder.

    Args:
        target: Where the job runs and where the files go.
        parts: The job kind's command, inputs, output and notes.
        root: landcover's source checkout (from :func:`source_root`).

    Returns:
        The files written, the ``az ml`` commands to run, notes and warnings.

    Raises:
        ClusterError: A nodeSetup script holds what looks like a credential.
        OutputError: If the folder cannot be written.
    """
    out, plan = Path(target.out), target.plan
    notes, warnings = list(parts.notes), list(plan.warnings)
    check_output_folder(out)
    for name, document in parts.documents.items():
        dump_yaml(out / name, document)
    code_dir = out / "code"
    shutil.rmtree(code_dir, ignore_errors=True)
    setup = setup_commands(target.cluster, Path(target.cluster_file).resolve().parent, code_dir)
    if setup:
        notes.append(
            "nodeSetup runs in every worker process first (Azure ML starts the command once "
            "per process): keep it idempotent"
        )
    context = out / "environment"
    warnings += write_build_context(context, root, parts.engine, target.base_image)
    files = AzureMLFiles(
        out=out,
        compute=out / "compute.yml",
        environment=out / "environment.yml",
        job=out / "job.yml",
        build_context=context,
        commands=[],
        notes=notes,
        warnings=warnings,
    )
    dump_yaml(files.compute, compute_spec(target.cluster, plan))
    dump_yaml(files.environment, environment_spec())
    command = " && ".join([*setup, parts.command])
    code = "code" if code_dir.is_dir() else None
    dump_yaml(files.job, job_spec(target, parts, command, code))

    started = plan.nodes * plan.processes_per_node
    if started != plan.workers:
        warnings.append(
            f"Azure ML starts the same number of processes on every node: the job runs "
            f"{started} workers ({plan.nodes} x {plan.processes_per_node}), not "
            f"{plan.workers}; use --workers {started} to plan for what runs"
        )
    notes.append(
        "the job reads data with its identity: give your user (or the compute's managed "
        "identity) the Storage Blob Data Reader role on the storage account"
    )
    files.commands.extend(
        f"az ml {what} create -f {path}"
        for what, path in (
            ("compute", files.compute),
            ("environment", files.environment),
            ("job", files.job),
        )
    )
    return files
