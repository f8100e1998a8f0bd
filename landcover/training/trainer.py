"""The epoch loop of one training worker: steps, validation, checkpoints, the replica check.

Each worker holds its share of the training tiles in memory
(:mod:`~landcover.training.shares`), draws random patches from them, and takes
``ceil(samples_per_epoch / global_batch)`` optimizer steps per epoch (the batch geometry:
:mod:`~landcover.training.geometry`; one step: :mod:`~landcover.training.step`). The engine
(:mod:`landcover.parallel`) wraps the model and optimizer for data parallelism. Rank 0 writes the
run folder and checkpoints; every run resumes from its ``last.pt``.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import time
from datetime import datetime, timezone
from typing import Any

import torch
from torch import nn

from landcover.checkpoint import Checkpoint, load_checkpoint
from landcover.config import Config, save_config
from landcover.data.normalize import tile_normalizer
from landcover.data.prefetch import Prefetcher
from landcover.data.sampler import epoch_rng
from landcover.errors import CheckpointError, TrainingError
from landcover.inference.sliding import SlidingWindowPredictor, resolve_geometry
from landcover.metrics import metrics_from_confusion
from landcover.models import (
    build_model,
    compile_model,
    final_stage_warning,
    load_initial_weights,
)
from landcover.parallel.devices import choose_precision
from landcover.parallel.engine import Engine
from landcover.parallel.env import DistEnv
from landcover.training.checkpoint import (
    find_resume_checkpoint,
    gather_rng_states,
    restore_rng_state,
    write_epoch_checkpoints,
)
from landcover.training.ema import ModelEMA, average_across_workers, start_ema
from landcover.training.geometry import BatchGeometry
from landcover.training.health import unlearned_classes, unlearned_message
from landcover.training.losses import SegmentationLoss
from landcover.training.progress import Progress
from landcover.training.runfolder import RunFolder
from landcover.training.runlog import RunLog
from landcover.training.schedule import lr_at
from landcover.training.shares import WorkerData, load_worker_data
from landcover.training.step import accumulation_step, build_optimizer
from landcover.training.validate import validation_confusion

log = logging.getLogger("landcover")


def parameter_digest(model: nn.Module) -> str:
    """A SHA-256 digest of a model's parameters, to compare replicas across workers.

    Args:
        model: The model.

    Returns:
        The hex digest.
    """
    h = hashlib.sha256()
    for name, param in sorted(model.named_parameters()):
        h.update(name.encode())
        h.update(param.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


class Trainer:
    """Trains one worker's part of a data-parallel run.

    Args:
        config: The resolved configuration.
        env: The worker's place in the job.
        engine: The data-parallel engine the worker joined.
        device: The worker's device.
    """

    def __init__(self, config: Config, env: DistEnv, engine: Engine, device: torch.device) -> None:
        self.config = config
        self.env = env
        self.engine = engine
        self.device = device
        config.run.workers = env.world_size  # as launched (an external launcher may differ)
        self.folder = RunFolder(config.run.out)
        self.mapping = config.data.classes
        self.precision = choose_precision(device, config.run.bf16)
        self.autocast_dtype = self.precision.autocast_dtype
        self.channels_last = device.type == "cuda" and config.run.channels_last
        self.geometry = BatchGeometry.from_optim(config.optim, env.world_size)
        self.reduce_device = device if device.type == "cuda" else torch.device("cpu")
        self.scaler = torch.amp.GradScaler(device.type) if self.precision.grad_scaling else None
        self.ema: ModelEMA | None = None
        self.resumed: Checkpoint | None = None

    def _build_model(self) -> None:
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
        self.replica = self.engine.replicate(model, self.env, cfg.run, self.device)
        self.model = self.replica.model
        optimizer = build_optimizer(self.model.parameters(), cfg)
        self.optimizer = self.engine.distribute_optimizer(
            optimizer, self.replica, cfg.optim.accumulate, cfg.run
        )
        self.criterion = SegmentationLoss(cfg.optim.loss, self.mapping.num_classes).to(self.device)

    def _resume(self, data: WorkerData) -> tuple[int, float]:
        path = find_resume_checkpoint(self.folder)
        if path is None:
            return 0, -1.0
        cached = data.resume
        state = cached[1] if cached is not None and cached[0] == path else load_checkpoint(path)
        data.resume = None
        try:
            self.model.load_state_dict(state.train_model or state.model)  # raw, not averaged
            self.optimizer.load_state_dict(state.optimizer)
            if self.scaler is not None and state.grad_scaler:
                self.scaler.load_state_dict(state.grad_scaler)
        except (RuntimeError, ValueError, KeyError) as exc:
            first = str(exc).splitlines()[0][:160]
            raise CheckpointError(
                f"{path}: does not fit this run's model or optimizer ({first}); "
                "use another --out or the same model settings"
            ) from None
        self.resumed = state
        own = restore_rng_state(state.rng, self.env.rank, self.device)
        log.info(
            "resuming from %s: %d epoch(s) complete (trained with %d workers, now %d)%s",
            path,
            state.epoch,
            state.workers,
            self.env.world_size,
            "" if own else f"; rank {self.env.rank} is new to the run and keeps fresh RNG states",
        )
        return state.epoch, state.best_miou

    def _checkpoint(self, epoch: int, best: float, record: dict[str, Any]) -> Checkpoint:
        rng = gather_rng_states(self.engine, self.device)  # a collective: every worker is here
        ema = self.ema
        return Checkpoint(
            model=ema.state_dict() if ema is not None else self.model.state_dict(),
            train_model=self.model.state_dict() if ema is not None else {},
            ema_updates=ema.updates if ema is not None else 0,
            config=self.config.to_dict(),
            optimizer=self.optimizer.state_dict(),
            grad_scaler=self.scaler.state_dict() if self.scaler is not None else {},
            scheduler={"progress_epochs": epoch, "global_batch": self.geometry.global_batch},
            epoch=epoch,
            best_miou=best,
            workers=self.env.world_size,
            rng=rng,
            metrics=record,
            pixel_size_m=self.data.pixel_size_m,
        )

    def _train_epoch(self, epoch: int, progress: Progress) -> tuple[float, float]:
        cfg = self.config
        rng = epoch_rng(cfg.run.seed, self.env.rank, epoch)
        self.data.prepare.start_epoch(self.env.rank, epoch)
        self.replica.module.train()
        progress.start_epoch(epoch + 1, self.geometry.steps_per_epoch)
        loss_sum = torch.zeros((), device=self.device)
        lr = 0.0
        k = cfg.optim.accumulate
        batches = iter(
            Prefetcher(
                lambda: self.data.sampler.batch_with_tiles(cfg.optim.batch_size, rng),
                self.geometry.steps_per_epoch * k,
                pin_memory=self.device.type == "cuda",
            )
        )
        for step in range(self.geometry.steps_per_epoch):
            lr = lr_at(cfg.optim, self.geometry, epoch + step / self.geometry.steps_per_epoch)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            micro = []
            for images, labels, tiles in itertools.islice(batches, k):
                inputs = self.data.prepare(images.to(self.device, non_blocking=True), tiles)
                if not self.channels_last:
                    inputs = inputs.contiguous()
                micro.append((inputs, labels.to(self.device, non_blocking=True).long()))
            loss = accumulation_step(
                self.replica.module,
                self.criterion,
                self.optimizer,
                micro,
                self.autocast_dtype,
                cfg.optim.grad_clip,
                sync=self.replica.syncs_gradients,
                scaler=self.scaler,
                no_sync=self.replica.no_sync,
            )
            if self.replica.local_sgd is not None:
                self.replica.local_sgd.after_step()
            if self.ema is not None:
                self.ema.update(self.model)
            loss_sum += loss
            if progress.enabled:
                progress.update(step + 1, loss, (step + 1) * self.geometry.global_batch)
        progress.end_epoch()
        if self.replica.local_sgd is not None:
            self.replica.local_sgd.synchronize()
            if self.ema is not None:  # each worker averaged its own steps
                average_across_workers(self.ema.module, self.engine)
        total = loss_sum.to(self.reduce_device).clone()
        self.engine.all_reduce_sum(total)
        return float(total) / (self.geometry.steps_per_epoch * self.env.world_size), lr

    def _validate(self) -> tuple[dict | None, float]:
        start = time.perf_counter()
        if self.data.n_val == 0:
            return None, 0.0
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
        return metrics_from_confusion(confusion.numpy(), self.mapping.names), (
            time.perf_counter() - start
        )

    def run(self) -> dict[str, Any]:
        """Trains up to ``optim.epochs`` epochs, resuming from the run's ``last.pt``.

        Returns:
            The last epoch's metrics record (empty if there was nothing to do).
        """
        cfg, env = self.config, self.env
        # resolves auto data settings, so config.yaml holds the numbers
        self.data = load_worker_data(cfg, env, self.folder, self.device, self.engine)
        if env.is_main:
            save_config(cfg, self.folder.path("config.yaml"))
            self.folder.publish("config.yaml")
        self._build_model()
        start_epoch, best = self._resume(self.data)
        self.engine.broadcast_initial(self.model, self.optimizer, resumed=start_epoch > 0)
        self.ema = start_ema(self.model, cfg.optim.ema_decay, self.resumed)
        self.resumed = None
        if cfg.run.compile:  # the training step's calls; validation and checkpoints stay eager
            self.replica.module = compile_model(self.replica.module, "training")
        if start_epoch >= cfg.optim.epochs:
            log.info(
                "nothing to do: the run already has %d epoch(s), --epochs is %d",
                start_epoch,
                cfg.optim.epochs,
            )
            return {}
        log.info(
            "training epochs %d..%d: %s, %d steps/epoch (%d samples), %s, device %s (%s)",
            start_epoch + 1,
            cfg.optim.epochs,
            self.geometry.describe_batch(),
            self.geometry.steps_per_epoch,
            self.geometry.epoch_samples,
            self.geometry.describe_lr(),
            self.device,
            self.precision.describe(),
        )
        runlog = RunLog(self.folder, start_epoch) if env.is_main else None
        progress = Progress(env.is_main, cfg.run.log_every_s, cfg.optim.epochs)
        record: dict[str, Any] = {}
        try:
            for epoch in range(start_epoch, cfg.optim.epochs):
                t0 = time.perf_counter()
                train_loss, lr = self._train_epoch(epoch, progress)
                train_s = time.perf_counter() - t0
                done = epoch + 1
                metrics, val_s = None, 0.0
                if done % cfg.run.val_every == 0 or done == cfg.optim.epochs:
                    metrics, val_s = self._validate()
                miou = metrics["miou"] if metrics else None
                is_best = miou is not None and miou > best
                best = miou if is_best else best
                record = {
                    "epoch": done,
                    "train_loss": train_loss,
                    "lr": lr,
                    "samples_per_s": self.geometry.epoch_samples / train_s,
                    "epoch_s": train_s,
                    "val_s": val_s,
                    "workers": env.world_size,
                    "global_batch": self.geometry.global_batch,
                    "steps": self.geometry.steps_per_epoch,
                    "val_miou": miou,
                    "val_accuracy": metrics["accuracy"] if metrics else None,
                    "val_iou": metrics["iou"] if metrics else None,
                    "unlearned": self._unlearned(metrics, done),
                    "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                }
                checkpoint = self._checkpoint(done, best, record)  # on every rank: RNG states
                if runlog is not None:
                    write_epoch_checkpoints(
                        self.folder,
                        checkpoint,
                        done,
                        is_best,
                        cfg.run.keep_last,
                    )
                    runlog.log_epoch(record)
                    val_text = (
                        f"val mIoU {miou:.3f} acc {record['val_accuracy']:.3f}"
                        if metrics
                        else "no validation"
                    )
                    log.info(
                        "epoch %d/%d loss %.4f %s | %.1f samples/s, %.1f s (+%.1f s val)%s",
                        done,
                        cfg.optim.epochs,
                        train_loss,
                        val_text,
                        record["samples_per_s"],
                        train_s,
                        val_s,
                        " *best*" if is_best else "",
                    )
                self.folder.publish(f"logs/rank{env.rank}.log")
                self.engine.barrier()
            self._verify_replicas()
        finally:
            if runlog is not None:
                runlog.close()
        self.folder.publish(f"logs/rank{env.rank}.log")
        return record

    def _unlearned(self, metrics: dict | None, done: int) -> list[str] | None:
        """Classes the model does not predict on the validation tiles, once past the warm-up.

        Logs one warning naming them (see :mod:`landcover.training.health`); ``None`` when
        there was no validation or the warm-up (at least one epoch) is not over.
        """
        if metrics is None or done <= max(1.0, self.config.optim.warmup_epochs):
            return None
        names = unlearned_classes(metrics)
        if names and self.env.is_main:
            log.warning("%s", unlearned_message(metrics, names, done))
        return names

    def _verify_replicas(self) -> None:
        """Checks that every worker ends with bit-identical weights (DDP kept them in sync)."""
        digest = parameter_digest(self.model)
        if self.ema is not None:
            digest = hashlib.sha256(
                (digest + parameter_digest(self.ema.module)).encode()
            ).hexdigest()
        digests = self.engine.all_gather_object(digest)
        if len(set(digests)) != 1:
            raise TrainingError(f"worker weights diverged: parameter digests {digests}")
        log.info(
            "replica check: weights identical on all %d worker(s) (sha256 %s)",
            self.env.world_size,
            digest[:16],
        )
