"""The engine interface: everything that differs between data-parallel implementations.

An :class:`Engine` joins and leaves the job, wraps the model (SyncBatchNorm, DDP and its
communication hooks, local SGD), wraps the optimizer, gives every worker rank 0's starting
state and starts the worker processes. The trainer, the cluster tools and the CLI talk to an
engine only through this interface (:func:`~landcover.parallel.engines.engine_for`), so that
no code outside this package asks which engine it runs on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import torch
from torch import nn

from landcover.config import Config, RunConfig
from landcover.errors import ConfigError
from landcover.parallel.communication import LocalSGD
from landcover.parallel.env import DistEnv
from landcover.registry import EngineSpec


class Counters(Protocol):
    """Atomic counters every worker of a job shares (a c10d store's ``add``)."""

    def add(self, key: str, amount: int) -> int:
        """Adds to a counter atomically (0 reads it); returns its new value."""
        ...


@dataclass
class Replica:
    """A worker's model as the engine prepared it.

    Attributes:
        model: The bare model (what checkpoints save and validation runs).
        module: What the training step calls (a DDP wrapper, or the bare model).
        local_sgd: Periodic model averaging, when workers step alone between averages.
        no_sync: Holds back the wrapper's gradient all-reduce for a backward pass (DDP's
            ``no_sync``), or ``None`` when ``module`` all-reduces nothing itself.
    """

    model: nn.Module
    module: nn.Module
    local_sgd: LocalSGD | None = None
    no_sync: Callable[[], AbstractContextManager[Any]] | None = None

    @property
    def syncs_gradients(self) -> bool:
        """Whether gradients are all-reduced every optimizer step (not under local SGD)."""
        return self.local_sgd is None


class Engine(ABC):
    """One data-parallel implementation: joining, wrapping, launching and collectives.

    Its name and the options it accepts are declared in :mod:`landcover.registry`
    (:attr:`spec`). The collectives (:meth:`all_reduce_sum`, :meth:`all_gather_object`,
    :meth:`broadcast_object`, :meth:`gather_object`, :meth:`barrier`) run on the group the
    worker joined, and are no-ops for a job of one.

    Attributes:
        spec: The engine's entry in the registry.
    """

    spec: ClassVar[EngineSpec]

    @property
    def name(self) -> str:
        """The ``run.engine`` value."""
        return self.spec.name

    @property
    def display(self) -> str:
        """The engine's name in messages."""
        return self.spec.display

    def check(self, run: RunConfig) -> None:
        """Refuses options this engine cannot honour, with one line that says what to do.

        Args:
            run: The run settings.

        Raises:
            ConfigError: If an option does not fit the engine.
        """
        problem = self.spec.problem(run.grad_compression, run.max_restarts, run.nnodes)
        if problem is not None:
            raise ConfigError(problem)

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

    # --- collectives on the joined group (no-ops for a job of one) ---

    @abstractmethod
    def world_size(self) -> int:
        """Workers in the joined group (1 when none was joined).

        Returns:
            The number of workers.
        """

    @abstractmethod
    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sums a tensor across workers in place.

        Args:
            tensor: The tensor; on the collective backend's device.

        Returns:
            The same tensor, now holding the sum.
        """

    def all_reduce_mean_(self, tensors: Iterable[torch.Tensor]) -> None:
        """Replaces each floating-point tensor by its mean over all workers, in place.

        Args:
            tensors: The tensors (parameters and buffers, say); others are left alone.
        """
        world = self.world_size()
        if world == 1:
            return
        for tensor in tensors:
            if tensor.is_floating_point():
                self.all_reduce_sum(tensor.data)
                tensor.data.div_(world)

    @abstractmethod
    def all_gather_object(self, obj: Any) -> list[Any]:
        """Gathers a picklable object from every worker, on every worker.

        Args:
            obj: This worker's object.

        Returns:
            Every worker's object, by rank.
        """

    @abstractmethod
    def gather_object(self, obj: Any) -> list[Any] | None:
        """Gathers a picklable object from every worker on rank 0.

        Args:
            obj: This worker's object.

        Returns:
            Every worker's object by rank on rank 0; ``None`` on the others.
        """

    @abstractmethod
    def broadcast_object(self, obj: Any) -> Any:
        """Rank 0's picklable object, on every worker.

        Args:
            obj: The object (rank 0's is sent; the others' are ignored).

        Returns:
            Rank 0's object.
        """

    @abstractmethod
    def barrier(self) -> None:
        """Waits for every worker."""

    def counters(self) -> Counters | None:
        """The job's shared atomic counters, where the engine has a key-value store.

        Returns:
            The counters, or ``None`` for a job of one (or an engine without a store).
        """
        return None

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

    def local_sgd(self, model: nn.Module, env: DistEnv, run: RunConfig) -> LocalSGD | None:
        """Periodic model averaging when ``run.local_sgd_period`` is set and there are peers.

        Args:
            model: The bare model.
            env: The worker's place.
            run: The run settings.

        Returns:
            The averaging schedule (averaging through :meth:`all_reduce_mean_`), or ``None``.
        """
        if run.local_sgd_period and env.distributed:
            return LocalSGD(model, run.local_sgd_period, self.all_reduce_mean_)
        return None

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
