"""Train benchmark: end-to-end training samples/s on CPU, ours against torchgeo's trainer.

One process, the same model for all three (the CPU config's U-Net, ``build_model(config.model,
4, num_classes)``, random initial weights, the same seed), the same batch, patch size, loss
(cross-entropy ignoring no-data), optimizer (AdamW) and torch thread count:

- **ours**: the training loop's data path in-process: ``load_tiles`` + ``PatchSampler``
  (D4 augment, the config's no-data and rare-class settings) drawing batches in the
  ``Prefetcher``'s background thread, ``BandNormalizer``, then ``train_step`` (with the learning
  rate set every step, as ``Trainer._train_epoch`` does).
- **bare**: the same ``train_step`` on tensors already in memory (no data pipeline): the ceiling
  for the line above. Goal: ours / bare >= 0.95.
- **torchgeo**: torchgeo's ``SemanticSegmentationTask`` under a lightning ``Trainer`` (CPU, one
  device), fed by ``RandomGeoSampler`` over ``NAIP & ChesapeakeLabels`` on the same files
  (``DataLoader``, ``num_workers=0``, ``stack_samples``; images normalised with the config's
  mean/std, labels mapped to classes). The task builds ``smp.Unet`` with smp's default decoder,
  so ``configure_models`` is overridden to build our model: the same network. Its scheduler
  monitors ``train_loss`` (there is no validation here). Goal: ours / torchgeo >= 1.

The three run in alternating rounds (so a change of load on a shared machine hits all of them)
after some warm-up steps each. In every round the first step is not timed; the clock then runs
from the end of one step to the end of the last (data loading included), until the round's
time is up. samples/s = measured steps x batch / measured seconds, summed over the rounds.
torchgeo's steps are timed by a lightning ``Callback`` (``on_train_batch_end``).

Usage: python benchmarks/train_bench.py [--quick] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, RESULTS, Goal, write_results
from io_bench import (
    CONFIG,
    bench_config,
    bench_data,
    quiet_torchgeo,
    torchgeo_dataset,
    torchgeo_loader,
)

from landcover.config import Config
from landcover.models import build_model

DEVICE = torch.device("cpu")
GOAL_BARE = 0.95
GOAL_TORCHGEO = 1.0
MAX_STEPS = 100_000


class Clock:
    """Step timestamps of one configuration, summed over rounds.

    Args:
        seconds: Measured time per round.
        min_steps: Measured steps per round at least.
    """

    def __init__(self, seconds: float, min_steps: int) -> None:
        self.seconds = seconds
        self.min_steps = min_steps
        self.intervals: list[float] = []
        self._stamps: list[float] = []

    def start_round(self) -> None:
        """Forgets the last round's stamps (its intervals are kept)."""
        self._stamps = []

    def tick(self) -> bool:
        """Records the end of a step.

        Returns:
            Whether the round is done (its first step ends the untimed part).
        """
        now = time.perf_counter()
        if self._stamps:
            self.intervals.append(now - self._stamps[-1])
        self._stamps.append(now)
        measured = len(self._stamps) - 1
        return measured >= self.min_steps and now - self._stamps[0] >= self.seconds

    @property
    def steps(self) -> int:
        """Measured steps over all rounds."""
        return len(self.intervals)

    @property
    def elapsed(self) -> float:
        """Measured seconds over all rounds."""
        return sum(self.intervals)


def measure_band_stats(config: Config, folder: Path) -> Config:
    """The configuration with ``data.mean/std: auto`` replaced by the tiles' numbers (untimed).

    Args:
        config: The benchmark configuration (unchanged).
        folder: The tile pairs.

    Returns:
        The configuration to train with.
    """
    from landcover.data.measure import measure_pairs
    from landcover.data.pairs import discover_pairs

    data = config.data
    if not data.stats_auto:
        return config
    pairs = discover_pairs(str(folder), data.image_suffix, data.label_suffix)
    stats = measure_pairs(pairs, data.classes, len(data.bands)).stats
    return config.replace(data=data.replace(mean=stats.mean(), std=stats.std()))


