"""A training worker made ready to train: its data, model, optimizer and restored state.

:class:`WorkerSetup` is the first half of :class:`~landcover.training.trainer.Trainer`: building
it loads the worker's share of the data, resolves the config's ``auto`` values, builds and wraps
the model and optimizer, restores the run's checkpoint and builds the step. The trainer adds the
epoch loop.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from landcover.checkpoint import Checkpoint, load_checkpoint
from landcover.config import Config, save_config
from landcover.data.pairs import SplitPairs
from landcover.errors import CheckpointError, first_line
from landcover.feed.loader import resolve_loader_workers
from landcover.models import build_model, compile_model, final_stage_warning, load_initial_weights
from landcover.parallel.devices import choose_precision
from landcover.parallel.engine import Engine, Replica
from landcover.parallel.env import DistEnv
from landcover.training.callbacks import Callback, CallbackList
from landcover.training.checkpoint import (
    find_resume_checkpoint,
    restore_best,
    restore_rng_state,
)
from landcover.training.ema import start_ema
from landcover.training.geometry import BatchGeometry
from landcover.training.loggers import run_callbacks
from landcover.training.losses import SegmentationLoss
from landcover.training.resolved import Resolved
from landcover.training.resumecheck import check_fits
from landcover.training.runfolder import RunFolder
from landcover.training.runlog import restore_record
from landcover.training.shares import WorkerData, load_worker_data
from landcover.training.step import build_optimizer
from landcover.training.steprunner import StepParts, StepRunner, build_step_runner

log = logging.getLogger("landcover")


class WorkerSetup:
    """One worker of a data-parallel run, made ready to train.

    Building it loads the worker's share of the data and resolves the config's ``auto`` values
    (collective calls, on every worker), builds and wraps the model, restores the run's
    checkpoint, if any, saves the effective configuration (rank 0), and builds the step and the
    callbacks. :class:`~landcover.training.trainer.Trainer` adds the epoch loop.

    Args:
        config: The configuration as loaded (it is not changed: the values resolved here are
            in :attr:`resolved`, and :attr:`config` is the effective configuration).
        env: The worker's place in the job.
        engine: The data-parallel engine the worker joined.
        device: The worker's device.
        callbacks: Further callbacks after the run folder's loggers (which log on rank 0
            only); these are called on every worker.
        folder: The process's run folder (built here if not given).
        pairs: The training and validation pairs, if already listed in this process.
    """

    def __init__(
        self,
        config: Config,
        env: DistEnv,
        engine: Engine,
        device: torch.device,
        callbacks: Sequence[Callback] = (),
        folder: RunFolder | None = None,
        pairs: SplitPairs | None = None,
    ) -> None:
        self.env = env
        self.engine = engine
        self.device = device
        self.folder = folder or RunFolder(config.run.out)
        self.precision = choose_precision(device, config.run.bf16)
        self.autocast_dtype = self.precision.autocast_dtype
        self.channels_last = device.type == "cuda" and config.run.channels_last
        self.loader_workers = resolve_loader_workers(config.data.loader_workers, device)
        self.geometry = BatchGeometry.from_optim(config.optim, env.world_size)
        self.reduce_device = device if device.type == "cuda" else torch.device("cpu")
        self.scaler = torch.amp.GradScaler(device.type) if self.precision.grad_scaling else None
        self.data = load_worker_data(config, env, self.folder, device, engine, pairs)
        # the worker count as launched (an external launcher may differ from run.workers)
        self.resolved = Resolved(workers=env.world_size, stats=self.data.stats)
        self.config = self.resolved.apply(config)
        self.mapping = self.config.data.classes
        self.replica, self.optimizer, self.criterion = self._build_model()
        self.model = self.replica.model
        self.start_epoch, self.best_miou, resumed = self._resume(self.data)
        if env.is_main:  # the numbers of auto values, for predict and evaluate; once the
            # model and the resume passed their checks (a refused run keeps its config.yaml)
            save_config(self.config, self.folder.path("config.yaml"))
            self.folder.publish("config.yaml")
        self.engine.broadcast_initial(self.model, self.optimizer, resumed=self.start_epoch > 0)
        self.ema = start_ema(self.model, self.config.optim.ema_decay, resumed)
        del resumed
        if self.config.run.compile:  # the training step's calls; validation, checkpoints eager
            mode = self.config.run.compile_mode
            self.replica.module = compile_model(self.replica.module, "training", mode)
        self.step = self._step_runner()
        own = run_callbacks(self.config, self.folder, self.start_epoch, env.is_main)
        self.callbacks = CallbackList([*own, *callbacks])

    def _build_model(self) -> tuple[Replica, torch.optim.Optimizer, SegmentationLoss]:
        cfg = self.config
        torch.manual_seed(cfg.run.seed)
        resuming = find_resume_checkpoint(self.folder) is not None
        model = build_model(
            cfg.model,
            len(cfg.data.bands),
            self.mapping.num_classes,
            cfg.data.patch_size,
            strict=not resuming,  # a run begun before arch_options were checked goes on
        )
        narrow = final_stage_warning(cfg.model, self.mapping.num_classes)
        if narrow and self.env.is_main:
            log.warning("%s", narrow)
        if cfg.model.weights and resuming:  # the checkpoint's weights replace them anyway
            log.info("model.weights %r not loaded: resuming from a checkpoint", cfg.model.weights)
        elif cfg.model.weights:
            log.info(load_initial_weights(model, cfg.model, len(cfg.data.bands)).summary())
        replica = self.engine.replicate(model, self.env, cfg.run, self.device)
        optimizer = self.engine.distribute_optimizer(
            build_optimizer(replica.model.parameters(), cfg), replica, cfg.optim.accumulate, cfg.run
        )
        criterion = SegmentationLoss(cfg.optim.loss, self.mapping.num_classes).to(self.device)
        return replica, optimizer, criterion

    def _resume(self, data: WorkerData) -> tuple[int, float, Checkpoint | None]:
        """Restores the run (:func:`find_resume_checkpoint`): epochs, best mIoU, checkpoint."""
        path = find_resume_checkpoint(self.folder)
        if path is None:
            return 0, -1.0, None
        cached = data.resume
        state = cached[1] if cached is not None and cached[0] == path else load_checkpoint(path)
        data.resume = None
        check_fits(path, state.config, self.config)  # the launcher checked it, if it was ours
        try:
            self.model.load_state_dict(state.train_model or state.model)  # raw, not averaged
            self.optimizer.load_state_dict(state.optimizer)
            if self.scaler is not None and state.grad_scaler:
                self.scaler.load_state_dict(state.grad_scaler)
        except (RuntimeError, ValueError, KeyError) as exc:
            first = first_line(exc, 160)
            raise CheckpointError(
                f"{path}: does not fit this run's model or optimizer ({first}); "
                "use another --out or the same model settings"
            ) from None
        own = restore_rng_state(state.rng, self.env.rank, self.device)
        log.info(
            "resuming from %s: %d epoch(s) complete (trained with %d workers, now %d)%s",
            path,
            state.epoch,
            state.workers,
            self.env.world_size,
            "" if own else f"; rank {self.env.rank} is new to the run and keeps fresh RNG states",
        )
        restore_best(self.folder, path, state, writer=self.env.is_main)
        restore_record(self.folder, state, writer=self.env.is_main)
        return state.epoch, state.best_miou, state

    def _step_runner(self) -> StepRunner:
        """The step, as one CUDA graph where ``run.cuda_graph`` asks for it and it can be."""
        parts = StepParts(
            self.replica,
            self.model,
            self.criterion,
            self.optimizer,
            self.data.prepare,
            self.ema,
            self.autocast_dtype,
            self.config.optim.grad_clip,
            self.scaler,
            self.channels_last,
        )
        return build_step_runner(parts, self.config, self.env.world_size)
