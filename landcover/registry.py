"""The data-parallel engines by name, and what each offers: declared once, here.

Config validation (``run.engine``), the CLI's ``--engine`` options and their help, the
launchers' checks and the cluster writers read the engines from this table; the engines
themselves (:mod:`landcover.parallel.engines`) take their name and abilities from it. Nothing
else in the package names an engine (``tests/test_structure.py`` checks it).

This module is plain data (no torch, no Horovod), so that the configuration, which every
other package imports, can read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Launcher = Literal["torchrun", "mpi"]
"""How an engine's worker processes are started: one process per GPU with torch's ``RANK`` /
``WORLD_SIZE`` variables (torchrun, Azure ML's ``pytorch`` distribution), or by MPI
(``horovodrun``, ``mpirun``, Azure ML's ``mpi`` distribution)."""


@dataclass(frozen=True)
class EngineSpec:
    """One data-parallel engine: its name and the options it accepts.

    Attributes:
        name: The ``run.engine`` / ``--engine`` value.
        display: The engine's name in messages.
        summary: One line for ``--help``.
        launcher: How its workers are started (see :data:`Launcher`).
        compressions: The ``run.grad_compression`` values it offers.
        restarts: Whether a failed worker group can be restarted in place
            (``run.max_restarts``).
        multi_node_launcher: Whether ``--nnodes`` runs several nodes under landcover's own
            launcher.
        maps_regions: Whether ``landcover predict`` can run its workers on it.
        install_script: A script a job environment runs to install it (relative to the
            repository), or ``None`` when the package's dependencies suffice.
    """

    name: str
    display: str
    summary: str
    launcher: Launcher
    compressions: tuple[str, ...] = ("none",)
    restarts: bool = False
    multi_node_launcher: bool = False
    maps_regions: bool = False
    install_script: str | None = None

    def problem(self, grad_compression: str, max_restarts: int, nnodes: int) -> str | None:
        """The first run option this engine cannot honour, as one line that says what to do.

        Args:
            grad_compression: ``run.grad_compression``.
            max_restarts: ``run.max_restarts``.
            nnodes: ``run.nnodes``.

        Returns:
            The message, or ``None`` when the engine honours every option.
        """
        if grad_compression not in self.compressions:
            return (
                f"--grad-compression {grad_compression} is not available with --engine "
                f"{self.name}; {self.display} offers {' or '.join(self.compressions)}"
            )
        restarter = next((e for e in ENGINES.values() if e.restarts), None)
        if max_restarts and not self.restarts and restarter is not None:
            return (
                f"run.max_restarts needs the {restarter.name} engine ({restarter.launcher}'s "
                f"elastic agent); with --engine {self.name}, rerun the same command to resume "
                "from the last checkpoint"
            )
        multi = next((e for e in ENGINES.values() if e.multi_node_launcher), None)
        if nnodes > 1 and not self.multi_node_launcher and multi is not None:
            return (
                f"--nnodes is for the {multi.name} engine; for a multi-node {self.name} job, run "
                f"'landcover train --engine {self.name} ...' under horovodrun -H host1:K,host2:K "
                "(or mpirun)"
            )
        return None


ENGINES: dict[str, EngineSpec] = {
    spec.name: spec
    for spec in (
        EngineSpec(
            name="torch",
            display="torch DDP",
            summary="DDP under torchrun's elastic agent",
            launcher="torchrun",
            compressions=("none", "fp16", "powersgd"),
            restarts=True,
            multi_node_launcher=True,
            maps_regions=True,
        ),
        EngineSpec(
            name="horovod",
            display="Horovod",
            summary="hvd.DistributedOptimizer under horovodrun",
            launcher="mpi",
            compressions=("none", "fp16"),
            install_script="scripts/install-horovod.sh",
        ),
    )
}
"""Every engine, by name."""

DEFAULT_ENGINE = "torch"
"""The engine a run uses unless it names another."""

REGION_ENGINE = next(spec.name for spec in ENGINES.values() if spec.maps_regions)
"""The engine a predict job's workers run on."""


def engine_help() -> str:
    """The engines for ``--engine``'s help: ``torch (DDP under ...) or horovod (...)``.

    Returns:
        One line.
    """
    return " or ".join(f"{spec.name} ({spec.summary})" for spec in ENGINES.values())


def check_engine_name(name: str) -> str:
    """Checks an engine name.

    Args:
        name: The name given.

    Returns:
        The name.

    Raises:
        ValueError: If no engine has that name (the message lists the engines).
    """
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}; choose {' or '.join(ENGINES)}")
    return name
