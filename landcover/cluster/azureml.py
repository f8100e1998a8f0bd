"""Azure ML (CLI v2) files for a distributed training or predict job: compute, environment, job.

``landcover cluster azureml`` writes into one folder:

- ``compute.yml``: an AmlCompute cluster of the cluster.json VM size and priority, scaling
  from ``minNodeCount`` to the nodes the run needs;
- ``environment.yml`` and its Docker build context ``environment/``: a Dockerfile on an
  Azure ML GPU base image, ``conda.yml`` with Python and landcover's dependencies (read from
  ``pyproject.toml``) and a copy of landcover's source, installed with ``pip install``;
- ``job.yml``: a command job running ``landcover train`` on every GPU. With the ``torch``
  engine Azure ML's ``pytorch`` distribution starts one process per GPU and sets
  ``RANK``/``WORLD_SIZE``/``MASTER_ADDR``, and landcover runs as that one worker (it starts
  no launcher of its own); with ``horovod``, the ``mpi`` distribution starts the processes.
  With ``--job predict`` it runs ``landcover predict`` instead, one worker per GPU under the
  same ``pytorch`` distribution: inputs ``tiles`` (a folder, or a list/manifest file) and
  ``checkpoint``, output ``maps`` (with ``--run-path``, a rerun maps only what is missing).

No file holds a secret: data are read with the job's identity (a managed identity or the
submitting user), nodes are reached with an SSH public key.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

import landcover
from landcover import storage
from landcover.cluster.plan import ClusterPlan
from landcover.cluster.spec import (
    NO_SECRETS_HINT,
    ClusterError,
    ClusterSpec,
    find_secret,
    secret_in_text,
)
from landcover.config import read_config_tree
from landcover.diskerrors import check_output_folder
from landcover.fileio import atomic_write_text
from landcover.redaction import redact_tree
from landcover.registry import DEFAULT_ENGINE, ENGINES, REGION_ENGINE, Launcher
from landcover.storage.credentials import ENV_ACCOUNT_NAME
from landcover.storage.urls import protocol

DISTRIBUTION: dict[Launcher, str] = {"torchrun": "pytorch", "mpi": "mpi"}
"""Azure ML's ``distribution.type`` for each way an engine's workers are started."""
InputMode = Literal["ro_mount", "download"]

SCHEMA_ROOT = "https://azuremlschemas.azureedge.net/latest"
BASE_IMAGE = "mcr.microsoft.com/azureml/openmpi5.0-cuda12.6-ubuntu24.04"
PYTHON_VERSION = "3.11"
ENVIRONMENT_NAME = "landcover"
EXPERIMENT_NAME = "landcover"

_PASS_THROUGH_SCHEMES = ("azureml", "https", "http", "wasbs", "wasb", "abfss", "adl")
_SOURCE_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".*")


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


def project_root() -> Path | None:
    """The source checkout landcover runs from (the folder with ``pyproject.toml``), if any."""
    root = Path(landcover.__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else None


def project_dependencies(root: Path | None = None) -> list[str]:
    """The runtime dependencies of landcover, as pip requirement strings.

    Args:
        root: The source checkout; its ``pyproject.toml`` is read. ``None`` falls back to
            the installed package's metadata.

    Returns:
        The ``[project] dependencies`` (no optional extras).
    """
    if root is not None and sys.version_info >= (3, 11):
        import tomllib

        with open(root / "pyproject.toml", "rb") as handle:
            return list(tomllib.load(handle)["project"]["dependencies"])
    requires = importlib.metadata.requires("landcover") or []
    return [r for r in requires if "extra ==" not in r]


def compute_spec(cluster: ClusterSpec, plan: ClusterPlan) -> dict[str, Any]:
    """The AmlCompute cluster (``compute.yml``).

    Args:
        cluster: cluster.json.
        plan: The run's plan (nodes needed).

    Returns:
        The YAML document as data.
    """
    spec: dict[str, Any] = {
        "$schema": f"{SCHEMA_ROOT}/amlCompute.schema.json",
        "type": "amlcompute",
        "name": cluster.name,
        "size": cluster.vm_size,
        "location": cluster.location,
        "tier": "low_priority" if cluster.vm_priority == "lowpriority" else "dedicated",
        "min_instances": cluster.min_node_count,
        "max_instances": max(plan.nodes, cluster.target_node_count),
    }
    if cluster.ssh_public_key:
        spec["ssh_public_access_enabled"] = True
        spec["ssh_settings"] = {
            "admin_username": "azureuser",
            "ssh_key_value": cluster.ssh_public_key,
        }
    return spec


def environment_spec(name: str = ENVIRONMENT_NAME) -> dict[str, Any]:
    """The environment (``environment.yml``), built from the ``environment/`` context."""
    return {
        "$schema": f"{SCHEMA_ROOT}/environment.schema.json",
        "name": name,
        "description": "landcover training: Python, landcover's dependencies and landcover",
        "build": {"path": "environment", "dockerfile_path": "Dockerfile"},
        "os_type": "linux",
    }


def conda_spec(dependencies: list[str]) -> dict[str, Any]:
    """The conda environment file (``environment/conda.yml``)."""
    return {
        "name": "landcover",
        "channels": ["conda-forge", "nodefaults"],
        "dependencies": [f"python={PYTHON_VERSION}", "pip", {"pip": dependencies}],
    }


def dockerfile(base_image: str, horovod_script: bool) -> str:
    """The environment's Dockerfile.

    Args:
        base_image: The Azure ML base image (CUDA, Open MPI, conda, InfiniBand libraries).
        horovod_script: Whether the build context holds ``install-horovod.sh``.

    Returns:
        The Dockerfile's text.
    """
    lines = [
        "# landcover training image, written by `landcover cluster azureml`.",
        f"FROM {base_image}",
        "",
        f"# Python {PYTHON_VERSION} and landcover's dependencies (from pyproject.toml).",
        "COPY conda.yml /tmp/landcover/conda.yml",
        "RUN conda env create --prefix /opt/landcover --file /tmp/landcover/conda.yml \\",
        "    && conda clean --all --yes",
        "ENV PATH=/opt/landcover/bin:$PATH",
        "",
        "# landcover itself; its dependencies are installed above.",
        "COPY src /tmp/landcover/src",
        "RUN pip install --no-cache-dir --no-deps /tmp/landcover/src && rm -rf /tmp/landcover",
    ]
    if horovod_script:
        lines += [
            "",
            "# Horovod, built against the installed torch with the image's Open MPI as its",
            "# controller, for the job's `mpi` distribution (see scripts/install-horovod.sh).",
            "COPY install-horovod.sh /tmp/install-horovod.sh",
            "RUN LANDCOVER_PYTHON=/opt/landcover/bin/python HOROVOD_WITH_MPI=1 \\",
            "    bash /tmp/install-horovod.sh && rm /tmp/install-horovod.sh",
        ]
    return "\n".join(lines) + "\n"


def data_input_path(
    data: str, environ: dict[str, str] | None = None, option: str = "--data", file: bool = False
) -> str:
    """Turns a data location into a path Azure ML can mount or download.

    ``azureml://``, ``https://``, ``wasbs://`` and ``abfss://CONTAINER@ACCOUNT...`` URIs pass
    through; landcover's ``az://CONTAINER/PATH`` (and ``abfs://``) become
    ``https://ACCOUNT.blob.core.windows.net/CONTAINER/PATH`` with the account from the URL or
    ``AZURE_STORAGE_ACCOUNT_NAME``; a local folder (or file) is made absolute (``az ml job
    create`` uploads it).

    Args:
        data: A URI or local folder (or file).
        environ: The environment (defaults to ``os.environ``), for the account name.
        option: The command-line option it came from, for messages.
        file: Whether the input is a file (a checkpoint, a list) rather than a folder.

    Returns:
        The input's ``path``.

    Raises:
        ClusterError: If the URI carries a secret, names no storage account, or the local
            folder (file) does not exist.
    """
    env = os.environ if environ is None else environ
    found = find_secret({"data": data})
    if found or re.match(r"(?i)^https?://[^?]*\?", data):
        raise ClusterError(
            f"{option} {data.split('?')[0]}: the URI carries a query (a SAS token?); give the "
            "URI without it: the job reads the data with its managed identity or your login"
        )
    scheme = protocol(data)
    if scheme in _PASS_THROUGH_SCHEMES:
        return data
    if scheme in ("az", "abfs"):
        location = storage.parse(data)
        if location.host and ".dfs." in location.host:
            return f"abfss://{location.container}@{location.host}/{location.blob}".rstrip("/")
        account = location.account or env.get(ENV_ACCOUNT_NAME, "").strip()
        if not account:
            raise ClusterError(
                f"{option} {data}: names no storage account; set {ENV_ACCOUNT_NAME} or give "
                "https://ACCOUNT.blob.core.windows.net/CONTAINER/PATH or "
                "azureml://datastores/NAME/paths/PATH"
            )
        return f"https://{account}.blob.core.windows.net/{location.path}"
    if scheme not in (None, "file"):
        raise ClusterError(
            f"{option} {data}: Azure ML cannot read {scheme}:// URIs; give azureml://, https:// "
            "or az:// blob URIs, or a local path"
        )
    local = Path(storage.parse(data).path).resolve()
    if not (local.is_file() if file else local.is_dir()):
        raise ClusterError(
            f"{data}: {'file' if file else 'data folder'} not found here; for data already in "
            f"Azure give {option} as an azureml://, https:// or az:// URI"
        )
    return str(local)


def train_command(
    epochs: int,
    engine: str,
    with_config: bool,
    with_data: bool,
    setup: list[str],
) -> str:
    """The job's command: optional setup commands, then ``landcover train``.

    The command has no ``--workers``: every process Azure ML starts is one worker.
    """
    parts = ["landcover", "train"]
    if with_config:
        parts += ["--config", "${{inputs.config}}"]
    if with_data:
        parts += ["--data", "${{inputs.data}}"]
    parts += ["--out", "${{outputs.run}}", "--epochs", str(epochs)]
    if engine != DEFAULT_ENGINE:
        parts += ["--engine", engine]
    return " && ".join([*setup, " ".join(parts)])


def predict_command(setup: list[str]) -> str:
    """The command of a predict job: optional setup commands, then ``landcover predict``.

    Every process Azure ML starts is one worker; the workers claim the tiles through the
    job's rendezvous store, and a rerun into the same maps folder skips complete tiles.
    """
    parts = "landcover predict ${{inputs.tiles}} --checkpoint ${{inputs.checkpoint}}"
    return " && ".join([*setup, parts + " --out ${{outputs.maps}}"])


@dataclass(frozen=True)
class PredictJob:
    """What a predict job maps.

    Attributes:
        tiles: A folder of tiles, or a list file (``.txt``) or manifest (``.csv``): URI or
            local path.
        checkpoint: The checkpoint: URI or local file.
    """

    tiles: str
    checkpoint: str

    @property
    def tiles_are_listed(self) -> bool:
        """Whether ``tiles`` is a list file or manifest rather than a folder."""
        return self.tiles.lower().endswith((".txt", ".csv"))

    def inputs(self, input_mode: InputMode) -> tuple[dict[str, Any], list[str]]:
        """The job's ``tiles`` and ``checkpoint`` inputs, and notes about them.

        Args:
            input_mode: How the tiles folder reaches the nodes.

        Returns:
            ``(inputs, notes)``.

        Raises:
            ClusterError: If a location cannot be used by Azure ML.
        """
        listed = self.tiles_are_listed
        inputs = {
            "tiles": {
                "type": "uri_file" if listed else "uri_folder",
                "path": data_input_path(self.tiles, option="--tiles", file=listed),
                "mode": "download" if listed else input_mode,
            },
            "checkpoint": {
                "type": "uri_file",
                "path": data_input_path(self.checkpoint, option="--checkpoint", file=True),
                "mode": "download",
            },
        }
        notes = [
            f"az ml job create uploads the local {name} {inputs[name]['path']}"
            for name, given in (("tiles", self.tiles), ("checkpoint", self.checkpoint))
            if not storage.is_remote(given)
        ]
        if listed:
            notes.append(
                "the list is downloaded on its own: its entries must be blob URLs (read with "
                "the job's identity) or absolute paths on the nodes"
            )
        return inputs, notes


def job_spec(
    cluster: ClusterSpec,
    plan: ClusterPlan,
    command: str,
    inputs: dict[str, Any],
    engine: str,
    run_path: str | None = None,
    code: str | None = None,
    job: Literal["train", "predict"] = "train",
) -> dict[str, Any]:
    """The command job (``job.yml``).

    Args:
        cluster: cluster.json (the compute's name).
        plan: The run's plan (nodes, processes per node).
        command: The command each process runs.
        inputs: The job's inputs (``data``, ``config``; ``tiles``, ``checkpoint``).
        engine: ``torch`` (``pytorch`` distribution) or ``horovod`` (``mpi``).
        run_path: Where the output folder lives: the run folder (train) or the maps
            (predict); a rerun with the same path resumes. Default: a new folder per job.
        code: A local folder uploaded as the job's working directory, if any.
        job: ``train`` (output ``run``) or ``predict`` (output ``maps``).

    Returns:
        The YAML document as data.
    """
    output: dict[str, Any] = {"type": "uri_folder", "mode": "rw_mount"}
    if run_path:
        output["path"] = run_path
    workers = plan.nodes * plan.processes_per_node
    spec: dict[str, Any] = {
        "$schema": f"{SCHEMA_ROOT}/commandJob.schema.json",
        "type": "command",
        "experiment_name": EXPERIMENT_NAME,
        "display_name": (
            f"landcover-{'predict-' if job == 'predict' else ''}{plan.workers}w-"
            f"{cluster.vm_size.lower()}"
        ),
        "description": (
            f"landcover {job} on {plan.nodes} x {cluster.vm_size} ({workers} workers"
            + (f", {engine} engine)" if job == "train" else ")")
        ),
    }
    if code:
        spec["code"] = code
    spec |= {
        "command": command,
        "environment": f"azureml:{ENVIRONMENT_NAME}@latest",
        "compute": f"azureml:{cluster.name}",
        "resources": {"instance_count": plan.nodes},
        "distribution": {
            "type": DISTRIBUTION[ENGINES[engine].launcher],
            "process_count_per_instance": plan.processes_per_node,
        },
        "inputs": inputs,
        "outputs": {"run" if job == "train" else "maps": output},
    }
    if not inputs:
        del spec["inputs"]
    return spec


def _dump(path: Path, data: Any) -> None:
    text = yaml.safe_dump(
        redact_tree(data), sort_keys=False, default_flow_style=False, width=10_000
    )
    atomic_write_text(path, text)


def _write_source(root: Path, dest: Path) -> None:
    """Copies landcover's source (package, pyproject.toml, README) to ``dest``, replacing it."""
    staging = dest.with_name(f".{dest.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shutil.copytree(root / "landcover", staging / "landcover", ignore=_SOURCE_IGNORE)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (root / name).is_file():
            shutil.copy2(root / name, staging / name)
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(staging, dest)


def _setup_commands(
    cluster: ClusterSpec, cluster_dir: Path, code_dir: Path
) -> tuple[list[str], bool]:
    """The nodeSetup commands; script files are copied into the job's code folder.

    Raises:
        ClusterError: A nodeSetup script holds what looks like a credential.
    """
    commands, scripts = [], False
    for item in cluster.node_setup:
        script = (cluster_dir / item).resolve() if " " not in item.strip() else None
        if script is not None and script.is_file():
            what = secret_in_text(script.read_text(errors="replace"))
            if what:
                raise ClusterError(f"nodeSetup script {script} holds {what}; {NO_SECRETS_HINT}")
            code_dir.mkdir(parents=True, exist_ok=True)
            shutil.copy2(script, code_dir / script.name)
            commands.append(f"bash {script.name}")
            scripts = True
        else:
            commands.append(item)
    return commands, scripts


def write_azureml(
    cluster: ClusterSpec,
    plan: ClusterPlan,
    epochs: int | None,
    out: str | Path,
    engine: str = DEFAULT_ENGINE,
    config_path: str | Path | None = None,
    data: str | None = None,
    input_mode: InputMode = "ro_mount",
    run_path: str | None = None,
    cluster_file: str | Path = "cluster.json",
    base_image: str = BASE_IMAGE,
    predict: PredictJob | None = None,
) -> AzureMLFiles:
    """Writes compute.yml, environment.yml (with its build context) and job.yml.

    The job trains (``landcover train``), or with ``predict`` maps tiles (``landcover
    predict``, one worker per GPU, the same ``pytorch`` distribution).

    Args:
        cluster: cluster.json.
        plan: The run's plan (from :func:`~landcover.cluster.plan.make_plan`).
        epochs: Total epochs to train to (training jobs).
        out: Output folder (created; files in it are replaced).
        engine: ``torch`` or ``horovod``.
        config_path: A landcover config file, passed to the job as an input.
        data: The training data: ``azureml://``, ``https://``, ``az://`` or a local folder;
            ``None`` trains on the built-in synthetic sample.
        input_mode: ``ro_mount`` (read on demand; each worker reads only its share) or
            ``download`` (copied to every node first).
        run_path: Where the outputs live (``azureml://datastores/NAME/paths/PATH``): the run
            folder, or the maps of a predict job; rerunning the job with the same path
            resumes (from the last checkpoint; with the tiles not yet mapped).
        cluster_file: cluster.json's path (nodeSetup scripts are relative to it).
        base_image: The Docker base image.
        predict: The tiles and checkpoint of a predict job (``None``: a training job).

    Returns:
        The files written and the ``az ml`` commands to run.

    Raises:
        ClusterError: If the data location cannot be used by Azure ML, the source tree is
            not found, ``epochs`` is below 1 (training), or a predict job asks for Horovod.
    """
    if predict is None and (epochs is None or epochs < 1):
        raise ClusterError(f"--epochs must be at least 1, not {epochs}")
    if predict is not None and not ENGINES[engine].maps_regions:
        raise ClusterError(
            f"--job predict runs on the {REGION_ENGINE} engine "
            f"({DISTRIBUTION[ENGINES[REGION_ENGINE].launcher]} distribution)"
        )
    if run_path and find_secret({"run": run_path}):
        raise ClusterError("--run-path carries a secret; give the URI without it")
    root = project_root()
    if root is None:
        raise ClusterError(
            "landcover's source tree (pyproject.toml beside the package) was not found: run "
            "`landcover cluster azureml` from a source checkout installed with pip install -e"
        )
    notes: list[str] = []
    warnings = list(plan.warnings)

    inputs: dict[str, Any] = {}
    if predict is not None:
        inputs, input_notes = predict.inputs(input_mode)
        notes += input_notes
        if not run_path:
            notes.append(
                "without --run-path each job writes a new maps folder; with --run-path "
                "azureml://datastores/NAME/paths/PATH a rerun maps only the tiles not yet done"
            )
    elif data is not None:
        inputs["data"] = {
            "type": "uri_folder",
            "path": data_input_path(data),
            "mode": input_mode,
        }
        if not storage.is_remote(data):
            notes.append(f"az ml job create uploads the local data folder {inputs['data']['path']}")
    else:
        notes.append("no --data and no data.root: the job trains on the built-in synthetic sample")
    merged = None
    if config_path is not None and predict is None:
        config_file = Path(config_path).resolve()
        if not config_file.is_file():
            raise ClusterError(f"{config_path}: config file not found")
        read = read_config_tree(config_file)
        merged = read.tree if read.includes else None
        inputs["config"] = {"type": "uri_file", "path": str(config_file), "mode": "download"}

    out = Path(out)
    check_output_folder(out)  # after every check above, so a refused job leaves no folder
    if merged is not None:  # the job downloads one file: merge the included ones into it
        config_file = out / "config.yaml"
        _dump(config_file, merged)
        inputs["config"]["path"] = str(config_file)
        notes.append(f"{config_path} and the files it includes are merged into {config_file}")
    code_dir = out / "code"
    shutil.rmtree(code_dir, ignore_errors=True)
    setup, has_code = _setup_commands(cluster, Path(cluster_file).resolve().parent, code_dir)
    if setup:
        notes.append(
            "nodeSetup runs in every worker process first (Azure ML starts the command once "
            "per process): keep it idempotent"
        )
    if predict is not None:
        command = predict_command(setup)
    else:
        assert epochs is not None
        command = train_command(epochs, engine, config_path is not None, data is not None, setup)

    context = out / "environment"
    context.mkdir(parents=True, exist_ok=True)
    _write_source(root, context / "src")
    _dump(context / "conda.yml", conda_spec(project_dependencies(root)))
    script = ENGINES[engine].install_script
    horovod = script is not None and (root / script).is_file()
    if horovod:
        shutil.copy2(root / script, context / "install-horovod.sh")
    elif (context / "install-horovod.sh").exists():
        (context / "install-horovod.sh").unlink()
    if script is not None and not horovod:
        warnings.append(
            f"the {engine} engine needs Horovod in the image, and {script} was "
            f"not found: add its install step to {context / 'Dockerfile'}"
        )
    atomic_write_text(context / "Dockerfile", dockerfile(base_image, horovod))

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
    _dump(files.compute, compute_spec(cluster, plan))
    _dump(files.environment, environment_spec())
    job = job_spec(
        cluster,
        plan,
        command,
        inputs,
        engine,
        run_path,
        code="code" if has_code else None,
        job="train" if predict is None else "predict",
    )
    _dump(files.job, job)

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
        [
            f"az ml compute create -f {files.compute}",
            f"az ml environment create -f {files.environment}",
            f"az ml job create -f {files.job}",
        ]
    )
    return files
