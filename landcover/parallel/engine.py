"""The engine interface: everything that differs between data-parallel implementations.

An :class:`Engine` joins and leaves the job, wraps the model (SyncBatchNorm, DDP and its
communication hooks, local SGD), wraps the optimizer, gives every worker rank 0's starting
state and starts the worker processes. The trainer, the cluster tools and the CLI talk to an
engine only through this interface (:func:`~landcover.parallel.engines.engine_for`), so that
no code outside this package asks which engine it runs on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from landcover.config import Config, RunConfig
from landcover.errors import ConfigError
from landcover.parallel.communication import LocalSGD
from landcover.parallel.env import DistEnv


@dataclass
class Replica:
    """A worker's model as the engine prepared it.

    Attributes:
        model: The bare model (what checkpoints save and validation runs).
        module: What the training step calls (a DDP wrapper, or the bare model).
        local_sgd: Periodic model averaging, when workers step alone between averages.
    """

    model: nn.Module
    module: nn.Module
    local_sgd: LocalSGD | None = None

    @property
    def syncs_gradients(self) -> bool:
        """Whether gradients are all-reduced every optimizer step (not under local SGD)."""
        return self.local_sgd is None


class Engine(ABC):
    """One data-parallel implementation.

    Attributes:
        name: The ``run.engine`` value.
        display: The engine's name in messages.
        azureml_distribution: The Azure ML job's ``distribution.type``.
        install_script: A script the job runs before training (relative to the repository),
            or ``None`` when the environment's packages suffice.
        maps_regions: Whether ``landcover predict`` can run its workers on this engine.
        restarts: Whether failed worker groups can be restarted in place.
        multi_node_launcher: Whether ``--nnodes`` runs several nodes under landcover's launcher.
        compressions: The ``run.grad_compression`` values the engine offers.
    """

    name: ClassVar[str]
    display: ClassVar[str]
    azureml_distribution: ClassVar[str]
    install_script: ClassVar[str | None] = None
    maps_regions: ClassVar[bool] = False
    restarts: ClassVar[bool] = False
    multi_node_launcher: ClassVar[bool] = False
    compressions: ClassVar[tuple[str, ...]] = ("none",)

    def check(self, run: RunConfig) -> None:
        """Refuses options this engine cannot honour, with one line that says what to do.

        Args:
            run: The run settings.

        Raises:
            ConfigError: If an option does not fit the engine.
        """
        if run.grad_compression not in self.compressions:
            raise ConfigError(
                f"--grad-compression {run.grad_compression} is not available with --engine "
                f"{self.name}; {self.display} offers {' or '.join(self.compressions)}"
            )
        if run.max_restarts and not self.restarts:
            raise ConfigError(
                f"run.max_restarts needs the torch engine (torchrun's elastic agent); with "
                f"--engine {self.name}, rerun the same command to resume from the last checkpoint"
            )
        if run.nnodes > 1 and not self.multi_node_launcher:
            raise ConfigError(
                f"--nnodes is for the torch engine; for a multi-node {self.name} job, run "
                f"'landcover train --engine {self.name} ...' under horovodrun -H host1:K,host2:K "
                "(or mpirun)"
            )

    @abstractmethod
    def backend(self, run: RunConfig, device: torch.device) -> str:
        """The collective backend's name, for the log.

        Args:
            run: The run settings.
            device: The worker's device.

        Returns:
            For example ``nccl``, ``gloo`` or ``horovod``.
        """

    @abstractmethod
    def join(self, env: DistEnv, run: RunConfig, device: torch.device) -> None:
        """Joins the job's collectives (a no-op for a job of one).

        Args:
            env: The worker's place.
            run: The run settings.
            device: The worker's device (NCCL binds the group to it).

        Raises:
            LandcoverError: If the job cannot be joined.
        """

    @abstractmethod
    def leave(self) -> None:
        """Leaves the job's collectives, if joined."""

    @abstractmethod
    def replicate(
        self, model: nn.Module, env: DistEnv, run: RunConfig, device: torch.device
    ) -> Replica:
        """Moves the model to its device and wraps it for data-parallel training.

        Args:
            model: The bare model, on the CPU.
            env: The worker's place.
            run: The run settings (communication options, channels_last).
            device: The worker's device.

        Returns:
            The replica.
        """

    def distribute_optimizer(
        self, optimizer: torch.optim.Optimizer, replica: Replica, accumulate: int, run: RunConfig
    ) -> torch.optim.Optimizer:
        """Wraps the optimizer when the engine averages gradients there (Horovod).

        Args:
            optimizer: The worker's optimizer.
            replica: The worker's replica.
            accumulate: Backward passes per optimizer step.
            run: The run settings.

        Returns:
            The optimizer to step (the same one for engines that average in the model).
        """
        return optimizer

    def broadcast_initial(  # noqa: B027 (a no-op unless the engine needs it)
        self, model: nn.Module, optimizer: torch.optim.Optimizer, resumed: bool
    ) -> None:
        """Gives every worker rank 0's starting state, where the engine does not already.

        Args:
            model: The bare model.
            optimizer: The optimizer.
            resumed: Whether the run resumed from a checkpoint.
        """

    @abstractmethod
    def launch(self, entry: Callable[[dict[str, Any]], Any], config: Config) -> None:
        """Starts ``config.run.workers`` worker processes on this node and waits for them.

        Args:
            entry: The worker's module-level entry point, called with the configuration as
                plain data (engines that start workers through a command line ignore it).
            config: The resolved configuration.

        Raises:
            LandcoverError: If a worker fails.
        """


def move_model(model: nn.Module, run: RunConfig, device: torch.device) -> nn.Module:
    """Moves a model to its device, in channels_last on CUDA when configured.

    Args:
        model: The model.
        run: The run settings.
        device: The device.

    Returns:
        The same model.
    """
    model.to(device)
    if device.type == "cuda" and run.channels_last:
        model.to(memory_format=torch.channels_last)
    return model


def local_sgd_for(model: nn.Module, env: DistEnv, run: RunConfig) -> LocalSGD | None:
    """Periodic model averaging when ``run.local_sgd_period`` is set and there are peers.

    Args:
        model: The bare model.
        env: The worker's place.
        run: The run settings.

    Returns:
        The averaging schedule, or ``None``.
    """
    if run.local_sgd_period and env.distributed:
        return LocalSGD(model, run.local_sgd_period)
    return None