def run_steps(step: Callable[[], Any], clock: Clock | None, count: int = 0) -> None:
    """Runs ``count`` untimed steps, or one round of ``clock``.

    Args:
        step: One training step.
        clock: The configuration's clock, or ``None`` for untimed warm-up steps.
        count: Warm-up steps (when ``clock`` is ``None``).
    """
    if clock is None:
        for _ in range(count):
            step()
        return
    clock.start_round()
    while True:
        step()
        if clock.tick():
            return


class OursLoop:
    """Our training loop's data path and step, one round (an epoch's iterator) at a time.

    Args:
        config: The benchmark configuration.
        folder: The tile pairs.
    """

    def __init__(self, config: Config, folder: Path) -> None:
        from landcover.data.normalize import BandNormalizer
        from landcover.data.pairs import discover_pairs
        from landcover.feed.memory import load_tiles
        from landcover.feed.sampler import PatchSampler
        from landcover.training.losses import SegmentationLoss
        from landcover.training.step import build_optimizer

        cfg = config.data
        self.config = config
        start = time.perf_counter()
        pairs = discover_pairs(str(folder), cfg.image_suffix, cfg.label_suffix)
        tiles, self.report = load_tiles(pairs, cfg.classes, len(cfg.bands))
        self.sampler = PatchSampler.from_config(tiles, cfg)
        self.setup_s = time.perf_counter() - start
        self.prepare = BandNormalizer(cfg.mean, cfg.std, DEVICE)
        self.model = new_model(config)
        self.optimizer = build_optimizer(self.model.parameters(), config)
        self.criterion = SegmentationLoss(config.optim.loss, cfg.classes.num_classes)
        self.epoch = 0
        self._batches: Any = None

    def begin(self) -> None:
        """Starts a new epoch's batch stream (a new ``Prefetcher``, as the trainer does)."""
        from landcover.feed.prefetch import Prefetcher
        from landcover.feed.sampler import epoch_rng

        self.end()
        self.model.train()
        rng = epoch_rng(self.config.run.seed, 0, self.epoch)
        batch = self.config.optim.batch_size
        self._prefetcher = Prefetcher(lambda: self.sampler.batch(batch, rng), MAX_STEPS)
        self._batches = iter(self._prefetcher)
        self.epoch += 1

    def end(self) -> None:
        """Stops the current batch stream."""
        if self._batches is not None:
            self._batches.close()
            self._prefetcher.close()
            self._batches = None

    def step(self) -> None:
        """One training step on the next batch (as ``Trainer._train_epoch`` takes it)."""
        from landcover.training.geometry import BatchGeometry
        from landcover.training.schedule import lr_at
        from landcover.training.step import train_step

        optim = self.config.optim
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(optim, BatchGeometry.from_optim(optim, 1), float(self.epoch))
        images, labels = next(self._batches)
        inputs = self.prepare(images.to(DEVICE, non_blocking=True)).contiguous()
        target = labels.to(DEVICE, non_blocking=True).long()
        train_step(
            self.model, self.criterion, self.optimizer, inputs, target, None, optim.grad_clip
        )


class BareLoop:
    """The same ``train_step`` on one batch of tensors held in memory (no data pipeline).

    Args:
        config: The benchmark configuration.
    """

    def __init__(self, config: Config) -> None:
        from landcover.data.normalize import BandNormalizer
        from landcover.training.losses import SegmentationLoss
        from landcover.training.step import build_optimizer

        cfg, optim = config.data, config.optim
        self.config = config
        generator = torch.Generator().manual_seed(0)
        size = (optim.batch_size, cfg.patch_size, cfg.patch_size)
        images = torch.randint(0, 256, (*size, len(cfg.bands)), generator=generator)
        self.inputs = BandNormalizer(cfg.mean, cfg.std, DEVICE)(images.to(torch.uint8))
        self.inputs = self.inputs.contiguous()
        self.target = torch.randint(0, cfg.classes.num_classes, size, generator=generator)
        self.model = new_model(config)
        self.optimizer = build_optimizer(self.model.parameters(), config)
        self.criterion = SegmentationLoss(optim.loss, cfg.classes.num_classes)

    def step(self) -> None:
        """One training step on the in-memory batch."""
        from landcover.training.geometry import BatchGeometry
        from landcover.training.schedule import lr_at
        from landcover.training.step import train_step

        optim = self.config.optim
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(optim, BatchGeometry.from_optim(optim, 1), 1.0)
        train_step(
            self.model,
            self.criterion,
            self.optimizer,
            self.inputs,
            self.target,
            None,
            optim.grad_clip,
        )


