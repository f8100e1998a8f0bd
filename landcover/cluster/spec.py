"""``cluster.json``: which VM size, how many nodes, which priority and region.

The file is validated by pydantic. It must never hold a secret: a field whose name looks like
a password, key or token (``adminPassword``, ``accountKey``, ``connectionString``,
``sasToken``, ``clientSecret``, ...) or a value that looks like one (a private key, a
connection string, a SAS URL) is refused. Nodes are reached with an SSH public key
(``sshPublicKey``) and storage with a managed identity or ``az login``.

Example::

    {
      "vmSize": "Standard_ND96isr_H100_v5",
      "targetNodeCount": 4,
      "vmPriority": "dedicated",
      "location": "eastus",
      "minNodeCount": 0,
      "name": "landcover-gpu",
      "nodeSetup": ["nvidia-smi"],
      "sshPublicKey": "ssh-ed25519 AAAA... me@laptop"
    }
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from landcover.cluster.secrets import (
    NO_SECRETS_HINT,
    PUBLIC_KEY_PREFIXES,
    find_secret,
    secret_in_text,
)
from landcover.cluster.setupscripts import SetupScript, setup_scripts
from landcover.cluster.vmsizes import VmSize, close_matches, find_vm_size
from landcover.errors import ConfigError

DEFAULT_CLUSTER_FILE = "cluster.json"
DEFAULT_COMPUTE_NAME = "landcover-gpu"

# Azure ML compute cluster names: 2 to 16 letters, digits and '-', starting with a letter.
_COMPUTE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{1,15}$")


class ClusterError(ConfigError):
    """``cluster.json`` is missing, unreadable, invalid or holds a secret."""


class ClusterSpec(BaseModel):
    """The cluster a distributed run needs.

    Attributes:
        vm_size: ``vmSize``: the Azure VM size (see :mod:`landcover.cluster.vmsizes`), stored
            as Azure spells it.
        target_node_count: ``targetNodeCount``: nodes the cluster may scale to (>= 1).
        vm_priority: ``vmPriority``: ``dedicated`` or ``lowpriority`` (pre-emptible).
        location: ``location``: the Azure region, e.g. ``eastus``.
        min_node_count: ``minNodeCount``: nodes kept running when idle (default 0).
        node_setup: ``nodeSetup``: shell commands (or a script path) each worker runs
            before training; a single string is one command.
        name: ``name``: the compute cluster's name (2-16 letters, digits, '-').
        ssh_public_key: ``sshPublicKey``: an SSH public key for logging in to nodes.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    vm_size: str = Field(alias="vmSize")
    target_node_count: int = Field(alias="targetNodeCount", ge=1)
    vm_priority: Literal["dedicated", "lowpriority"] = Field(alias="vmPriority")
    location: str = Field(min_length=1)
    min_node_count: int = Field(0, alias="minNodeCount", ge=0)
    node_setup: list[str] = Field(default_factory=list, alias="nodeSetup")
    name: str = DEFAULT_COMPUTE_NAME
    ssh_public_key: str | None = Field(None, alias="sshPublicKey")

    @model_validator(mode="before")
    @classmethod
    def _no_secrets(cls, data: Any) -> Any:
        found = find_secret(data)
        if found:
            raise ValueError(f"{found}; {NO_SECRETS_HINT}")
        return data

    @field_validator("vm_size", mode="before")
    @classmethod
    def _known_size(cls, value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError("must be a VM size name such as Standard_NC96ads_A100_v4")
        vm = find_vm_size(value)
        if vm is None:
            matches = close_matches(value)
            hint = (
                f"close matches: {', '.join(matches)}"
                if matches
                else "see landcover/cluster/vmsizes.py"
            )
            raise ValueError(f"unknown VM size {value!r} ({hint})")
        return vm.name

    @field_validator("vm_priority", mode="before")
    @classmethod
    def _priority(cls, value: Any) -> str:
        norm = re.sub(r"[^a-z]", "", str(value).lower())
        if norm not in ("dedicated", "lowpriority"):
            raise ValueError(f"must be dedicated or lowpriority, not {value!r}")
        return norm

    @field_validator("node_setup", mode="before")
    @classmethod
    def _setup_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("name")
    @classmethod
    def _compute_name(cls, value: str) -> str:
        if not _COMPUTE_NAME.match(value):
            raise ValueError(
                f"{value!r} is not a valid compute name (2-16 letters, digits and '-', "
                "starting with a letter)"
            )
        return value

    @field_validator("ssh_public_key")
    @classmethod
    def _public_key_only(cls, value: str | None) -> str | None:
        if value is None:
            return None
        text = value.strip()
        if "PRIVATE KEY" in text:
            raise ValueError(f"holds a private key; {NO_SECRETS_HINT}")
        if not text.startswith(PUBLIC_KEY_PREFIXES) or "\n" in text:
            raise ValueError(
                "must be one SSH public key line (ssh-ed25519 AAAA... or ssh-rsa AAAA..., "
                "the content of a .pub file)"
            )
        return text

    @model_validator(mode="after")
    def _min_below_target(self) -> ClusterSpec:
        if self.min_node_count > self.target_node_count:
            raise ValueError(
                f"minNodeCount {self.min_node_count} is above targetNodeCount "
                f"{self.target_node_count}"
            )
        return self

    @property
    def vm(self) -> VmSize:
        """The VM size's table entry."""
        vm = find_vm_size(self.vm_size)
        assert vm is not None  # checked by the validator
        return vm


_ALIASES = {name: (info.alias or name) for name, info in ClusterSpec.model_fields.items()}


def _format_error(err: ValidationError, source: str) -> str:
    errors = err.errors()
    missing = [str(e["loc"][0]) for e in errors if e["type"] == "missing" and e["loc"]]
    if missing:
        fields = ", ".join(repr(m) for m in missing)
        return f"{source}: missing required field{'s' if len(missing) > 1 else ''} {fields}"
    first = errors[0]
    where = ".".join(_ALIASES.get(str(p), str(p)) for p in first["loc"])
    if first["type"] == "extra_forbidden":
        known = ", ".join(_ALIASES.values())
        return f"{source}: unknown field {where!r} (cluster.json fields: {known})"
    message = first["msg"].removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{source}: {where + ': ' if where else ''}{message}{more}"


def parse_cluster(tree: Any, source: str = DEFAULT_CLUSTER_FILE) -> ClusterSpec:
    """Validates parsed ``cluster.json`` data.

    Args:
        tree: The parsed JSON.
        source: Where it came from, for messages.

    Returns:
        The validated cluster.

    Raises:
        ClusterError: If the data is not a valid cluster description or holds a secret.
    """
    if not isinstance(tree, dict):
        raise ClusterError(f"{source}: must be a JSON object with vmSize, targetNodeCount, ...")
    try:
        return ClusterSpec.model_validate(tree)
    except ValidationError as err:
        raise ClusterError(_format_error(err, source)) from None


def load_cluster(path: str | Path = DEFAULT_CLUSTER_FILE) -> ClusterSpec:
    """Reads and validates a ``cluster.json`` file and the scripts its nodeSetup runs.

    Args:
        path: The file.

    Returns:
        The validated cluster.

    Raises:
        ClusterError: If the file is missing, unreadable, not JSON, invalid or holds a secret,
            or a script its nodeSetup runs holds one (or is missing).
    """
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise ClusterError(f"{path}: cluster file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ClusterError(
            f"{path}: cannot read the cluster file ({exc.__class__.__name__})"
        ) from None
    try:
        tree = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ClusterError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    cluster = parse_cluster(tree, str(path))
    check_setup_scripts(cluster, Path(path).resolve().parent)  # every command that reads it
    return cluster


def check_setup_scripts(cluster: ClusterSpec, cluster_dir: Path) -> list[SetupScript]:
    """Finds every local script cluster.json's nodeSetup runs and scans each for secrets.

    Args:
        cluster: cluster.json.
        cluster_dir: cluster.json's folder.

    Returns:
        The scripts, each once.

    Raises:
        ClusterError: A script holds what looks like a credential, or a command runs a
            script that is missing or outside cluster.json's folder.
    """
    scripts: dict[str, SetupScript] = {}
    for item in cluster.node_setup:
        try:
            found = setup_scripts(item, cluster_dir)
        except ValueError as exc:
            raise ClusterError(str(exc)) from None
        for script in found:
            try:
                text = script.path.read_text(errors="replace")
            except OSError as exc:
                raise ClusterError(
                    f"nodeSetup script {script.path}: cannot read it ({exc.strerror})"
                ) from None
            what = secret_in_text(text)
            if what:
                raise ClusterError(
                    f"nodeSetup script {script.path} holds {what}; {NO_SECRETS_HINT}"
                )
            scripts.setdefault(script.named, script)
    return list(scripts.values())
