"""The YAML files that do not depend on the job: compute, environment, conda; and their writing.

Every YAML file is built as plain data (dicts and lists) and written by :func:`dump_yaml`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from landcover.cluster.azureml.settings import (
    ENVIRONMENT_NAME,
    PYTHON_VERSION,
    SCHEMA_ROOT,
)
from landcover.cluster.plan import ClusterPlan
from landcover.cluster.spec import ClusterSpec
from landcover.fileio import atomic_write_text
from landcover.redaction import redact_tree


def dump_yaml(path: Path, data: Any) -> None:
    """Writes data as a YAML file (atomically), keys in their order, secrets redacted.

    Args:
        path: The file.
        data: Plain data: dicts, lists, strings, numbers.
    """
    text = yaml.safe_dump(
        redact_tree(data), sort_keys=False, default_flow_style=False, width=10_000
    )
    atomic_write_text(path, text)


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
    """The environment (``environment.yml``), built from the ``environment/`` context.

    Args:
        name: The environment's name in the workspace.

    Returns:
        The YAML document as data.
    """
    return {
        "$schema": f"{SCHEMA_ROOT}/environment.schema.json",
        "name": name,
        "description": "landcover training: Python, landcover's dependencies and landcover",
        "build": {"path": "environment", "dockerfile_path": "Dockerfile"},
        "os_type": "linux",
    }


def conda_spec(packages: list[str]) -> dict[str, Any]:
    """The conda environment file (``environment/conda.yml``).

    Args:
        packages: The pip requirements installed into it.

    Returns:
        The YAML document as data.
    """
    return {
        "name": "landcover",
        "channels": ["conda-forge", "nodefaults"],
        "dependencies": [f"python={PYTHON_VERSION}", "pip", {"pip": packages}],
    }
