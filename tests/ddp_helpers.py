"""Worker functions for the DDP tests; spawned processes import them from here."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from landcover.config import LossConfig, ModelConfig
from landcover.distributed import destroy_process_group, env_from_environ, init_process_group
from landcover.models import build_model
from landcover.training.losses import SegmentationLoss
from landcover.training.trainer import train_step

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
