"""Worker functions for the DDP tests; spawned processes import them from here."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from landcover.config import LossConfig, ModelConfig
from landcover.models import build_model
from landcover.parallel.env import env_from_environ
from landcover.parallel.torch_engine import destroy_process_group, init_process_group
from landcover.training.losses import SegmentationLoss
from landcover.training.step import train_step

TINY_MODEL = ModelConfig(encoder="resnet18", encoder_depth=3, decoder_channels=[16, 8, 4])


def make_batch(path: str) -> None:
    """Writes a fixed batch of 4 samples (no ignored pixels) to ``path``."""
    g = torch.Generator().manual_seed(123)
    inputs = torch.randn(4, 4, 32, 32, generator=g)
    target = torch.randint(0, 6, (4, 32, 32), generator=g)
    torch.save({"inputs": inputs, "target": target}, path)


def one_step(batch_path: str, out_path: str, rows: list[int] | None = None) -> None:
    """Takes one SGD step on this rank's part of the batch and saves rank 0's parameters.

    Batch-norm layers use their running statistics (eval mode) so each sample's gradient is
    independent of the others in its batch: then data-parallel SGD must equal one large-batch
    step exactly, which is what DDP's gradient all-reduce guarantees.
    """
    env = env_from_environ()
    assert env is not None
    torch.set_num_threads(1)
    init_process_group(env, "gloo", 60)
    try:
        torch.manual_seed(0)
        model = build_model(TINY_MODEL, 4, 6)
        model.train()
        for module in model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                module.eval()
        wrapped = DistributedDataParallel(model) if env.distributed else model
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        criterion = SegmentationLoss(LossConfig(), 6)
        batch = torch.load(batch_path, weights_only=True)
        per_rank = 4 // env.world_size
        index = (
            rows
            if rows is not None
            else list(range(env.rank * per_rank, (env.rank + 1) * per_rank))
        )
        train_step(wrapped, criterion, optimizer, batch["inputs"][index], batch["target"][index])
        if env.rank == 0:
            torch.save(model.state_dict(), out_path)
    finally:
        destroy_process_group()


def crash(rank_to_crash: int) -> None:
    """A worker with a bug: raises an unexpected exception on one rank."""
    env = env_from_environ()
    assert env is not None
    if env.rank == rank_to_crash:
        raise ZeroDivisionError("the bug under test")


def count_collectives(cases: list[tuple[dict, int]], steps: int) -> list[dict]:
    """Trains a few steps through the torch engine per case; counts collectives per step.

    For each case ``(run options, accumulate)``, the model is prepared by
    :class:`~landcover.parallel.torch_engine.TorchEngine` from the run options
    (``grad_compression``, ``local_sgd_period``) and stepped by the trainer's own
    :func:`~landcover.training.step.accumulation_step`. torch's profiler records every Gloo
    collective the process group runs (DDP's bucket all-reduces included), by name.

    Returns:
        Per case: ``{"all_reduce": [per step], "collectives": [per step], "hook": DDP hook
        name or None, "wrapped": whether the model is DDP-wrapped, "tensors": floating
        tensors in the model}``.
    """
    from landcover.config import RunConfig
    from landcover.parallel.torch_engine import TorchEngine
    from landcover.training.step import accumulation_step

    env = env_from_environ()
    assert env is not None
    torch.set_num_threads(1)
    engine = TorchEngine()
    cpu = torch.device("cpu")
    engine.join(env, RunConfig(), cpu)
    results = []
    try:
        for options, accumulate in cases:
            run = RunConfig(**options)
            torch.manual_seed(0)
            replica = engine.replicate(build_model(TINY_MODEL, 4, 6), env, run, cpu)
            optimizer = torch.optim.SGD(replica.model.parameters(), lr=0.1)
            engine.broadcast_initial(replica.model, optimizer, resumed=False)
            criterion = SegmentationLoss(LossConfig(), 6)
            g = torch.Generator().manual_seed(env.rank)
            counts: dict = {"all_reduce": [], "collectives": []}
            for _ in range(steps):
                micro = [
                    (
                        torch.randn(2, 4, 32, 32, generator=g),
                        torch.randint(0, 6, (2, 32, 32), generator=g),
                    )
                    for _ in range(accumulate)
                ]
                activities = [torch.profiler.ProfilerActivity.CPU]
                with torch.profiler.profile(activities=activities) as prof:
                    accumulation_step(
                        replica.module,
                        criterion,
                        optimizer,
                        micro,
                        sync=replica.syncs_gradients,
                        no_sync=replica.no_sync,
                    )
                    if replica.local_sgd is not None:
                        replica.local_sgd.after_step()
                names = [e.name for e in prof.events() if e.name.startswith("gloo:")]
                counts["all_reduce"].append(names.count("gloo:all_reduce"))
                counts["collectives"].append(len(names))
            wrapped = isinstance(replica.module, DistributedDataParallel)
            logging_data = replica.module._get_ddp_logging_data() if wrapped else {}
            tensors = [*replica.model.parameters(), *replica.model.buffers()]
            results.append(
                {
                    **counts,
                    "hook": logging_data.get("comm_hook"),
                    "wrapped": wrapped,
                    "tensors": sum(t.is_floating_point() for t in tensors),
                }
            )
    finally:
        engine.leave()
    return results
