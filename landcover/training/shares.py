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
from landcover.data.pairs import SplitPairs, split_pairs
from landcover.data.raster import TileArrays
from landcover.data.stats import DataStats
from landcover.errors import DataError
from landcover.feed.inputs import TrainingInput
from landcover.feed.sampler import PatchSampler
from landcover.feed.share import TileShare, build_feed, listed, load_share, share_stats
from landcover.parallel.engine import Engine
from landcover.parallel.env import DistEnv
from landcover.synthetic.sample import data_root
from landcover.training.autostats import needs_resolving, reduce_stats, resolve_auto
from landcover.training.checkpoint import find_resume_checkpoint
from landcover.training.resolved import ResolvedStats
from landcover.training.runfolder import RunFolder

log = logging.getLogger("landcover")


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

    The feed loads the share (:func:`~landcover.feed.share.load_share`); ``auto`` band
    statistics and class weights become numbers (measured on all workers' shares and reduced,
    or taken from the checkpoint of a resumed run), returned as :attr:`WorkerData.stats`; the
    feed then builds the sampler and batch preparation with them
    (:func:`~landcover.feed.share.build_feed`). ``config`` is not changed.

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
    root = data_root(config.data.root)
    listed_pairs = pairs or split_pairs(config.data, root)
    share = load_share(config, env.rank, env.world_size, listed_pairs, root)
    resume, stats = _resolve_data_stats(config, env, folder, share, device, engine)
    feed = build_feed(share, stats.apply(config), device, env.rank)
    return WorkerData(
        feed.sampler,
        share.val_tiles,
        share.n_val,
        feed.prepare,
        feed.val_stats,
        stats,
        pixel_size_m=feed.pixel_size_m,
        resume=resume,
    )


def _resolve_data_stats(
    config: Config,
    env: DistEnv,
    folder: RunFolder,
    share: TileShare,
    device: torch.device,
    engine: Engine,
) -> tuple[tuple[str, Checkpoint] | None, ResolvedStats]:
    """The numbers that replace ``auto`` band statistics and class weights.

    A resumed run takes them from its checkpoint, which is returned for the resume (with the
    numbers).
    The share's all-no-data images are named when no tile has a valid pixel.
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
        stats = reduce_stats(
            share_stats(share, env.rank, env.world_size, config), config, reduce_device, engine
        )
        if stats.valid_pixels == 0:  # the same on every worker: the statistics are reduced
            files = f": {listed(share.empty)}" if share.empty else ""
            n_train = share.n_train
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
