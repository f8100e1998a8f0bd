"""A worker's share of the tiles: loaded into memory, measured, and made into its feed.

The feed's two calls from training (:mod:`landcover.training.shares`): :func:`load_share`
deals the worker its share of the training tiles and every ``world_size``-th validation tile
and loads them (:mod:`~landcover.feed.memory`); :func:`build_feed` makes the patch sampler and the batch
preparation from the share once training has resolved the ``auto`` numbers (which need every
worker's :func:`share_stats`). Reading a pair is :mod:`landcover.data`'s.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from landcover.config import Config
from landcover.data.normalize import TileStats
from landcover.data.pairs import SplitPairs, TilePair, data_source
from landcover.data.raster import TileArrays
from landcover.data.sharding import counts_once, shard
from landcover.data.stats import DataStats
from landcover.errors import DataError
from landcover.feed.inputs import TrainingInput, tile_stats
from landcover.feed.memory import load_tiles, training_pixel_size
from landcover.feed.sampler import PatchSampler

log = logging.getLogger("landcover")

LISTED = 3
"""Files named in a message about many (the rest are counted)."""


@dataclass
class TileShare:
    """The tiles a worker holds in memory.

    Attributes:
        tiles: The worker's share of the training tiles.
        val_tiles: The worker's share of the validation tiles.
        n_train: Training tiles in the whole run.
        n_val: Validation tiles in the whole run.
        empty: The image files of this worker's training tiles that are all no-data.
    """

    tiles: list[TileArrays]
    val_tiles: list[TileArrays]
    n_train: int
    n_val: int
    empty: list[str]


@dataclass
class Feed:
    """What a worker's training draws from, and its validation tiles' own statistics.

    Attributes:
        sampler: Draws training patches from the worker's share of the training tiles.
        prepare: Augments and normalises training batches (``data.photometric``,
            ``data.normalize``; the global numbers are identical on every worker).
        val_stats: Each validation tile's own band statistics (``data.normalize: per_tile``;
            ``None`` entries otherwise).
        pixel_size_m: The pixel size the model trains at (metres), if known.
    """

    sampler: PatchSampler
    prepare: TrainingInput
    val_stats: list[TileStats | None]
    pixel_size_m: float | None


def listed(paths: list[str]) -> str:
    """A few paths for a message, the rest counted (``a, b, c and 4 more``).

    Args:
        paths: The paths.

    Returns:
        The text.
    """
    named = ", ".join(paths[:LISTED])
    rest = len(paths) - LISTED
    return f"{named} and {rest} more" if rest > 0 else named


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


def load_share(
    config: Config, rank: int, world_size: int, pairs: SplitPairs, root: str
) -> TileShare:
    """Loads the worker's share of the pairs into memory.

    Args:
        config: The run's configuration (its ``data`` section).
        rank: The worker's rank.
        world_size: The number of workers.
        pairs: The run's training and validation pairs.
        root: The data folder, for the log.

    Returns:
        The share.

    Raises:
        DataError: If a pair cannot be read.
        StorageError: If fetching a file fails after bounded retries.
    """
    cfg = config.data
    train_pairs, val_pairs = pairs
    bands = len(cfg.bands)
    mine = shard(train_pairs, rank, world_size)
    fetch = {
        "concurrency": cfg.fetch_concurrency,
        "cache_dir": cfg.cache_dir,
        "resolution": cfg.resolution,  # resampled on load when set
    }
    where = f"rank {rank}/{world_size}"
    log.info(
        "%s fetching its %d training tiles (%d files) from %s",
        where,
        len(mine),
        2 * len(mine),
        data_source(cfg, root),
    )
    tiles, report = load_tiles(mine, cfg.classes, bands, **fetch)
    log.info(
        "%s holds %d of %d training tiles [%s]: fetched %d bytes in %.2f s "
        "(%.1f MB/s), %.1f MB in memory after %.2f s",
        where,
        len(tiles),
        len(train_pairs),
        ", ".join(report.tiles),
        report.file_bytes,
        report.fetch_seconds,
        report.fetch_mb_per_s,
        report.megabytes,
        report.seconds,
    )
    own_val = val_pairs[rank::world_size]
    val_tiles, val_report = load_tiles(own_val, cfg.classes, bands, **fetch)
    log.info(
        "%s holds %d of %d validation tiles [%s]: %.1f MB in %.2f s",
        where,
        len(val_tiles),
        len(val_pairs),
        ", ".join(val_report.tiles),
        val_report.megabytes,
        val_report.seconds,
    )
    empty = empty_images(tiles, mine)
    for image in empty:
        log.warning("%s: every image pixel is no-data: the tile adds nothing to training", image)
    small = [t.name for t in tiles if min(t.image.shape[:2]) < cfg.patch_size]
    if small:
        fits = min(min(t.image.shape[:2]) for t in tiles) // 32 * 32  # a multiple of 32
        advice = f"a patch_size of at most {fits} px uses them whole" if fits else "no patch fits"
        log.warning(
            "%s: %d of %d training tiles are smaller than data.patch_size (%d px), as %s: "
            "their patches are padded with ignored pixels; %s",
            where,
            len(small),
            len(tiles),
            cfg.patch_size,
            small[0],
            advice,
        )
    return TileShare(tiles, val_tiles, len(train_pairs), len(val_pairs), empty)


def share_stats(share: TileShare, rank: int, world_size: int, config: Config) -> DataStats:
    """This worker's part of the training tiles' statistics: each tile counted by one worker.

    Args:
        share: The worker's tiles.
        rank: The worker's rank.
        world_size: The number of workers.
        config: The run's configuration (bands and classes).

    Returns:
        Exact histograms of the tiles this worker counts (none when another worker holding
        the same tiles counts them: :func:`~landcover.data.sharding.counts_once`); the sum
        over the workers is the statistics of every training tile.
    """
    stats = DataStats.empty(len(config.data.bands), config.data.classes.num_classes)
    if counts_once(rank, world_size, share.n_train):
        for tile in share.tiles:
            stats.add_tile(tile)
    return stats


def build_feed(share: TileShare, config: Config, device: torch.device, rank: int) -> Feed:
    """The patch sampler and batch preparation of a share, with the run's resolved numbers.

    Args:
        share: The worker's tiles.
        config: The effective configuration (no ``auto`` band statistics left).
        device: The worker's device.
        rank: The worker's rank (for messages).

    Returns:
        The feed.

    Raises:
        DataError: If every training tile of the share is all no-data, or it yields no
            usable patch.
    """
    cfg = config.data
    if share.tiles and len(share.empty) == len(share.tiles):
        raise DataError(
            f"rank {rank}: every image pixel is no-data in its training tiles: "
            f"{listed(share.empty)}"
        )
    try:
        sampler = PatchSampler.from_config(share.tiles, cfg)
    except ValueError as exc:
        raise DataError(f"rank {rank}: {exc}") from None
    prepare = TrainingInput(cfg, share.tiles, device, config.run.seed)
    per_tile = cfg.normalize == "per_tile"
    val_stats = tile_stats(share.val_tiles) if per_tile else [None] * len(share.val_tiles)
    return Feed(sampler, prepare, val_stats, training_pixel_size(share.tiles, cfg.resolution))
