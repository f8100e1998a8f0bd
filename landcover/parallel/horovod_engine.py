"""The Horovod engine: ``hvd.DistributedOptimizer`` instead of DDP.

Each worker joins Horovod (Gloo controller on CPU; MPI or NCCL where Horovod was built with
them), wraps its optimizer in ``hvd.DistributedOptimizer`` (gradients averaged by all-reduce,
optionally fp16-compressed, once per ``optim.accumulate`` backward passes) and takes the model's
parameters, and on a resume the optimizer state, from rank 0. Everything else (data shards,
metrics reduced across workers, rank 0's checkpoints, the run folder) is the trainer's own, so
a Horovod checkpoint resumes and predicts under the torch engine and back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from landcover.config import Config, RunConfig
from landcover.errors import TrainingError
from landcover.parallel.engine import Engine, Replica, move_model
from landcover.parallel.env import DistEnv
from landcover.parallel.horovod_install import import_horovod
from landcover.registry import ENGINES


class HorovodEngine(Engine):
    """Horovod's all-reduce in the optimizer, under ``horovodrun`` or ``mpirun``."""

    spec = ENGINES["horovod"]

    def backend(self, run: RunConfig, device: torch.device) -> str:
        """See :meth:`Engine.backend`."""
        return "horovod"

    def join(self, env: DistEnv, run: RunConfig, device: torch.device) -> None:
        """See :meth:`Engine.join` (a job of one when not started by ``horovodrun``).

        Raises:
            ConfigError: If Horovod is not installed.
            TrainingError: If Horovod places this worker elsewhere than the launcher did.
        """
        hvd = import_horovod()
        hvd.init()
        if (hvd.rank(), hvd.size()) != (env.rank, env.world_size):
            raise TrainingError(
                f"Horovod placed this worker at rank {hvd.rank()} of {hvd.size()}, the launcher "
                f"at {env.rank} of {env.world_size}"
            )

    def leave(self) -> None:
        """See :meth:`Engine.leave`."""
        try:
            import horovod.torch as hvd
        except ImportError:
            return
        if hvd.is_initialized():
            hvd.shutdown()

    def world_size(self) -> int:
        """See :meth:`Engine.world_size`."""
        hvd = _joined()
        return hvd.size() if hvd is not None else 1

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """See :meth:`Engine.all_reduce_sum`."""
        hvd = _joined()
        if hvd is not None and hvd.size() > 1:
            tensor.copy_(hvd.allreduce(tensor, op=hvd.Sum))
        return tensor

    def all_gather_object(self, obj: Any) -> list[Any]:
        """See :meth:`Engine.all_gather_object`."""
        hvd = _joined()
        if hvd is None or hvd.size() == 1:
            return [obj]
        return list(hvd.allgather_object(obj))

    def gather_object(self, obj: Any) -> list[Any] | None:
        """See :meth:`Engine.gather_object` (Horovod gathers on every rank; rank 0 keeps it)."""
        hvd = _joined()
        gathered = self.all_gather_object(obj)
        return gathered if hvd is None or hvd.rank() == 0 else None

    def broadcast_object(self, obj: Any) -> Any:
        """See :meth:`Engine.broadcast_object`."""
        hvd = _joined()
        if hvd is None or hvd.size() == 1:
            return obj
        return hvd.broadcast_object(obj, root_rank=0)

    def barrier(self) -> None:
        """See :meth:`Engine.barrier`."""
        hvd = _joined()
        if hvd is not None and hvd.size() > 1:
            hvd.barrier()

    def replicate(
        self, model: nn.Module, env: DistEnv, run: RunConfig, device: torch.device
    ) -> Replica:
        """See :meth:`Engine.replicate`: the model stays bare (Horovod averages in the optimizer).

        torch's SyncBatchNorm needs a torch.distributed group, which Horovod workers do not
        join; batch-norm statistics stay per worker.
        """
        move_model(model, run, device)
        return Replica(model, model, self.local_sgd(model, env, run))

    def distribute_optimizer(
        self, optimizer: torch.optim.Optimizer, replica: Replica, accumulate: int, run: RunConfig
    ) -> torch.optim.Optimizer:
        """See :meth:`Engine.distribute_optimizer`.

        Raises:
            ConfigError: If Horovod is not installed.
        """
        if not replica.syncs_gradients:
            return optimizer  # local SGD: workers step alone and average their models
        hvd = import_horovod()
        codecs = {"none": hvd.Compression.none, "fp16": hvd.Compression.fp16}
        return hvd.DistributedOptimizer(
            optimizer,
            named_parameters=list(replica.model.named_parameters()),
            compression=codecs[run.grad_compression],
            backward_passes_per_step=accumulate,
        )

    def broadcast_initial(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, resumed: bool
    ) -> None:
        """See :meth:`Engine.broadcast_initial`.

        A fresh optimizer has no state to send (Horovod would make some up by taking a step
        with zero gradients, which moves the weights under weight decay), so it is sent only
        on resume.
        """
        hvd = import_horovod()
        if hvd.size() == 1:
            return
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        if resumed:
            hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    def launch(self, entry: Callable[[dict[str, Any]], Any], config: Config) -> None:
        """See :meth:`Engine.launch`: ``horovodrun`` with the Gloo controller on this node."""
        from landcover.parallel.launch_horovod import launch_horovod

        launch_horovod(config, config.run.workers)


def _joined() -> Any:
    """``horovod.torch`` once this worker joined Horovod, else ``None`` (a job of one)."""
    try:
        import horovod.torch as hvd
    except ImportError:
        return None
    return hvd if hvd.is_initialized() else None
