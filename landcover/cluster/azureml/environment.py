"""The job environment's Docker build context: Dockerfile, ``conda.yml`` and landcover's source.

The image is an Azure ML GPU base image with a conda environment holding Python, landcover's
dependencies (read from ``pyproject.toml``) and the MLflow packages Azure ML's metrics need
(:data:`~landcover.cluster.azureml.settings.MLFLOW_PACKAGES`, at the versions landcover's
``mlflow`` extra pins); landcover itself is installed
from a copy of its source with ``pip install --no-deps``. An engine with an install script
(:attr:`~landcover.registry.EngineSpec.install_script`) gets it run in the image.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import sys
from pathlib import Path

import landcover
from landcover.cluster.azureml.documents import conda_spec, dump_yaml
from landcover.cluster.azureml.settings import (
    DISTRIBUTION,
    MLFLOW_EXTRA,
    MLFLOW_PACKAGES,
    PYTHON_VERSION,
)
from landcover.fileio import atomic_write_text
from landcover.registry import ENGINES, EngineSpec

_SOURCE_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".*")


def project_root() -> Path | None:
    """The source checkout landcover runs from (the folder with ``pyproject.toml``), if any.

    Returns:
        The folder, or ``None`` for an installed (non-editable) package.
    """
    root = Path(landcover.__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else None


def project_dependencies(root: Path | None = None, extra: str | None = None) -> list[str]:
    """The runtime dependencies of landcover (or of one of its extras), as pip requirements.

    Args:
        root: The source checkout; its ``pyproject.toml`` is read. ``None`` falls back to
            the installed package's metadata.
        extra: An optional extra (``[project.optional-dependencies]``) to read instead of
            the dependencies.

    Returns:
        The ``[project] dependencies`` (no optional extras), or the extra's requirements
        (none when landcover has no such extra).
    """
    if root is not None and sys.version_info >= (3, 11):
        import tomllib

        with open(root / "pyproject.toml", "rb") as handle:
            project = tomllib.load(handle)["project"]
        if extra is None:
            return list(project["dependencies"])
        return list(project.get("optional-dependencies", {}).get(extra, []))
    requires = importlib.metadata.requires("landcover") or []
    if extra is None:
        return [r for r in requires if "extra ==" not in r]
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    return [r.split(";")[0].strip() for r in requires if marker.search(r)]


def requirement_name(requirement: str) -> str:
    """A pip requirement's distribution name, normalized.

    Args:
        requirement: E.g. ``Foo_Bar[extra]>=1; python_version >= "3.10"``.

    Returns:
        E.g. ``foo-bar``.
    """
    name = re.split(r"[\s<>=!~;\[(@]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def environment_packages(dependencies: list[str], mlflow: list[str] | None = None) -> list[str]:
    """The pip requirements of the job environment: landcover's, then the MLflow packages.

    Args:
        dependencies: landcover's dependencies (:func:`project_dependencies`).
        mlflow: The requirements of landcover's MLflow extra
            (:data:`~landcover.cluster.azureml.settings.MLFLOW_EXTRA`), whose versions win
            over the bare names of :data:`~landcover.cluster.azureml.settings.MLFLOW_PACKAGES`.

    Returns:
        ``dependencies``, then each requirement of ``mlflow`` and each of
        :data:`~landcover.cluster.azureml.settings.MLFLOW_PACKAGES` that no earlier one names.
    """
    packages = list(dependencies)
    named = {requirement_name(p) for p in packages}
    for requirement in [*(mlflow or []), *MLFLOW_PACKAGES]:
        if requirement_name(requirement) not in named:
            packages.append(requirement)
            named.add(requirement_name(requirement))
    return packages


def dockerfile(base_image: str, engine: EngineSpec | None = None) -> str:
    """The environment's Dockerfile.

    Args:
        base_image: The Azure ML base image (CUDA, Open MPI, conda, InfiniBand libraries).
        engine: An engine whose install script the build context holds (it is run in the
            image), or ``None``.

    Returns:
        The Dockerfile's text.
    """
    lines = [
        "# landcover training image, written by `landcover cluster azureml`.",
        f"FROM {base_image}",
        "",
        f"# Python {PYTHON_VERSION} and landcover's dependencies (from pyproject.toml), with",
        f"# {' and '.join(MLFLOW_PACKAGES)} for the metrics Azure ML shows (through MLflow).",
        "COPY conda.yml /tmp/landcover/conda.yml",
        "RUN conda env create --prefix /opt/landcover --file /tmp/landcover/conda.yml \\",
        "    && conda clean --all --yes",
        "ENV PATH=/opt/landcover/bin:$PATH",
        "",
        "# landcover itself; its dependencies are installed above.",
        "COPY src /tmp/landcover/src",
        "RUN pip install --no-cache-dir --no-deps /tmp/landcover/src && rm -rf /tmp/landcover",
    ]
    if engine is not None and engine.install_script is not None:
        script = Path(engine.install_script).name
        lines += [
            "",
            f"# {engine.display}, built against the installed torch with the image's Open MPI "
            "as its",
            f"# controller, for the job's `{DISTRIBUTION[engine.launcher]}` distribution (see "
            f"{engine.install_script}).",
            f"COPY {script} /tmp/{script}",
            "RUN LANDCOVER_PYTHON=/opt/landcover/bin/python HOROVOD_WITH_MPI=1 \\",
            f"    bash /tmp/{script} && rm /tmp/{script}",
        ]
    return "\n".join(lines) + "\n"


def copy_source(root: Path, dest: Path) -> None:
    """Copies landcover's source (package, pyproject.toml, README) to ``dest``, replacing it.

    Args:
        root: The source checkout.
        dest: The folder to create (or replace).
    """
    staging = dest.with_name(f".{dest.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shutil.copytree(root / "landcover", staging / "landcover", ignore=_SOURCE_IGNORE)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (root / name).is_file():
            shutil.copy2(root / name, staging / name)
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(staging, dest)


def _copy_install_script(root: Path, context: Path, engine: EngineSpec) -> bool:
    """Puts the engine's install script (if any) in the context and removes other engines'.

    Returns:
        Whether the context holds the engine's install script.
    """
    script = Path(engine.install_script) if engine.install_script else None
    keep = script.name if script is not None and (root / script).is_file() else None
    for other in {Path(e.install_script).name for e in ENGINES.values() if e.install_script}:
        if other != keep:
            (context / other).unlink(missing_ok=True)
    if script is not None and keep is not None:
        shutil.copy2(root / script, context / keep)
    return keep is not None


def write_build_context(context: Path, root: Path, engine: str, base_image: str) -> list[str]:
    """Writes the environment's build context: source copy, conda.yml, Dockerfile.

    Args:
        context: The folder (created; files in it are replaced).
        root: landcover's source checkout.
        engine: The job's engine (its install script, if any, is run in the image).
        base_image: The Docker base image.

    Returns:
        Warnings (an install script that was not found).
    """
    spec = ENGINES[engine]
    context.mkdir(parents=True, exist_ok=True)
    copy_source(root, context / "src")
    packages = environment_packages(
        project_dependencies(root), project_dependencies(root, MLFLOW_EXTRA)
    )
    dump_yaml(context / "conda.yml", conda_spec(packages))
    installed = _copy_install_script(root, context, spec)
    warnings = []
    if spec.install_script is not None and not installed:
        warnings.append(
            f"the {engine} engine needs {spec.display} in the image, and {spec.install_script} "
            f"was not found: add its install step to {context / 'Dockerfile'}"
        )
    atomic_write_text(context / "Dockerfile", dockerfile(base_image, spec if installed else None))
    return warnings