def new_model(config: Config) -> torch.nn.Module:
    """The benchmark's model, from the same seed every time.

    Args:
        config: The benchmark configuration.

    Returns:
        ``build_model(config.model, bands, classes)`` in training mode.
    """
    torch.manual_seed(config.run.seed)
    model = build_model(config.model, len(config.data.bands), config.data.classes.num_classes)
    return model.to(DEVICE).train()


class TorchgeoLoop:
    """torchgeo's ``SemanticSegmentationTask`` under lightning, one ``fit`` per round.

    Args:
        config: The benchmark configuration.
        folder: The tile pairs.
    """

    def __init__(self, config: Config, folder: Path) -> None:
        from lightning.pytorch import Callback
        from torchgeo.trainers import SemanticSegmentationTask

        cfg = config.data
        self.config = config
        start = time.perf_counter()
        self.dataset = torchgeo_dataset(folder, cfg.classes, normalize=(cfg.mean, cfg.std))
        self.setup_s = time.perf_counter() - start

        class Task(SemanticSegmentationTask):
            monitor = "train_loss"  # no validation in this benchmark

            def configure_models(self) -> None:
                self.model = new_model(config)

        self.task = Task(
            model="unet",
            backbone=config.model.encoder,
            weights=None,
            in_channels=len(cfg.bands),
            num_classes=cfg.classes.num_classes,
            loss="ce",
            ignore_index=255,
            lr=config.optim.lr,
        )
        self.threads_seen: set[int] = set()
        outer = self

        class StepClock(Callback):
            def __init__(self, clock: Clock | None) -> None:
                self.clock = clock

            def on_train_batch_end(self, trainer: Any, *args: Any, **kwargs: Any) -> None:
                outer.threads_seen.add(torch.get_num_threads())
                if self.clock is not None and self.clock.tick():
                    trainer.should_stop = True

        self._callback = StepClock

    def fit(self, clock: Clock | None, steps: int = 0) -> None:
        """Runs one ``Trainer.fit``: ``steps`` untimed steps, or one round of ``clock``.

        Args:
            clock: The clock, or ``None`` for warm-up.
            steps: Steps of a warm-up fit.
        """
        from lightning.pytorch import Trainer

        batch = self.config.optim.batch_size
        loader = torchgeo_loader(self.dataset, self.config.data.patch_size, batch, 10**7)
        if clock is not None:
            clock.start_round()
        trainer = Trainer(
            accelerator="cpu",
            devices=1,
            max_epochs=1,
            max_steps=steps if clock is None else MAX_STEPS,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            limit_val_batches=0,
            callbacks=[self._callback(clock)],
        )
        trainer.fit(self.task, train_dataloaders=loader)


def summary(name: str, what: str, clock: Clock, batch: int, setup_s: float | None) -> dict:
    """One table row: measured steps, seconds and samples/s of a configuration."""
    median = statistics.median(clock.intervals)
    return {
        "config": name,
        "what": what,
        "steps": clock.steps,
        "seconds": round(clock.elapsed, 1),
        "samples_per_s": clock.steps * batch / clock.elapsed,
        "median_step_s": round(median, 3),
        "median_samples_per_s": batch / median,
        "setup_s": "" if setup_s is None else round(setup_s, 2),
    }


