"""Resolving ``auto`` data settings when training starts: band statistics and class weights.

``data.mean: auto`` / ``data.std: auto`` are measured from the training tiles the workers hold
in memory: each worker accumulates exact histograms of its share
(:class:`~landcover.data.stats.DataStats`), and one int64 all-reduce sums them, so every worker
gets the same numbers. When there are more workers than tiles, several workers hold the same
tile; only one of them counts it (:func:`~landcover.data.sharding.counts_once`).

``optim.loss.class_weights: auto`` becomes frequency weights (median-frequency or inverse
square root, capped: :func:`~landcover.training.losses.frequency_weights`) of
``data.class_frequencies`` when the config gives them (say, from an included ``landcover data
stats`` file), else of the class frequencies measured the same way.

A resumed run takes every ``auto`` value from its checkpoint's config instead of measuring
again, so it keeps normalising as before. Explicit numbers are always used as given. The
resolved numbers are a record (:class:`~landcover.training.resolved.ResolvedStats`) that makes
the run's effective configuration, which the run folder's ``config.yaml`` and every checkpoint
hold, so ``predict`` and ``evaluate`` use exactly what training used.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from landcover.config import AUTO, Config
from landcover.data.stats import DataStats
from landcover.parallel.engine import Engine
from landcover.training.losses import frequency_weights, weight_bounds
from landcover.training.resolved import ResolvedStats


def needs_resolving(config: Config) -> bool:
    """Whether any ``auto`` value is left in the config.

    Args:
        config: The run configuration.

    Returns:
        True when ``data.mean``, ``data.std`` or ``optim.loss.class_weights`` is ``auto``.
    """
    return config.data.stats_auto or config.optim.loss.class_weights == AUTO


def reduce_stats(
    local: DataStats, config: Config, device: torch.device, engine: Engine
) -> DataStats:
    """Statistics of all training tiles, from every worker's part (a collective call).

    Args:
        local: This worker's part (:func:`~landcover.feed.share.share_stats`: each tile
            counted by one worker).
        config: The run configuration (bands and classes).
        device: Device of the collective backend (CUDA for NCCL, else CPU).
        engine: The engine whose group sums the statistics.

    Returns:
        The statistics of every training tile, each counted once; the same on every worker.
    """
    bands, num_classes = len(config.data.bands), config.data.classes.num_classes
    vector = torch.from_numpy(local.to_vector()).to(device)
    engine.all_reduce_sum(vector)
    return DataStats.from_vector(vector.cpu().numpy(), bands, num_classes)


def _numbers(values: list[float]) -> str:
    return "[" + ", ".join(f"{v:.6f}" for v in values) + "]"


def _named(names: list[str], values: list[float]) -> str:
    return ", ".join(f"{n} {v:.4f}" for n, v in zip(names, values, strict=True))


def resolve_auto(
    config: Config,
    measure: Callable[[], DataStats],
    previous: Config | None = None,
    previous_source: str = "checkpoint",
) -> tuple[ResolvedStats, list[str]]:
    """The numbers that replace every ``auto`` value of the config (which is not changed).

    ``measure`` is called at most once, and only when something is left to measure; in a
    multi-worker job it is a collective call, and every worker makes the same decision
    because every worker has the same config and checkpoint.

    Args:
        config: The run configuration.
        measure: Returns the statistics of the training tiles.
        previous: The resumed checkpoint's configuration, if the run resumes.
        previous_source: Where ``previous`` came from, for the log.

    Returns:
        The resolved numbers (configured ones as given), and log lines saying what was
        resolved and how.
    """
    data, loss = config.data, config.optim.loss
    mean, std, frequencies = data.mean, data.std, data.class_frequencies
    weights = loss.class_weights
    lines: list[str] = []
    bands_auto, weights_auto = data.stats_auto, weights == AUTO
    if previous is not None:  # auto values (and missing class frequencies) from the checkpoint
        if mean == AUTO and previous.data.mean != AUTO:
            mean = list(previous.data.mean)
        if std == AUTO and previous.data.std != AUTO:
            std = list(previous.data.std)
        if frequencies is None and previous.data.class_frequencies is not None:
            frequencies = dict(previous.data.class_frequencies)
        if weights == AUTO and isinstance(previous.optim.loss.class_weights, list):
            weights = list(previous.optim.loss.class_weights)
    measured = None
    if AUTO in (mean, std) or (weights == AUTO and frequencies is None):
        measured = measure()
        mean = measured.mean() if mean == AUTO else mean
        std = measured.std() if std == AUTO else std
        if frequencies is None:
            frequencies = dict(zip(data.classes.names, measured.frequencies(), strict=True))
    bands = f"mean {_numbers(mean)} std {_numbers(std)}"  # type: ignore[arg-type]
    if measured is not None and bands_auto:
        lines.append(
            f"band statistics measured on {measured.tiles} training tiles "
            f"({measured.valid_pixels} valid px): {bands}"
        )
    elif bands_auto:
        lines.append(f"band statistics from {previous_source}: {bands}")
    else:
        lines.append(f"band statistics as configured: {bands}")
    if measured is not None:
        lines.append(
            f"class frequencies of the training tiles ({measured.labelled_pixels} labelled px): "
            + _named(data.classes.names, measured.frequencies())
        )
    if weights == AUTO:
        given = frequencies or {}
        # w = (median(f) / f) ** p is scale-free: the frequencies need not sum to 1
        shares = [given.get(name, 0.0) for name in data.classes.names]
        low, high = weight_bounds(loss.class_weight_cap)
        weights = frequency_weights(shares, loss.class_weight_scheme, (low, high))
        scheme = loss.class_weight_scheme.replace("_", "-")
        lines.append(
            f"class weights ({scheme} balancing, clipped to [{low:g}, {high:g}]): "
            + _named(data.classes.names, weights)
        )
    elif weights_auto:
        lines.append(
            f"class weights from {previous_source}: " + _named(data.classes.names, weights)
        )
    resolved = ResolvedStats(
        mean=tuple(mean),  # type: ignore[arg-type]
        std=tuple(std),  # type: ignore[arg-type]
        class_frequencies=None if frequencies is None else dict(frequencies),
        class_weights=None if weights is None else tuple(weights),
    )
    return resolved, lines
