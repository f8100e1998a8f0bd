"""Run under ``horovodrun``: one SGD step through landcover's Horovod engine.

Usage: horovodrun -np 2 -H localhost:2 --gloo python tests/horovod_step.py BATCH OUT

Each rank steps on its half of the fixed batch of ``ddp_helpers.make_batch`` with
``hvd.DistributedOptimizer`` (as the trainer builds it); rank 0 saves the parameters.
"""

from __future__ import annotations

import sys

import torch
from torch import nn

from landcover.config import LossConfig, RunConfig
from landcover.models import build_model
from landcover.parallel.env import env_from_environ
from landcover.parallel.horovod_engine import HorovodEngine
from landcover.training.losses import SegmentationLoss
from landcover.training.step import train_step

from ddp_helpers import TINY_MODEL


def main(batch_path: str, out_path: str) -> None:
    env = env_from_environ()
    assert env is not None
    rank, size = env.rank, env.world_size
    engine, run = HorovodEngine(), RunConfig()
    engine.join(env, run, torch.device("cpu"))
    torch.set_num_threads(1)
    try:
        torch.manual_seed(rank)  # different starting weights: the broadcast must fix them
        model = build_model(TINY_MODEL, 4, 6)
        model.train()
        for module in model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                module.eval()
        replica = engine.replicate(model, env, run, torch.device("cpu"))
        optimizer = engine.distribute_optimizer(
            torch.optim.SGD(model.parameters(), lr=0.5), replica, 1, run
        )
        if rank != 0:
            torch.manual_seed(0)
            reference = build_model(TINY_MODEL, 4, 6)
            assert any(
                not torch.equal(a, b)
                for a, b in zip(
                    model.state_dict().values(), reference.state_dict().values(), strict=True
                )
            )
        engine.broadcast_initial(model, optimizer, resumed=False)
        criterion = SegmentationLoss(LossConfig(), 6)
        batch = torch.load(batch_path, weights_only=True)
        per_rank = 4 // size
        index = list(range(rank * per_rank, (rank + 1) * per_rank))
        train_step(model, criterion, optimizer, batch["inputs"][index], batch["target"][index])
        if rank == 0:
            torch.save(model.state_dict(), out_path)
    finally:
        engine.leave()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
