"""The training worker: one process per GPU (or CPU worker), data-parallel with DDP.

Each worker loads its share of the training tiles into memory once, draws random patches from
them, and takes ``ceil(samples_per_epoch / global_batch)`` steps per epoch (the batch geometry:
:mod:`~landcover.training.geometry`). Rank 0 writes the run folder and checkpoints; every run
resumes from its ``last.pt``.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import os
import time
from datetime import datetime, timezone
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from landcover.config import Config, config_from_dict, save_config
from landcover.data.memory import load_tiles, training_pixel_size
from landcover.data.normalize import BandNormalizer
from landcover.data.pairs import split_pairs
from landcover.data.prefetch import Prefetcher
from landcover.data.raster import TileArrays
from landcover.data.sample import data_root
from landcover.data.sampler import PatchSampler, epoch_rng
from landcover.data.sharding import shard
from landcover.data.stats import DataStats
from landcover.devices import autocast, resolve_device
from landcover.distributed import (
    DistEnv,
    all_gather_object,
    all_reduce_sum,
    barrier,
    destroy_process_group,
    env_from_environ,
    init_process_group,
)
from landcover.errors import CheckpointError, DataError, PeerFailureError, TrainingError
from landcover.inference.sliding import SlidingWindowPredictor
from landcover.logs import setup_logging
from landcover.metrics import metrics_from_confusion
from landcover.models import build_model, final_stage_warning, load_initial_weights
from landcover.training import horovod_engine
from landcover.training.autostats import measure_shares, needs_resolving, resolve_auto
from landcover.training.checkpoint import (
    checkpoint_state,
    find_resume_checkpoint,
    load_checkpoint,
    restore_rng_state,
    write_epoch_checkpoints,
)
from landcover.training.communication import LocalSGD, configure_gradient_compression
from landcover.training.geometry import BatchGeometry
from landcover.training.health import unlearned_classes, unlearned_message
from landcover.training.losses import SegmentationLoss
from landcover.training.progress import Progress
from landcover.training.runfolder import RunFolder
from landcover.training.runlog import RunLog
from landcover.training.schedule import lr_at
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


def build_optimizer(params: Any, config: Config) -> torch.optim.Optimizer:
    """Builds the optimizer named in the config.

    Args:
        params: Model parameters.
        config: The run configuration.

    Returns:
        The optimizer (its learning rate is set every step by the schedule).
    """
    o = config.optim
    if o.optimizer == "sgd":
        return torch.optim.SGD(params, lr=o.lr, momentum=o.momentum, weight_decay=o.weight_decay)
    cls = torch.optim.AdamW if o.optimizer == "adamw" else torch.optim.Adam
    return cls(params, lr=o.lr, betas=(o.momentum, 0.999), weight_decay=o.weight_decay)


def train_step(
    model: nn.Module,
    criterion: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    target: torch.Tensor,
    autocast_dtype: torch.dtype | None = None,
    grad_clip: float | None = None,
) -> torch.Tensor:
    """One synchronous data-parallel SGD step (DDP all-reduces gradients in ``backward``).

    Args:
        model: The model, DDP-wrapped when there are several workers.
        criterion: The loss.
        optimizer: The optimizer.
        inputs: ``(B, C, H, W)`` float input.
        target: ``(B, H, W)`` int64 class indices.
        autocast_dtype: Autocast dtype (bf16 on CUDA), or ``None`` for fp32.
        grad_clip: Optional gradient-norm clip.

    Returns:
        The detached loss.
    """
    return accumulation_step(
        model, criterion, optimizer, [(inputs, target)], autocast_dtype, grad_clip
    )


def accumulation_step(
    model: nn.Module,
    criterion: nn.Module,
    optimizer: torch.optim.Optimizer,
    micro_batches: list[tuple[torch.Tensor, torch.Tensor]],
    autocast_dtype: torch.dtype | None = None,
    grad_clip: float | None = None,
    sync: bool = True,
) -> torch.Tensor:
    """One optimizer step over K micro-batches, all-reducing gradients once (or never).

    Args:
        model: The model, DDP-wrapped when there are several workers.
        criterion: The loss.
        optimizer: The optimizer.
        micro_batches: ``(inputs, target)`` pairs; their gradients are averaged.
        autocast_dtype: Autocast dtype (bf16 on CUDA), or ``None`` for fp32.
        grad_clip: Optional gradient-norm clip.
        sync: All-reduce the gradients with the last micro-batch (False for local SGD).

    Returns:
        The detached mean loss over the micro-batches.
    """
    optimizer.zero_grad()  # None gradients (Horovod's zero_grad takes no arguments)
    total = torch.zeros((), device=micro_batches[0][0].device)
    k = len(micro_batches)
    # Horovod's DistributedOptimizer all-reduces in hooks and counts backward passes itself
    horovod = hasattr(optimizer, "synchronize")
    for i, (inputs, target) in enumerate(micro_batches):
        skip_sync = isinstance(model, DistributedDataParallel) and (i < k - 1 or not sync)
        with model.no_sync() if skip_sync else contextlib.nullcontext():
            with autocast(inputs.device, autocast_dtype):
                logits = model(inputs)
            loss = criterion(logits, target) / k
            loss.backward()
        total += loss.detach()
    if grad_clip is not None and horovod:
        optimizer.synchronize()  # type: ignore[attr-defined]
        nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        with optimizer.skip_synchronize():  # type: ignore[attr-defined]
            optimizer.step()
        return total
    if grad_clip is not None:
        nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return total


class Trainer:
    """Trains one worker's part of a data-parallel run.

    Args:
        config: The resolved configuration.
        env: The worker's place in the job.
    """

    _resume_state: tuple[str, dict[str, Any]] | None = None
    """The checkpoint to resume from, when it was already loaded for its data statistics."""

    def __init__(self, config: Config, env: DistEnv) -> None:
        self.config = config
        self.env = env
        config.run.workers = env.world_size  # as launched (an external launcher may differ)
        self.folder = RunFolder(config.run.out)
        self.mapping = config.data.classes
        self.device = resolve_device(config.run.device, env)
        cuda = self.device.type == "cuda"
        self.autocast_dtype = torch.bfloat16 if cuda and config.run.bf16 else None
        self.channels_last = cuda and config.run.channels_last
        self.geometry = BatchGeometry.from_optim(config.optim, env.world_size)
        self.reduce_device = self.device if cuda else torch.device("cpu")

    def _load_data(self) -> None:
        cfg, env = self.config.data, self.env
        root = data_root(cfg.root)
        train_pairs, val_pairs = split_pairs(cfg, root)
        bands = len(cfg.bands)
        mine = shard(train_pairs, env.rank, env.world_size)
        fetch = {"concurrency": cfg.fetch_concurrency, "cache_dir": cfg.cache_dir}
        fetch["resolution"] = cfg.resolution  # resolution hook: resample on load
        log.info(
            "rank %d/%d fetching its %d training tiles (%d files) from %s",
            env.rank,
            env.world_size,
            len(mine),
            2 * len(mine),
            root,
        )
        tiles, report = load_tiles(mine, self.mapping, bands, **fetch)
        log.info(
            "rank %d/%d holds %d of %d training tiles [%s]: fetched %d bytes in %.2f s "
            "(%.1f MB/s), %.1f MB in memory after %.2f s",
            env.rank,
            env.world_size,
            len(tiles),
            len(train_pairs),
            ", ".join(report.tiles),
            report.file_bytes,
            report.fetch_seconds,
            report.fetch_mb_per_s,
            report.megabytes,
            report.seconds,
        )
        self.val_tiles, val_report = load_tiles(
            val_pairs[env.rank :: env.world_size], self.mapping, bands, **fetch
        )
        log.info(
            "rank %d/%d holds %d of %d validation tiles [%s]: %.1f MB in %.2f s",
            env.rank,
            env.world_size,
            len(self.val_tiles),
            len(val_pairs),
            ", ".join(val_report.tiles),
            val_report.megabytes,
            val_report.seconds,
        )
        self.n_val = len(val_pairs)
        self.pixel_size_m = training_pixel_size(tiles, cfg.resolution)  # resolution hook
        self._resolve_data_stats(tiles, len(train_pairs))
        try:
            self.sampler = PatchSampler(
                tiles,
                cfg.patch_size,
                self.mapping.num_classes,
                max_nodata_fraction=cfg.max_nodata_fraction,
                oversample_rare=cfg.oversample_rare,
                augment=cfg.augment,
            )
        except ValueError as exc:
            raise DataError(f"rank {env.rank}: {exc}") from None

    def _resolve_data_stats(self, tiles: list[TileArrays], n_train: int) -> None:
        """Replaces ``auto`` band statistics and class weights by numbers; builds the normaliser.

        A resumed run takes them from its checkpoint (which is then kept for :meth:`_resume`).
        """
        cfg, env = self.config, self.env
        previous, source = None, "checkpoint"
        if needs_resolving(cfg):
            path = find_resume_checkpoint(self.folder)
            if path is not None:
                self._resume_state = (path, load_checkpoint(path))
                source = f"checkpoint {path}"
                previous = config_from_dict(self._resume_state[1]["config"], f"{path}: config")

        def measure() -> DataStats:
            return measure_shares(tiles, env.rank, env.world_size, n_train, cfg, self.reduce_device)

        for line in resolve_auto(cfg, measure, previous, source):
            log.info("%s", line)
        self.prepare = BandNormalizer(cfg.data.mean, cfg.data.std, self.device)

    def _build_model(self) -> None:
        cfg = self.config
        torch.manual_seed(cfg.run.seed)
        model = build_model(cfg.model, len(cfg.data.bands), self.mapping.num_classes)
        narrow = final_stage_warning(cfg.model, self.mapping.num_classes)
        if narrow and self.env.is_main:
            log.warning("%s", narrow)
        resuming = find_resume_checkpoint(self.folder) is not None
        if cfg.model.weights and resuming:  # the checkpoint's weights replace them anyway
            log.info("model.weights %r not loaded: resuming from a checkpoint", cfg.model.weights)
        elif cfg.model.weights:
            log.info(load_initial_weights(model, cfg.model, len(cfg.data.bands)).summary())
        if self.env.distributed and self.device.type == "cuda" and cfg.run.engine == "torch":
            # (torch's SyncBatchNorm needs a torch.distributed group: not under Horovod)
            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        model.to(self.device)
        if self.channels_last:
            model.to(memory_format=torch.channels_last)
        self.model = model
        self.ddp: nn.Module = model
        torch_ddp = self.env.distributed and cfg.run.engine == "torch"
        if torch_ddp:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.ddp = DistributedDataParallel(model, device_ids=ids)
            configure_gradient_compression(
                self.ddp,
                cfg.run.grad_compression,
                cfg.run.powersgd_rank,
                cfg.run.powersgd_warmup_steps,
            )
        period = cfg.run.local_sgd_period
        self.local_sgd = LocalSGD(model, period) if period and self.env.distributed else None
        self.optimizer = build_optimizer(model.parameters(), cfg)
        if cfg.run.engine == "horovod" and self.local_sgd is None:
            self.optimizer = horovod_engine.distributed_optimizer(
                self.optimizer, model, cfg.run.grad_compression, cfg.optim.accumulate
            )
        self.criterion = SegmentationLoss(cfg.optim.loss, self.mapping.num_classes).to(self.device)

    def _resume(self) -> tuple[int, float]:
        path = find_resume_checkpoint(self.folder)
        if path is None:
            return 0, -1.0
        cached, self._resume_state = self._resume_state, None
        state = cached[1] if cached is not None and cached[0] == path else load_checkpoint(path)
        try:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as exc:
            first = str(exc).splitlines()[0][:160]
            raise CheckpointError(
                f"{path}: does not fit this run's model or optimizer ({first}); "
                "use another --out or the same model settings"
            ) from None
        restore_rng_state(state["rng"])
        epoch = int(state["epoch"])
        log.info(
            "resuming from %s: %d epoch(s) complete (trained with %d workers, now %d)",
            path,
            epoch,
            state["workers"],
            self.env.world_size,
        )
        return epoch, float(state.get("best_miou", -1.0))

    def _checkpoint_state(self, epoch: int, best: float, record: dict) -> dict[str, Any]:
        return checkpoint_state(
            self.model,
            self.config.to_dict(),
            optimizer=self.optimizer,
            epoch=epoch,
            best_miou=best,
            workers=self.env.world_size,
            scheduler={"progress_epochs": epoch, "global_batch": self.geometry.global_batch},
            metrics=record,
            pixel_size_m=self.pixel_size_m,  # resolution hook
        )

    def _train_epoch(self, epoch: int, progress: Progress) -> tuple[float, float]:
        cfg = self.config
        rng = epoch_rng(cfg.run.seed, self.env.rank, epoch)
        self.ddp.train()
        progress.start_epoch(epoch + 1, self.geometry.steps_per_epoch)
        loss_sum = torch.zeros((), device=self.device)
        lr = 0.0
        k = cfg.optim.accumulate
        batches = iter(
            Prefetcher(
                lambda: self.sampler.batch(cfg.optim.batch_size, rng),
                self.geometry.steps_per_epoch * k,
                pin_memory=self.device.type == "cuda",
            )
        )
        for step in range(self.geometry.steps_per_epoch):
            lr = lr_at(cfg.optim, self.geometry, epoch + step / self.geometry.steps_per_epoch)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            micro = []
            for images, labels in itertools.islice(batches, k):
                inputs = self.prepare(images.to(self.device, non_blocking=True))
                if not self.channels_last:
                    inputs = inputs.contiguous()
                micro.append((inputs, labels.to(self.device, non_blocking=True).long()))
            loss = accumulation_step(
                self.ddp,
                self.criterion,
                self.optimizer,
                micro,
                self.autocast_dtype,
                cfg.optim.grad_clip,
                sync=self.local_sgd is None,
            )
            if self.local_sgd is not None:
                self.local_sgd.after_step()
            loss_sum += loss
            if progress.enabled:
                progress.update(step + 1, loss, (step + 1) * self.geometry.global_batch)
        progress.end_epoch()
        if self.local_sgd is not None:
            self.local_sgd.synchronize()
        total = loss_sum.to(self.reduce_device).clone()
        all_reduce_sum(total)
        return float(total) / (self.geometry.steps_per_epoch * self.env.world_size), lr

    def _validate(self) -> tuple[dict | None, float]:
        start = time.perf_counter()
        if self.n_val == 0:
            return None, 0.0
        cfg = self.config
        predictor = SlidingWindowPredictor(
            self.model,
            cfg.data.patch_size,
            cfg.run.val_overlap,
            cfg.optim.batch_size,
            self.prepare,
            self.device,
            self.autocast_dtype,
        )
        confusion = validation_confusion(
            predictor, self.val_tiles, self.mapping.num_classes, self.reduce_device
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
        self._load_data()  # resolves auto data settings, so config.yaml holds the numbers
        if env.is_main:
            save_config(cfg, self.folder.path("config.yaml"))
            self.folder.publish("config.yaml")
        self._build_model()
        start_epoch, best = self._resume()
        if cfg.run.engine == "horovod":
            horovod_engine.broadcast_state(self.model, self.optimizer, resumed=start_epoch > 0)
        if start_epoch >= cfg.optim.epochs:
            log.info(
                "nothing to do: the run already has %d epoch(s), --epochs is %d",
                start_epoch,
                cfg.optim.epochs,
            )
            return {}
        log.info(
            "training epochs %d..%d: %s, %d steps/epoch (%d samples), %s, device %s%s",
            start_epoch + 1,
            cfg.optim.epochs,
            self.geometry.describe_batch(),
            self.geometry.steps_per_epoch,
            self.geometry.epoch_samples,
            self.geometry.describe_lr(),
            self.device,
            " bf16" if self.autocast_dtype else "",
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
                if runlog is not None:
                    write_epoch_checkpoints(
                        self.folder,
                        self._checkpoint_state(done, best, record),
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
                barrier()
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
        digests = all_gather_object(digest)
        if len(set(digests)) != 1:
            raise TrainingError(f"worker weights diverged: parameter digests {digests}")
        log.info(
            "replica check: weights identical on all %d worker(s) (sha256 %s)",
            self.env.world_size,
            digest[:16],
        )


_COLLECTIVE_FAILURES = (
    "timed out",
    "connection closed by peer",
    "connection reset by peer",
    "gloo",
    "nccl",
    "processgroup",
    "horovod",
)


def is_collective_failure(exc: BaseException) -> bool:
    """Whether an exception is a failed collective (a dead, hung or unreachable peer).

    torch raises ``DistError`` for some, and a plain ``RuntimeError`` from the Gloo/NCCL
    transport (through the autograd engine during DDP's all-reduce) for others.

    Args:
        exc: The exception.

    Returns:
        True for a collective failure.
    """
    if isinstance(exc, torch.distributed.DistError):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and any(p in text for p in _COLLECTIVE_FAILURES)


def run_worker(config: Config, env: DistEnv) -> dict[str, Any]:
    """Runs one training worker: joins the process group, trains, leaves.

    Args:
        config: The resolved configuration.
        env: The worker's place.

    Returns:
        The last epoch's metrics record.
    """
    setup_logging(env, RunFolder(config.run.out).local)
    threads = config.run.threads_per_worker or max(1, (os.cpu_count() or 1) // env.local_world_size)
    torch.set_num_threads(threads)
    horovod = config.run.engine == "horovod"
    backend = config.run.backend
    if horovod:
        backend = "horovod"
    elif backend == "auto":
        cuda = config.run.device != "cpu" and torch.cuda.is_available()
        backend = "nccl" if cuda else "gloo"
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    log.info(
        "rank %d/%d: pid %d, local rank %d, %d threads, backend %s%s",
        env.rank,
        env.world_size,
        os.getpid(),
        env.local_rank,
        threads,
        backend,
        f", restart {restart} of the worker group" if restart else "",
    )
    if horovod:
        joined = horovod_engine.init_horovod()
        if joined[:2] != (env.rank, env.world_size):
            raise TrainingError(
                f"Horovod placed this worker at rank {joined[0]} of {joined[1]}, the launcher "
                f"at {env.rank} of {env.world_size}"
            )
    else:
        init_process_group(env, backend, config.run.timeout_s)
    try:
        return Trainer(config, env).run()
    except RuntimeError as exc:
        if not is_collective_failure(exc):
            raise
        first = str(exc).splitlines()[0][:200] if str(exc) else exc.__class__.__name__
        raise PeerFailureError(
            f"rank {env.rank}: a collective operation failed ({first}); a peer worker died, "
            f"hung or did not answer within run.timeout_s={config.run.timeout_s:g} s"
        ) from None
    finally:
        if horovod:
            horovod_engine.shutdown_horovod()
        else:
            destroy_process_group()


def worker_entry(config_dict: dict[str, Any]) -> dict[str, Any]:
    """Entry point of a worker process started by landcover's launcher.

    Args:
        config_dict: The resolved configuration as plain data.

    Returns:
        The last epoch's metrics record.
    """
    env = env_from_environ() or DistEnv()
    return run_worker(config_from_dict(config_dict), env)
