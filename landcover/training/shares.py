"""A worker's data: its training and validation tiles, band statistics and class weights.

The training tiles are the worker's share, held in memory; the band statistics and class
weights are measured on the shares of all workers and reduced, so every worker uses the same.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from landcover.checkpoint import Checkpoint, load_checkpoint
from landcover.config import Config, config_from_dict
from landcover.data.normalize import TileStats
from landcover.data.pairs import SplitPairs, TilePair, split_pairs
from landcover.data.raster import TileArrays
from landcover.data.sharding import shard
from landcover.data.stats import DataStats
from landcover.errors import DataError
from landcover.feed.inputs import TrainingInput, tile_stats
from landcover.feed.memory import load_tiles, training_pixel_size
from landcover.feed.sampler import PatchSampler
from landcover.parallel.engine import Engine
from landcover.parallel.env import DistEnv
from landcover.synthetic.sample import data_root
from landcover.training.autostats import measure_shares, needs_resolving, resolve_auto
from landcover.training.checkpoint import find_resume_checkpoint
from landcover.training.resolved import ResolvedStats
from landcover.training.runfolder import RunFolder

log = logging.getLogger("landcover")

LISTED = 3
"""Files named in a message about many (the rest are counted)."""


def empty_images(tiles: list[TileArrays], pairs: list[TilePair]) -> list[str]:
    """The image files of the tiles whose every image pixel is no-data.

    Args:
        tiles: Loaded tiles.
        pairs: The pairs they were loaded from (their names give the image files).

    Returns:
        The image paths (or tile names when a pair is not found), in the tiles' order.
    """
    images = {pair.name: pair.image for pair in pairs}
    return [
        images.get(tile.name, tile.name)
        for tile in tiles
        if tile.nodata is not None and bool(tile.nodata.all())
    ]


def _listed(paths: list[str]) -> str:
    named = ", ".join(paths[:LISTED])
    rest = len(paths) - LISTED
    return f"{named} and {rest} more" if rest > 0 else named


@dataclass
class WorkerData:
    """What a worker trains and validates on.

    Attributes:
        sampler: Draws training patches from the worker's share of the training tiles.
        val_tiles: The worker's share of the validation tiles.
        n_val: Validation tiles in the whole run.
        prepare: Augments and normalises training batches (``data.photometric``,
            ``data.normalize``; the global numbers are identical on every worker).
        val_stats: Each validation tile's own band statistics (``data.normalize: per_tile``;
            ``None`` entries otherwise).
        stats: The numbers that replace the config's ``auto`` data settings (the same on
            every worker); :meth:`~landcover.training.resolved.ResolvedStats.apply` makes the
            effective configuration from them.
        pixel_size_m: The pixel size the model trains at, for its checkpoints (metres).
        resume: The checkpoint to resume from, when it was already loaded for its data
            statistics (path and record).
    """

    sampler: PatchSampler
    val_tiles: list[TileArrays]
    n_val: int
    prepare: TrainingInput
    val_stats: list[TileStats | None]
    stats: ResolvedStats
    pixel_size_m: float | None = None
    resume: tuple[str, Checkpoint] | None = None


def load_worker_data(
    config: Config,
    env: DistEnv,
    folder: RunFolder,
    device: torch.device,
    engine: Engine,
    pairs: SplitPairs | None = None,
) -> WorkerData:
    """Loads the worker's share of the tiles and resolves ``auto`` data settings.

    ``auto`` band statistics and class weights become numbers (measured on all workers' shares
    and reduced, or taken from the checkpoint of a resumed run), returned as
    :attr:`WorkerData.stats`; ``config`` is not changed.

    Args:
        config: The run's configuration as loaded.
        env: The worker's place.
        folder: The run folder (for a resumed run's checkpoint).
        device: The worker's device.
        engine: The engine the worker joined (its group reduces the statistics).
        pairs: The training and validation pairs, if already listed in this process.

    Returns:
        The worker's data.

    Raises:
        DataError: If the data cannot be loaded or yields no usable patch.
    """
    cfg = config.data
    mapping = cfg.classes
    root = data_root(cfg.root)
    train_pairs, val_pairs = pairs or split_pairs(cfg, root)
    bands = len(cfg.bands)
    mine = shard(train_pairs, env.rank, env.world_size)
    fetch = {
        "concurrency": cfg.fetch_concurrency,
        "cache_dir": cfg.cache_dir,
        "resolution": cfg.resolution,  # resampled on load when set
    }
    log.info(
        "rank %d/%d fetching its %d training tiles (%d files) from %s",
        env.rank,
        env.world_size,
        len(mine),
        2 * len(mine),
        root,
    )
    tiles, report = load_tiles(mine, mapping, bands, **fetch)
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
    val_tiles, val_report = load_tiles(
        val_pairs[env.rank :: env.world_size], mapping, bands, **fetch
    )
    log.info(
        "rank %d/%d holds %d of %d validation tiles [%s]: %.1f MB in %.2f s",
        env.rank,
        env.world_size,
        len(val_tiles),
        len(val_pairs),
        ", ".join(val_report.tiles),
        val_report.megabytes,
        val_report.seconds,
    )
    empty = empty_images(tiles, mine)
    for image in empty:
        log.warning("%s: every image pixel is no-data: the tile adds nothing to training", image)
    resume, stats = _resolve_data_stats(
        config, env, folder, tiles, len(train_pairs), device, empty, engine
    )
    if tiles and len(empty) == len(tiles):
        raise DataError(
            f"rank {env.rank}: every image pixel is no-data in its training tiles: {_listed(empty)}"
        )
    try:
        sampler = PatchSampler.from_config(tiles, cfg)
    except ValueError as exc:
        raise DataError(f"rank {env.rank}: {exc}") from None
    prepare = TrainingInput(stats.apply(config).data, tiles, device, config.run.seed)
    per_tile = cfg.normalize == "per_tile"
    val_stats = tile_stats(val_tiles) if per_tile else [None] * len(val_tiles)
    pixel_size = training_pixel_size(tiles, cfg.resolution)
    return WorkerData(
        sampler,
        val_tiles,
        len(val_pairs),
        prepare,
        val_stats,
        stats,
        pixel_size_m=pixel_size,
        resume=resume,
    )


def _resolve_data_stats(
    config: Config,
    env: DistEnv,
    folder: RunFolder,
    tiles: list[TileArrays],
    n_train: int,
    device: torch.device,
    empty: list[str],
    engine: Engine,
) -> tuple[tuple[str, Checkpoint] | None, ResolvedStats]:
    """The numbers that replace ``auto`` band statistics and class weights.

    A resumed run takes them from its checkpoint, which is returned for the resume (with the
    numbers).
    ``empty`` (this worker's all-no-data images) is named when no tile has a valid pixel.
    """
    previous, source, resume = None, "checkpoint", None
    if needs_resolving(config):
        path = find_resume_checkpoint(folder)
        if path is not None:
            resume = (path, load_checkpoint(path))
            source = f"checkpoint {path}"
            previous = config_from_dict(resume[1].config, f"{path}: config")
    reduce_device = device if device.type == "cuda" else torch.device("cpu")

    def measure() -> DataStats:
        stats = measure_shares(
            tiles, env.rank, env.world_size, n_train, config, reduce_device, engine
        )
        if stats.valid_pixels == 0:  # the same on every worker: the statistics are reduced
            files = f": {_listed(empty)}" if empty else ""
            tiles_text = f"{n_train} training tile{'s' if n_train != 1 else ''}"
            raise DataError(
                f"no valid image pixel to measure band statistics on in the {tiles_text} "
                f"(every pixel is no-data){files}"
            )
        return stats

    stats, lines = resolve_auto(config, measure, previous, source)
    for line in lines:
        log.info("%s", line)
    return resume, stats
