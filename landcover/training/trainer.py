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
from collections.abc import Generator, Iterator
from datetime import datetime, timezone

import torch

from landcover.checkpoint import Checkpoint
from landcover.data.normalize import tile_normalizer
from landcover.errors import TrainingError
from landcover.feed.devicecopy import copied_ahead
from landcover.feed.loader import EpochBatches, describe_feed, epoch_loader
from landcover.inference.sliding import SlidingWindowPredictor, resolve_geometry
from landcover.metrics import metrics_from_confusion
from landcover.training.checkpoint import (
    gather_rng_states,
    write_epoch_checkpoints,
)
from landcover.training.ema import average_across_workers
from landcover.training.health import unlearned_after
from landcover.training.profiling import epoch_profiler
from landcover.training.records import EpochRecord, ValidationMetrics
from landcover.training.replicas import any_not_finite, verify_replicas
from landcover.training.schedule import lr_at
from landcover.training.validate import validation_confusion
from landcover.training.workersetup import WorkerSetup

log = logging.getLogger("landcover")


class Trainer(WorkerSetup):
    """Trains one worker's part of a data-parallel run: the epoch loop.

    Building a trainer makes the worker ready to train
    (:class:`~landcover.training.workersetup.WorkerSetup`, whose arguments it takes: data,
    ``auto`` values, model, optimizer, the run's checkpoint, the effective configuration saved
    by rank 0); :meth:`run` then trains the remaining epochs: steps, validation, checkpoints and
    the check that the replicas agree.
    """

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

    def _train_epoch(self, epoch: int, batches: Iterator[tuple]) -> tuple[float, float]:
        cfg = self.config
        self.data.prepare.start_epoch(self.env.rank, epoch)
        self.replica.module.train()
        self.callbacks.on_epoch_start(epoch + 1, self.geometry.steps_per_epoch)
        loss_sum = torch.zeros((), device=self.device)
        lr = 0.0
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

    def feed(self, epoch: int, epochs: int = 1) -> Generator[tuple, None, None]:
        """The worker's sampled batches of ``epochs`` epochs from ``epoch`` (0-based) on.

        One feed serves a whole run (:meth:`run`): its processes draw the next epoch's first
        batches while an epoch ends. Batch ``k`` of an epoch is the same batch however many
        epochs the feed spans.

        Args:
            epoch: The first epoch.
            epochs: Epochs the feed spans.

        Returns:
            The batches in order, as the step takes them; close it to stop the feed.
        """
        cfg, sampler = self.config, self.data.sampler
        on_device = self.data.prepare.d4_table is not None
        draw = sampler.batch_for_device if on_device else sampler.batch_with_tiles
        count = self.geometry.steps_per_epoch * cfg.optim.accumulate
        batches = EpochBatches(
            draw, cfg.optim.batch_size, count, cfg.run.seed, self.env.rank, epoch, epochs
        )
        loader = epoch_loader(batches, self.loader_workers, pin_memory=self.device.type == "cuda")
        # on a GPU each batch's copy overlaps the step before it (a copy stream)
        return copied_ahead(loader, self.device)

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
        batches = None
        try:
            batches = self.feed(self.start_epoch, cfg.optim.epochs - self.start_epoch)
            for epoch in range(self.start_epoch, cfg.optim.epochs):
                record = self._run_epoch(epoch, batches)
            average = self.ema.module if self.ema is not None else None
            verify_replicas(self.model, average, self.engine)
            completed = True
        finally:
            try:
                if batches is not None:
                    batches.close()
            finally:
                self.callbacks.on_train_end(completed)
        self.folder.publish(f"logs/rank{self.env.rank}.log")
        return record

    def _run_epoch(self, epoch: int, batches: Iterator[tuple]) -> EpochRecord:
        """Trains, validates (when due) and checkpoints one epoch, and tells the callbacks."""
        cfg = self.config
        t0 = time.perf_counter()
        train_loss, lr = self._train_epoch(epoch, batches)
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
