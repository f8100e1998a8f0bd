"""The epoch loop of one training worker: steps, validation, checkpoints, the replica check.

Each worker holds its share of the training tiles in memory
(:mod:`~landcover.training.shares`), draws random patches from them, and takes
``ceil(samples_per_epoch / global_batch)`` optimizer steps per epoch (the batch geometry:
:mod:`~landcover.training.geometry`; one step: :mod:`~landcover.training.step`). The engine
(:mod:`landcover.parallel`) wraps the model and optimizer for data parallelism. Rank 0 writes the
run folder and checkpoints; every run resumes from its ``last.pt``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone

import torch

from landcover.checkpoint import Checkpoint, load_checkpoint
from landcover.config import Config, save_config
from landcover.data.normalize import tile_normalizer
from landcover.data.pairs import SplitPairs
from landcover.errors import CheckpointError, TrainingError, first_line
from landcover.feed.loader import EpochBatches, describe_feed, epoch_loader, resolve_loader_workers
from landcover.inference.sliding import SlidingWindowPredictor, resolve_geometry
from landcover.metrics import metrics_from_confusion
from landcover.models import build_model, compile_model, final_stage_warning, load_initial_weights
from landcover.parallel.devices import choose_precision
from landcover.parallel.engine import Engine, Replica
from landcover.parallel.env import DistEnv
from landcover.training.callbacks import Callback, CallbackList
from landcover.training.checkpoint import (
    find_resume_checkpoint,
    gather_rng_states,
    restore_best,
    restore_rng_state,
    write_epoch_checkpoints,
)
from landcover.training.ema import average_across_workers, start_ema
from landcover.training.geometry import BatchGeometry
from landcover.training.health import unlearned_after
from landcover.training.loggers import run_callbacks
from landcover.training.losses import SegmentationLoss
from landcover.training.profiling import epoch_profiler
from landcover.training.records import EpochRecord, ValidationMetrics
from landcover.training.replicas import any_not_finite, verify_replicas
from landcover.training.resolved import Resolved
from landcover.training.resumecheck import check_fits
from landcover.training.runfolder import RunFolder
from landcover.training.runlog import restore_record
from landcover.training.schedule import lr_at
from landcover.training.shares import WorkerData, load_worker_data
from landcover.training.step import build_optimizer
from landcover.training.steprunner import StepParts, StepRunner, build_step_runner
from landcover.training.validate import validation_confusion

log = logging.getLogger("landcover")


class Trainer:
    """Trains one worker's part of a data-parallel run.

    Building a trainer makes the worker ready to train: it loads the worker's share of the
    data and resolves the config's ``auto`` values (collective calls, on every worker), builds
    and wraps the model, restores the run's checkpoint, if any, and then saves the effective
    configuration (rank 0). :meth:`run` then trains the remaining epochs.

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
        model = build_model(
            cfg.model, len(cfg.data.bands), self.mapping.num_classes, cfg.data.patch_size
        )
        narrow = final_stage_warning(cfg.model, self.mapping.num_classes)
        if narrow and self.env.is_main:
            log.warning("%s", narrow)
        resuming = find_resume_checkpoint(self.folder) is not None
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

    def _checkpoint(self, record: EpochRecord) -> Checkpoint:
        rng = gather_rng_states(self.engine, self.device)  # a collective: every worker is here
        ema = self.ema
        return Checkpoint(
            model=ema.state_dict() if ema is not None else self.model.state_dict(),
            train_model=self.model.state_dict() if ema is not None else {},
            ema_updates=ema.updates if ema is not None else 0,
            config=self.config.to_dict(),
            optimizer=self.optimizer.state_dict(),
            grad_scaler=self.scaler.state_dict() if self.scaler is not None else {},
            scheduler={
                "progress_epochs": record.epoch,
                "global_batch": self.geometry.global_batch,
            },
            epoch=record.epoch,
            best_miou=self.best_miou,
            workers=self.env.world_size,
            rng=rng,
            metrics=record.to_dict(),
            pixel_size_m=self.data.pixel_size_m,
        )

    def _train_epoch(self, epoch: int) -> tuple[float, float]:
        cfg = self.config
        self.data.prepare.start_epoch(self.env.rank, epoch)
        self.replica.module.train()
        self.callbacks.on_epoch_start(epoch + 1, self.geometry.steps_per_epoch)
        loss_sum = torch.zeros((), device=self.device)
        lr = 0.0
        batches = self.epoch_batches(epoch)
        profiler = (  # run.profile_steps: steps of the first epoch this run trains
            epoch_profiler(
                self.folder.path("profile"),
                self.env.rank,
                self.device,
                self.geometry.steps_per_epoch,
                cfg.run.profile_steps,
            )
            if epoch == self.start_epoch
            else None
        )
        with profiler if profiler is not None else contextlib.nullcontext():
            for step in range(self.geometry.steps_per_epoch):
                lr = self._train_step(epoch, step, batches, loss_sum)
                if profiler is not None:
                    profiler.step()
        if profiler is not None and profiler.files:
            self.folder.publish(*(f"profile/{f.name}" for f in profiler.files))
        if self.replica.local_sgd is not None:
            self.replica.local_sgd.synchronize()
            if self.ema is not None:  # each worker averaged its own steps
                average_across_workers(self.ema.module, self.engine)
        total = loss_sum.to(self.reduce_device).clone()
        self.engine.all_reduce_sum(total)
        return float(total) / (self.geometry.steps_per_epoch * self.env.world_size), lr

    def epoch_batches(self, epoch: int) -> Iterator[tuple]:
        """The worker's sampled batches of epoch ``epoch`` (0-based), as the step takes them."""
        cfg, sampler = self.config, self.data.sampler
        on_device = self.data.prepare.d4_table is not None
        draw = sampler.batch_for_device if on_device else sampler.batch_with_tiles
        count = self.geometry.steps_per_epoch * cfg.optim.accumulate
        batches = EpochBatches(
            draw, cfg.optim.batch_size, count, cfg.run.seed, self.env.rank, epoch
        )
        return epoch_loader(batches, self.loader_workers, pin_memory=self.device.type == "cuda")

    def _train_step(
        self, epoch: int, step: int, batches: Iterator[tuple], loss_sum: torch.Tensor
    ) -> float:
        """One optimizer step on the next ``optim.accumulate`` batches; returns its lr.

        The step's loss is added to ``loss_sum`` on the device (nothing is read back).
        """
        cfg = self.config
        lr = lr_at(cfg.optim, self.geometry, epoch + step / self.geometry.steps_per_epoch)
        loss = self.step(list(itertools.islice(batches, cfg.optim.accumulate)), lr)
        loss_sum += loss
        self.callbacks.on_step(step + 1, loss, (step + 1) * self.geometry.global_batch)
        return lr

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

    def _validate(self) -> ValidationMetrics | None:
        start = time.perf_counter()
        if self.data.n_val == 0:
            return None
        cfg = self.config
        # predict's windows (four patches wide, the same overlap): fewer pixels computed twice
        # than patch-sized windows (1.14x against 1.78x at the default overlap), and the
        # validation maps are made the way predict and evaluate make theirs
        window, overlap, batch = resolve_geometry(cfg.data.patch_size, None, cfg.run.val_overlap)
        predictor = SlidingWindowPredictor(
            self.ema.module if self.ema is not None else self.model,
            window,
            overlap,
            batch,
            tile_normalizer(cfg.data, None, self.device),
            self.device,
            self.autocast_dtype,
        )
        stats = self.data.val_stats
        confusion = validation_confusion(
            predictor,
            self.data.val_tiles,
            self.mapping.num_classes,
            self.reduce_device,
            self.engine,
            lambda i: tile_normalizer(cfg.data, stats[i], self.device),
        )
        metrics = metrics_from_confusion(confusion.numpy(), self.mapping.names)
        return ValidationMetrics.from_metrics(metrics, time.perf_counter() - start)

    def run(self) -> EpochRecord | None:
        """Trains up to ``optim.epochs`` epochs, resuming from the run's ``last.pt``.

        Returns:
            The last epoch's record (``None`` if there was nothing to do).
        """
        cfg = self.config
        if self.start_epoch >= cfg.optim.epochs:
            log.info(
                "nothing to do: the run already has %d epoch(s), --epochs is %d",
                self.start_epoch,
                cfg.optim.epochs,
            )
            return None
        log.info(
            "training epochs %d..%d: %s, %d steps/epoch (%d samples), %s, device %s (%s), %s",
            self.start_epoch + 1,
            cfg.optim.epochs,
            self.geometry.describe_batch(),
            self.geometry.steps_per_epoch,
            self.geometry.epoch_samples,
            self.geometry.describe_lr(),
            self.device,
            self.precision.describe(),
            describe_feed(self.loader_workers),
        )
        self.callbacks.on_train_start(cfg)
        record, completed = None, False
        try:
            for epoch in range(self.start_epoch, cfg.optim.epochs):
                record = self._run_epoch(epoch)
            average = self.ema.module if self.ema is not None else None
            verify_replicas(self.model, average, self.engine)
            completed = True
        finally:
            self.callbacks.on_train_end(completed)
        self.folder.publish(f"logs/rank{self.env.rank}.log")
        return record

    def _run_epoch(self, epoch: int) -> EpochRecord:
        """Trains, validates (when due) and checkpoints one epoch, and tells the callbacks."""
        cfg = self.config
        t0 = time.perf_counter()
        train_loss, lr = self._train_epoch(epoch)
        train_s = time.perf_counter() - t0
        done = epoch + 1
        average = self.ema.module if self.ema is not None else None
        # a loss alone is no divergence: fp16 grad scaling skips an overflowed step
        if not math.isfinite(train_loss) and any_not_finite(
            self.model, average, self.engine, self.reduce_device
        ):
            raise TrainingError(
                f"epoch {done}: the training loss is {train_loss} and the weights are no longer "
                f"finite: the run diverged (a learning rate too high, optim.lr "
                f"{cfg.optim.lr:g}, or extreme loss weights); no checkpoint of this epoch is "
                "written, and a rerun with gentler settings resumes from the last finite one"
            )
        validation = None
        if done % cfg.run.val_every == 0 or done == cfg.optim.epochs:
            validation = self._validate()
        miou = validation.miou if validation is not None else None
        is_best = miou is not None and miou > self.best_miou
        self.best_miou = miou if is_best else self.best_miou
        record = EpochRecord(
            epoch=done,
            train_loss=train_loss,
            lr=lr,
            samples_per_s=self.geometry.epoch_samples / train_s,
            epoch_s=train_s,
            workers=self.env.world_size,
            global_batch=self.geometry.global_batch,
            steps=self.geometry.steps_per_epoch,
            validation=validation,
            unlearned=unlearned_after(validation, done, cfg.optim.warmup_epochs),
            best=is_best,
            time=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )
        checkpoint = self._checkpoint(record)  # on every rank: RNG states
        if self.env.is_main:
            write_epoch_checkpoints(self.folder, checkpoint, done, is_best, cfg.run.keep_last)
            self.callbacks.on_checkpoint(self.folder.url_of("checkpoints", "last.pt"), False)
            if is_best:
                self.callbacks.on_checkpoint(self.folder.url_of("checkpoints", "best.pt"), True)
        self.callbacks.on_epoch_end(record)
        self.folder.publish(f"logs/rank{self.env.rank}.log")
        self.engine.barrier()
        return record