def run(quick: bool, out: Path) -> list[Goal]:
    """Measures training samples/s of the three configurations, writes ``train.json`` / ``.csv``.

    Args:
        quick: Fewer, shorter rounds (under 90 s on 2 quiet cores).
        out: Results folder.

    Returns:
        The two train goals: ours / bare >= 0.95 and ours / torchgeo >= 1.
    """
    quiet_torchgeo()
    threads = os.cpu_count() or 1  # what `landcover train --workers 1` uses
    torch.set_num_threads(threads)
    tiles, size = (4, 1024) if quick else (8, 2048)
    warmup, rounds, round_s, min_steps = (1, 3, 3.5, 2) if quick else (2, 6, 11.0, 2)
    config = bench_config()
    batch, patch = config.optim.batch_size, config.data.patch_size
    folder = bench_data(tiles, size)
    config = measure_band_stats(config, folder)

    ours = OursLoop(config, folder)
    bare = BareLoop(config)
    import_start = time.perf_counter()
    import lightning  # noqa: F401  (import time reported, not counted)
    import torchgeo.trainers  # noqa: F401

    import_s = time.perf_counter() - import_start
    quiet_torchgeo()  # again: importing lightning set its loggers to INFO
    tg = TorchgeoLoop(config, folder)

    clocks = {name: Clock(round_s, min_steps) for name in ("ours", "bare", "torchgeo")}
    ours.begin()
    run_steps(ours.step, None, warmup)
    run_steps(bare.step, None, warmup)
    tg.fit(None, warmup)
    for _ in range(rounds):
        ours.begin()
        run_steps(ours.step, clocks["ours"])
        ours.end()
        run_steps(bare.step, clocks["bare"])
        tg.fit(clocks["torchgeo"])

    rows = [
        summary(
            "ours",
            "PatchSampler + Prefetcher + BandNormalizer + train_step",
            clocks["ours"],
            batch,
            ours.setup_s,
        ),
        summary("bare", "train_step on in-memory tensors", clocks["bare"], batch, None),
        summary(
            "torchgeo",
            "SemanticSegmentationTask + lightning, RandomGeoSampler",
            clocks["torchgeo"],
            batch,
            tg.setup_s,
        ),
    ]
    rate = {r["config"]: r["samples_per_s"] for r in rows}
    over_bare = rate["ours"] / rate["bare"]
    over_tg = rate["ours"] / rate["torchgeo"]
    model = config.model
    setting = (
        f"U-Net {model.encoder}, decoder {model.decoder_channels}, random init, batch {batch}, "
        f"patch {patch}, CPU, {threads} torch threads, one process; {rounds} alternating "
        f"rounds of >= {round_s:g} s after {warmup} warm-up step(s) each"
    )
    goals = [
        Goal(
            part="train",
            goal="end-to-end training samples/s / train_step on in-memory tensors",
            value=round(over_bare, 3),
            target=f">= {GOAL_BARE:g}",
            holds=over_bare >= GOAL_BARE,
            note=(
                f"ours {rate['ours']:.2f} vs bare {rate['bare']:.2f} samples/s "
                f"({rows[0]['steps']} and {rows[1]['steps']} measured steps); {setting}"
            ),
        ),
        Goal(
            part="train",
            goal="end-to-end training samples/s / torchgeo SemanticSegmentationTask",
            value=round(over_tg, 3),
            target=f">= {GOAL_TORCHGEO:g}",
            holds=over_tg >= GOAL_TORCHGEO,
            note=(
                f"ours {rate['ours']:.2f} vs torchgeo {rate['torchgeo']:.2f} samples/s "
                f"({rows[2]['steps']} measured steps); the same network in both (torchgeo's "
                "configure_models overridden to build ours: its own 'unet' has smp's default "
                "decoder), same loss and AdamW; torchgeo also computes its per-step train "
                f"accuracy/IoU; {setting}"
            ),
        ),
    ]
    extra = {
        "quick": quick,
        "settings": {
            "config": str(CONFIG.relative_to(REPO)),
            "encoder": model.encoder,
            "decoder_channels": model.decoder_channels,
            "batch": batch,
            "patch": patch,
            "tiles": tiles,
            "tile_px": size,
            "torch_threads": threads,
            "torchgeo_threads_seen": sorted(tg.threads_seen),
            "warmup_steps": warmup,
            "rounds": rounds,
            "round_s": round_s,
        },
        "ours_over_bare": over_bare,
        "ours_over_torchgeo": over_tg,
        "step_intervals_s": {name: c.intervals for name, c in clocks.items()},
        "ours_memory_mb": ours.report.megabytes,
        "lightning_torchgeo_import_s": import_s,
    }
    write_results("train", rows, extra, out, goals)
    return goals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter rounds")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    args = parser.parse_args()
    run(args.quick, args.out)


if __name__ == "__main__":
    main()
