"""The trainer's optimizer step, from the feed's batches to the updated weights and average.

:class:`StepRunner` makes the sampled batches model input (:class:`TrainingInput`), takes the
step (:func:`~landcover.training.step.accumulation_step`), lets local SGD count it and moves
the weights' moving average. With ``run.cuda_graph: true`` and a step that can be captured
(:func:`~landcover.training.graphstep.graph_obstacle`), all of it is one CUDA graph
(:class:`~landcover.training.graphstep.GraphedStep`): the learning rate and the average's
weight then live in device tensors filled before each replay.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import nn

from landcover.config import AUTO, Config
from landcover.feed.inputs import TrainingInput
from landcover.parallel.engine import Replica
from landcover.training.ema import ModelEMA
from landcover.training.graphstep import WARMUP_STEPS, GraphedStep, graph_obstacle
from landcover.training.step import accumulation_step

log = logging.getLogger("landcover")


@dataclass
class StepParts:
    """What a step uses.

    Attributes:
        replica: The model as the engine wrapped it.
        model: The bare model (its weights feed the average).
        criterion: The loss.
        optimizer: The optimizer.
        prepare: Makes sampled batches model input on the device.
        ema: The weights' moving average, or ``None``.
        autocast_dtype: The autocast dtype, or ``None`` for fp32.
        grad_clip: The gradient-norm clip, or ``None``.
        scaler: fp16's gradient scaler, or ``None``.
        channels_last: Whether the model takes channels-last input.
    """

    replica: Replica
    model: nn.Module
    criterion: nn.Module
    optimizer: torch.optim.Optimizer
    prepare: TrainingInput
    ema: ModelEMA | None
    autocast_dtype: torch.dtype | None
    grad_clip: float | None
    scaler: torch.amp.GradScaler | None
    channels_last: bool


class StepRunner:
    """Takes the trainer's optimizer steps, eagerly or as one replayed CUDA graph.

    Args:
        parts: What the step uses.
        graph: Capture the step as a CUDA graph (the caller checked that it can be).
    """

    def __init__(self, parts: StepParts, graph: bool = False) -> None:
        self.parts = parts
        self.graphed: GraphedStep | None = None
        if not graph:
            return
        device = parts.prepare.device
        self.lr = torch.zeros((), device=device)
        self.ema_weight = torch.zeros((), device=device)
        for group in parts.optimizer.param_groups:  # read from the device at every replay
            group["lr"] = self.lr
            group["capturable"] = True
        self.graphed = GraphedStep(self._graph_body, device)

    def __call__(self, batches: list[tuple[torch.Tensor, ...]], lr: float) -> torch.Tensor:
        """One optimizer step.

        Args:
            batches: ``optim.accumulate`` batches as the sampler draws them (one when
                graphed).
            lr: The step's learning rate.

        Returns:
            The step's loss (a device scalar; nothing is read back).
        """
        p = self.parts
        if self.graphed is not None:
            self.lr.fill_(lr)
            if p.ema is not None:
                self.ema_weight.fill_(p.ema.next_weight())
            batch = batches[0]
            draw = p.prepare.host_draw(batch[0])  # drawn here, a graph input like the batch
            loss = self.graphed(batch if draw is None else (*batch, draw))
            if p.ema is not None:
                p.ema.count()
            return loss
        for group in p.optimizer.param_groups:
            group["lr"] = lr
        micro = [p.prepare.model_batch(b, contiguous=not p.channels_last) for b in batches]
        loss = self._step(micro)
        if p.replica.local_sgd is not None:
            p.replica.local_sgd.after_step()
        if p.ema is not None:
            p.ema.update(p.model)
        return loss

    def _step(self, micro: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        p = self.parts
        return accumulation_step(
            p.replica.module,
            p.criterion,
            p.optimizer,
            micro,
            p.autocast_dtype,
            p.grad_clip,
            sync=p.replica.syncs_gradients,
            scaler=p.scaler,
            no_sync=p.replica.no_sync,
        )

    def _graph_body(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """The captured step: input, step, and the average with its weight from the device."""
        p = self.parts
        draw = None
        if p.prepare.p > 0:  # the host's photometric draw, the last input
            batch, draw = batch[:-1], batch[-1]
        inputs = p.prepare.model_batch(batch, contiguous=not p.channels_last, draw=draw)
        loss = self._step([inputs])
        if p.ema is not None:
            p.ema.lerp(p.model, self.ema_weight)
        return loss


def build_step_runner(parts: StepParts, config: Config, world_size: int) -> StepRunner:
    """The run's step runner: one CUDA graph where ``run.cuda_graph`` asks and it can be.

    Args:
        parts: What the step uses.
        config: The effective configuration.
        world_size: Workers in the run.

    Returns:
        The runner. Where the graph was asked for (``true``, or ``auto`` on a CUDA GPU) and
        the step cannot be captured, one log line says why and the runner steps eagerly.
    """
    wanted = config.run.cuda_graph
    device = parts.prepare.device
    if wanted is False or (wanted == AUTO and device.type != "cuda"):
        return StepRunner(parts)
    obstacle = graph_obstacle(
        device,
        config.optim.accumulate,
        world_size,
        parts.scaler is not None,
        hasattr(parts.optimizer, "synchronize"),
        config.run.compile,
    )
    if obstacle is not None:
        log.info("run.cuda_graph %s: the step runs eagerly: %s", str(wanted).lower(), obstacle)
        return StepRunner(parts)
    log.info(
        "run.cuda_graph %s: the training step is one CUDA graph, captured after %d eager "
        "steps and replayed",
        str(wanted).lower(),
        WARMUP_STEPS,
    )
    return StepRunner(parts, graph=True)
